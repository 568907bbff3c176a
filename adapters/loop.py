"""The one timed training loop. Frameworks plug in through ``Backend``; nothing here is per-framework.

What is timed, and how (the run's ``Settings`` choose; docs/gpu.md has the rules):
- ``timing="synced"`` (default): every clock read is ``time.perf_counter()`` taken right after
  ``backend.sync()``, so queued device work is finished before the clock is read; each step is
  timed on its own.
- ``timing="pipelined"``: no host sync inside a window of ``timing_window`` steps. The clock (one
  sync) is read at the window's bounds and the losses are read back then; each step's time is the
  window's mean, or, where the backend has device events (CUDA events in torch), the time between
  the step's own events.
- ``input="host"`` (default): a *step* is: gather the batch from the epoch's order, hand it to the
  framework (layout/dtype conversion and host→device copy included), forward, backward, optimizer
  update, read the loss. ``input="device"``: the whole training split is put on the device once,
  before timing (``input_upload_s``); batches are gathered there, inside the step.
- The first ``warmup_steps`` steps of the run are warm-up: their time (tracing, compilation,
  allocator growth) is reported as ``warmup_s`` and ``first_step_s`` and kept out of every
  steady-state figure (step median/IQR, samples/s).
- Validation after each epoch and the final test pass are timed separately from training.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapters import data as data_module
from adapters import protocol


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
    synced timing (``apply_settings`` refuses anything else for it)."""

    framework: str = ""

    def describe(self) -> dict[str, Any]:
        """framework_version, device, device_name, threads_effective, interop_threads, extra."""
        raise NotImplementedError

    def build(self, hyper: Hyper, dataset: data_module.Dataset) -> None:
        raise NotImplementedError

    def param_count(self) -> int:
        """Trainable parameters."""
        raise NotImplementedError

    def sync(self) -> None:
        """Block until all queued device work is done."""

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One optimizer step on one batch; returns the loss as a Python float."""
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
        """(mean loss, accuracy) over all of x in batches, no dropout, no update."""
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

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A batch as the framework receives it in ``train_step``, converted back to numpy in the
        data's own layout (NHWC). Lets the equity tests check every framework trains on the same
        bytes; called once per run, outside any timed region."""
        return x, y


