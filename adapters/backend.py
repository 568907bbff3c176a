"""The adapter contract: what a framework supplies to be benchmarked, and nothing else.

A framework package (``adapters/<framework>/``) has an adapter module with one function::

    def make_backend(api: str, device: str, threads: int) -> Backend

called once per run in the worker, after the framework is imported (the worker has already put
the thread variables in the environment and pinned the CPU affinity the manifest asks for).
``api`` is one of the manifest's APIs, ``device`` is ``"cpu"`` or ``"gpu:N"``, ``threads`` the
CPU threads the run asked for. The returned object implements ``Backend``: the required methods
(``describe``, ``build``, ``param_count``, ``train_step``, ``evaluate``) are enough for a training
run in fp32 with host input; ``predict`` and ``prepare_inference`` add the inference mode, ``prepare_generation`` and
``generate`` the generation mode (docs/generation.md); the
optional hooks (settings, device input, device timers, data-parallel) add the rest, each with a
safe default here. The loops that drive it (``adapters.train``, ``adapters.serve``) and the clock
(``adapters.clock``) are shared by every framework: an adapter never reads a clock.

The values the loops hand in (``Hyper``, ``Settings``, ``Parallel``) and the helpers an
implementation may use for its evaluation arithmetic (``evaluate_in_batches``,
``logits_loss_correct``) live here too. This module imports numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from adapters import data as data_module

if TYPE_CHECKING:
    from adapters.clock import StepClock, TokenClock


class DeviceError(RuntimeError):
    """The requested device does not exist in this runtime; raised before training starts."""


@dataclass(frozen=True)
class Hyper:
    """What every framework must build and train identically."""

    model: str
    batch_size: int
    lr: float
    optimizer: str
    dropout: float
    seed: int
    # The gpt's dimensions (``adapters.models.gpt_dims``: layers, d_model, heads, seq_len,
    # vocab_size, head_dim, d_ff), resolved from the spec; None for the fixed-shape models.
    dims: Any = None
    # Adam's constants are fixed across frameworks (Keras' defaults; torch's epsilon differs).
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7


@dataclass(frozen=True)
class Parallel:
    """This process's place in a data-parallel run (spec fields workers, scaling).

    Every rank walks the same global batches the single-process run with the global batch size
    would use, and trains on its own contiguous slice of each: the bytes of a global step are the
    same whatever the framework and the number of workers."""

    rank: int = 0
    workers: int = 1
    scaling: str = "weak"
    # One process drives all N devices (Keras on JAX): it feeds the whole global batch and the
    # framework splits it across its devices.
    in_process: bool = False

    def worker_batch(self, batch_size: int) -> int:
        """weak: batch_size is per worker; strong: batch_size is the global batch, split evenly."""
        return batch_size if self.scaling == "weak" else batch_size // self.workers

    def global_batch(self, batch_size: int) -> int:
        return self.worker_batch(batch_size) * self.workers

    def shard(self, idx: np.ndarray) -> np.ndarray:
        if self.in_process:
            return idx
        per = len(idx) // self.workers
        return idx[self.rank * per : (self.rank + 1) * per]


@dataclass(frozen=True)
class Settings:
    """The run's rules (spec fields precision, autotune, input, timing, timing_window)."""

    precision: str = "fp32"
    autotune: str = "on"
    input: str = "host"
    timing: str = "synced"
    timing_window: int = 10

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Settings:
        defaults = cls()
        return cls(**{k: spec.get(k, getattr(defaults, k)) for k in defaults.__dict__})


