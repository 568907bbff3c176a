"""Theano 1.0.5: the APIs ``theano`` (``graph``: the model and the step as Theano symbolic
functions) and ``keras2`` (``keras2``: Keras 2.3.1 ``fit`` on the Theano backend).

Same shape as every framework's adapter: ``make_backend(api, device, threads)`` returns an
``adapters.backend.Backend``. The lines a user of each API writes are counted in the modules named
below (``tui-bench:uses``).
"""

from __future__ import annotations

import os

from adapters.backend import Backend
from adapters.theano import graph

# tui-bench:uses common.py
# tui-bench:uses graph.py
# tui-bench:uses keras2.py

# Keras 2 is imported only for its API (the runner sets KERAS_BACKEND=theano for it and clears
# it for the plain Theano API), so its import time is counted where it is paid.
if os.environ.get("KERAS_BACKEND") == "theano":
    from adapters.theano import keras2
else:
    keras2 = None

APIS = ("theano", "keras2")


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"theano adapter has no API {api!r} (choose: {', '.join(APIS)})")
    if api == "keras2":
        if keras2 is None:
            raise RuntimeError(
                "keras2 needs Keras 2 imported on the Theano backend: KERAS_BACKEND=theano must "
                "be set before the adapter is imported"
            )
        return keras2.Keras2Backend(api, device, threads)
    return graph.TheanoBackend(api, device, threads)
