"""The step clock: how a training step is timed, warm-up kept apart, and the step statistics.

What is timed, and how (the run's ``Settings`` choose; docs/gpu.md has the rules):
- ``timing="synced"`` (default): every clock read is ``time.perf_counter()`` taken right after
  ``backend.sync()``, so queued device work is finished before the clock is read; each step is
  timed on its own.
- ``timing="pipelined"``: no host sync inside a window of ``timing_window`` steps. The clock (one
  sync) is read at the window's bounds and the losses are read back then; each step's time is the
  window's mean, or, where the backend has device events (CUDA events in torch), the time between
  the step's own events.
- The first ``warmup_steps`` steps of the run are warm-up: their time (tracing, compilation,
  allocator growth) is reported as ``warmup_s`` and ``first_step_s`` and kept out of every
  steady-state figure (step median/IQR, samples/s).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from adapters import protocol


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


class TokenClock:
    """The generation loop's clock, handed to ``Backend.generate`` (``token_timing``
    "per-token"): ``token`` reads ``perf_counter_ns`` once as each token's ids reach the host,
    nothing else in the request's path (adapters/generate.py reads the stamps)."""

    def __init__(self, now: Callable[[], int] = time.perf_counter_ns) -> None:
        self._now = now
        self.stamps: list[int] = []

    def token(self, ids: Any = None) -> None:
        """A token's ids are on the host: read the clock. ``ids`` (the (batch,) host ids) is
        accepted for the adapter's convenience and not kept: ``generate`` returns them all."""
        self.stamps.append(self._now())

    def reset(self) -> None:
        self.stamps = []
