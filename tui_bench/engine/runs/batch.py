"""One batch runner for every front end: a single run, its repeats, or a preset's sweep.

A *batch* is what one Start (TUI) or one ``tui-bench run`` (CLI) asks for. It is planned as an
``engine.sweep.Sweep`` — a preset's sweep as it is, one configuration's repeats as a sweep of one
configuration — and run by ``sweep.run``, so interleaving, the skip rules, resume and seed per
repeat are the same whoever started it. The run supervisor (``engine.supervisor``) runs batches;
tests may run one in-process.

Each batch has an append-only event file, ``<data home>/batches/<id>.jsonl``, written by the
batch's one supervisor: its request, the supervisor's identity, the plan, which run is current,
and how the batch ended. What happened inside each run is in that run's series file, never here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_bench.engine.kinds import BatchEvent
from tui_bench.engine.paths import data_home
from tui_bench.engine.results.history import History, HistoryError, new_run_id, now_iso
from tui_bench.engine.spec import RunSpec

if TYPE_CHECKING:  # viewers import this module for its paths: they never run workers
    from tui_bench.engine.runs import runner
    from tui_bench.engine.runs import sweep as sweep_module
BatchEventCallback = Callable[[dict[str, Any]], None]


def batches_dir() -> Path:
    return data_home() / "batches"


def events_path(batch_id: str) -> Path:
    return batches_dir() / f"{batch_id}.jsonl"


def log_path(batch_id: str) -> Path:
    return batches_dir() / f"{batch_id}.log"


@dataclass
class BatchRequest:
    """What to run: one configuration ``spec`` (run ``spec.repeats`` times) or the planned sweep
    ``sweep_id`` (its pending runs). ``options`` are worker options (stall timeout, sampling),
    and ``cluster``: the address of a Ray cluster whose nodes run the runs (``engine.fleet``).
    ``auto_repeats`` (``--repeats auto``, with a spec): ``{"max": N, "target_ci": 0.02}``, the
    spec then repeats until its median's 95 % CI is within the target or N runs have run."""

    spec: dict[str, Any] | None = None
    sweep_id: str | None = None
    refresh: bool = False  # a resumed sweep re-checks what this machine can run now
    options: dict[str, Any] = field(default_factory=dict)
    auto_repeats: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.spec is None) == (self.sweep_id is None):
            raise ValueError("a batch runs either one spec or one sweep")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchRequest:
        return cls(
            spec=data.get("spec"),
            sweep_id=data.get("sweep_id"),
            refresh=bool(data.get("refresh")),
            options=dict(data.get("options") or {}),
            auto_repeats=data.get("auto_repeats"),  # checked when planned: a failed batch
        )

    def label(self) -> str:
        if self.sweep_id:
            return f"sweep {self.sweep_id}"
        spec = RunSpec.from_dict(self.spec or {}, validate=False)
        if isinstance(self.auto_repeats, dict):
            return f"{spec.label()} ×auto (≤{self.auto_repeats.get('max')})"
        repeats = f" ×{spec.repeats}" if spec.repeats > 1 else ""
        return spec.label() + repeats


def plan(batch_id: str, request: BatchRequest) -> sweep_module.Sweep:
    """The sweep a batch runs: the named one, or one configuration's repeats (not saved: its
    runs are found by their group, the batch id). Raises ValueError (one line) for a request
    it cannot run."""
    from tui_bench.engine.runs import sweep as sweep_module
    from tui_bench.engine.runs.presets import SweepConfig

    auto = None
    if request.auto_repeats is not None:
        if request.sweep_id:
            raise ValueError("auto repeats are part of a sweep's plan, not of its batch")
        auto = sweep_module.check_auto_repeats(request.auto_repeats)
    if request.sweep_id:
        sweep = sweep_module.find(request.sweep_id)
        if request.refresh:
            sweep.refresh()
        return sweep
    spec = RunSpec.from_dict(request.spec or {}, validate=False)
    return sweep_module.Sweep(
        id=batch_id,
        preset="",
        preset_path="",
        description="",
        study="",
        repeats=auto["max"] if auto else spec.repeats,
        configs=[SweepConfig(key=spec.label(), spec=spec)],
        created_at=now_iso(),
        auto_repeats=auto,
    )


