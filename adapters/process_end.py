"""How a process that imported a framework ends: ``leave(code)``, for the worker and the
hardware probe.

Stdlib only. The runtime probe (engine) and the card probe, which cannot import it, end the
same way in two lines.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """End the process without the interpreter's finalisation, which after a framework import
    tears down thousands of modules and objects: measured here, 0.9 s after TensorFlow, 0.7-1.1
    s after torch, 1.1 s after Keras on torch, 0.45 s after JAX, the last thing every run (and
    every probe) waited for. Call it once everything is said: the worker's event pipe is
    unbuffered and its backend closed (temporary files, process groups) before. What exit does
    besides the teardown is kept: the atexit handlers run (Theano's cache cleanup, logging's
    flush, MXNet's engine shutdown, torch's compile workers: under 2 ms together), then Python's
    and C's stdio buffers are flushed."""
    import atexit

    atexit._run_exitfuncs()  # what sys.exit would run; errors are printed, as there
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream has nothing left to say
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)  # what a framework's C code printed and buffered
    except Exception:  # noqa: BLE001 - no C library to ask (not Linux or macOS): nothing held
        pass
    os._exit(code)
