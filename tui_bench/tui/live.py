"""The app's run controller: the one batch the app shows, started, attached to, followed, cancelled.

Runs belong to a supervisor process (``engine.runs.supervisor``), not to this app: the controller
launches a batch, then follows its files like any other viewer through the engine's follower,
whose ``BatchView`` is the only thing the screens draw. The follower reads the files in a thread
and queues what it finds; the app drains the view on a timer at a fixed low rate and redraws once
per drain. Quitting, a hangup or a kill of the app leaves the run going; cancel asks the
supervisor to stop it. No screen or widget here: the controller talks to the app through
messages (``tui.messages``) and the app's worker threads; ``tui.app_runs.LiveRuns`` is the app's
side of those messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results import metrics, stability
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.messages import (
    BatchFinished,
    Notice,
    RunShown,
)

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from tui_bench.engine.runs.follow import BatchFollower
    from tui_bench.engine.runs.presets import Preset

FOLLOW_POLL_S = 0.5  # how often a followed batch's files are read (redraws stay at refresh_hz)
QUIT_WAIT_S = 10.0  # how long 'cancel and quit' waits for the run to be recorded


def newest_in_progress() -> BatchFollower | None:
    """The newest batch in progress, its backlog folded (a run attached an hour in has its
    whole loss curve), or None. Runs before the app's first frame: reading and folding a
    20,000-step run takes tens of milliseconds (benchmarks/attach_latency.py)."""
    from tui_bench.engine.runs import supervisor
    from tui_bench.engine.runs.follow import BatchFollower

    try:
        running = supervisor.in_progress()
    except OSError:  # an unreadable batch directory: start on Setup, as with no run
        return None
    if not running:
        return None
    follower = BatchFollower(running[-1].id)
    follower.catch_up()
    return follower


@dataclass
class Outcome:
    """How the app tells the user a batch ended: a modal (``modal``) or a notification."""

    message: str
    title: str = ""
    severity: SeverityLevel = "information"
    timeout: float | None = None
    modal: bool = False


class RunController:
    """The one batch the app shows: start it, attach to it, follow it, cancel it."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.view: BatchView | None = None  # the batch being followed (the app shows it)
        self._adopted: BatchFollower | None = None
        self._picking: str | None = None  # a batch the watch picked up, its backlog folding

    @property
    def running(self) -> bool:
        return self.view is not None and not self.view.done

    # -- start ------------------------------------------------------------------------------
    def start(self, spec: RunSpec, auto_repeats: dict[str, Any] | None = None) -> BatchView:
        """Start one configuration (``spec.repeats`` runs, or ``auto_repeats``: until its
        median is known); the returned view fills as it runs."""
        from tui_bench.engine.runs.batch import BatchRequest

        most = auto_repeats["max"] if auto_repeats else spec.repeats
        view = BatchView(spec=spec, runs_total=most)
        return self._begin(
            view, lambda: BatchRequest(spec=spec.to_dict(), auto_repeats=auto_repeats)
        )

    def start_sweep(self, preset: Preset, auto_repeats: dict[str, Any] | None = None) -> BatchView:
        """Run a preset's sweep (engine.sweep: planned, interleaved, resumable from the CLI)."""

        def request() -> Any:
            from tui_bench.engine.runs import sweep as sweep_module
            from tui_bench.engine.runs.batch import BatchRequest

            sweep = sweep_module.create(preset, auto_repeats=auto_repeats)
            return BatchRequest(sweep_id=sweep.id)

        view = BatchView(spec=RunSpec(), runs_total=1)
        view.sweep_line = f"preparing the sweep of {preset.name}…"
        return self._begin(view, request)

    def _begin(self, view: BatchView, request: Callable[[], Any]) -> BatchView:
        self.view = view
        self.app.run_worker(
            lambda: self._launch(view, request),
            thread=True,
            group="run",
            exit_on_error=False,
            name="start the run",
        )
        return view

    def _launch(self, view: BatchView, request: Callable[[], Any]) -> None:
        """In a thread: hand the batch to a supervisor, then follow it."""
        from tui_bench.engine.runs import supervisor

        try:
            view.batch_id = supervisor.launch(request())
            if view.cancel_requested:  # cancel was confirmed while the supervisor was starting
                supervisor.stop(view.batch_id)
        except (TuiBenchError, OSError) as exc:  # an unreadable preset, no supervisor
            view.not_started(str(exc))
            title = exc.title if isinstance(exc, TuiBenchError) else "run not started"
            self.app.post_message(BatchFinished(view, title))
            return
        except Exception as exc:  # a bug: end the view (not 'running' forever), then the modal
            view.not_started(repr(exc))
            self.app.post_message(BatchFinished(view))
            raise
        self._follow(view)

    # -- attach -----------------------------------------------------------------------------
    def adopt(self, follower: BatchFollower) -> BatchView:
        """Follow a batch whose backlog is already folded (``newest_in_progress``)."""
        self._adopted = follower
        self.view = follower.view
        return follower.view

    def follow_adopted(self) -> None:
        follower, self._adopted = self._adopted, None
        if follower is not None:
            view = follower.view
            self.app.run_worker(
                lambda: self._follow(view, follower), thread=True, group="run", exit_on_error=False
            )

    def attach(self, batch_id: str, picked_up: bool = False) -> None:
        """Follow a batch started elsewhere (another terminal, an earlier session of the app).
        ``picked_up``: found by the app's watch, not asked for; it gives way to a batch that
        started here meanwhile, and the user stays on the screen they are on."""
        if self.view is not None and self.view.batch_id == batch_id and not self.view.done:
            return
        if picked_up:
            if self._picking == batch_id:
                return  # its backlog is still folding: the next look would fold it again
            self._picking = batch_id
        self.app.run_worker(
            lambda: self._attach(batch_id, picked_up),
            thread=True,
            group="run",
            exit_on_error=False,
        )

    def _attach(self, batch_id: str, picked_up: bool = False) -> None:
        """In a thread: fold the batch's whole backlog (a run attached an hour in has its loss
        curve from step 1) into a fresh view in one pass, so the app only has to draw it."""
        from tui_bench.engine.runs.follow import BatchFollower

        follower = BatchFollower(batch_id)
        try:
            view = follower.catch_up()
        finally:
            if picked_up:
                self._picking = None
        if picked_up and self.view is not None and not self.view.done:
            return  # a run started (or was attached to) meanwhile: it keeps Live
        self.view = view  # from here the previous batch's follower stops
        self.app.post_message(RunShown(view, switch=not picked_up))
        self._follow(view, follower)

    def _follow(self, view: BatchView, follower: Any = None) -> None:
        """In a thread: queue the batch's new events on ``view`` until the batch ends (or the
        app follows another one); the app drains them at its own refresh rate."""
        from textual.worker import get_current_worker

        from tui_bench.engine.runs.follow import BatchFollower

        follower = follower or BatchFollower(view.batch_id or "", view=view)
        worker = get_current_worker()
        ended = follower.follow(
            should_stop=lambda: worker.is_cancelled or view is not self.view,
            interval=FOLLOW_POLL_S,
        )
        if ended:
            self.app.post_message(BatchFinished(view))

    # -- cancel -----------------------------------------------------------------------------
    def cancel(self, view: BatchView) -> None:
        self.app.run_worker(
            lambda: self._request_stop(view),
            thread=True,
            group="stop",
            exit_on_error=False,
            name="cancel the run",
        )

    def _request_stop(self, view: BatchView) -> None:
        from tui_bench.engine.runs import supervisor

        view.cancel_requested = True
        if view.batch_id is None:
            return  # still launching: _launch sees cancel_requested and stops it
        try:
            supervisor.stop(view.batch_id)
        except TuiBenchError as exc:  # already ended, or its supervisor is gone
            self.app.post_message(Notice(str(exc), title=exc.title, severity="warning"))
        except OSError as exc:  # its state file could not be written
            self.app.post_message(Notice(str(exc), severity="warning"))

    async def cancel_and_wait(self, timeout: float = QUIT_WAIT_S) -> None:
        """Cancel the run and wait (bounded) until its supervisor has recorded it."""
        view = self.view
        if view is None or view.done:
            return
        self.cancel(view)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not view.done and loop.time() < deadline:
            await asyncio.sleep(0.1)
            view.drain()


