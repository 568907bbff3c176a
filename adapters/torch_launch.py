"""``torch.distributed.run`` with its rendezvous store listening on 127.0.0.1 only.

torch's ``TCPStore`` binds every interface unless it is handed a socket that is already bound
(``master_listen_fd``). This registers a static rendezvous, ``loopback-static``, that binds the
store's socket to the endpoint's address itself, then runs ``torch.distributed.run``'s own main
with the arguments given: the launcher, the agent and the ranks are torch's, unchanged.

Usage: ``python -I torch_launch.py --rdzv-backend=loopback-static --rdzv-endpoint=127.0.0.1:PORT
--nnodes=1 --nproc-per-node=N ...`` (any other ``torch.distributed.run`` arguments).
"""

from __future__ import annotations

import socket
import sys

from torch.distributed import TCPStore, run
from torch.distributed.elastic.rendezvous import RendezvousParameters, rendezvous_handler_registry
from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

BACKEND = "loopback-static"
_listeners: list[socket.socket] = []  # kept open for the store's lifetime


class LoopbackStaticRendezvous(StaticTCPRendezvous):
    def get_backend(self) -> str:
        return BACKEND


def loopback_static(params: RendezvousParameters) -> StaticTCPRendezvous:
    address, port = parse_rendezvous_endpoint(params.endpoint, -1)
    if params.max_nodes != 1:
        raise ValueError(f"{BACKEND} runs on one host (--nnodes=1), got {params.max_nodes}")
    handler = LoopbackStaticRendezvous(
        address, port, 0, 1, params.run_id, int(params.config.get("timeout", 900))
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, port))
    listener.listen()
    _listeners.append(listener)
    handler._store = TCPStore(
        address,
        port,
        1,
        True,
        handler.timeout,
        multi_tenant=True,
        master_listen_fd=listener.fileno(),
    )
    return handler


if __name__ == "__main__":
    rendezvous_handler_registry.register(BACKEND, loopback_static)
    sys.argv[0] = "torch.distributed.run"
    run.main()  # every rank has exited; a failed one raised out of here, as torch reports it
    # Exit handlers, but no teardown of torch's modules (~0.7 s; see process_end.leave, which
    # -I keeps off sys.path here).
    import atexit
    import os

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