class Backend:
    """What a framework adapter supplies. One subclass per framework × API family.

    Required: describe, build, param_count, train_step, evaluate. Everything else is optional
    with a safe default, so an adapter that implements none of it runs as fp32 / host input /
    synced timing (``apply_settings`` refuses anything else for it). The order the worker calls
    them in: ``setup_parallel``, ``apply_settings``, ``build``, ``sync``, ``framework_view``,
    ``param_count`` and ``describe`` (reported before any step), then the training loop
    (``train_epoch`` → ``train_step``, ``evaluate`` after each epoch and once on the test split)
    or the serving loop (``prepare_inference``, ``predict``) or the generation loop
    (``prepare_generation``, ``generate``), ``memory_stats``, ``close``.

    The worker may set two attributes before ``build``: ``build_only`` (the run reports the
    model and stops: skip compiling a training function) and ``serve_only`` (an inference run:
    nothing is trained; a generation run too). Read them with ``getattr(self, "build_only", False)``.

    Equity rules every implementation keeps (tests/test_frameworks.py, tests/test_equity.py
    hold them): build the model ``hyper.model`` with the sizes of ``adapters.models`` (the
    model manifest), Keras' initialiser family, or the shared draw of ``adapters.shared_init``
    where the model has one; Adam with ``hyper.beta1``, ``beta2``, ``epsilon``; no data
    augmentation, no shuffling of its own (the loop hands the batches in its order)."""

    framework: str = ""

    def describe(self) -> dict[str, Any]:
        """What this process runs, read back from the framework, reported with the run:
        ``framework_version`` (str), ``device`` (what the framework really uses, e.g.
        ``"cuda:0"``, ``"cpu"``), ``device_name`` (the device's own name), ``threads_effective``
        (the intra-op threads the framework reports it uses), ``interop_threads`` (or None), and
        ``extra`` (a dict of anything else worth recording: library builds, backends)."""
        raise NotImplementedError

    def build(self, hyper: Hyper, dataset: data_module.Dataset) -> None:
        """Build the model ``hyper.model`` for ``dataset.shape`` (``input_shape``: HWC images,
        ``(maxlen,)`` sequences, ``(S,)`` tokens; ``num_classes``; ``vocab_size``) and its
        optimizer (``hyper.optimizer``: "adam" or "sgd", at ``hyper.lr``), seeded from
        ``hyper.seed``; ``hyper.dims`` holds the gpt's sizes. A model with two classes whose
        head is one logit (``adapters.data.binary_head``) trains with binary cross-entropy on
        logits, every other with sparse categorical cross-entropy on logits. Untimed (reported
        as ``build_s``); compile here what the framework compiles ahead of the first step."""
        raise NotImplementedError

    def param_count(self) -> int:
        """Trainable parameters of the built model, as the framework counts them."""
        raise NotImplementedError

    def sync(self) -> None:
        """Block until all queued device work is done (the clock is read only after it). A
        framework that runs synchronously (numpy, CPU-only graphs) keeps this default no-op."""

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One optimizer step on one batch: ``x`` and ``y`` as ``take`` returned them (numpy,
        NHWC for images, from the host unless ``to_device`` moved the split); hand them to the
        framework, forward, backward, update. Returns the loss: a Python float, or a framework
        scalar that ``loss_value`` turns into one (read after the step's sync, so a pipelined
        window need not wait for each loss)."""
        raise NotImplementedError

    def train_epoch(
        self,
        x: np.ndarray,
        y: np.ndarray,
        batch_indices: list[np.ndarray],
        clock: StepClock,
    ) -> None:
        """Run one epoch. The default drives ``train_step``; APIs whose framework owns the loop
        (Keras ``fit``, Estimator) override this and call ``clock.begin()`` / ``clock.end(loss)``
        from the framework's own per-step hooks."""
        for idx in batch_indices:
            clock.begin()
            xb, yb = self.take(x, y, idx)
            loss = self.train_step(xb, yb)
            clock.end(loss)

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        """(mean loss, accuracy) over all of x in batches of ``batch_size``, no dropout, no
        update; per target (one per sample, or one per position for tokens).
        ``evaluate_in_batches`` and ``logits_loss_correct`` below do the bookkeeping and the
        float64 arithmetic the same way for every framework."""
        raise NotImplementedError

    # -- optional hooks ------------------------------------------------------------------------
    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        """Apply precision / autotune / input / timing before ``build``; return what is in
        effect, read back from the framework where it can say (recorded as ``settings``)."""
        return default_settings(self, settings)

    def to_device(self, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        """``input="device"``: the whole split resident on the device, before timing."""
        return x, y

    def take(self, x: Any, y: Any, idx: np.ndarray) -> tuple[Any, Any]:
        """One batch from the (host or device) split; runs inside the timed step."""
        return x[idx], y[idx]

    def loss_value(self, loss: Any) -> float:
        """The loss ``train_step`` returned (a float or a framework scalar) as a float."""
        return float(loss)

    def device_timer(self) -> Any:
        """An object with ``start()``, ``stop()`` and ``times()`` (seconds per step, read after a
        sync) timing steps on the device without a host sync, or None."""
        return None

    def memory_stats(self) -> dict[str, Any]:
        """The framework allocator's peak, labelled: {"allocator_peak_mib", "allocator"}."""
        return {}

    def run_facts(self) -> dict[str, Any]:
        """Figures the framework's own machinery cost outside the timed steps (e.g. the
        Estimator's graph rebuilds and checkpoints), reported apart in the summary."""
        return {}

    def close(self) -> None:
        """Remove what the run left behind (temporary model dirs)."""

    def setup_parallel(self, parallel: Parallel) -> dict[str, Any]:
        """Join the framework's data-parallel engine (process group, strategy) before ``build``;
        returns what is in effect. Timed apart from everything else (``comm_setup_s``)."""
        if parallel.workers > 1:
            raise RuntimeError(f"{type(self).__name__} has no data-parallel engine")
        return {}

    def gather_step_times(self, times: list[float]) -> list[list[float]]:
        """Every rank's steady step times, gathered through the framework's own collective
        (called by every rank after training, outside the timed steps); one list per rank."""
        return [list(times)]

    # -- inference (spec mode "inference"; docs/inference.md) ----------------------------------
    # An API offers inference by supplying ``predict``; ``run_inference`` refuses one without it.
    def prepare_inference(self) -> dict[str, Any]:
        """Put the built model in its serving form (evaluation mode: no dropout, no gradients;
        the API's natural serving path) before the first request; return what is in effect."""
        raise NotImplementedError

    def predict(self, x: np.ndarray) -> Any:
        """One request: the batch from the host into the framework, forward, the outputs (left
        on the device: the loop's ``sync`` waits for them)."""
        raise NotImplementedError

    def served_outputs(self, outputs: Any) -> np.ndarray:
        """A request's outputs (what ``predict`` returned) as a host numpy array of logits, one
        row per sample (per position for tokens). Read once per run, untimed, for the equity
        check (``served_loss``)."""
        return np.asarray(outputs)

    # -- generation (spec mode "generate"; the gpt only; docs/generation.md) --------------------
    # An API generates by supplying both methods and listing "generate" in its capabilities'
    # modes; ``adapters.generate.run_generation`` refuses one without them. The full contract
    # (the cache, greedy fixed-length decoding, precision, token timing) is adapters/generate.py's
    # docstring.
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        """Once, untimed, after ``build``: the serving form, a static KV cache of
        ``prompt_tokens + new_tokens`` positions for ``batch`` sequences, the compiled step.
        Return the facts recorded as the summary's ``generation``: ``path``, ``cache``,
        ``token_timing`` ("per-token" or "whole"), ``compile``, ``weights_dtype``,
        ``cache_dtype`` (``adapters.generate.FACTS``), and anything else worth recording."""
        raise NotImplementedError

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: TokenClock) -> np.ndarray:
        """One request: the (batch, P) host token ids ``prompt`` into the framework, the prefill,
        ``new_tokens - 1`` greedy decode steps over the cache; the (batch, new_tokens) generated
        ids as a host numpy integer array. ``new_tokens`` is the run's N or 1. With
        ``token_timing`` "per-token", call ``clock.token(ids)`` once per token, in order, right
        after its (batch,) ids are on the host; with "whole", never."""
        raise NotImplementedError

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A batch as the framework receives it in ``train_step``, converted back to numpy in the
        data's own layout (NHWC). Lets the equity tests check every framework trains on the same
        bytes; called once per run, outside any timed region."""
        return x, y


def default_settings(backend: Any, settings: Settings) -> dict[str, Any]:
    """What a backend without its own ``apply_settings`` runs: fp32, host input; refuses more."""
    for name, plain in (("precision", "fp32"), ("input", "host")):
        if getattr(settings, name) != plain:
            raise RuntimeError(
                f"{type(backend).__name__} cannot apply {name}={getattr(settings, name)!r} "
                f"(it implements {name}={plain!r} only)"
            )
    return {
        "precision": "fp32",
        "input": "host",
        "timing": settings.timing,
        "autotune": "not applicable",
        "compile": "unknown",
    }


def optional_hooks(backend: Any) -> Callable[[str], Callable[..., Any]]:
    """The backend's own optional hook, or ``Backend``'s default bound to it."""

    def hook(name: str) -> Callable[..., Any]:
        own = getattr(backend, name, None)
        if own is not None:
            return own
        return getattr(Backend, name).__get__(backend)

    return hook


def evaluate_in_batches(
    predict: Callable[[np.ndarray, np.ndarray], tuple[float, int]],
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
) -> tuple[float, float]:
    """Shared evaluation bookkeeping: ``predict`` returns (summed loss, correct count) of a batch."""
    total_loss, correct = 0.0, 0
    for start in range(0, len(x), batch_size):
        loss_sum, right = predict(x[start : start + batch_size], y[start : start + batch_size])
        total_loss += loss_sum
        correct += right
    # Per target: one per sample, or one per position where each position predicts a token.
    n = max(y.size, 1)
    return total_loss / n, correct / n


def logits_loss_correct(logits: np.ndarray, y: np.ndarray, binary: bool) -> tuple[float, int]:
    """Summed cross-entropy from logits and the number of right answers, in float64 numpy: the
    same evaluation arithmetic for frameworks whose own evaluation would differ in reductions."""
    z = np.asarray(logits, dtype=np.float64)
    if binary:
        z = z.reshape(-1)
        t = np.asarray(y, dtype=np.float64).reshape(-1)
        # log(1 + exp(-|z|)) + max(z, 0) - z*t: stable binary cross-entropy with logits
        loss = np.logaddexp(0.0, -np.abs(z)) + np.maximum(z, 0.0) - z * t
        return float(loss.sum()), int(((z > 0) == (t > 0.5)).sum())
    labels = np.asarray(y, dtype=np.int64).reshape(-1)
    shifted = z - z.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(len(labels)), labels]
    return float(loss.sum()), int((z.argmax(axis=1) == labels).sum())
