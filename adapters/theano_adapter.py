"""Theano 1.0.5 adapter. APIs: ``theano`` (the model and the step written as Theano symbolic
functions: gradients from ``theano.grad``, Adam written in Theano with Keras' formulation) and
``keras2`` (Keras 2.3.1 ``fit`` on the Theano backend: the stack of Shatnawi et al. 2018).

Same shape as ``torch_adapter``: ``make_backend(api, device, threads)`` returns a ``loop.Backend``;
model and step code sit between ``# tui-bench:begin``/``# tui-bench:end`` markers (a marker naming
APIs applies to those APIs only).

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
Threads: the worker sets ``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` before this module is
imported; OpenBLAS sizes its pool from them when it is loaded, and both counts are read back
from the libraries themselves.
"""

from __future__ import annotations

import collections
import collections.abc
import ctypes
import functools
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

APIS = ("theano", "keras2")

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
from theano.sandbox.rng_mrg import MRG_RandomStreams  # noqa: E402
from theano.tensor.nnet import conv2d  # noqa: E402
from theano.tensor.signal.pool import pool_2d  # noqa: E402

from adapters import shared_init, theano_pch  # noqa: E402
from adapters.data import binary_head  # noqa: E402
from adapters.loop import (  # noqa: E402
    Backend,
    DeviceError,
    Hyper,
    Settings,
    StepClock,
    default_settings,
    evaluate_in_batches,
    logits_loss_correct,
)

# Theano's C modules compile with their shared include block precompiled (see theano_pch).
theano_pch.install(theano.gof.cmodule, theano.config)

# Keras 2 is imported only for its API (the runner sets KERAS_BACKEND=theano for it and clears
# it for the plain Theano API), so its import time is counted where it is paid.
if os.environ.get("KERAS_BACKEND") == "theano":
    os.environ.setdefault("KERAS_HOME", str(compile_dir().parent / "keras2"))
    restore_collections_aliases()
    import keras  # noqa: E402
else:
    keras = None

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


