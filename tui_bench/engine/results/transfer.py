"""Moving runs between histories: ``history export --jsonl`` and ``history import``.

The file is JSON lines and describes itself: a header ``{"format": "tui-bench-runs", "version":
2, ...}``, then one line per run: ``{"run": <full record>, "series": [<every event of its series
file>]}`` (the series holds the raw per-step samples). Import merges by run id: a run already in
the history is skipped, so importing twice is a no-op. Files written by an older schema are
migrated record by record (``migration.migrate_record``); a newer one is refused in one line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import HistoryError
from tui_bench.engine.results import journal, jsonlines, migration
from tui_bench.engine.results.history import History

FORMAT = "tui-bench-runs"
# A run id names a file under runs/: nothing that could step outside it.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def export_jsonl(history: History, path: Path, ids: Iterable[str] | None = None) -> int:
    """Write runs (all, or ``ids``) with their series; how many."""
    count = 0
    with open(path, "w", encoding="utf-8") as handle, jsonlines.collector_paused():
        header = {"format": FORMAT, "version": journal.VERSION, "fields": ["run", "series"]}
        handle.write(json.dumps(header) + "\n")
        # Records and series lines are copied as stored where they can be (checked as JSON,
        # not encoded again): encoding again what was read was most of a 10,000-run export.
        for run_id, run in history.record_texts(ids):
            series = ",".join(jsonlines.iter_line_texts(history.series_path(run_id)))
            handle.write(f'{{"run":{run},"series":[{series}]}}\n')
            count += 1
    return count


def import_jsonl(history: History, path: Path) -> tuple[int, int]:
    """Merge a file's runs into ``history`` by run id; (added, already there)."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise HistoryError(f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        version = _header(handle.readline(), path)
        runs: list[tuple[dict[str, Any], list[Any]]] = []
        for number, raw in enumerate(handle, start=2):
            try:
                line = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise HistoryError(f"{path}: line {number} is not JSON") from None
            record = line.get("run") if isinstance(line, dict) else None
            if not isinstance(record, dict) or not isinstance(record.get("id"), str | int):
                raise HistoryError(f"{path}: line {number} holds no run record")
            if not _SAFE_ID.fullmatch(str(record["id"])):
                raise HistoryError(
                    f"{path}: line {number}: {str(record['id'])[:40]!r} is not a run id"
                )
            series = line.get("series")
            record = {**migration.migrate_record(record, version), "id": str(record["id"])}
            runs.append((record, series if isinstance(series, list) else []))
    added = set(history.import_records([record for record, _ in runs]))
    for record, series in runs:
        target = history.series_path(record["id"])
        if record["id"] in added and series and not target.exists():
            body = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in series)
            journal.atomic_write(target, body)
    return len(added), len(runs) - len(added)


def _header(raw: bytes, path: Path) -> int:
    try:
        head = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        head = None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise HistoryError(
            f"{path} is not a tui-bench runs file (export one with history export --jsonl)"
        )
    version = head.get("version")
    if not isinstance(version, int) or version < 1:
        raise HistoryError(f"{path}: its header names no schema version")
    if version > journal.VERSION:
        raise HistoryError(
            f"{path} was written by a newer tui-bench (schema {version}; this one reads up to "
            f"{journal.VERSION}): upgrade tui-bench to import it"
        )
    return version
