"""What a run looks like to the UI: events applied to plain state, no Textual here.

Worker threads ``push`` events (thread-safe, no UI work); the UI ``drain``s them on a timer at a
fixed low rate and redraws once per drain. The same ``apply`` path rebuilds a finished run from
its stored series file, so History shows exactly what Live showed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.kinds import BatchEvent, RunStatus, SeriesEvent, WorkerEvent
from tui_bench.engine.spec import RunSpec

# Series kept whole in memory are bounded: a week-long run still fits.
# A spec in an event that this version cannot read: written by another version (SpecError), or
# not a mapping at all.
SPEC_UNREADABLE = (TuiBenchError, TypeError, AttributeError)
MAX_POINTS = 200_000


def downsample(values: list[float | None], width: int) -> tuple[list[float], list[float]]:
    """At most ``width`` points: bucket means, x at each bucket's centre (1-based step numbers).

    Missing values (a diverged loss travels as null) are skipped."""
    points = [(i + 1, v) for i, v in enumerate(values) if v is not None]
    if width <= 0 or not points:
        return [], []
    if len(points) <= width:
        return [float(x) for x, _ in points], [float(y) for _, y in points]
    xs: list[float] = []
    ys: list[float] = []
    size = len(points) / width
    for bucket in range(width):
        chunk = points[int(bucket * size) : max(int((bucket + 1) * size), int(bucket * size) + 1)]
        xs.append(sum(x for x, _ in chunk) / len(chunk))
        ys.append(sum(y for _, y in chunk) / len(chunk))
    return xs, ys


@dataclass
class LiveRun:
    """State of one run (or of the current run of a batch of repeats / a thread sweep)."""

    spec: RunSpec
    runs_total: int = 1
    run_index: int = 0  # 0-based index of the current run in the batch
    run_id: str | None = None
    status: str = "starting"  # starting, running, finished, failed, cancelled, interrupted
    reason: str | None = None
    started: dict[str, Any] | None = None
    losses: list[float | None] = field(default_factory=list)
    epoch: int = 0
    epochs: int = 0
    epoch_steps: int = 0  # steps in the current epoch
    epoch_step: int = 0  # steps done in the current epoch
    steps_done_before: int = 0  # steps of finished epochs
    epoch_records: list[dict[str, Any]] = field(default_factory=list)
    test: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    first_step_t: float | None = None
    first_steps_done: int = 0  # steps done when first_step_t was read
    last_t: float | None = None
    run_ids: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    cancel_requested: bool = False
    done: bool = False  # the whole batch is over
    # A sweep (preset or Setup's threads sweep) through engine.sweep: its id (to resume it),
    # "run k of N · config key · repeat r/R" and the configurations it skips here, with why.
    sweep_id: str | None = None
    sweep_line: str | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    sweep_left: int = 0  # (configuration, repeat) pairs without a finished run, at the end
    sweep_failed: dict[str, str] = field(default_factory=dict)  # config key -> why it stopped
    batch_id: str | None = None  # the supervisor's batch this view follows
    worker_pid: int | None = None  # the current run's worker process
    lost: str | None = None  # the supervisor died without ending the batch: why

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self.epochs = self.spec.epochs

    # -- threads ----------------------------------------------------------------------------
    def push(self, event: dict[str, Any]) -> None:
        """Called from any thread, as fast as events come; does no UI work."""
        with self._lock:
            self._pending.append(event)

    def drain(self) -> bool:
        """Apply what arrived since the last drain; True if anything changed."""
        with self._lock:
            pending, self._pending = self._pending, []
        for event in pending:
            self.apply(event)
        return bool(pending)

    # -- state ------------------------------------------------------------------------------
    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == SeriesEvent.RECORD:
            record = event["record"]
            if self.run_id is not None and record.get("id") != self.run_id:
                self._next_run()
            self.run_id = record.get("id")
            if record.get("spec"):
                try:
                    self.spec = RunSpec.from_dict(record["spec"], validate=False)
                    self.epochs = self.spec.epochs
                except SPEC_UNREADABLE:
                    pass  # keep the previous spec on screen rather than fail the view
            if self.run_id and self.run_id not in self.run_ids:
                self.run_ids.append(self.run_id)
            self.status = RunStatus.RUNNING
        elif kind == WorkerEvent.RUN_STARTED:
            self.started = event
            self.status = RunStatus.RUNNING
        elif kind == WorkerEvent.EPOCH_STARTED:
            self.epoch = event["epoch"]
            self.epochs = event.get("epochs", self.epochs)
            self.epoch_steps = event.get("steps", 0)
            self.epoch_step = 0
        elif kind == WorkerEvent.STEPS:
            losses = event.get("losses") or []
            if len(self.losses) < MAX_POINTS:
                self.losses.extend(losses)
            self.epoch_step = event.get("first_step", 0) + len(losses)
            if self.first_step_t is None:
                self.first_step_t = event.get("t")
                self.first_steps_done = self.steps_done
            self.last_t = event.get("t", self.last_t)
        elif kind == WorkerEvent.EPOCH_FINISHED:
            self.epoch_records.append(event)
            self.steps_done_before += event.get("steps", self.epoch_steps)
            self.epoch_step = self.epoch_steps = 0
            self.last_t = event.get("t", self.last_t)
        elif kind == WorkerEvent.TEST_FINISHED:
            self.test = event
        elif kind == WorkerEvent.FINISHED:
            self.summary = event.get("summary") or {}
        elif kind == WorkerEvent.ERROR:
            self.reason = f"{event.get('error_type')}: {(event.get('message') or '').strip()}"
        elif kind == SeriesEvent.SAMPLE:
            if len(self.samples) < MAX_POINTS:
                self.samples.append(event)
        elif kind == SeriesEvent.RESULT:
            record = event["record"]
            self.status = record.get("status", RunStatus.FAILED)
            self.reason = record.get("reason")
            self.metrics = record.get("metrics") or {}
            self.results.append(record)
        elif kind == BatchEvent.SWEEP_RUN:
            self.sweep_line = (
                f"run {event['index'] + 1} of {event['total']} · {event['key']} · "
                f"repeat {event['repeat'] + 1}/{event['repeats']}"
                + (" · oversubscribed (threads > cores)" if event.get("oversubscribed") else "")
            )
            self.runs_total = event["total"]
            try:
                self.spec = RunSpec.from_dict(event["spec"], validate=False)
            except SPEC_UNREADABLE:
                pass  # keep the previous spec on screen rather than fail the view
        elif kind == BatchEvent.PLAN:
            self.runs_total = max(event.get("total") or 1, 1)
            self.sweep_id = event.get("sweep_id") or self.sweep_id
            self.skipped = [tuple(item) for item in event.get("skipped") or []]
        elif kind == SeriesEvent.WORKER:
            self.worker_pid = event.get("pid")
        elif kind == BatchEvent.BATCH_DONE:
            self.done = True
            self.sweep_left = event.get("sweep_left") or 0
            self.sweep_failed = dict(event.get("not_run") or {})
            self.lost = event.get("lost")
            if event.get("error") and not self.results:
                self.reason = event["error"]

    def _next_run(self) -> None:
        """A new run of the batch starts: per-run state resets, the batch's results stay."""
        self.run_index += 1
        self.started = self.test = self.summary = None
        self.losses, self.epoch_records, self.samples = [], [], []
        self.epoch = self.epoch_steps = self.epoch_step = self.steps_done_before = 0
        self.first_step_t = self.last_t = None
        self.first_steps_done = 0
        self.metrics = {}
        self.reason = None

    # -- derived ----------------------------------------------------------------------------
    @property
    def steps_per_epoch(self) -> int:
        if self.started and self.started.get("steps_per_epoch"):
            return int(self.started["steps_per_epoch"])
        return self.epoch_steps

    @property
    def steps_total(self) -> int:
        return max(self.steps_per_epoch * max(self.epochs, 1), 1)

    @property
    def steps_done(self) -> int:
        return self.steps_done_before + self.epoch_step

    def overall_fraction(self) -> float:
        if self.done:
            return 1.0
        this_run = min(self.steps_done / self.steps_total, 1.0) if self.steps_per_epoch else 0.0
        if (
            self.status in ("finished", "failed", "cancelled")
            and self.run_index + 1 >= self.runs_total
        ):
            this_run = 1.0
        return (self.run_index + this_run) / max(self.runs_total, 1)

    def eta_s(self) -> float | None:
        """Remaining training time of the batch from the worker's own clock (steps so far)."""
        if self.first_step_t is None or self.last_t is None:
            return None
        elapsed = self.last_t - self.first_step_t
        if elapsed <= 0 or self.steps_done <= self.first_steps_done:
            return None
        rate = (self.steps_done - self.first_steps_done) / elapsed
        remaining = self.steps_total - self.steps_done
        remaining += (self.runs_total - self.run_index - 1) * self.steps_total
        return max(remaining, 0) / rate if rate > 0 else None

    def latest_figures(self) -> dict[str, Any]:
        """Steady-state step time, samples/s and accuracy as far as they are known."""
        out: dict[str, Any] = {}
        if self.epoch_records:
            last = self.epoch_records[-1]
            out["step_median_s"] = last.get("step_median_s")
            out["samples_per_s"] = last.get("samples_per_s")
            out["val_accuracy"] = last.get("val_accuracy")
            out["epoch_wall_s"] = last.get("wall_s")
        source = self.summary or self.metrics
        if source:
            for key in (
                "step_median_s",
                "samples_per_s",
                "val_accuracy",
                "test_accuracy",
                "warmup_s",
                "train_wall_s",
            ):
                if source.get(key) is not None:
                    out[key] = source[key]
        if self.test:
            out["test_accuracy"] = self.test.get("test_accuracy")
        return out


def live_run_from_series(events: list[dict[str, Any]]) -> LiveRun:
    """Rebuild a recorded run's view from its series file (History → open)."""
    spec = RunSpec()
    for event in events:
        if event.get("type") == SeriesEvent.RECORD:
            try:
                spec = RunSpec.from_dict(event["record"].get("spec") or {}, validate=False)
            except SPEC_UNREADABLE:
                spec = RunSpec()
            break
    run = LiveRun(spec=spec)
    for event in events:
        run.apply(event)
    if run.status == RunStatus.RUNNING:  # no result line: the app died during the run
        run.status, run.reason = RunStatus.INTERRUPTED, "the run has no recorded end"
    run.done = True
    return run
