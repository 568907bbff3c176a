"""Viewers follow a batch through the files its supervisor writes; they never talk to it.

``BatchTail.read`` returns, in order, every event of the batch since the last read: the batch's
own events (request, supervisor, plan, sweep position, batch_done) and each run's series events
from its first line, so a viewer that attaches an hour in still gets the loss curve from step 1.
``BatchFollower`` folds them into one ``reducer.BatchView``: the backlog at once (``catch_up``),
then what arrives (``poll``, or the one polling loop, ``follow``). Any number of viewers can follow
one batch: they only read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui_bench.engine.kinds import BatchEvent, SeriesEvent
from tui_bench.engine.machine import procs
from tui_bench.engine.results.history import History, HistoryError
from tui_bench.engine.runs import batch as batch_module
from tui_bench.engine.runs.reducer import BatchView, Progress

__all__ = ["BatchFollower", "BatchTail", "Progress", "Tail", "left_running_hint", "progress"]

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


class BatchFollower:
    """A batch followed into one ``BatchView``: what every viewer (CLI attach and ps, the TUI's
    Live view, tests) reads instead of events."""

    def __init__(
        self, batch_id: str, history: History | None = None, view: BatchView | None = None
    ) -> None:
        self.tail = BatchTail(batch_id, history)
        self.view = view if view is not None else BatchView()
        self.view.batch_id = batch_id

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
