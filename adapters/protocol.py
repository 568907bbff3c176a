"""The event schema between a worker and the app: one JSON object per line on a dedicated pipe.

Both sides use this file: the worker imports it as ``adapters.protocol``; the app loads it by path
(``tui_bench.engine.protocol``). It is stdlib-only because a worker may run under another
interpreter with another numpy.

Schema version 1. Every event carries ``v`` (schema version), ``type`` and ``t`` (seconds since the
worker started, ``time.perf_counter`` based). Types and their fields:

``run_started``
    framework, framework_version, api, device (what the framework really uses, e.g. ``cuda:0``),
    device_name, threads_requested, threads_effective (read back from the framework),
    interop_threads (or null), param_count, python, numpy_version, extra (framework facts),
    import_s (framework import time), data_s (dataset load time), build_s (model build time),
    steps_per_epoch, train_samples, val_samples, test_samples, settings (precision, compile,
    autotune, input, timing as applied and read back), threads_configured, perf_env
    (performance-relevant environment variables that were set), first_batch_sha256,
    initial_loss (models with shared initial weights only: the first batch's loss before any
    update, no dropout).
``epoch_started``
    epoch (1-based), epochs, steps.
``steps``
    epoch, first_step (0-based index within the epoch of ``losses[0]``), losses (floats),
    step_times (seconds, 4 significant digits: the steady steps among them, in order; absent
    while all are warm-up). Coalesced: at most ~10 per second whatever the step rate.
``epoch_finished``
    epoch, wall_s (all steps of the epoch, warm-up included), warmup_s (part of wall_s spent in
    warm-up steps), steady_steps, step_median_s, step_iqr_s, samples_per_s (steady-state),
    loss (mean training loss), val_loss, val_accuracy, val_s.
``requests``
    done (requests finished so far, warm-up ones included), latencies (seconds, 4 significant
    digits: the timed requests since the last event, in order, each timed alone; absent during
    warm-up). An inference run's series (``mode`` inference, docs/inference.md); coalesced like
    ``steps``. A generation run's (``mode`` generate, docs/generation.md) latencies are each
    request's E2E time, and it adds ttft and tpot (seconds, the same requests, in order).
``test_finished``
    test_s (inference over the test set, synchronised), test_loss, test_accuracy, test_samples.
``heartbeat``
    nothing else; proves a long step or compile is alive.
``steady``
    edge (``begin`` or ``end``), epoch: the bounds of steady-state training within an epoch
    (warm-up and validation outside), so the runner's sampler reads the GPU energy counter at them.
``finished``
    summary: the run's overall figures (``adapters.train.run_training`` or ``adapters.serve.run_inference``).
``error``
    error_type, message, traceback, phase (import, data, build, train, inference, generate, test).

On the app's side one reducer folds these (``tui_bench/engine/runs/reducer.py``): a new type is
added here, written by the worker, and handled there, nowhere else.
"""

from __future__ import annotations

import json
import math
from enum import Enum
from typing import Any

SCHEMA_VERSION = 1


class WorkerEvent(str, Enum):  # noqa: UP042 (older runtimes)
    """The kinds of event a worker sends. ``str`` mixin rather than StrEnum: a runtime the user
    points at may run an older Python than the app."""

    RUN_STARTED = "run_started"
    EPOCH_STARTED = "epoch_started"
    STEPS = "steps"
    REQUESTS = "requests"
    EPOCH_FINISHED = "epoch_finished"
    TEST_FINISHED = "test_finished"
    HEARTBEAT = "heartbeat"
    STEADY = "steady"
    FINISHED = "finished"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


EVENT_TYPES = frozenset(kind.value for kind in WorkerEvent)

# Losses per second the worker sends at most; the UI redraws at its own, lower rate.
MAX_STEP_MESSAGES_PER_S = 10


def _finite(value: Any) -> Any:
    # JSON has no NaN/Infinity; a diverged loss must still travel, as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def encode(event_type: str, t: float, **fields: Any) -> bytes:
    """One event as a single line of UTF-8 JSON, newline-terminated."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    payload = {"v": SCHEMA_VERSION, "type": event_type, "t": round(t, 6), **_finite(fields)}
    return (json.dumps(payload, separators=(",", ":"), allow_nan=False) + "\n").encode()


class DecodeError(ValueError):
    """A line on the event channel that is not a valid event."""


def decode(line: bytes | str) -> dict[str, Any]:
    """Parse one line; raise DecodeError with a short reason when it is not a valid event."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"not UTF-8: {exc.reason}") from None
    line = line.strip()
    if not line:
        raise DecodeError("empty line")
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"not JSON: {exc.msg}") from None
    if not isinstance(event, dict):
        raise DecodeError("not a JSON object")
    if event.get("v") != SCHEMA_VERSION:
        raise DecodeError(f"schema version {event.get('v')!r}, expected {SCHEMA_VERSION}")
    if event.get("type") not in EVENT_TYPES:
        raise DecodeError(f"unknown event type {event.get('type')!r}")
    return event


class LineSplitter:
    """Turns arbitrary chunks read from a pipe into complete lines; keeps a partial tail."""

    def __init__(self, max_line: int = 16 * 1024 * 1024) -> None:
        self._buffer = b""
        self._max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > self._max_line:
            # A line this long is garbage; drop it rather than grow without bound.
            lines.append(self._buffer)
            self._buffer = b""
        return lines

    def flush(self) -> bytes:
        """What is left when the pipe closed: a partial line, or b''."""
        rest, self._buffer = self._buffer, b""
        return rest
