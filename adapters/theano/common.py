"""Theano 1.0.5, what both of its APIs share: the configuration written before Theano is
imported, the BLAS and thread read-backs, the initialisers, the gpt's causal attention, and the
base of both backends. The APIs: ``graph`` (plain Theano) and ``keras2`` (Keras 2.3.1 on Theano);
``adapter`` picks one.

Theano reads its configuration once, at import, from ``THEANO_FLAGS``; this module writes it
before importing Theano (see ``theano_flags``):
- ``blas.ldflags``: Theano's default probe reads ``numpy.distutils`` fields that numpy no longer
  has, so the BLAS is named explicitly: the OpenBLAS of the ``scipy-openblas32`` wheel. That
  build prefixes its symbols (``scipy_sgemm_``); ``-D`` flags map the Fortran names Theano's C
  code calls onto them (Theano passes the non-``-l`` tokens of ``blas.ldflags`` to the compiler
  of every BLAS-using op, and turns ``-L`` into an rpath).
- ``base_compiledir``: the compile cache goes under tui-bench's cache directory (the runner
  passes it in ``TUI_BENCH_WORKER_CACHE``), never ``~/.theano``.
- ``openmp``: Theano's own OpenMP loops (convolutions over the batch, large elementwise ops) are
  compiled in when more than one thread is asked for; their count is ``OMP_NUM_THREADS``.
- ``compile.wait``: a process that finds the compile directory locked sleeps this many seconds
  (to twice as many) before it looks again, and the holder keeps the lock for a whole function's
  modules. Theano's 5 s suits a cluster's shared disk; here a second run (or a test process)
  slept 5-10 s at a time after the lock was free. 1 s; ``compile.timeout`` (when a lock not
  refreshed is taken over) stays Theano's 120 s, which it would otherwise derive as 24 × wait.
Threads: the worker sets ``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` before this module is
imported; OpenBLAS sizes its pool from them when it is loaded, and both counts are read back
from the libraries themselves.
"""

from __future__ import annotations

import collections
import collections.abc
import ctypes
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# Fortran BLAS routines Theano's C code declares; each one the library exports with the
# ``scipy_`` prefix gets a ``-D`` alias.
_BLAS_ROUTINES = tuple(
    f"{kind}{name}_"
    for kind in "sdcz"
    for name in (
        "gemm",
        "gemv",
        "ger",
        "dot",
        "axpy",
        "scal",
        "copy",
        "swap",
        "symm",
        "syrk",
        "trmm",
        "trsm",
    )
) + ("openblas_set_num_threads", "openblas_get_num_threads")


def blas_library() -> Path:
    """The OpenBLAS shared library of the runtime's ``scipy-openblas32`` wheel."""
    import scipy_openblas32

    return Path(scipy_openblas32.get_lib_dir()) / scipy_openblas32.get_library(fullname=True)


def compile_dir() -> Path:
    """Theano's compile cache: under tui-bench's cache (from the runner), else the temp dir."""
    root = os.environ.get("TUI_BENCH_WORKER_CACHE") or Path(tempfile.gettempdir()) / "tui-bench"
    return Path(root) / "theano"


def theano_flags(threads: int) -> str:
    library = blas_library()
    exported = ctypes.CDLL(str(library))
    aliases = [
        f"-D{name}=scipy_{name}" for name in _BLAS_ROUTINES if hasattr(exported, f"scipy_{name}")
    ]
    link_name = library.name.removeprefix("lib").removesuffix(".so")
    ldflags = " ".join([f"-L{library.parent}", f"-l{link_name}", *aliases])
    return ",".join(
        [
            "device=cpu",
            "floatX=float32",
            f"openmp={threads > 1}",
            "compile.wait=1",
            "compile.timeout=120",
            # Theano puts -g on every g++ line; a later -g0 leaves the machine code as it is
            # (GCC's rule: debug info never changes code generation; the modules' disassembly
            # compared identical) and compiles ~20 % faster (Keras 2's CNN: 80 -> 68 s cold).
            "gcc.cxxflags=-g0",
            f"base_compiledir={compile_dir()}",
            f"blas.ldflags={ldflags}",
        ]
    )


def restore_collections_aliases() -> None:
    """Keras 2.3.1 imports ABCs from ``collections`` (moved to ``collections.abc``, the aliases
    removed in Python 3.10): put them back before it is imported."""
    for name in collections.abc.__all__:
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))


_THREADS = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
os.environ["THEANO_FLAGS"] = theano_flags(_THREADS)
# Scan's C driver is Cython output from 2017 that no longer compiles against Python >= 3.11
# headers (PyCode_New, frame internals). Theano falls back to its Python driver, which calls
# the compiled inner step each time step, when that module cannot be imported: say so up front.
sys.modules["theano.scan_module.scan_perform_ext"] = None  # type: ignore[assignment]

import numpy as np  # noqa: E402
import theano  # noqa: E402
import theano.tensor as T  # noqa: E402, N812 - Theano's own convention

from adapters.backend import Backend, DeviceError, Settings, default_settings  # noqa: E402
from adapters.theano import pch  # noqa: E402

# Theano's C modules compile with their shared include block precompiled (see ``pch``).
pch.install(theano.gof.cmodule, theano.config)


FLOATX = np.float32