# tui-bench:begin model theano
class Net:
    """The network as Theano expressions over shared variables (the trainable parameters)."""

    def __init__(
        self, model: str, shape, classes: int, dropout: float, vocab: int, seed: int, dims=None
    ):
        # shape: the data's input shape; dims: the gpt's (adapters.models.gpt_dims), else None
        self.model, self.classes, self.dropout, self.dims = model, classes, dropout, dims
        self.rng = np.random.RandomState(seed)
        self.noise = MRG_RandomStreams(self.rng.randint(1, 2**30))  # dropout masks (seed > 0)
        self.params: list[Any] = []
        self.layers: list[tuple[str, tuple[Any, ...]]] = []
        # tui-bench:end model
        if model == "cnn":
            # tui-bench:begin model theano cnn
            h, w, c = shape
            flat = 64 * (((h - 4) // 2 - 2) // 2) * (((w - 4) // 2 - 2) // 2)
            self._conv(c, 32, 5, "valid")
            self.layers.append(("pool", ()))
            self._conv(32, 64, 3, "valid")
            self.layers += [("pool", ()), ("flatten", ())]
            self._dense(flat, 1024, relu=True)
            self.layers.append(("dropout", ()))
            self._dense(1024, classes)
            # tui-bench:end model
        elif model == "mlp":
            # tui-bench:begin model theano mlp
            self.layers.append(("flatten", ()))
            self._dense(int(np.prod(shape)), 512, relu=True)
            self.layers.append(("dropout", ()))
            self._dense(512, 512, relu=True)
            self.layers.append(("dropout", ()))
            self._dense(512, classes)
            # tui-bench:end model
        elif model == "vgg16":
            # tui-bench:begin model theano vgg16
            channels = shape[2]
            for width, repeats in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
                for _ in range(repeats):
                    self._conv(channels, width, 3, "half")
                    channels = width
                self.layers.append(("pool", ()))
            side = shape[0] // 32
            self.layers.append(("flatten", ()))
            self._dense(512 * side * side, 512, relu=True)
            self.layers.append(("dropout", ()))
            self._dense(512, classes)
            # tui-bench:end model
        elif model == "lstm":
            # tui-bench:begin model theano lstm
            table = self._shared(self.rng.uniform(-0.05, 0.05, (vocab, 128)).astype(FLOATX))
            kernel = self._shared(glorot_uniform(self.rng, (128, 4 * 128)))
            recurrent = self._shared(orthogonal(self.rng, (128, 4 * 128)))
            bias = np.zeros(4 * 128, FLOATX)
            bias[128:256] = 1.0  # Keras' unit_forget_bias
            self.layers += [("embed", (table,)), ("lstm", (kernel, recurrent, self._shared(bias)))]
            self._dense(128, 1)
            # tui-bench:end model
        elif model == "transformer":
            # tui-bench:begin model theano transformer
            tokens = self._uniform((vocab, 128))
            self.layers.append(("embed", (tokens, self._uniform((shape[0], 128)))))
            for _ in range(2):
                self.layers.append(("encoder", self._encoder_params()))
            self.layers.append(("mean", ()))
            self._dense(128, 1)
            # tui-bench:end model
        elif model == "gpt":
            # tui-bench:begin model theano gpt
            d = dims.d_model
            # Placeholders of the canonical shapes, in its order: the shared draw sets them all.
            tokens = self._shared(np.zeros((dims.vocab_size, d), FLOATX))
            self.layers.append(
                ("embed", (tokens, self._shared(np.zeros((dims.seq_len, d), FLOATX))))
            )
            for _ in range(dims.layers):
                self.layers.append(("gpt_block", self._gpt_params(dims)))
            # The head is the token table itself (tied): no weight, no bias of its own.
            self.layers.append(("gpt_head", (*self._norm_params(d), tokens)))
            # tui-bench:end model
        else:
            raise ValueError(f"model {model!r} is not defined for theano")

    # tui-bench:begin model theano
    def _shared(self, value: np.ndarray):
        variable = theano.shared(value)
        self.params.append(variable)
        return variable

    # tui-bench:end model
    # tui-bench:begin model theano cnn vgg16
    def _conv(self, cin: int, cout: int, k: int, border: str) -> None:
        kernel = self._shared(glorot_uniform(self.rng, (cout, cin, k, k)))
        self.layers.append(("conv", (kernel, self._shared(np.zeros(cout, FLOATX)), border)))

    # tui-bench:end model
    # tui-bench:begin model theano
    def _dense(self, fan_in: int, fan_out: int, relu: bool = False) -> None:
        kernel = self._shared(glorot_uniform(self.rng, (fan_in, fan_out)))
        self.layers.append(("dense", (kernel, self._shared(np.zeros(fan_out, FLOATX)), relu)))

    def logits(self, x, train: bool):
        """x: NHWC images (float32) or (batch, time) word ids; the logits of the last layer."""
        h = x.dimshuffle(0, 3, 1, 2) if x.ndim == 4 else x  # NHWC (the data's layout) → NCHW
        for kind, args in self.layers:
            # tui-bench:end model
            if kind == "conv":
                # tui-bench:begin model theano cnn vgg16
                kernel, bias, border = args
                h = conv2d(h, kernel, border_mode=border, filter_flip=False)
                h = T.nnet.relu(h + bias.dimshuffle("x", 0, "x", "x"))
                # tui-bench:end model
            elif kind == "pool":
                # tui-bench:begin model theano cnn vgg16
                h = pool_2d(h, ws=(2, 2), ignore_border=True, mode="max")
                # tui-bench:end model
            elif kind == "flatten":
                # tui-bench:begin model theano cnn mlp vgg16
                h = h.flatten(2)
                # tui-bench:end model
            elif kind == "dense":
                # tui-bench:begin model theano
                kernel, bias, relu = args
                h = T.dot(h, kernel) + bias
                h = T.nnet.relu(h) if relu else h
                # tui-bench:end model
            elif kind == "dropout" and train and self.dropout > 0:
                # tui-bench:begin model theano cnn mlp vgg16
                keep = 1.0 - self.dropout
                mask = self.noise.binomial(h.shape, p=keep, dtype="float32")
                h = h * mask / np.float32(keep)
                # tui-bench:end model
            elif kind == "embed":
                # tui-bench:begin model theano lstm transformer gpt
                h = args[0][h]  # (batch, time, 128)
                # tui-bench:end model
                if len(args) > 1:
                    # tui-bench:begin model theano transformer gpt
                    h = h + args[1]  # learned positions, broadcast over the batch
                    # tui-bench:end model
            elif kind == "encoder":
                # tui-bench:begin model theano transformer
                h = self._encoder(h, train, *args)
                # tui-bench:end model
            elif kind == "gpt_block":
                # tui-bench:begin model theano gpt
                h = self._gpt_block(h, train, *args)
                # tui-bench:end model
            elif kind == "gpt_head":
                # tui-bench:begin model theano gpt
                gamma, beta, tokens = args
                h = T.dot(self._layer_norm(h, gamma, beta, 1e-5), tokens.T)  # (batch, S, V)
                h = h.reshape((-1, tokens.shape[0]))  # one row per position
                # tui-bench:end model
            elif kind == "mean":
                # tui-bench:begin model theano transformer
                h = h.mean(axis=1)
                # tui-bench:end model
            elif kind == "lstm":
                # tui-bench:begin model theano lstm
                h = self._lstm(h, *args)
                # tui-bench:end model
        # tui-bench:begin model theano
        return h.flatten() if self.model in ("lstm", "transformer") else h

    # tui-bench:end model
    # tui-bench:begin model theano lstm
    @staticmethod
    def _lstm(sequence, kernel, recurrent, bias):
        """Keras' LSTM: gates i, f, c, o; sigmoid and tanh; the last step's output."""
        inputs = (T.dot(sequence, kernel) + bias).dimshuffle(1, 0, 2)  # (time, batch, 4·128)

        def step(x_t, h, c):
            z = x_t + T.dot(h, recurrent)
            i, f = T.nnet.sigmoid(z[:, :128]), T.nnet.sigmoid(z[:, 128:256])
            g, o = T.tanh(z[:, 256:384]), T.nnet.sigmoid(z[:, 384:])
            c = f * c + i * g
            return o * T.tanh(c), c

        zeros = T.zeros((sequence.shape[0], 128), dtype="float32")
        (hs, _), _ = theano.scan(step, sequences=inputs, outputs_info=[zeros, zeros])
        return hs[-1]

    # tui-bench:end model
    # tui-bench:begin model theano transformer
    def _uniform(self, shape: tuple[int, int]):
        return self._shared(self.rng.uniform(-0.05, 0.05, shape).astype(FLOATX))

    def _encoder_params(self) -> tuple[Any, ...]:
        """q, k, v, out (128×128 + bias), LayerNorm, Dense 512, Dense 128, LayerNorm."""

        def dense(fan_in: int, fan_out: int) -> list[Any]:
            kernel = self._shared(glorot_uniform(self.rng, (fan_in, fan_out)))
            return [kernel, self._shared(np.zeros(fan_out, FLOATX))]

        def norm() -> list[Any]:
            return [self._shared(np.ones(128, FLOATX)), self._shared(np.zeros(128, FLOATX))]

        projections = dense(128, 128) + dense(128, 128) + dense(128, 128) + dense(128, 128)
        return tuple(projections + norm() + dense(128, 512) + dense(512, 128) + norm())

    # tui-bench:end model
    # tui-bench:begin model theano transformer gpt
    def _drop(self, h, train: bool):
        if not train or self.dropout <= 0:
            return h
        keep = 1.0 - self.dropout
        return h * self.noise.binomial(h.shape, p=keep, dtype="float32") / np.float32(keep)

    @staticmethod
    def _layer_norm(x, gamma, beta, eps: float = 1e-6):
        mean = x.mean(axis=-1, keepdims=True)
        var = T.sqr(x - mean).mean(axis=-1, keepdims=True)
        return (x - mean) / T.sqrt(var + np.float32(eps)) * gamma + beta

    # tui-bench:end model
    # tui-bench:begin model theano transformer
    def _encoder(self, x, train, wq, bq, wk, bk, wv, bv, wo, bo, g1, b1, w1, c1, w2, c2, g2, b2):
        """Multi-head self-attention from dot and batched_dot (Theano has no attention op)."""
        batch, time = x.shape[0], x.shape[1]

        def split(t):  # (batch, time, 128) → (batch·4, time, 32)
            return t.reshape((batch, time, 4, 32)).dimshuffle(0, 2, 1, 3).reshape((-1, time, 32))

        q, k, v = (split(T.dot(x, w) + b) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        scores = T.batched_dot(q, k.dimshuffle(0, 2, 1)) / np.float32(np.sqrt(32.0))
        weights = T.nnet.softmax(scores.reshape((-1, time))).reshape(scores.shape)
        h = T.batched_dot(self._drop(weights, train), v)
        h = h.reshape((batch, 4, time, 32)).dimshuffle(0, 2, 1, 3).reshape((batch, time, 128))
        x = self._layer_norm(x + self._drop(T.dot(h, wo) + bo, train), g1, b1)
        f = T.dot(x, w1) + c1
        f = np.float32(0.5) * f * (np.float32(1.0) + T.erf(f / np.float32(np.sqrt(2.0))))
        f = T.dot(f, w2) + c2
        return self._layer_norm(x + self._drop(f, train), g2, b2)

    # tui-bench:end model
    # tui-bench:begin model theano gpt
    def _norm_params(self, d: int) -> list[Any]:
        return [self._shared(np.ones(d, FLOATX)), self._shared(np.zeros(d, FLOATX))]

    def _gpt_params(self, dims: Any) -> tuple[Any, ...]:
        """LN, fused q/k/v (d × 3d + bias), out (d × d + bias), LN, Dense 4d, Dense d."""

        def dense(fan_in: int, fan_out: int) -> list[Any]:
            kernel = self._shared(np.zeros((fan_in, fan_out), FLOATX))
            return [kernel, self._shared(np.zeros(fan_out, FLOATX))]

        d = dims.d_model
        attention = self._norm_params(d) + dense(d, 3 * d) + dense(d, d)
        return tuple(attention + self._norm_params(d) + dense(d, dims.d_ff) + dense(dims.d_ff, d))

    def _gpt_block(self, x, train, g1, b1, wqkv, bqkv, wo, bo, g2, b2, w1, c1, w2, c2):
        """Pre-LN: x + causal attention(LN(x)), x + MLP(LN(x)); LN ε 1e-5, GELU in tanh form."""
        qkv = T.dot(self._layer_norm(x, g1, b1, 1e-5), wqkv) + bqkv
        h = causal_attention(qkv, self.dims, lambda weights: self._drop(weights, train))
        x = x + self._drop(T.dot(h, wo) + bo, train)
        f = gelu_tanh(T.dot(self._layer_norm(x, g2, b2, 1e-5), w1) + c1)
        return x + self._drop(T.dot(f, w2) + c2, train)


# tui-bench:end model


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


class TheanoBackend(Backend):
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
            "floatX": theano.config.floatX,
            "scan_driver": "python",  # see the scan_perform_ext note at the imports
        }
        if self.api == "keras2":
            extra["keras_version"] = keras.__version__
            extra["backend"] = keras.backend.backend()
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

    def _inputs(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # The gpt's targets flattened like its logits: one row per position.
        return x, (y.astype(FLOATX) if self.binary else y.reshape(-1))

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The arrays as the compiled function holds them: filtered by its input types."""
        xb, yb = self._inputs(x, y)
        return self.x_var.type.filter(xb), self.y_var.type.filter(yb)

    def build(self, hyper: Hyper, dataset) -> None:
        shape = dataset.shape
        self.binary = binary_head(hyper.model, shape.num_classes)
        if hyper.model in ("transformer", "gpt"):
            self.applied["attention"] = GPT_ATTENTION if hyper.dims else ATTENTION[self.api]
        self.net = Net(
            hyper.model,
            shape.input_shape,
            shape.num_classes,
            hyper.dropout,
            shape.vocab_size,
            hyper.seed,
            hyper.dims,
        )
        load = self._load_shared
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        self.x_var = T.tensor4("x") if shape.kind == "image" else T.imatrix("x")
        self.y_var = T.vector("y") if self.binary else T.lvector("y")
        build_only = getattr(self, "build_only", False)  # the worker's build-only mode
        serve_only = getattr(self, "serve_only", False)  # an inference run: never trains
        if not (build_only or serve_only):  # no training function: it costs minutes cold
            self._compile(hyper)
        if not build_only or serve_only or hyper.model in shared_init.SHARED_MODELS:
            # Inference only (evaluation, and the worker's initial loss of shared weights).
            self.logits_fn = theano.function([self.x_var], self.net.logits(self.x_var, train=False))

    def _load_shared(self, weights: dict[str, np.ndarray]) -> None:
        """The shared draw into the shared variables: ``Net`` holds them in the canonical order
        and (in, out) layout of adapters/shared_init.py (positions: (length, 128))."""
        if len(weights) != len(self.net.params):
            raise ValueError(f"the shared weights and Theano's {self.net.model} do not match")
        for (name, value), variable in zip(weights.items(), self.net.params, strict=True):
            variable.set_value(
                shared_init.checked(name, value, variable.get_value(borrow=True).shape)
            )

    # tui-bench:begin step theano
    def _loss(self, logits):
        if self.binary:  # log(1 + e^z) - z·t: binary cross-entropy from logits
            return T.mean(T.nnet.softplus(logits) - logits * self.y_var)
        return T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), self.y_var))

    def _compile(self, hyper: Hyper) -> None:
        params = self.net.params
        loss = self._loss(self.net.logits(self.x_var, train=True))
        grads = theano.grad(loss, params)
        lr = np.float32(hyper.lr)
        if hyper.optimizer == "adam":
            b1, b2, eps = (np.float32(v) for v in (hyper.beta1, hyper.beta2, hyper.epsilon))
            t = theano.shared(np.float32(0.0))
            t_next = t + np.float32(1.0)
            lr_t = lr * T.sqrt(np.float32(1.0) - b2**t_next) / (np.float32(1.0) - b1**t_next)
            updates = [(t, t_next)]
            for p, g in zip(params, grads, strict=True):
                m = theano.shared(np.zeros_like(p.get_value()))
                v = theano.shared(np.zeros_like(p.get_value()))
                m_next = b1 * m + (np.float32(1.0) - b1) * g
                v_next = b2 * v + (np.float32(1.0) - b2) * T.sqr(g)
                updates += [(m, m_next), (v, v_next)]
                updates.append((p, p - lr_t * m_next / (T.sqrt(v_next) + eps)))
        else:
            updates = [(p, p - lr * g) for p, g in zip(params, grads, strict=True)]
        self.train_fn = theano.function([self.x_var, self.y_var], loss, updates=updates)

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(self.train_fn(*self._inputs(x, y)))

    # tui-bench:end step

    def param_count(self) -> int:
        return int(sum(p.get_value(borrow=True).size for p in self.net.params))

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        def predict(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            return logits_loss_correct(self.logits_fn(xb), yb, self.binary)

        return evaluate_in_batches(predict, x, y, batch_size)

    def prepare_inference(self) -> dict[str, Any]:
        # The forward pass compiled at build (the evaluation function: logits with train=False,
        # so no dropout node and no gradient in its graph) serves: its C code exists before the
        # first request, so build_s, not first_request_s, carries Theano's compilation.
        return {
            "path": "compiled theano.function of the forward pass (logits), built at build",
            "mode": "graph built with train=False: no dropout masks, no gradients",
        }

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.logits_fn(x)  # synchronous on the CPU: the numpy logits


# tui-bench:begin model keras2 transformer gpt
# Keras 2.3.1 has no attention, LayerNormalization or GELU: written as layers over Theano ops.
_Keras2Layer = keras.layers.Layer if keras else object


class Keras2Positions(_Keras2Layer):
    def build(self, input_shape: Any) -> None:
        uniform = keras.initializers.RandomUniform(-0.05, 0.05)
        self.table = self.add_weight(name="positions", shape=input_shape[1:], initializer=uniform)
        super().build(input_shape)

    def call(self, x: Any) -> Any:
        return x + self.table


class Keras2LayerNorm(_Keras2Layer):
    def build(self, input_shape: Any) -> None:
        self.gamma = self.add_weight(name="gamma", shape=input_shape[-1:], initializer="ones")
        self.beta = self.add_weight(name="beta", shape=input_shape[-1:], initializer="zeros")
        super().build(input_shape)

    def call(self, x: Any) -> Any:
        return Net._layer_norm(x, self.gamma, self.beta)


# tui-bench:end model
# tui-bench:begin model keras2 transformer
class Keras2SelfAttention(_Keras2Layer):
    def __init__(self, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dropout = dropout

    def build(self, input_shape: Any) -> None:
        self.projections = [
            (
                self.add_weight(name=f"{n}_kernel", shape=(128, 128), initializer="glorot_uniform"),
                self.add_weight(name=f"{n}_bias", shape=(128,), initializer="zeros"),
            )
            for n in ("query", "key", "value", "out")
        ]
        super().build(input_shape)

    def call(self, x: Any, training: Any = None) -> Any:
        batch, time = x.shape[0], x.shape[1]

        def split(t):  # (batch, time, 128) → (batch·4, time, 32)
            return t.reshape((batch, time, 4, 32)).dimshuffle(0, 2, 1, 3).reshape((-1, time, 32))

        (wq, bq), (wk, bk), (wv, bv), (wo, bo) = self.projections
        q, k, v = (split(T.dot(x, w) + b) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        scores = T.batched_dot(q, k.dimshuffle(0, 2, 1)) / np.float32(np.sqrt(32.0))
        weights = T.nnet.softmax(scores.reshape((-1, time))).reshape(scores.shape)
        if self.dropout > 0:
            dropped = keras.backend.dropout(weights, self.dropout)
            weights = keras.backend.in_train_phase(dropped, weights, training=training)
        h = T.batched_dot(weights, v)
        h = h.reshape((batch, 4, time, 32)).dimshuffle(0, 2, 1, 3).reshape((batch, time, 128))
        return T.dot(h, wo) + bo


def gelu(x: Any) -> Any:
    return np.float32(0.5) * x * (np.float32(1.0) + T.erf(x / np.float32(np.sqrt(2.0))))


def keras2_transformer(vocab: int, length: int, dropout: float) -> Any:
    layers = keras.layers
    ids = layers.Input((length,))
    h = Keras2Positions()(layers.Embedding(vocab, 128)(ids))
    for _ in range(2):
        a = Keras2SelfAttention(dropout)(h)
        h = Keras2LayerNorm()(layers.Add()([h, layers.Dropout(dropout)(a)]))
        f = layers.Dense(128)(layers.Dense(512, activation=gelu)(h))
        h = Keras2LayerNorm()(layers.Add()([h, layers.Dropout(dropout)(f)]))
    return keras.models.Model(ids, layers.Dense(1)(layers.GlobalAveragePooling1D()(h)))


# tui-bench:end model


# tui-bench:begin model keras2 gpt
class Keras2GptNorm(Keras2LayerNorm):
    def call(self, x: Any) -> Any:
        return Net._layer_norm(x, self.gamma, self.beta, 1e-5)  # GPT-2's ε


class Keras2CausalSelfAttention(_Keras2Layer):
    """Fused q/k/v (d × 3d, bias), causal multi-head attention, output projection (d × d, bias)."""

    def __init__(self, dims: Any, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dims, self.dropout = dims, dropout

    def build(self, input_shape: Any) -> None:
        d = self.dims.d_model
        self.qkv = self.add_weight(name="qkv_kernel", shape=(d, 3 * d), initializer="zeros")
        self.qkv_bias = self.add_weight(name="qkv_bias", shape=(3 * d,), initializer="zeros")
        self.out = self.add_weight(name="out_kernel", shape=(d, d), initializer="zeros")
        self.out_bias = self.add_weight(name="out_bias", shape=(d,), initializer="zeros")
        super().build(input_shape)

    def call(self, x: Any, training: Any = None) -> Any:
        def drop(weights: Any) -> Any:
            if self.dropout <= 0:
                return weights
            dropped = keras.backend.dropout(weights, self.dropout)
            return keras.backend.in_train_phase(dropped, weights, training=training)

        h = causal_attention(T.dot(x, self.qkv) + self.qkv_bias, self.dims, drop)
        return T.dot(h, self.out) + self.out_bias


class Keras2TiedHead(_Keras2Layer):
    """The logits from the token Embedding's own weight (no weight, no bias of its own)."""

    def __init__(self, embedding: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # In a tuple: Keras 2 would track a Layer attribute's weights as this layer's too.
        self.tied = (embedding,)

    def call(self, x: Any) -> Any:
        return T.dot(x, self.tied[0].embeddings.T)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[:-1] + (self.tied[0].input_dim,)


def next_token_loss(tokens: Any, logits: Any) -> Any:
    """Cross-entropy of every position's next token, exact (Keras 2's sparse cross-entropy on
    Theano clips the probabilities to [1e-7, 1 - 1e-7]); (batch, S): fit takes the mean."""
    rows = T.nnet.softmax(logits.reshape((-1, logits.shape[-1])))
    return T.nnet.categorical_crossentropy(rows, tokens.flatten()).reshape(tokens.shape)


def keras2_gpt(dims: Any, dropout: float) -> Any:
    layers = keras.layers
    ids = layers.Input((dims.seq_len,))
    embedding = layers.Embedding(dims.vocab_size, dims.d_model)
    h = layers.Dropout(dropout)(Keras2Positions()(embedding(ids)))
    for _ in range(dims.layers):
        a = Keras2CausalSelfAttention(dims, dropout)(Keras2GptNorm()(h))
        h = layers.Add()([h, layers.Dropout(dropout)(a)])
        f = layers.Dense(dims.d_ff, activation=gelu_tanh)(Keras2GptNorm()(h))
        h = layers.Add()([h, layers.Dropout(dropout)(layers.Dense(dims.d_model)(f))])
    return keras.models.Model(ids, Keras2TiedHead(embedding)(Keras2GptNorm()(h)))


# tui-bench:end model


def load_keras2_gpt(model: Any, weights: dict[str, np.ndarray]) -> None:
    """The shared gpt draw into the Keras 2 gpt, layer by layer in the model's order (kernels
    (in, out) as the canonical layout; ``set_weights`` refuses a wrong shape)."""
    layers: dict[str, list[Any]] = {}
    for layer in model.layers:
        layers.setdefault(type(layer).__name__, []).append(layer)
    (embedding,), (positions,) = layers["Embedding"], layers["Keras2Positions"]
    attention, norms, dense = (
        layers["Keras2CausalSelfAttention"],
        layers["Keras2GptNorm"],
        layers["Dense"],
    )
    blocks = len(attention)
    if (len(norms), len(dense)) != (2 * blocks + 1, 2 * blocks):
        raise ValueError("load_keras2_gpt: the model is not the catalog's gpt")
    embedding.set_weights([weights["tokens"]])
    positions.set_weights([weights["positions"]])

    def pair(name: str, first: str, second: str) -> list[np.ndarray]:
        return [weights[f"{name}.{first}"], weights[f"{name}.{second}"]]

    for b in range(blocks):
        p = f"block{b}."
        qkv, out = pair(p + "qkv", "kernel", "bias"), pair(p + "out", "kernel", "bias")
        attention[b].set_weights(qkv + out)
        for i, name in enumerate(("norm1", "norm2")):
            norms[2 * b + i].set_weights(pair(p + name, "gamma", "beta"))
        for i, name in enumerate(("hidden", "back")):
            dense[2 * b + i].set_weights(pair(p + name, "kernel", "bias"))
    norms[-1].set_weights(pair("final", "gamma", "beta"))
    if sum(w.size for w in model.get_weights()) != sum(v.size for v in weights.values()):
        raise ValueError("load_keras2_gpt: the model holds weights the shared draw does not set")


def load_keras2_transformer(model: Any, weights: dict[str, np.ndarray]) -> None:
    """The shared draw into the Keras 2 transformer, layer by layer in the model's order (its
    kernels are (in, out) like the canonical layout; ``set_weights`` refuses a wrong shape)."""
    layers: dict[str, list[Any]] = {}
    for layer in model.layers:
        layers.setdefault(type(layer).__name__, []).append(layer)
    attention, norms, dense = (
        layers["Keras2SelfAttention"],
        layers["Keras2LayerNorm"],
        layers["Dense"],
    )
    if (len(attention), len(norms), len(dense)) != (2, 4, 5):
        raise ValueError("load_keras2_transformer: the model is not the catalog's transformer")
    (embedding,), (positions,) = layers["Embedding"], layers["Keras2Positions"]
    embedding.set_weights([weights["tokens"]])
    positions.set_weights([weights["positions"]])
    for b in range(2):
        p = f"block{b}."
        attention[b].set_weights(
            [
                weights[p + n + kind]
                for n in shared_init.PROJECTIONS
                for kind in (".kernel", ".bias")
            ]
        )
        for i, name in enumerate(("norm1", "norm2")):
            norms[2 * b + i].set_weights(
                [weights[p + name + ".gamma"], weights[p + name + ".beta"]]
            )
        for i, name in enumerate(("hidden", "back")):
            dense[2 * b + i].set_weights(
                [weights[p + name + ".kernel"], weights[p + name + ".bias"]]
            )
    dense[-1].set_weights([weights["head.kernel"], weights["head.bias"]])


# tui-bench:begin model keras2
def build_keras2_model(model: str, input_shape, classes: int, dropout: float, vocab: int):
    layers = keras.layers
    # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model keras2 cnn
        stack = [
            layers.Conv2D(32, 5, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(1024, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
        # tui-bench:end model
    elif model == "mlp":
        # tui-bench:begin model keras2 mlp
        stack = [
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(512, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
        # tui-bench:end model
    elif model == "vgg16":
        # tui-bench:begin model keras2 vgg16
        stack = []
        for width, repeats in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
            stack += [
                layers.Conv2D(width, 3, padding="same", activation="relu") for _ in range(repeats)
            ]
            stack.append(layers.MaxPooling2D(2))
        stack += [
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
        # tui-bench:end model
    elif model == "lstm":
        # tui-bench:begin model keras2 lstm
        stack = [layers.Embedding(vocab, 128), layers.LSTM(128), layers.Dense(1)]
        # tui-bench:end model
    elif model == "transformer":
        # tui-bench:begin model keras2 transformer
        return keras2_transformer(vocab, input_shape[0], dropout)
        # tui-bench:end model
    else:
        raise ValueError(f"model {model!r} is not defined for keras2")
    # tui-bench:begin model keras2
    return keras.models.Sequential([layers.InputLayer(input_shape=input_shape), *stack])


# tui-bench:end model


class _ClockCallback(keras.callbacks.Callback if keras else object):
    """Times each of ``fit``'s steps; Keras 2 logs each batch's own loss."""

    def __init__(self, clock: StepClock) -> None:
        super().__init__()
        self.clock = clock

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.clock.begin()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.clock.end(float(logs["loss"]))


class Keras2Backend(TheanoBackend):
    """Keras 2.3.1 on the Theano backend; ``fit`` owns the loop."""

    def __init__(self, api: str, device: str, threads: int) -> None:
        if keras is None or keras.backend.backend() != "theano":
            raise RuntimeError(
                "keras2 needs Keras 2 imported on the Theano backend: KERAS_BACKEND=theano must "
                "be set before the adapter is imported"
            )
        super().__init__(api, device, threads)

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keras 2 feeds numpy batches to its compiled Theano function, cast to floatX."""
        xb = x if x.dtype.kind == "i" else keras.backend.cast_to_floatx(x)
        return xb, y

    def build(self, hyper: Hyper, dataset) -> None:
        np.random.seed(hyper.seed)  # Keras 2 seeds its Theano random streams from numpy
        keras.backend.set_image_data_format("channels_last")
        shape = dataset.shape
        self.hyper = hyper
        self.binary = binary_head(hyper.model, shape.num_classes)
        if hyper.model in ("transformer", "gpt"):
            self.applied["attention"] = GPT_ATTENTION if hyper.dims else ATTENTION[self.api]
        if hyper.model == "gpt":
            # tui-bench:begin model keras2 gpt
            self.model = keras2_gpt(hyper.dims, hyper.dropout)
            # tui-bench:end model
            load = functools.partial(load_keras2_gpt, self.model)
        else:
            self.model = build_keras2_model(
                hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
            )
            load = functools.partial(load_keras2_transformer, self.model)
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        # The worker's build-only mode and an inference run train nothing: no training function.
        if not (getattr(self, "build_only", False) or getattr(self, "serve_only", False)):
            self._compile(hyper)

    # tui-bench:begin step keras2
    def _compile(self, hyper: Hyper) -> None:
        if hyper.optimizer == "adam":
            optimizer = keras.optimizers.Adam(
                learning_rate=hyper.lr,
                beta_1=hyper.beta1,
                beta_2=hyper.beta2,
                epsilon=hyper.epsilon,
            )
        else:
            optimizer = keras.optimizers.SGD(learning_rate=hyper.lr)
        if self.binary:
            loss = keras.losses.BinaryCrossentropy(from_logits=True)
        else:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        # tui-bench:end step
        if hyper.model == "gpt":
            # tui-bench:begin step keras2 gpt
            # Integer targets of every position, fed as they are (not cast to the logits' float).
            tokens = keras.backend.placeholder(ndim=2, dtype="int64", name="next_tokens")
            self.model.compile(optimizer=optimizer, loss=next_token_loss, target_tensors=[tokens])
            # tui-bench:end step
            return
        # tui-bench:begin step keras2
        self.model.compile(optimizer=optimizer, loss=loss)

    def train_epoch(self, x, y, batch_indices, clock: StepClock) -> None:
        order = np.concatenate(batch_indices)
        labels = y[order].astype(FLOATX) if self.binary else y[order]
        self.model.fit(
            x[order],
            labels,
            batch_size=self.hyper.batch_size,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[_ClockCallback(clock)],
        )

    # tui-bench:end step

    def param_count(self) -> int:
        return int(sum(keras.backend.count_params(w) for w in self.model.trainable_weights))

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        def predict(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            logits = self.model.predict_on_batch(xb)  # the gpt's: (batch, S, V)
            return logits_loss_correct(logits.reshape(-1, logits.shape[-1]), yb, self.binary)

        return evaluate_in_batches(predict, x, y, batch_size)

    def prepare_inference(self) -> dict[str, Any]:
        # Keras 2's own serving call: predict_on_batch feeds learning phase 0 (Dropout off)
        # to the model's predict function, which Keras compiles (a theano.function) on its
        # first call: the first request, a warm-up one.
        return {
            "path": "Keras 2 model.predict_on_batch (its compiled predict function)",
            "mode": "learning phase 0 (predict): Dropout off, no gradients",
        }

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_on_batch(x)


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"theano adapter has no API {api!r} (choose: {', '.join(APIS)})")
    if api == "keras2":
        return Keras2Backend(api, device, threads)
    return TheanoBackend(api, device, threads)
