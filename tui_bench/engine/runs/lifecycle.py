"""One record lifecycle for every run, local or on a fleet node: reserve → running → ended.

A run's id is reserved first (its series file exists from then on), its record is added to
history as ``running`` and written as the series' first line, every event of the run is appended
to the series, and its end (finished, failed or cancelled) is written as the series' last line
and into history. A run whose recorder dies in between is found ``running`` with a dead recorder
and settled as ``interrupted`` by ``History.mark_interrupted``. ``runner.execute`` and
``fleet.FleetExecutor`` both go through ``RunRecord``, so a record looks the same wherever it ran.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tui_bench.engine.kinds import RunStatus, SeriesEvent
from tui_bench.engine.results import stability
from tui_bench.engine.results.history import History, now_iso
from tui_bench.engine.results.record import Run


class SeriesWriter:
    """Appends whole JSON lines to a run's series file from several threads."""

    def __init__(self, path: Path) -> None:
        self._handle = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.error: str | None = None  # the first write failure (disk full): the run fails on it

    def write(self, item: dict[str, Any]) -> None:
        line = json.dumps(item, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self.error is not None:
                return  # what was written stays; nothing more is tried on a failing disk
            try:
                self._handle.write(line)
                self._handle.flush()
            except OSError as exc:
                self.error = exc.strerror or str(exc)

    def close(self) -> None:
        with self._lock:
            try:
                self._handle.close()
            except OSError as exc:
                self.error = self.error or exc.strerror or str(exc)


class RunRecord:
    """One run's history record and series file, from its reserved id to its end."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.run_id = history.reserve_run_id()
        self.record: dict[str, Any] | None = None
        self._series: SeriesWriter | None = None

    @property
    def started(self) -> bool:
        return self.record is not None

    def start(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The run is running: its record goes into history and opens its series."""
        rest = {k: v for k, v in fields.items() if k not in ("id", "status")}
        self.record = {"id": self.run_id, "status": RunStatus.RUNNING, **rest}
        self.history.add(self.record)
        self._series = SeriesWriter(self.history.series_path(self.run_id))
        self._series.write({"type": SeriesEvent.RECORD, "record": self.record})
        return self.record

    def write(self, event: dict[str, Any]) -> None:
        """One event of the run, into its series."""
        assert self._series is not None, "start() first"
        self._series.write(event)

    def finish(self, status: str, **fields: Any) -> dict[str, Any]:
        """The run ended (finished, failed, cancelled): its final record closes the series and
        replaces the running one in history. Nobody records it any more."""
        assert self.record is not None and self._series is not None, "start() first"
        rest = {k: v for k, v in fields.items() if k not in ("id", "status")}
        if self._series.error is not None and status == RunStatus.FINISHED:
            status = RunStatus.FAILED
            rest["reason"] = f"could not write the run's series: {self._series.error}"
        final = {
            **self.record,
            **rest,
            "status": status,
            "finished_at": rest.get("finished_at") or now_iso(),
            "recorder_pid": None,
            "recorder_started": None,
        }
        # Whether its numbers can be trusted, from what the record now holds (issue 19).
        verdict = (
            stability.assess_record(Run.from_record(final))
            if status == RunStatus.FINISHED
            else None
        )
        final["stability"] = verdict.as_dict() if verdict is not None else None
        self._series.write({"type": SeriesEvent.RESULT, "record": final})
        self._series.close()
        if self._series.error is not None and final["status"] == RunStatus.FINISHED:
            # The disk filled on the result line itself: the series lacks the run's end, so
            # the history (still writable) must not call it finished.
            final["status"] = RunStatus.FAILED
            final["reason"] = f"could not write the run's series: {self._series.error}"
            final["stability"] = None
        self.history.update(self.run_id, **{k: v for k, v in final.items() if k != "id"})
        return final