def openmp_threads() -> int | None:
    """omp_get_max_threads() of the OpenMP runtime loaded into this process (Theano's compiled
    ops link it when the ``openmp`` flag is on); None when none is loaded."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        libraries = {line.split()[-1] for line in maps if "omp" in line.rsplit("/", 1)[-1]}
    for path in sorted(libraries):
        try:
            return int(ctypes.CDLL(path).omp_get_max_threads())
        except (OSError, AttributeError):
            continue
    return None


def blas_threads() -> int:
    return int(ctypes.CDLL(str(blas_library())).scipy_openblas_get_num_threads())


def resolve_device(device: str) -> str:
    if device == "cpu":
        return "cpu"
    gpu_backend = importlib.util.find_spec("pygpu") is not None
    build = "has pygpu but was started for the CPU" if gpu_backend else "CPU-only (no pygpu)"
    raise DeviceError(
        f"theano runtime sees 0 GPUs; installed build {theano.__version__} is {build}"
    )


# -- initialisers: Keras' defaults, drawn from one seeded numpy generator ------------------------
def glorot_uniform(rng: np.random.RandomState, shape: tuple[int, ...]) -> np.ndarray:
    """Keras' Glorot-uniform: fans from a dense (in, out) or a conv (out, in, kh, kw) shape."""
    if len(shape) == 2:
        fan_in, fan_out = shape
    else:
        receptive = int(np.prod(shape[2:]))
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape).astype(FLOATX)


def orthogonal(rng: np.random.RandomState, shape: tuple[int, int]) -> np.ndarray:
    """Keras' Orthogonal(gain=1): QR of a normal matrix, signs fixed by R's diagonal."""
    rows, cols = shape
    flat = rng.normal(0.0, 1.0, (max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    return (q.T if rows < cols else q).astype(FLOATX)


# tui-bench:begin model gpt
def causal_attention(qkv: Any, dims: Any, drop: Any) -> Any:
    """Multi-head attention of the fused (batch, S, 3d) q/k/v from T.dot and T.batched_dot
    (Theano has no attention op), each position seeing itself and the ones before it: a constant
    -inf above the diagonal is added to the scores before the softmax. ``drop``: the dropout of
    the attention weights. Returns (batch, S, d)."""
    batch, time = qkv.shape[0], qkv.shape[1]
    d, heads, width = dims.d_model, dims.heads, dims.head_dim

    def split(t):  # (batch, S, d) → (batch·heads, S, d / heads)
        t = t.reshape((batch, time, heads, width)).dimshuffle(0, 2, 1, 3)
        return t.reshape((-1, time, width))

    q, k, v = (split(qkv[:, :, i * d : (i + 1) * d]) for i in range(3))
    future = np.triu(np.full((dims.seq_len,) * 2, -np.inf, FLOATX), k=1)
    scores = T.batched_dot(q, k.dimshuffle(0, 2, 1)) / np.float32(np.sqrt(width)) + future
    weights = T.nnet.softmax(scores.reshape((-1, time))).reshape(scores.shape)
    h = T.batched_dot(drop(weights), v)
    return h.reshape((batch, heads, time, width)).dimshuffle(0, 2, 1, 3).reshape((batch, time, d))


def gelu_tanh(x: Any) -> Any:
    """GPT-2's GELU, tanh form."""
    c, cube = np.float32(np.sqrt(2.0 / np.pi)), np.float32(0.044715)
    return np.float32(0.5) * x * (np.float32(1.0) + T.tanh(c * (x + cube * x * x * x)))


# tui-bench:end model

# How the transformer's attention is computed here (recorded with the run's settings).
ATTENTION = {
    "theano": "written out: T.dot projections, T.batched_dot + softmax + dropout (no fused kernel)",
    "keras2": "written out: Keras 2 layers over K.dot, K.batch_dot + softmax + dropout "
    "(Keras 2.3.1 has no attention layer)",
}
GPT_ATTENTION = (
    "written out: fused T.dot q/k/v, T.batched_dot + causal mask (-inf above the diagonal) + "
    "softmax + dropout (no fused kernel)"
)


# How each API compiles, as the catalog states it (the worker records this value).
COMPILES = {
    "theano": "graph (theano.function, C code compiled at build)",
    "keras2": "graph (Keras 2 builds a theano.function, C code compiled at build)",
}


class TheanoBase(Backend):
    """What both APIs share: the device check, what the run reports, the settings it applies."""

    framework = "theano"

    def __init__(self, api: str, device: str, threads: int) -> None:
        self.api = api
        self.device = resolve_device(device)
        self.threads = threads
        self.binary = False
        self.applied: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        omp = openmp_threads() if theano.config.openmp else None
        blas = blas_threads()
        extra = {
            "blas": str(blas_library()),
            "blas_threads": blas,
            "openmp": bool(theano.config.openmp),
            "openmp_threads": omp,
            "compiledir": theano.config.compiledir,
            "compile_lock_wait_s": theano.config.compile.wait,
            "cxxflags": theano.config.gcc.cxxflags,
            "floatX": theano.config.floatX,
            "scan_driver": "python",  # see the scan_perform_ext note at the imports
        }
        return {
            "framework_version": theano.__version__,
            "device": self.device,
            "device_name": self.device,
            # The most threads any of its pools (OpenBLAS, Theano's OpenMP loops) will run.
            "threads_effective": max(blas, omp or 0),
            "interop_threads": None,
            "extra": extra,
        }

    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        """fp32 and host input only (the catalog refuses the rest before a worker starts); the
        compilation is stated like every API's: theano.function compiles the graph to C."""
        self.applied = {**default_settings(self, settings), "compile": COMPILES[self.api]}
        return self.applied  # build adds the attention kernel before run_started records it