def create(request: BatchRequest) -> str:
    """A new batch id with its event file, holding the request as its first line."""
    batches_dir().mkdir(parents=True, exist_ok=True)
    while True:
        batch_id = f"batch-{new_run_id()}"
        try:
            with open(events_path(batch_id), "x", encoding="utf-8") as handle:
                header = {
                    "type": BatchEvent.BATCH,
                    "id": batch_id,
                    "created_at": now_iso(),
                    "label": request.label(),
                    "request": asdict(request),
                }
                handle.write(json.dumps(header, default=str) + "\n")
            return batch_id
        except FileExistsError:
            continue


class BatchControl:
    """Cancel from another thread or a signal handler: the current worker stops (its run is
    recorded as cancelled) and no further run of the batch starts."""

    def __init__(self) -> None:
        self.cancelled = False
        self.worker: runner.WorkerRun | None = None

    def attach(self, worker: runner.WorkerRun) -> None:
        self.worker = worker
        if self.cancelled:
            worker.cancel()

    def cancel(self) -> None:
        self.cancelled = True
        if self.worker is not None:
            self.worker.cancel()


def run_batch(
    batch_id: str,
    request: BatchRequest,
    history: History,
    on_batch_event: BatchEventCallback,
    control: BatchControl | None = None,
    on_event: runner.EventCallback | None = None,
) -> sweep_module.SweepOutcome | None:
    """Run a batch to its end and report it through ``on_batch_event``. Never raises: a batch
    that cannot be planned ends with its reason in the ``batch_done`` event."""
    from tui_bench.engine.runs import sweep as sweep_module

    control = control or BatchControl()
    try:
        sweep = plan(batch_id, request)
    except (HistoryError, ValueError, TypeError) as exc:
        on_batch_event({"type": BatchEvent.BATCH_DONE, "statuses": [], "error": str(exc)})
        return None
    todo = sweep_module.pending(sweep, history)
    on_batch_event(
        {
            "type": BatchEvent.PLAN,
            "total": len(todo),
            "sweep_id": sweep.id if sweep.preset else None,
            "skipped": [(c.key, c.skip_reason) for c in sweep.configs if c.skip_reason],
            "cluster": request.options.get("cluster"),
            "auto_repeats": sweep.auto_repeats,  # total is then the most runs, not the count
        }
    )

    def before_run(config: Any, repeat: int, index: int, total: int) -> None:
        if sweep.preset:
            on_batch_event(
                {
                    "type": BatchEvent.SWEEP_RUN,
                    "index": index,
                    "total": total,
                    "key": config.key,
                    "repeat": repeat,
                    "repeats": sweep.repeats,
                    "oversubscribed": config.oversubscribed,
                    "spec": config.spec.to_dict(),
                }
            )

    def on_start(worker: runner.WorkerRun) -> None:
        on_batch_event({"type": BatchEvent.RUN, "run_id": worker.run_id})
        control.attach(worker)

    options = dict(request.options)
    cluster = options.pop("cluster", None)
    executor = None
    outcome = None
    error = None
    try:
        if cluster:
            from tui_bench.engine.runs import fleet

            executor = fleet.FleetExecutor(cluster)
        outcome = sweep_module.run(
            sweep,
            history,
            on_event=on_event,
            on_start=on_start,
            before_run=before_run,
            should_stop=lambda: control.cancelled,
            extra={"batch": batch_id},
            executor=executor,
            **options,
        )
    except HistoryError as exc:  # FleetError: no Ray, or no cluster at the address
        error = str(exc)
    except Exception as exc:  # recorded per run by execute; the batch says why it stopped
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if executor is not None:
            executor.close()
    on_batch_event(
        {
            "type": BatchEvent.BATCH_DONE,
            "statuses": [result.status for _c, _r, result in (outcome.ran if outcome else [])],
            "cancelled": control.cancelled or bool(outcome and outcome.cancelled),
            "sweep_left": len(sweep_module.pending(sweep, history)) if sweep.preset else 0,
            "not_run": dict(outcome.not_run) if outcome else {},
            "stopped": dict(sweep.stopped),  # auto repeats: configuration key -> why they stopped
            "error": error,
        }
    )
    return outcome
