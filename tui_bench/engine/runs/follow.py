"""Viewers follow a batch through the files its supervisor writes; they never talk to it.

``BatchFollower.poll`` returns, in order, every event of the batch since the last poll: the
batch's own events (plan, sweep position, batch_done) and each run's series events from its first
line, so a viewer that attaches an hour in still gets the loss curve from step 1. Any number of
viewers can follow one batch: they only read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine.kinds import BatchEvent, SeriesEvent, WorkerEvent
from tui_bench.engine.machine import procs
from tui_bench.engine.results.history import History, HistoryError
from tui_bench.engine.runs import batch as batch_module


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
        events = []
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        return events


class BatchFollower:
    def __init__(self, batch_id: str, history: History | None = None) -> None:
        self.batch_id = batch_id
        self.history = history or History()
        self._batch = Tail(batch_module.events_path(batch_id))
        self._run: Tail | None = None
        self.header: dict[str, Any] | None = None
        self.supervisor: dict[str, Any] | None = None
        self.run_ids: list[str] = []
        self.done = False

    def poll(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for event in self._batch.read():
            kind = event.get("type")
            if kind == BatchEvent.BATCH:
                self.header = event
                continue
            if kind == BatchEvent.SUPERVISOR:
                self.supervisor = event
                continue
            # A batch event is written after the current run's series is complete: drain it.
            if self._run is not None:
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
            return ([] if self._run is None else self._run.read()) + [
                e for e in out if e.get("type") != "supervisor"
            ]
        if self._run is not None:
            out += self._run.read()
        self.history.mark_interrupted()
        if self.run_ids:
            try:
                out.append(
                    {"type": SeriesEvent.RESULT, "record": self.history.get(self.run_ids[-1])}
                )
            except HistoryError:
                pass
        pid = (self.supervisor or {}).get("pid")
        self.done = True
        out.append(
            {
                "type": "batch_done",
                "statuses": [],
                "lost": f"the supervisor (pid {pid}) ended without finishing the batch",
            }
        )
        return out


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


def progress(batch_id: str, history: History | None = None) -> Progress:
    follower = BatchFollower(batch_id, history)
    p = Progress()
    for event in follower.poll():
        kind = event.get("type")
        if kind == BatchEvent.PLAN:
            p.runs_total = event.get("total", 0)
        elif kind == BatchEvent.SWEEP_RUN:
            p.position = f"{event['key']} · repeat {event['repeat'] + 1}/{event['repeats']}"
        elif kind == SeriesEvent.RECORD:
            p.run_index += 1
            p.run_id = event["record"].get("id")
            p.host = event["record"].get("host")
            p.epoch = p.epochs = p.step = p.steps = 0
        elif kind == WorkerEvent.EPOCH_STARTED:
            p.epoch, p.epochs = event.get("epoch", 0), event.get("epochs", 0)
            p.steps, p.step = event.get("steps", 0), 0
        elif kind == WorkerEvent.STEPS:
            p.step = event.get("first_step", 0) + len(event.get("losses") or [])
    return p


def left_running_hint(batch_id: str) -> str:
    """What to tell someone who leaves a batch running: how to follow or cancel it, and whether
    logging out would kill it."""
    from tui_bench.engine.machine.sysinfo import logout_trap

    hint = f"follow it with: tui-bench attach {batch_id}; cancel it with: tui-bench stop {batch_id}"
    trap = logout_trap()
    return hint + (f"\nwarning: {trap}" if trap else "")
