"""tinydb's view of the history: ``TinyDB(home / "history.jsonl", storage=JournalStorage)``
queries every run (the README's example). The app itself reads and writes through ``History``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tinydb.storages import Storage

from tui_bench.engine.results.journal import append, delete_line, put_line, replay, scan


class JournalStorage(Storage):
    """tinydb storage over the journal: ``TinyDB(home / "history.jsonl",
    storage=JournalStorage)`` queries every run. A write appends what changed (tinydb hands
    over the whole database; unchanged runs are not written again). Hold the history's lock
    (``History.lock``) around writes made this way."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._last: dict[str, dict[str, Any]] = {}

    def read(self) -> dict[str, Any] | None:
        records = replay(scan(self.path).entries)
        self._last = {r: dict(rec) for r, rec in records.items()}
        return {"_default": {str(i + 1): rec for i, rec in enumerate(records.values())}}

    def write(self, data: dict[str, Any]) -> None:
        table = data.get("_default", {})
        now = {str(doc["id"]): dict(doc) for doc in table.values() if doc.get("id")}
        lines = [put_line(rec) for run_id, rec in now.items() if self._last.get(run_id) != rec]
        lines += [delete_line(run_id) for run_id in self._last if run_id not in now]
        if lines:
            append(self.path, lines)
        self._last = now