class FitStepLoss:
    """A step's loss recovered from Keras ``fit``'s running mean when it is read (blocks until
    the step's loss exists); reads happen in step order. Shared by the APIs whose framework owns
    the loop through ``fit`` (Keras 3 on any backend, TensorFlow's keras API)."""

    def __init__(self, callback: Any, running_mean: Any) -> None:
        self.callback = callback
        self.running_mean = running_mean

    def __float__(self) -> float:
        cb = self.callback
        mean = float(np.asarray(self.running_mean))
        loss = mean * (cb.seen + 1) - cb.mean * cb.seen
        cb.seen, cb.mean = cb.seen + 1, mean
        return loss


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


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an already sorted list."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class StepClock:
    """Times each step (``synced``) or each window of steps (``pipelined``), separates warm-up,
    marks the steady-state window (for energy) and coalesces loss events."""

    def __init__(
        self,
        sync: Callable[[], None],
        emit: Callable[..., None],
        warmup_steps: int,
        batch_size: int,
        now: Callable[[], float] = time.perf_counter,
        loss_value: Callable[[Any], float] = float,
        timing: str = "synced",
        window: int = 10,
        device_timer: Any = None,
    ) -> None:
        self._sync = sync
        self._emit = emit
        self._now = now
        self._loss_value = loss_value
        self.timing = timing
        self.window = max(1, window)
        self._timer = device_timer
        self.warmup_remaining = warmup_steps
        self.batch_size = batch_size
        self.first_step_s: float | None = None
        self.warmup_s = 0.0
        self.steady_times: list[float] = []  # whole run
        self.windows = 0  # pipelined windows closed (each: one sync, one clock read)
        self.in_steady = False
        self._start = 0.0
        self._window_start = 0.0
        self._window: list[Any] = []  # loss handles of the open pipelined window
        self._flush_interval = 1.0 / protocol.MAX_STEP_MESSAGES_PER_S
        self.new_epoch(0)

    @property
    def step_source(self) -> str:
        if self.timing == "synced":
            return "per step, device-synchronised"
        if self._timer is not None:
            return "device events per step, one sync per window"
        return f"windows of {self.window} steps, one sync per window"

    def new_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.epoch_steady: list[float] = []
        self.epoch_warmup_s = 0.0
        self.epoch_losses: list[float] = []
        self._pending: list[float] = []
        self._pending_times: list[float] = []  # steady step times since the last flush
        self._pending_first = 0
        self._last_flush = self._now()

    def _pipelined(self) -> bool:
        return self.timing == "pipelined" and self.warmup_remaining == 0

    def begin(self) -> None:
        if self.warmup_remaining == 0 and not self.in_steady:
            self.in_steady = True
            self._emit("steady", edge="begin", epoch=self.epoch)
        if self._pipelined():
            if not self._window:
                self._sync()
                self._window_start = self._now()
            if self._timer is not None:
                self._timer.start()
            return
        self._sync()
        self._start = self._now()

    def end(self, loss: Any) -> None:
        if self._pipelined():
            if self._timer is not None:
                self._timer.stop()
            self._window.append(loss)
            if len(self._window) >= self.window:
                self.close_window()
            return
        value = self._loss_value(loss)  # reading the loss is part of the step
        self._sync()
        elapsed = self._now() - self._start
        if self.first_step_s is None:
            self.first_step_s = elapsed
        if self.warmup_remaining > 0:
            self.warmup_remaining -= 1
            self.warmup_s += elapsed
            self.epoch_warmup_s += elapsed
        else:
            self.epoch_steady.append(elapsed)
            self.steady_times.append(elapsed)
            self._pending_times.append(elapsed)
        self._record_loss(value)
        # Reading the clock here is cheap and outside the timed region.
        if self._start + elapsed - self._last_flush >= self._flush_interval:
            self.flush()

    def close_window(self) -> None:
        """End the open pipelined window: one sync, one clock read, then read its losses."""
        if not self._window:
            return
        self._sync()
        total = self._now() - self._window_start
        steps = len(self._window)
        times = self._timer.times() if self._timer is not None else []
        if len(times) != steps:
            times = [total / steps] * steps
        self.windows += 1
        self.epoch_steady.extend(times)
        self.steady_times.extend(times)
        self._pending_times.extend(times)
        for loss in self._window:
            self._record_loss(self._loss_value(loss))
        self._window = []
        self.flush()

    def end_epoch(self) -> None:
        """After the epoch's last step: close a partial window and the steady-state mark."""
        self.close_window()
        if self.in_steady:
            self._sync()
            self.in_steady = False
            self._emit("steady", edge="end", epoch=self.epoch)

    def _record_loss(self, value: float) -> None:
        if not self._pending:
            self._pending_first = len(self.epoch_losses)
        value = float(value)
        self.epoch_losses.append(value)
        self._pending.append(value)

    def flush(self) -> None:
        if self._pending:
            # The steady steps' times ride along, so a viewer can judge the run as it goes
            # (4 significant digits, as in the result: plenty for 1 % rules).
            times = {"step_times": compact(self._pending_times)} if self._pending_times else {}
            self._emit(
                "steps",
                epoch=self.epoch,
                first_step=self._pending_first,
                losses=self._pending,
                **times,
            )
            self._pending = []
            self._pending_times = []
        self._last_flush = self._now()


def compact(times: list[float]) -> list[float]:
    """Step times at 4 significant digits: plenty for 1 % rules, and short on the wire."""
    return [float(f"{t:.4g}") for t in times]


def step_stats(times: list[float], batch_size: int) -> dict[str, float | None]:
    ordered = sorted(times)
    if not ordered:
        return {
            "step_median_s": None,
            "step_iqr_s": None,
            "step_mean_s": None,
            "samples_per_s": None,
        }
    total = sum(ordered)
    return {
        "step_median_s": percentile(ordered, 0.5),
        "step_iqr_s": percentile(ordered, 0.75) - percentile(ordered, 0.25),
        "step_mean_s": total / len(ordered),
        "samples_per_s": batch_size * len(ordered) / total if total > 0 else None,
    }


