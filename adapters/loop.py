"""The one timed training loop. Frameworks plug in through ``Backend``; nothing here is per-framework.

What is timed, and how:
- Every clock read is ``time.perf_counter()`` taken right after ``backend.sync()``, so queued
  device work is finished before the clock is read.
- A *step* is: gather the batch from the epoch's order, hand it to the framework (layout/dtype
  conversion and host→device copy included), forward, backward, optimizer update, read the loss.
- The first ``warmup_steps`` steps of the run are warm-up: their time (tracing, compilation,
  allocator growth) is reported as ``warmup_s`` and ``first_step_s`` and kept out of every
  steady-state figure (step median/IQR, samples/s).
- Validation after each epoch and the final test pass are timed separately from training.
"""

from __future__ import annotations

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
    # Adam's constants are fixed across frameworks (Keras' defaults; torch's epsilon differs).
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7


class Backend:
    """What a framework adapter supplies. One subclass per framework × API family."""

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
            loss = self.train_step(x[idx], y[idx])
            clock.end(loss)

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        """(mean loss, accuracy) over all of x in batches, no dropout, no update."""
        raise NotImplementedError

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A batch as the framework receives it in ``train_step``, converted back to numpy in the
        data's own layout (NHWC). Lets the equity tests check every framework trains on the same
        bytes; called once per run, outside any timed region."""
        return x, y


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an already sorted list."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class StepClock:
    """Times each step (device-synchronised), separates warm-up, and coalesces loss events."""

    def __init__(
        self,
        sync: Callable[[], None],
        emit: Callable[..., None],
        warmup_steps: int,
        batch_size: int,
        now: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._sync = sync
        self._emit = emit
        self._now = now
        self.warmup_remaining = warmup_steps
        self.batch_size = batch_size
        self.first_step_s: float | None = None
        self.warmup_s = 0.0
        self.steady_times: list[float] = []  # whole run
        self._start = 0.0
        self._flush_interval = 1.0 / protocol.MAX_STEP_MESSAGES_PER_S
        self.new_epoch(0)

    def new_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.epoch_steady: list[float] = []
        self.epoch_warmup_s = 0.0
        self.epoch_losses: list[float] = []
        self._pending: list[float] = []
        self._pending_first = 0
        self._last_flush = self._now()

    def begin(self) -> None:
        self._sync()
        self._start = self._now()

    def end(self, loss: float) -> None:
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
        if not self._pending:
            self._pending_first = len(self.epoch_losses)
        loss = float(loss)
        self.epoch_losses.append(loss)
        self._pending.append(loss)
        # Reading the clock here is cheap and outside the timed region.
        if self._start + elapsed - self._last_flush >= self._flush_interval:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._emit(
                "steps", epoch=self.epoch, first_step=self._pending_first, losses=self._pending
            )
            self._pending = []
        self._last_flush = self._now()


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
) -> dict[str, Any]:
    """Train, validate each epoch, test once; emit events; return the run summary."""
    now = time.perf_counter
    clock = StepClock(backend.sync, emit, warmup_steps, hyper.batch_size)
    n_train = len(dataset.x_train)
    epoch_records: list[dict[str, Any]] = []
    reached: dict[str, Any] | None = None
    train_wall = 0.0
    for epoch in range(1, epochs + 1):
        batch_indices = data_module.batches(
            n_train, hyper.batch_size, hyper.seed, epoch, steps_per_epoch
        )
        emit("epoch_started", epoch=epoch, epochs=epochs, steps=len(batch_indices))
        clock.new_epoch(epoch)
        if fault:
            fault("epoch", epoch)
        backend.sync()
        epoch_start = now()
        backend.train_epoch(dataset.x_train, dataset.y_train, batch_indices, clock)
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
            **step_stats(clock.epoch_steady, hyper.batch_size),
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
    overall = step_stats(clock.steady_times, hyper.batch_size)
    return {
        "epochs_run": len(epoch_records),
        "train_wall_s": train_wall,
        "warmup_s": clock.warmup_s,
        "first_step_s": clock.first_step_s,
        "steady_steps": len(clock.steady_times),
        **overall,
        "final_loss": epoch_records[-1]["loss"] if epoch_records else None,
        "val_accuracy": epoch_records[-1]["val_accuracy"] if epoch_records else None,
        "test_s": test_s,
        "test_loss": test_loss,
        "test_accuracy": test_acc,
        "target_accuracy": target_accuracy,
        "target_reached_epoch": reached["epoch"] if reached else None,
        "target_reached_s": reached["train_wall_s"] if reached else None,
    }


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
    n = max(len(x), 1)
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