def outcome(view: BatchView, title: str, compare_key: str) -> Outcome:
    """What to tell the user about a batch that ended (``compare_key``: the key that opens
    Compare, for a sweep)."""
    statuses = [r.status for r in view.results]
    if view.lost:
        return Outcome(view.lost, title="run lost", modal=True)
    if view.sweep_id is not None:
        return _sweep_outcome(view, statuses, compare_key)
    if not statuses:
        return Outcome(view.reason or "the run did not start", title=title, severity="error")
    if all(s == RunStatus.FINISHED for s in statuses):
        figure = finished_figures(view.results[-1])
        figure = f": {figure}" if figure else ""
        judged = stability.stored_line(view.verdict)  # can the figure be trusted (issue 19)
        figure += f"\n{judged}" if judged else ""
        for why in view.stopped.values():  # --repeats auto: the target, or the maximum
            figure += f"\nrepeats: {why}"
        return Outcome(f"{len(statuses)} run(s) finished{figure}", title="done", timeout=8)
    if RunStatus.CANCELLED in statuses:
        return Outcome("run cancelled; recorded as cancelled in History", severity="warning")
    failed = next(r for r in view.results if r.status != RunStatus.FINISHED)
    return Outcome(
        f"{failed.reason or 'no reason recorded'}\n\n{failed.log_tail or ''}",
        title=f"run {failed.status}",
        modal=True,
    )


def finished_figures(run: Run) -> str:
    """A finished run's figure and rate in its own mode, through the metric registry: the
    median step and samples/s (a gpt's tokens/s) of a training run, the p50 request and
    samples served of an inference run; "" when it has neither."""
    said = []
    for key in (
        metrics.in_mode(metrics.COMPARED_BY_DEFAULT, run.mode),
        metrics.throughput(run.mode, run.metric("tokens_per_s") is not None),
    ):
        value = run.metric(key)
        if value is not None:
            shown = metrics.get(key)
            head = shown.what.split(" (")[0]  # "median step time"; a rate names itself
            quantity = shown.quantity(value)
            said.append(quantity if head.endswith(shown.shown_unit) else f"{head} {quantity}")
    return " · ".join(said)


def _sweep_outcome(view: BatchView, statuses: list[Any], compare_key: str) -> Outcome:
    left = view.sweep_left
    resume = f"resume later with: tui-bench run --resume {view.sweep_id}"
    if view.cancel_requested or RunStatus.CANCELLED in statuses:
        return Outcome(
            f"sweep cancelled after {statuses.count('finished')} run(s), {left} left; {resume}",
            title="sweep cancelled",
            severity="warning",
            timeout=20,
        )
    if left:
        why = "; ".join(f"{k}: {r}" for k, r in view.sweep_failed.items()) or "runs failed"
        return Outcome(
            f"{left} run(s) not done ({why}); {resume}",
            title="sweep incomplete",
            severity="error",
            timeout=20,
        )
    return Outcome(
        f"{len(statuses)} run(s) finished; {compare_key} compares them",
        title="sweep done",
        timeout=10,
    )
