"""``torch.distributed.run`` with its rendezvous store listening on 127.0.0.1 only.

torch's ``TCPStore`` binds every interface unless it is handed a socket that is already bound
(``master_listen_fd``). This registers a static rendezvous, ``loopback-static``, that binds the
store's socket to the endpoint's address itself, then runs ``torch.distributed.run``'s own main
with the arguments given: the launcher, the agent and the ranks are torch's, unchanged.

Usage: ``python -I adapters/torch/launch.py --rdzv-backend=loopback-static --rdzv-endpoint=127.0.0.1:PORT
--nnodes=1 --nproc-per-node=N ...`` (any other ``torch.distributed.run`` arguments).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path


def _keep_adapters_off_path(root: Path) -> None:
    """Drop the adapters tree from sys.path: a plain ``python adapters/torch/launch.py`` (no
    ``-I``) puts this directory first on it, whose modules would stand in for any of the same
    name, and the adapters tree must never be where ``import torch`` looks
    (tests/test_framework_packages.py)."""

    def inside(entry: str) -> bool:
        where = Path(entry or ".").resolve()
        return where == root or root in where.parents

    sys.path[:] = [entry for entry in sys.path if not inside(entry)]


if __name__ == "__main__":
    _keep_adapters_off_path(Path(__file__).resolve().parents[1])

from torch.distributed import TCPStore, run  # noqa: E402
from torch.distributed.elastic.rendezvous import RendezvousParameters, rendezvous_handler_registry  # noqa: E402
from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous  # noqa: E402
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint  # noqa: E402

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
