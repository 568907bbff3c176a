"""Run history: one tinydb summary record per run, plus one series file per run beside it.

Layout under the data home::

    history.json        tinydb: summaries (spec, environment, metrics, status)
    history.lock        one writer at a time, across processes
    runs/<id>.jsonl     everything the run streamed: header, events, resource samples, result

tinydb rewrites its whole file on each write, so writes go to a temporary file that replaces the
database atomically: a crash mid-write leaves the old file intact. The series files hold enough to
rebuild every summary, so a database that is corrupt anyway (edited by hand, disk trouble) is moved
aside and rebuilt from them: nothing already recorded is lost.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock
from tinydb import Query, TinyDB
from tinydb.storages import Storage

from tui_bench.engine.errors import HistoryError
from tui_bench.engine.kinds import RunStatus, SeriesEvent
from tui_bench.engine.machine import procs
from tui_bench.engine.paths import data_home
from tui_bench.engine.results.export_safety import csv_header, csv_row


class AtomicJSONStorage(Storage):
    """tinydb storage that never leaves a half-written file behind."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        if not text.strip():
            return None
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("top level is not an object")
        return data

    def write(self, data: dict[str, Any]) -> None:
        atomic_write(self.path, json.dumps(data, separators=(",", ":")))


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).astimezone().isoformat(timespec="seconds")


def new_run_id() -> str:
    """Sortable, and unique in practice: 20261121-101502-3f9a0c1e (32 random bits).

    ``History.reserve_run_id`` makes it unique for certain within one history."""
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4)


class History:
    def __init__(self, home: Path | None = None) -> None:
        self.home = Path(home) if home else data_home()
        self.db_path = self.home / "history.json"
        self.runs_dir = self.home / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.home / "history.lock"), timeout=60)
        self.warnings: list[str] = []

    # -- low level ------------------------------------------------------------------------------
    def _open(self) -> TinyDB:
        """Open under the lock; a corrupt file is moved aside and rebuilt from the series files."""
        storage_db = TinyDB(self.db_path, storage=AtomicJSONStorage)
        try:
            storage_db.storage.read()
        except (ValueError, UnicodeDecodeError) as exc:
            storage_db.close()
            self._recover(exc)
            storage_db = TinyDB(self.db_path, storage=AtomicJSONStorage)
        return storage_db

    def _recover(self, exc: Exception) -> None:
        aside = self.db_path.with_name(f"history.corrupt-{dt.datetime.now():%Y%m%d-%H%M%S}.json")
        os.replace(self.db_path, aside)
        records = list(self._records_from_series())
        table = {str(i + 1): record for i, record in enumerate(records)}
        atomic_write(self.db_path, json.dumps({"_default": table}))
        self.warnings.append(
            f"history file was corrupt ({exc}); kept it as {aside.name} and rebuilt "
            f"{len(records)} run(s) from the series files"
        )

    def _records_from_series(self) -> Iterator[dict[str, Any]]:
        for path in sorted(self.runs_dir.glob("*.jsonl")):
            header, result = series_ends(path)
            record = result or header
            if record is None:
                continue
            if result is None and not recorder_alive(record):
                record = {**record, "status": RunStatus.INTERRUPTED, "reason": INTERRUPTED_REASON}
            yield record

    # -- records --------------------------------------------------------------------------------
    def reserve_run_id(self) -> str:
        """A new run id, unique in this history: its series file is created exclusively."""
        while True:
            run_id = new_run_id()
            try:
                with open(self.series_path(run_id), "x", encoding="utf-8"):
                    return run_id
            except FileExistsError:
                continue

    def add(self, record: dict[str, Any]) -> str:
        record = dict(record)
        record.setdefault("id", new_run_id())
        record.setdefault("started_at", now_iso())
        with self._lock, self._open() as db:
            db.insert(record)
        return record["id"]

    def update(self, run_id: str, **fields: Any) -> None:
        with self._lock, self._open() as db:
            if not db.update(fields, Query().id == run_id):
                raise HistoryError(f"no run with id {run_id}")

    def all(self) -> list[dict[str, Any]]:
        with self._lock, self._open() as db:
            records = db.all()
        return sorted((dict(r) for r in records), key=lambda r: r.get("started_at", ""))

    def get(self, run_id: str) -> dict[str, Any]:
        """A run by id or unique id prefix."""
        matches = [r for r in self.all() if r["id"] == run_id]
        if not matches:
            matches = [r for r in self.all() if r["id"].startswith(run_id)]
        if not matches:
            raise HistoryError(f"no run with id {run_id!r}")
        if len(matches) > 1:
            raise HistoryError(f"id prefix {run_id!r} matches {len(matches)} runs; give more of it")
        return matches[0]

    def delete(self, run_ids: Iterable[str]) -> int:
        """Delete runs and their files. A run in progress is refused: stop it first."""
        ids = set(run_ids)
        for record in self.all():
            if (
                record["id"] in ids
                and record.get("status") == RunStatus.RUNNING
                and recorder_alive(record)
            ):
                raise HistoryError(
                    f"run {record['id']} is in progress: stop it first "
                    f"(tui-bench stop {record.get('batch') or record['id']})"
                )
        with self._lock, self._open() as db:
            removed = db.remove(Query().id.one_of(list(ids)))
        for run_id in ids:
            self.series_path(run_id).unlink(missing_ok=True)
            self.log_path(run_id).unlink(missing_ok=True)
        return len(removed)

    def mark_interrupted(self) -> int:
        """Settle runs still 'running' whose supervisor is gone (killed, or the machine died).

        A run whose series file holds its result (the supervisor died between writing the
        series and the history) is recovered from it; any other becomes 'interrupted' with the
        reason, keeping what its series holds, and a worker it left behind is killed. Returns
        how many became interrupted."""
        interrupted = 0
        for record in self.all():
            if record.get("status") != RunStatus.RUNNING or recorder_alive(record):
                continue
            run_id = record["id"]
            _header, result = series_ends(self.series_path(run_id))
            if result is not None:
                self.update(run_id, **{k: v for k, v in result.items() if k != "id"})
                continue
            worker = last_worker(self.series_path(run_id))
            if worker:
                procs.kill_group(worker.get("pid"), worker.get("started"))
            pid = record.get("recorder_pid")
            self.update(
                run_id,
                status=RunStatus.INTERRUPTED,
                finished_at=now_iso(),
                reason=f"{INTERRUPTED_REASON} (its supervisor, pid {pid}, is gone)",
            )
            interrupted += 1
        return interrupted

    # -- series ---------------------------------------------------------------------------------
    def series_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.jsonl"

    def log_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.log"

    def read_series(self, run_id: str) -> list[dict[str, Any]]:
        return list(read_jsonl(self.series_path(run_id)))

    # -- export ---------------------------------------------------------------------------------
    def export_csv(self, path: Path, records: list[dict[str, Any]] | None = None) -> int:
        rows = [flatten(r) for r in (self.all() if records is None else records)]
        columns = csv_columns(rows)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
            writer.writerow(csv_header(columns))
            writer.writerows(csv_row(row) for row in rows)  # formulas neutralised (OWASP)
        return len(rows)


