"""The one fold of a batch's event stream into the state of the batch and its current run.

Every viewer reads a batch the same way: the batch's own events (request, supervisor, plan, sweep
position, run ids, the end) and each run's series events (record, the worker's events, samples,
result) are applied, in order, to one ``BatchView``. The supervisor (``BatchState``), the CLI
(``attach``, ``ps``), the TUI's Live view, History's stored runs and the runner's own result all
read this state; none of them switches on an event kind. A new event kind is handled here, once.

``fold`` takes a backlog (a run attached an hour in) in one pass; ``apply`` takes one live event.
``push``/``drain`` hand events from a reading thread to the thread that draws, so drawing never
waits on a file and the view is only ever changed by the thread that reads it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine import flops
from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.kinds import ENDED, BatchEvent, RunStatus, SeriesEvent, WorkerEvent
from tui_bench.engine.machine import peaks
from tui_bench.engine.machine.limits import Limits, Mfu
from tui_bench.engine.results import metrics as metric_registry
from tui_bench.engine.results import stability
from tui_bench.engine.results.record import Run
from tui_bench.engine.spec import SERVING, RunSpec

# A spec in an event that this version cannot read: written by another version (SpecError), or
# not a mapping at all. The view keeps the previous spec rather than fail.
SPEC_UNREADABLE = (TuiBenchError, TypeError, AttributeError)
# Series kept whole in memory are bounded: a week-long run still fits.
MAX_POINTS = 200_000
_STEPS = str(WorkerEvent.STEPS)  # the bulk of any backlog: compared as a plain str in ``fold``
# Judging 20,000 steps takes ~40 ms: a live verdict is worked out again at most this often.
FORMING_EVERY_S = 1.0


@dataclass
class RunEntry:
    """One run of the batch, as far as it got: what a viewer prints once per run."""

    run_id: str | None
    label: str = ""
    host: str | None = None  # the node a fleet run ran on; None: this machine
    position: dict[str, Any] | None = None  # the sweep_run event that announced it
    started: dict[str, Any] | None = None  # the worker's run_started event
    epoch_records: list[dict[str, Any]] = field(default_factory=list)
    test: dict[str, Any] | None = None
    result: Run | None = None  # the final history record, as a value


@dataclass
class Progress:
    """Where a batch is, for ``tui-bench ps``: run k of N, epoch, step."""

    run_index: int = 0
    runs_total: int = 0
    run_id: str | None = None
    epoch: int = 0
    epochs: int = 0
    step: int = 0
    steps: int = 0
    position: str = ""
    host: str | None = None  # the node a fleet run runs on (engine.fleet); None: this machine

    @property
    def fraction(self) -> float:
        if not self.runs_total:
            return 0.0
        run = 0.0
        if self.epochs and self.steps:
            run = ((self.epoch - 1) + self.step / self.steps) / self.epochs
        return (max(self.run_index - 1, 0) + min(max(run, 0.0), 1.0)) / self.runs_total

    def describe(self) -> str:
        parts = [f"run {self.run_index}/{self.runs_total}"]
        if self.epochs:
            parts.append(f"epoch {self.epoch}/{self.epochs}")
        if self.steps:
            parts.append(f"step {self.step}/{self.steps}")
        where = f" on {self.host}" if self.host else ""
        return " · ".join(parts) + f" ({self.fraction:.0%}){where}"


@dataclass
class BatchView:
    """The state of a batch and of its current run (one run, a run's repeats, or a sweep)."""

    spec: RunSpec = field(default_factory=RunSpec)
    runs_total: int = 1
    batch_id: str | None = None
    # -- the batch (its own event file) --
    header: dict[str, Any] | None = None  # the request, as its launcher wrote it
    supervisor: dict[str, Any] | None = None  # the owner's identity (pid + start time)
    plan: dict[str, Any] | None = None
    position: dict[str, Any] | None = None  # the last sweep_run event
    ending: dict[str, Any] | None = None  # the batch_done event
    run_ids: list[str] = field(default_factory=list)
    runs: list[RunEntry] = field(default_factory=list)  # one per run that recorded its start
    results: list[Run] = field(default_factory=list)  # each run's final record, in order
    done: bool = False  # the whole batch is over
    # A sweep (preset or Setup's threads sweep) through engine.sweep: its id (to resume it),
    # "run k of N · config key · repeat r/R" and the configurations it skips here, with why.
    sweep_id: str | None = None
    sweep_line: str | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    sweep_left: int = 0  # (configuration, repeat) pairs without a finished run, at the end
    sweep_failed: dict[str, str] = field(default_factory=dict)  # config key -> why it stopped
    # ``--repeats auto``: config key -> why its repeats stopped (the target, or the maximum)
    stopped: dict[str, str] = field(default_factory=dict)
    lost: str | None = None  # the supervisor died without ending the batch: why
    cancel_requested: bool = False  # a viewer asked the supervisor to cancel
    # -- the current run --
    run_index: int = 0  # 0-based index of the current run in the batch
    run_id: str | None = None
    status: str = "starting"  # starting, running, finished, failed, cancelled, interrupted
    reason: str | None = None
    started: dict[str, Any] | None = None
    losses: list[float | None] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)  # the run's steady steps so far
    # An inference run's timed requests so far (seconds, in order): judged like steps.
    latencies: list[float] = field(default_factory=list)
    # A generation run's (docs/generation.md): each timed request's TTFT and TPOT, in order (its
    # E2E is in ``latencies``).
    ttfts: list[float] = field(default_factory=list)
    tpots: list[float] = field(default_factory=list)
    epoch: int = 0
    epochs: int = 0
    epoch_steps: int = 0  # steps in the current epoch
    epoch_step: int = 0  # steps done in the current epoch (0 again once it is finished)
    step: int = 0  # the last step reported in the current epoch (kept after it finishes)
    steps_done_before: int = 0  # steps of finished epochs
    epoch_records: list[dict[str, Any]] = field(default_factory=list)
    test: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    final: dict[str, Any] | None = None  # the worker's last word: its finished or error event
    metrics: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None  # the result's stability verdict, where it has one
    samples: list[dict[str, Any]] = field(default_factory=list)
    first_step_t: float | None = None
    first_steps_done: int = 0  # steps done when first_step_t was read
    last_t: float | None = None
    worker_pid: int | None = None  # the current run's worker process
    host: str | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._forming: tuple[str | None, int, float, stability.Verdict | None] = (None, 0, 0, None)
        self._limits: tuple[Any, int | None, peaks.Peak | None] = (None, None, None)
        self._limits_text: tuple[int, float, str | None] = (-1, 0.0, None)
        self.epochs = self.epochs or self.spec.epochs

    # -- threads ----------------------------------------------------------------------------
    def push(self, event: dict[str, Any]) -> None:
        """Called from any thread, as fast as events come; does no work on the view."""
        with self._lock:
            self._pending.append(event)

    def push_all(self, events: list[dict[str, Any]]) -> None:
        if events:
            with self._lock:
                self._pending.extend(events)

    def drain(self) -> bool:
        """Apply what arrived since the last drain; True if anything changed."""
        with self._lock:
            pending, self._pending = self._pending, []
        self.fold(pending)
        return bool(pending)

    # -- the fold ---------------------------------------------------------------------------
    def fold(self, events: Iterable[dict[str, Any]]) -> BatchView:
        """Apply a backlog in one pass. Runs of ``steps`` events (nearly all of a long run's
        lines) are folded in a tight loop; every other event goes through ``apply``."""
        losses = self.losses
        steps_before = self.steps_done_before
        for event in events:
            if event.get("type") != _STEPS:
                self.apply(event)
                losses, steps_before = self.losses, self.steps_done_before
                continue
            chunk = event.get("losses") or []
            if len(losses) < MAX_POINTS:
                losses.extend(chunk)
                times = event.get("step_times")
                if times:
                    self.step_times.extend(times)
            self.epoch_step = self.step = event.get("first_step", 0) + len(chunk)
            if self.first_step_t is None:
                self.first_step_t = event.get("t")
                self.first_steps_done = steps_before + self.epoch_step
            self.last_t = event.get("t", self.last_t)
        return self

    def apply(self, event: dict[str, Any]) -> None:
        """One event of the batch file or of a run's series file."""
        kind = event.get("type")
        if kind == WorkerEvent.STEPS:
            self.fold((event,))
        elif kind == WorkerEvent.REQUESTS:
            times = event.get("latencies")
            if times and len(self.latencies) < MAX_POINTS:
                self.latencies.extend(times)
            for key, kept in (("ttft", self.ttfts), ("tpot", self.tpots)):
                if (values := event.get(key)) and len(kept) < MAX_POINTS:
                    kept.extend(values)
            done = event.get("done")
            if isinstance(done, int):
                self.epoch_step = self.step = done
            if self.first_step_t is None:
                self.first_step_t = event.get("t")
                self.first_steps_done = self.steps_done_before + self.epoch_step
            self.last_t = event.get("t", self.last_t)
        elif kind == SeriesEvent.RECORD:
            self._record(event.get("record") or {})
        elif kind == WorkerEvent.RUN_STARTED:
            self.started = event
            self.status = RunStatus.RUNNING
            if self.runs:
                self.runs[-1].started = event
        elif kind == WorkerEvent.EPOCH_STARTED:
            self.epoch = event.get("epoch", 0)
            self.epochs = event.get("epochs", self.epochs)
            self.epoch_steps = event.get("steps", 0)
            self.epoch_step = self.step = 0
        elif kind == WorkerEvent.EPOCH_FINISHED:
            self.epoch_records.append(event)
            self.steps_done_before += event.get("steps", self.epoch_steps)
            self.epoch_step = self.epoch_steps = 0
            self.last_t = event.get("t", self.last_t)
        elif kind == WorkerEvent.TEST_FINISHED:
            self.test = event
            if self.runs:
                self.runs[-1].test = event
        elif kind == WorkerEvent.FINISHED:
            self.summary = event.get("summary") or {}
            self.final = event
        elif kind == WorkerEvent.ERROR:
            self.reason = f"{event.get('error_type')}: {(event.get('message') or '').strip()}"
            self.final = event
        elif kind == SeriesEvent.SAMPLE:
            if len(self.samples) < MAX_POINTS:
                self.samples.append(event)
        elif kind == SeriesEvent.WORKER:
            self.worker_pid = event.get("pid")
        elif kind == SeriesEvent.RESULT:
            self._result(event.get("record") or {})
        elif kind == BatchEvent.BATCH:
            self.header = event
        elif kind == BatchEvent.SUPERVISOR:
            self.supervisor = event
        elif kind == BatchEvent.PLAN:
            self.plan = event
            self.runs_total = max(event.get("total") or 1, 1)
            self.sweep_id = event.get("sweep_id") or self.sweep_id
            self.skipped = [tuple(item) for item in event.get("skipped") or []]
        elif kind == BatchEvent.SWEEP_RUN:
            self._sweep_run(event)
        elif kind == BatchEvent.RUN:
            if event.get("run_id") and event["run_id"] not in self.run_ids:
                self.run_ids.append(event["run_id"])
        elif kind == BatchEvent.BATCH_DONE:
            self.done = True
            self.ending = event
            self.sweep_left = event.get("sweep_left") or 0
            self.sweep_failed = dict(event.get("not_run") or {})
            stopped = event.get("stopped")
            self.stopped = (
                {str(k): str(v) for k, v in stopped.items()} if isinstance(stopped, dict) else {}
            )
            self.lost = event.get("lost")
            if event.get("error") and not self.results:
                self.reason = event["error"]
        # Anything else (heartbeats, a kind from a newer version) changes nothing on screen.

    def _record(self, record: dict[str, Any]) -> None:
        run_id = record.get("id")
        if self.runs and self.runs[-1].run_id == run_id:
            return  # the same run recorded again (a fleet node's relay): nothing new
        if self.runs:
            self._next_run()
        self.run_id = run_id
        self.host = record.get("host")
        self.status = RunStatus.RUNNING
        if record.get("spec"):
            try:
                self.spec = RunSpec.from_dict(record["spec"], validate=False)
                self.epochs = self.spec.epochs
            except SPEC_UNREADABLE:
                pass  # keep the previous spec on screen rather than fail the view
        if run_id and run_id not in self.run_ids:
            self.run_ids.append(run_id)
        self.runs.append(
            RunEntry(
                run_id=run_id,
                label=record.get("label", ""),
                host=self.host,
                position=self.position,
                epoch_records=self.epoch_records,  # the same list: filled as epochs end
            )
        )

    def _result(self, record: dict[str, Any]) -> None:
        run = Run.from_record(record)  # never raises on a damaged record
        self.status = run.status or RunStatus.FAILED
        self.reason = run.reason
        self.metrics = dict(run.metrics)
        self.verdict = dict(run.stability) or None  # {verdict, reasons, ...}: stability.py
        self.results.append(run)
        if self.runs and self.runs[-1].result is None:
            self.runs[-1].result = run

    def _sweep_run(self, event: dict[str, Any]) -> None:
        self.position = event
        self.sweep_line = (
            f"run {event.get('index', 0) + 1} of {event.get('total')} · {event.get('key')} · "
            f"repeat {event.get('repeat', 0) + 1}/{event.get('repeats')}"
            + (" · oversubscribed (threads > cores)" if event.get("oversubscribed") else "")
        )
        self.runs_total = event.get("total") or self.runs_total
        try:
            self.spec = RunSpec.from_dict(event["spec"], validate=False)
        except (KeyError, *SPEC_UNREADABLE):
            pass  # keep the previous spec on screen rather than fail the view

    def _next_run(self) -> None:
        """A new run of the batch starts: per-run state resets, the batch's results stay."""
        self.run_index += 1
        self.started = self.test = self.summary = self.final = self.verdict = None
        self.losses, self.epoch_records, self.samples = [], [], []
        self.step_times, self.latencies = [], []
        self.ttfts, self.tpots = [], []
        self.epoch = self.epoch_steps = self.epoch_step = self.step = 0
        self.steps_done_before = 0
        self.first_step_t = self.last_t = None
        self.first_steps_done = 0
        self.metrics = {}
        self.reason = None
        self.worker_pid = None

    def not_started(self, reason: str) -> None:
        """The batch never reached its supervisor (no supervisor, an unreadable preset)."""
        self.push({"type": BatchEvent.BATCH_DONE, "statuses": [], "error": reason})

    def settle_unfinished(self, record: Run | None = None) -> BatchView:
        """A stored run whose series has no result: what its history record says now (settled
        by its supervisor's liveness: 'running' while it lives, 'interrupted' once it is
        gone); with no record, it is taken for interrupted."""
        if self.status == RunStatus.RUNNING:
            if record is not None and record.status:
                self.status, self.reason = record.status, record.reason
            else:
                self.status, self.reason = RunStatus.INTERRUPTED, "the run has no recorded end"
        self.done = self.status != RunStatus.RUNNING
        return self

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
        if self.status in ENDED and self.run_index + 1 >= self.runs_total:
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

    def verdict_line(self, now: Callable[[], float] = time.monotonic) -> str | None:
        """The run's stability verdict in one line: the stored one once its result is in, else
        the step-time rules on the steady steps so far ("so far", since the machine's figures
        are judged at the end); None during warm-up. Judged again at most once a second."""
        if self.verdict is not None or self.status in ENDED:
            return stability.stored_line(self.verdict)  # the result's word, or none at all
        timed = self.timed
        run_id, count, at, verdict = self._forming
        changed = count != len(timed)
        if run_id != self.run_id or (
            changed and (verdict is None or now() - at >= FORMING_EVERY_S)
        ):
            inference = self.spec.mode in SERVING
            verdict = stability.forming(
                timed, timing=stability.INFERENCE_TIMING if inference else "synced"
            )
            self._forming = (self.run_id, len(timed), now(), verdict)
        if verdict is None:
            return None
        first = stability.stored_line(verdict.as_dict()) or verdict.verdict
        unit = "request" if self.spec.mode in SERVING else "step"
        return f"so far {first}" if verdict.reasons else f"so far {verdict.verdict} ({unit} times)"

    def limits_text(self, now: Callable[[], float] = time.monotonic) -> str | None:
        """Achieved FLOP/s and MFU as they form (the steady steps' median so far, against the
        cached measured peak: never measured here), then the result's own figures; None before
        the first steady step or for a model without a FLOP count."""
        if self.spec.mode == "generate":  # its prefill MFU and MBU: the run's summary has them
            return None
        if (
            self.metrics.get("flops_per_step") is not None
            or self.metrics.get("flops_per_request") is not None
        ):
            # A finished run's own figures: its energy (or, briefly, why it cannot be read
            # here) and its memory peaks too; `tui-bench history show` has the whole sentences.
            limits = Limits.from_metrics(self.metrics)
            return limits.brief() if limits is not None else None
        timed = self.timed
        if not timed or self.status in ENDED:
            return None
        key = (self.run_id, self.spec)
        if self._limits[0] != key:
            batch = self.spec.batch_size * (
                1 if self.spec.scaling == "strong" else self.spec.workers
            )
            counter = (
                flops.inference_request_flops
                if self.spec.mode == "inference"
                else flops.train_step_flops
            )
            per_step = counter(self.spec.model, self.spec.dataset, batch, self.spec.model_dims())
            peak = peaks.cached(self.spec.device, self.spec.threads, self.spec.precision)
            # A peak that would give no MFU at the end (unreliable, emulated) gives none live
            # either; the load comparison waits for the run's steady windows.
            if peak is not None:
                verdict = stability.assess_peak(peak, self.spec.device, self.spec.threads)
                if stability.peak_problem(peak, verdict, self.spec.device, 1, {}) is not None:
                    peak = None
            self._limits = (key, per_step, peak)
            self._limits_text = (-1, 0.0, None)
        _key, per_step, peak = self._limits
        if per_step is None:
            return None
        # The median of 20,000 steps is a sort: worked out again at most once a second.
        count, at, text = self._limits_text
        if count == len(timed):
            return text
        t = now()
        if text is not None and t - at < FORMING_EVERY_S:
            return text
        ordered = sorted(timed)
        median = ordered[len(ordered) // 2]
        text = None
        if median > 0:
            used = peaks.utilization(per_step, median, peak)
            measured = Mfu("measured", used.mfu, None, used.problem)
            text = Limits.so_far(used.achieved_tflops, measured).brief()
        self._limits_text = (len(timed), t, text)
        return text

    @property
    def throughput_key(self) -> str:
        """The rate this run states (``metrics.throughput``): tokens/s for a language model
        that trains, samples/s in the run's own mode for the rest."""
        return metric_registry.throughput(self.spec.mode, self.spec.model_dims() is not None)

    @property
    def timed(self) -> list[float]:
        """What the run times one at a time so far: its steady steps, or an inference run's
        requests."""
        return self.latencies if self.spec.mode in SERVING else self.step_times

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
        # A language model's rate in its own unit, as its record states it (``run_result``:
        # each sample is one sequence of S tokens); the epochs and the summary count samples.
        dims = self.spec.model_dims()
        samples = out.get("samples_per_s")
        if dims is not None and isinstance(samples, int | float):
            out["tokens_per_s"] = samples * dims.seq_len
        return out

    def progress(self) -> Progress:
        """Where the batch is, as ``tui-bench ps`` shows it."""
        position = self.position
        epochs = self.epochs if self.epoch else 0
        return Progress(
            run_index=len(self.runs),
            runs_total=(self.plan or {}).get("total", 0),
            run_id=self.run_id,
            epoch=self.epoch,
            epochs=epochs,
            step=self.step,
            steps=self.epoch_steps or (self.steps_per_epoch if self.epoch else 0),
            position=(
                f"{position.get('key')} · repeat {position.get('repeat', 0) + 1}/"
                f"{position.get('repeats')}"
                if position
                else ""
            ),
            host=self.host,
        )


def stored_run(events: Iterable[dict[str, Any]], record: Run | None = None) -> BatchView:
    """A recorded run's view rebuilt from its series file (History → open): the same fold as
    Live, so History shows exactly what Live showed. A series without its result takes the
    status of ``record`` (the history's, settled by the supervisor's liveness): a run still
    'running' stays so (the view is not done: a follower goes on from here)."""
    return BatchView().fold(events).settle_unfinished(record)