def run_training(
    backend: Backend,
    dataset: data_module.Dataset,
    hyper: Hyper,
    epochs: int,
    steps_per_epoch: int | None,
    warmup_steps: int,
    emit: Callable[..., None],
    target_accuracy: float | None = None,
    fault: Callable[[str, int], None] | None = None,
    settings: Settings | None = None,
    parallel: Parallel | None = None,
) -> dict[str, Any]:
    """Train, validate each epoch, test once; emit events; return the run summary.

    ``backend`` may be any object with the required ``Backend`` methods; the optional hooks
    fall back to ``Backend``'s defaults. With ``parallel``, ``hyper.batch_size`` is this
    worker's batch; steps walk the global batches and throughput counts global samples."""
    settings = settings or Settings()
    parallel = parallel or Parallel()
    global_batch = hyper.batch_size * parallel.workers
    now = time.perf_counter
    hook = _optional_hooks(backend)
    clock = StepClock(
        backend.sync,
        emit,
        warmup_steps,
        global_batch,
        loss_value=hook("loss_value"),
        timing=settings.timing,
        window=settings.timing_window,
        device_timer=hook("device_timer")() if settings.timing == "pipelined" else None,
    )
    n_train = len(dataset.x_train)
    x_train, y_train = dataset.x_train, dataset.y_train
    input_upload_s = None
    if settings.input == "device":
        backend.sync()
        t0 = now()
        x_train, y_train = hook("to_device")(x_train, y_train)
        backend.sync()
        input_upload_s = now() - t0
    epoch_records: list[dict[str, Any]] = []
    reached: dict[str, Any] | None = None
    train_wall = 0.0
    for epoch in range(1, epochs + 1):
        batch_indices = [
            parallel.shard(idx)
            for idx in data_module.batches(
                n_train, global_batch, hyper.seed, epoch, steps_per_epoch
            )
        ]
        emit("epoch_started", epoch=epoch, epochs=epochs, steps=len(batch_indices))
        clock.new_epoch(epoch)
        if fault:
            fault("epoch", epoch)
        backend.sync()
        epoch_start = now()
        backend.train_epoch(x_train, y_train, batch_indices, clock)
        clock.end_epoch()
        backend.sync()
        wall = now() - epoch_start
        clock.flush()
        train_wall += wall
        val_loss = val_acc = None
        val_s = 0.0
        if len(dataset.x_val):
            backend.sync()
            t0 = now()
            val_loss, val_acc = backend.evaluate(dataset.x_val, dataset.y_val, hyper.batch_size)
            backend.sync()
            val_s = now() - t0
        losses = clock.epoch_losses
        record = {
            "epoch": epoch,
            "wall_s": wall,
            "warmup_s": clock.epoch_warmup_s,
            "steps": len(batch_indices),
            "steady_steps": len(clock.epoch_steady),
            **step_stats(clock.epoch_steady, global_batch),
            "loss": sum(losses) / len(losses) if losses else None,
            "val_loss": val_loss,
            "val_accuracy": val_acc,
            "val_s": val_s,
        }
        epoch_records.append(record)
        emit("epoch_finished", **record)
        if (
            reached is None
            and target_accuracy is not None
            and val_acc is not None
            and val_acc >= target_accuracy
        ):
            reached = {"epoch": epoch, "train_wall_s": train_wall}
            break
    backend.sync()
    t0 = now()
    test_loss, test_acc = backend.evaluate(dataset.x_test, dataset.y_test, hyper.batch_size)
    backend.sync()
    test_s = now() - t0
    emit(
        "test_finished",
        test_s=test_s,
        test_loss=test_loss,
        test_accuracy=test_acc,
        test_samples=len(dataset.x_test),
    )
    overall = step_stats(clock.steady_times, global_batch)
    return {
        **parallel_summary(hook("gather_step_times")(clock.steady_times), parallel, hyper),
        "timing": settings.timing,
        "timing_window": settings.timing_window if settings.timing == "pipelined" else None,
        "step_source": clock.step_source,
        "pipelined_windows": clock.windows if settings.timing == "pipelined" else None,
        "input": settings.input,
        "input_upload_s": input_upload_s,
        **(
            hook("memory_stats")()
            or {
                "allocator_peak_mib": None,
                "allocator": "n/a: no allocator peak from the framework here (n/a on CPU)",
            }
        ),
        **hook("run_facts")(),
        "epochs_run": len(epoch_records),
        "train_wall_s": train_wall,
        "warmup_s": clock.warmup_s,
        "first_step_s": clock.first_step_s,
        "steady_steps": len(clock.steady_times),
        **overall,
        # Every steady step in order, so the app can judge the run's stability (and re-judge it
        # when the rules change); 4 significant digits are plenty for 1 % rules and keep it short.
        "steady_step_times": compact(clock.steady_times),
        "final_loss": epoch_records[-1]["loss"] if epoch_records else None,
        "val_accuracy": epoch_records[-1]["val_accuracy"] if epoch_records else None,
        "test_s": test_s,
        "test_loss": test_loss,
        "test_accuracy": test_acc,
        "target_accuracy": target_accuracy,
        "target_reached_epoch": reached["epoch"] if reached else None,
        "target_reached_s": reached["train_wall_s"] if reached else None,
    }