INTERRUPTED_REASON = "the run's supervisor stopped before the run ended"


def recorder_alive(record: dict[str, Any]) -> bool:
    """Is the process that records this run (its supervisor) still the one that started it?"""
    pid = record.get("recorder_pid")
    if pid == os.getpid():
        return False  # a record left 'running' by this very process cannot still be running
    return procs.alive(pid, record.get("recorder_started"))


def series_ends(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The header record and the result record of a series file (None where missing)."""
    header = result = None
    for event in read_jsonl(path):
        if event.get("type") == SeriesEvent.RECORD:
            header = event["record"]
        elif event.get("type") == SeriesEvent.RESULT:
            result = event["record"]
    return header, result


def last_worker(path: Path) -> dict[str, Any] | None:
    """The worker process a series file names (pid and start time), if any."""
    worker = None
    for event in read_jsonl(path):
        if event.get("type") == SeriesEvent.WORKER:
            worker = event
    return worker


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Complete JSON lines of a series file; a torn last line (crash) is skipped."""
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


_FIRST_COLUMNS = ["id", "started_at", "finished_at", "status", "reason"]


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    """One CSV row: nested dicts become dotted columns (spec.threads, metrics.step_median_s)."""
    row: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)
        elif isinstance(value, list):
            row[prefix] = json.dumps(value)
        else:
            row[prefix] = value

    for key, value in record.items():
        if key in ("log_tail", "recorder_pid", "recorder_started"):
            continue
        walk(key, value)
    return row


def csv_columns(rows: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {c: None for c in _FIRST_COLUMNS}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)
