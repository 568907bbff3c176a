"""Viewers follow a batch through the files its supervisor writes; they never talk to it.

``BatchTail.read`` returns, in order, every event of the batch since the last read: the batch's
own events (request, supervisor, plan, sweep position, batch_done) and each run's series events
from its first line, so a viewer that attaches an hour in still gets the loss curve from step 1.
``BatchFollower`` folds them into one ``reducer.BatchView``: the backlog at once (``catch_up``),
then what arrives (``poll``, or the one polling loop, ``follow``). Any number of viewers can follow
one batch: they only read. ``RunTail`` is the same for one run of a batch (History opens a run in
progress), and ``BatchWatch`` tells a viewer that stays open (the TUI) which batches are in
progress on this home, whoever started them, cheaply enough to ask at every redraw.

Whether a run or a batch is still going is the supervisor's word only: its process, named by pid
and start time (``machine.procs``), is alive. A run is never shown as ended before that.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui_bench.engine.kinds import BatchEvent, RunStatus, SeriesEvent
from tui_bench.engine.machine import procs
from tui_bench.engine.results.history import History, HistoryError, recorder_alive
from tui_bench.engine.runs import batch as batch_module
from tui_bench.engine.runs.reducer import BatchView, Progress
from tui_bench.engine.runs.supervisor import START_TIMEOUT_S, BatchState

__all__ = [
    "BatchFollower",
    "BatchTail",
    "BatchWatch",
    "Progress",
    "RunTail",
    "Tail",
    "left_running_hint",
    "progress",
]

POLL_S = 0.25  # how often a followed batch's files are read when nothing arrives


class Tail:
    """The complete lines appended to a file since the last read (a torn last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        lines = [line for line in lines if line.strip()]
        if not lines:
            return []
        try:
            # One parse for the whole chunk: a 20,000-step backlog is one call, not thousands.
            decoded = json.loads(b"[" + b",".join(lines) + b"]")
        except ValueError:  # a damaged line somewhere: skip just that one
            decoded = [_decode(line) for line in lines]
        return [event for event in decoded if isinstance(event, dict)]


def _decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


class BatchTail:
    """The events of a batch and of its runs' series, in order, since the last read."""

    def __init__(self, batch_id: str, history: History | None = None) -> None:
        self.batch_id = batch_id
        self.history = history or History()
        self._batch = Tail(batch_module.events_path(batch_id))
        self._run: Tail | None = None
        self.supervisor: dict[str, Any] | None = None
        self.run_ids: list[str] = []
        self.done = False

    def read(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for event in self._batch.read():
            kind = event.get("type")
            if kind == BatchEvent.SUPERVISOR:
                self.supervisor = event
            # A batch event is written after the current run's series is complete: drain it.
            elif self._run is not None and kind != BatchEvent.BATCH:
                out += self._run.read()
            if kind == BatchEvent.RUN:
                self.run_ids.append(event["run_id"])
                self._run = Tail(self.history.series_path(event["run_id"]))
            elif kind == BatchEvent.BATCH_DONE:
                self.done = True
            out.append(event)
        if self._run is not None and not self.done:
            out += self._run.read()
        if not self.done and self.supervisor is not None and not self._supervisor_alive():
            out += self._lost()
        return out

    def _supervisor_alive(self) -> bool:
        s = self.supervisor or {}
        return procs.alive(s.get("pid"), s.get("started"))

    def _lost(self) -> list[dict[str, Any]]:
        """The supervisor died without ending the batch (SIGKILL, OOM, reboot): settle its runs
        in history and end the view with what was recorded."""
        out = self._batch.read()  # it may have ended the batch just before dying
        if any(e.get("type") == BatchEvent.BATCH_DONE for e in out):
            self.done = True
            return ([] if self._run is None else self._run.read()) + out
        if self._run is not None:
            out += self._run.read()
        self.history.mark_interrupted()
        if self.run_ids:
            try:
                out.append(
                    {
                        "type": SeriesEvent.RESULT,
                        "record": dict(self.history.get(self.run_ids[-1]).raw),
                    }
                )
            except HistoryError:
                pass
        pid = (self.supervisor or {}).get("pid")
        self.done = True
        out.append(
            {
                "type": BatchEvent.BATCH_DONE,
                "statuses": [],
                "lost": f"the supervisor (pid {pid}) ended without finishing the batch",
            }
        )
        return out


class RunTail:
    """The events of one run's series since the last read, until it ends: with its result, or,
    once its supervisor is gone without one, with the record the history settles it to
    (``History.mark_interrupted``). While the supervisor lives the run is running, however long
    its series stays quiet."""

    def __init__(self, run_id: str, history: History | None = None) -> None:
        self.history = history or History()
        self.run_id = run_id
        self.run_ids = [run_id]
        self._series = Tail(self.history.series_path(run_id))
        self._record: dict[str, Any] | None = None  # its history record: who records it
        self.done = False

    def read(self) -> list[dict[str, Any]]:
        if self.done:
            return []
        out = self._series.read()
        if any(event.get("type") == SeriesEvent.RESULT for event in out):
            return self._end(out)
        if self._record is None:
            try:
                self._record = dict(self.history.get(self.run_id).raw)
            except HistoryError:  # deleted meanwhile: nothing more will come
                return self._end(out)
        if self._record.get("status") == RunStatus.RUNNING and recorder_alive(self._record):
            return out
        # Its supervisor is gone (or the record had ended): what the series got last, then the
        # record as the history holds it once settled.
        out += self._series.read()
        if not any(event.get("type") == SeriesEvent.RESULT for event in out):
            self.history.mark_interrupted()
            try:
                out.append(
                    {"type": SeriesEvent.RESULT, "record": dict(self.history.get(self.run_id).raw)}
                )
            except HistoryError:
                pass
        return self._end(out)

    def _end(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The run is over: so is the view of it (one run, as a batch of its own)."""
        self.done = True
        return [*out, {"type": BatchEvent.BATCH_DONE, "statuses": []}]


class BatchWatch:
    """The batches in progress on this home, whoever started them (this app, another one, a
    shell's ``tui-bench run --detach``), asked again at every redraw: a batch that ended, or
    whose supervisor is gone, is read once and never again; a new one is read until its
    supervisor names itself (``supervisor.START_TIMEOUT_S``, after which it never will)."""

    def __init__(self) -> None:
        self._settled: set[str] = set()

    def in_progress(self) -> list[BatchState]:
        """Batches whose supervisor is alive, oldest first (as ``supervisor.in_progress``)."""
        running = []
        for path in sorted(batch_module.batches_dir().glob("batch-*.jsonl")):
            batch_id = path.stem
            if batch_id in self._settled:
                continue
            state = BatchState.read(batch_id)
            if state.in_progress:
                running.append(state)
            elif state.done is not None or state.supervisor is not None or _older(path):
                self._settled.add(batch_id)
        return sorted(running, key=lambda b: (b.supervisor or {}).get("started") or 0.0)


def _older(path: Path, seconds: float = START_TIMEOUT_S) -> bool:
    try:
        return time.time() - path.stat().st_mtime > seconds
    except OSError:  # gone: nothing to wait for
        return True


class BatchFollower:
    """A batch followed into one ``BatchView``: what every viewer (CLI attach and ps, the TUI's
    Live view, tests) reads instead of events. ``of_run`` follows one run of a batch instead."""

    def __init__(
        self,
        batch_id: str,
        history: History | None = None,
        view: BatchView | None = None,
        tail: BatchTail | RunTail | None = None,
    ) -> None:
        self.tail = tail if tail is not None else BatchTail(batch_id, history)
        self.view = view if view is not None else BatchView()
        self.view.batch_id = batch_id

    @classmethod
    def of_run(
        cls, run_id: str, batch_id: str | None = None, history: History | None = None
    ) -> BatchFollower:
        """One run followed until it ends (History opens a run in progress): the same view as
        Live's, fed by the run's series alone."""
        return cls(batch_id or "", history, tail=RunTail(run_id, history))

    @property
    def done(self) -> bool:
        return self.tail.done

    @property
    def run_ids(self) -> list[str]:
        return self.tail.run_ids

    def catch_up(self) -> BatchView:
        """Fold everything written so far straight into the view, in one pass. Only for a view
        no other thread reads yet (a viewer attaching); later events go through ``poll``."""
        return self.view.fold(self.tail.read())

    def poll(self) -> bool:
        """Queue what arrived since the last look on the view (``view.drain`` applies it, on
        the thread that reads the view); True if anything arrived."""
        events = self.tail.read()
        self.view.push_all(events)
        return bool(events)

    def follow(
        self,
        on_update: Callable[[BatchView], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        interval: float = POLL_S,
    ) -> bool:
        """The one polling loop: read the batch's files until it ends (True) or ``should_stop``
        (False). ``on_update`` runs after each look that found something."""
        while not should_stop():
            if self.poll() and on_update is not None:
                on_update(self.view)
            if self.done:
                return True
            time.sleep(interval)
        return False


def progress(batch_id: str, history: History | None = None) -> Progress:
    """Where a batch is, for ``tui-bench ps``."""
    return BatchFollower(batch_id, history).catch_up().progress()


def left_running_hint(batch_id: str) -> str:
    """What to tell someone who leaves a batch running: how to follow or cancel it, and whether
    logging out would kill it."""
    from tui_bench.engine.machine.sysinfo import logout_trap

    hint = f"follow it with: tui-bench attach {batch_id}; cancel it with: tui-bench stop {batch_id}"
    trap = logout_trap()
    return hint + (f"\nwarning: {trap}" if trap else "")