def parallel_summary(
    rank_times: list[list[float]], parallel: Parallel, hyper: Hyper
) -> dict[str, Any]:
    """Workers, batches and every rank's steady step median: a straggler shows as one rank's
    median above the others (rank 0's own steps wait for it at every gradient all-reduce)."""
    medians = [percentile(sorted(times), 0.5) if times else None for times in rank_times]
    known = [m for m in medians if m]
    return {
        "workers": parallel.workers,
        "scaling": parallel.scaling,
        "worker_batch": hyper.batch_size,
        "global_batch": hyper.batch_size * parallel.workers,
        "rank_step_median_s": medians,
        "rank_straggler_ratio": max(known) / min(known) if known else None,
    }


def _optional_hooks(backend: Any) -> Callable[[str], Callable[..., Any]]:
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


# -- inference -------------------------------------------------------------------------------
# The tail a percentile claims is only claimed where the requests can bound it: the upper end of
# the q-quantile's distribution-free 95 % confidence interval (order statistics, the normal
# approximation to the binomial, as stability.median_ci does for the median) must fall inside
# the sample. That needs 8 requests for p50, 53 for p90, 563 for p99 (``tail_requests``).
LATENCY_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
TAIL_Z = 1.96
INFERENCE_SOURCE = "per request, device-synchronised"


def tail_bounded(n: int, q: float, z: float = TAIL_Z) -> bool:
    """Whether n values bound the q-quantile from above: the rank (1-based) of its 95 % upper
    confidence limit, ceil(1 + nq + z sqrt(nq(1-q))), is at most n."""
    if n < 1:
        return False
    return math.ceil(1 + n * q + z * math.sqrt(n * q * (1 - q))) <= n


def tail_requests(q: float, z: float = TAIL_Z) -> int:
    """The fewest requests that bound the q-quantile (``tail_bounded``)."""
    n = 1
    while not tail_bounded(n, q, z):
        n += 1
    return n


def latency_stats(times: list[float], batch_size: int) -> dict[str, Any]:
    """p50, p90, p99, max and mean latency of the timed requests (seconds), the count behind
    them, samples/s (batch × requests / their summed time), and a note naming each percentile
    the requests are too few to bound (None when all are)."""
    ordered = sorted(times)
    n = len(ordered)
    total = sum(ordered)
    out: dict[str, Any] = {"latency_requests": n}
    for name, q in LATENCY_QUANTILES:
        out[f"latency_{name}_s"] = percentile(ordered, q) if n else None
    out["latency_max_s"] = ordered[-1] if n else None
    out["latency_mean_s"] = total / n if n else None
    out["inference_samples_per_s"] = batch_size * n / total if total > 0 else None
    short = [
        f"{name} rests on {n} requests, fewer than the {tail_requests(q)} that bound it "
        "(95 % interval of the quantile)"
        for name, q in LATENCY_QUANTILES
        if not tail_bounded(n, q)
    ]
    out["latency_note"] = "; ".join(short) or None
    return out


def request_batches(n: int, batch_size: int, seed: int, count: int) -> list[np.ndarray]:
    """The index arrays of ``count`` requests over a split of n samples: one seeded order (the
    split's epoch-1 order, the same in every framework), walked in consecutive batches and
    wrapping round, so any number of requests of any size is drawn the same way."""
    order = data_module.epoch_order(n, seed, 1)
    return [
        np.take(order, np.arange(i * batch_size, (i + 1) * batch_size), mode="wrap")
        for i in range(count)
    ]


def served_loss(
    backend: Backend,
    dataset: data_module.Dataset,
    hyper: Hyper,
    x: np.ndarray,
    y: np.ndarray,
    first: np.ndarray,
) -> dict[str, Any]:
    """The first request served once more, untimed, after the timed ones: its outputs' mean
    cross-entropy against the request's labels (float64 numpy, ``logits_loss_correct``) and the
    sha256 of its bytes. Same weights, same bytes, same function: the same number in every
    framework (tests/test_inference_equity.py holds it to the float64 reference for the models
    with a shared draw), so an API that served a different model (dropout left on, weights
    mapped wrongly, a different input layout) shows here."""
    outputs = np.asarray(backend.served_outputs(backend.predict(x[first])), dtype=np.float64)
    labels = y[first]
    binary = data_module.binary_head(hyper.model, dataset.shape.num_classes)
    logits = outputs.reshape(labels.size, -1)
    loss, _ = logits_loss_correct(logits, labels, binary)
    return {
        "served_loss": loss / max(labels.size, 1),
        "first_request_sha256": hashlib.sha256(
            np.ascontiguousarray(x[first]).tobytes()
        ).hexdigest(),
    }


def run_inference(
    backend: Backend,
    dataset: data_module.Dataset,
    hyper: Hyper,
    requests: int,
    warmup: int,
    emit: Callable[..., None],
    weights: str,
) -> dict[str, Any]:
    """Serve ``warmup`` then ``requests`` requests of ``hyper.batch_size`` test samples, each
    timed alone: ``perf_counter_ns`` after a device sync, the request (``predict``: host bytes
    into the framework, forward), a device sync, the clock. Warm-up requests (the first one
    pays tracing and compilation) are reported apart; the timed ones go out as ``requests``
    events and make the summary. ``weights`` says which weights serve (recorded)."""
    if getattr(backend, "predict", None) is None or type(backend).predict is Backend.predict:
        raise RuntimeError(f"inference is not built for {type(backend).__name__} (no predict)")
    hook = _optional_hooks(backend)
    serving = backend.prepare_inference()
    split = "test" if len(dataset.x_test) else "train"
    x, y = (
        (dataset.x_test, dataset.y_test) if split == "test" else (dataset.x_train, dataset.y_train)
    )
    total = warmup + requests
    order = request_batches(len(x), hyper.batch_size, hyper.seed, total)
    emit("epoch_started", epoch=1, epochs=1, steps=total)
    clock = time.perf_counter_ns
    flush_every_ns = int(1e9 / protocol.MAX_STEP_MESSAGES_PER_S)
    warm: list[float] = []
    timed: list[float] = []
    pending: list[float] = []
    backend.sync()
    wall0 = last_flush = clock()
    for i, idx in enumerate(order):
        xb = x[idx]  # the request's payload exists before the request: gathered untimed
        backend.sync()
        t0 = clock()
        backend.predict(xb)
        backend.sync()
        elapsed = (clock() - t0) * 1e-9
        if i < warmup:
            warm.append(elapsed)
        else:
            timed.append(elapsed)
            pending.append(elapsed)
        now = t0 + int(elapsed * 1e9)  # outside the timed region: no extra clock read
        if now - last_flush >= flush_every_ns or i == total - 1:
            emit("requests", done=i + 1, **({"latencies": compact(pending)} if pending else {}))
            pending = []
            last_flush = now
    wall = (clock() - wall0) * 1e-9
    return {
        "mode": "inference",
        **served_loss(backend, dataset, hyper, x, y, order[0]),
        "serving": serving,
        "weights": weights,
        "request_split": split,
        "batch_size": hyper.batch_size,
        "warmup_requests": warmup,
        "warmup_s": sum(warm),
        "first_request_s": warm[0] if warm else (timed[0] if timed else None),
        "requests": len(timed),
        "inference_wall_s": wall,
        **latency_stats(timed, hyper.batch_size),
        # The latency series judged by the same rules as training steps (stability.py reads
        # steady_step_times): each request is one "step" of an inference run.
        "steady_steps": len(timed),
        "steady_step_times": compact(timed),
        "step_source": INFERENCE_SOURCE,
        "timing": "per request",
        "input": "host",
        **(
            hook("memory_stats")()
            or {
                "allocator_peak_mib": None,
                "allocator": "n/a: no allocator peak from the framework here (n/a on CPU)",
            }
        ),
    }
