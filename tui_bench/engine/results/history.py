"""Run history: every run's record in an append-only journal, plus one series file per run.

The layout and why it is so are in ``journal.py``. This module is the read and write API that
everything else uses:

- ``History.summaries()``: every run, the fields lists show (fast: the summary cache);
- ``History.all()`` / ``History.records()``: every run's full record, oldest first;
- ``History.get(run_id)``: one full record by id or unique prefix;

each read as a ``record.Run`` (the one reader of a record's fields). The stored dicts stay in
here and in the store (the writes, the repair) and in the exports (``records_of``,
``record_texts``), whose job is the file format.
- ``History.read_series(run_id)`` / ``History.step_events(run_id)``: what the run streamed;
- ``History.add`` / ``update`` / ``delete`` / ``mark_interrupted``: the writes.

The CSV export is ``csv_export.py``; the JSONL export and import, ``transfer.py``.

Every reader sees a settled status: a run still ``running`` whose supervisor is gone reads
``interrupted`` the moment it is read (``mark_interrupted`` writes that down). Every reader
tolerates damage: a bad journal line is skipped, a journal that lost runs is completed from the
series files (which hold every run's first and last record), and either is then repaired: the
damaged original is kept beside it and the repaired journal replaces it atomically. ``warnings``
says, in one line each, what was found and done.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_bench.engine.errors import HistoryError
from tui_bench.engine.kinds import RunStatus, SeriesEvent
from tui_bench.engine.paths import data_home
from tui_bench.engine.results import journal, jsonlines, migration, summary_cache
from tui_bench.engine.results.journal import atomic_write
from tui_bench.engine.results.record import Run

if TYPE_CHECKING:
    from filelock import FileLock

# filelock, psutil (procs) and secrets are imported where used: together a fifth of a second of
# `history list`, which reads the cache and takes no lock and, with no run in progress, asks
# after no process.

__all__ = ["History", "HistoryError", "atomic_write", "new_run_id", "now_iso", "read_jsonl"]


_progress: Callable[[str], None] | None = None


def report_progress_to(callback: Callable[[str], None] | None) -> None:
    """Who hears about a long one-time wait (moving a schema-1 history to the journal): the
    CLI prints it on stderr; the TUI, which draws on stderr, does not set one."""
    global _progress
    _progress = callback


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).astimezone().isoformat(timespec="seconds")


def new_run_id() -> str:
    """Sortable, and unique in practice: 20261121-101502-3f9a0c1e (32 random bits).

    ``History.reserve_run_id`` makes it unique for certain within one history."""
    import secrets

    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4)


def _write_failed(exc: OSError, what: str) -> HistoryError:
    return HistoryError(f"cannot write the history ({what}): {exc.strerror or exc}")


class History:
    def __init__(self, home: Path | None = None, repair: bool = True) -> None:
        """``repair=False``: read and report only (``history check`` without ``--repair``)."""
        self.home = Path(home) if home else data_home()
        self.journal_path = self.home / journal.JOURNAL_NAME
        self.legacy_path = self.home / migration.LEGACY_NAME
        self.cache_path = self.home / summary_cache.CACHE_NAME
        self.runs_dir = self.home / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.repair = repair
        self.warnings: list[str] = []
        self._checked = False
        self._added: set[str] = set()  # ids this object added: updated without a lookup
        self._known: summary_cache.Summaries | None = (
            None  # the last read: the next reads what follows
        )

    @functools.cached_property
    def lock(self) -> FileLock:
        """One writer at a time, across processes (reentrant within this History)."""
        from filelock import FileLock

        return FileLock(str(self.home / "history.lock"), timeout=60)

    # -- reading --------------------------------------------------------------------------------
    def summaries(self) -> list[Run]:
        """Every run, oldest first, with the fields lists show (id, status, dates, label, group,
        batch, the main spec fields, a few metrics, env.host): fast at 10,000 runs."""
        return [Run.from_record(r) for r in self._summary_records()]

    def _summary_records(self) -> list[dict[str, Any]]:
        """``summaries`` as the stored dicts (for the writes here: ids, a running run's batch)."""
        self._ensure_sound()
        found = self._read_summaries()
        return _ordered(settle(r) for r in found.records.values())

    def group_summaries(self, group: str) -> list[Run]:
        """The summaries of one group's runs (a sweep, a batch's repeats), oldest first. A group
        with no run yet (every new batch) costs the index alone, not every run's summary."""
        self._ensure_sound()
        if group not in self._read_summaries(full=False).groups:
            return []
        return [r for r in self.summaries() if r.group == group]

    def _read_summaries(self, full: bool = True) -> summary_cache.Summaries:
        """Summaries as the journal stands now: the first read loads the cache, later ones read
        only what was appended since (a run's supervisor reads them several times). ``full=False``:
        the index alone (ids, running runs, groups)."""
        self._known = summary_cache.read_summaries(
            self.journal_path, self.cache_path, self._known, full=full
        )
        return self._known

    def all(self) -> list[Run]:
        """Every run's full record, oldest first."""
        return list(self.records())

    def records(self, ids: Iterable[str] | None = None) -> Iterator[Run]:
        """Full records, oldest first (only ``ids`` when given). Parsed one run at a time in
        the order the summaries give: 10,000 runs are never all in memory at once."""
        for record in records_of(self._journal_lines(ids)):
            yield Run.from_record(record)

    def record_texts(self, ids: Iterable[str] | None = None) -> Iterator[tuple[str, str]]:
        """What ``records`` yields, as JSON text (``json.dumps(record, separators=(",", ":"),
        default=str)``) with its run's id: copied from the journal where a run is one line
        written as we write it (``journal.stored_record_text``), else parsed and encoded."""
        for run_id, lines in self._journal_lines(ids):
            text = journal.stored_record_text(run_id, lines)
            if text is None:
                record = journal.final_record(run_id, lines)
                if record is None:
                    continue
                text = json.dumps(settle(record), separators=(",", ":"), default=str)
            yield run_id, text

    def _journal_lines(self, ids: Iterable[str] | None) -> Iterator[tuple[str, list[bytes]]]:
        """Each run's id and journal lines, oldest run first (only ``ids`` when given)."""
        return self.lines_of_runs(self.run_order(ids))

    def run_order(self, ids: Iterable[str] | None) -> list[str]:
        """The ids of the runs (only ``ids`` when given), oldest first."""
        order = [r["id"] for r in self._summary_records()]  # checks (and repairs) it first
        if ids is not None:
            wanted = set(ids)
            order = [run_id for run_id in order if run_id in wanted]
        return order

    def lines_of_runs(self, order: list[str]) -> Iterator[tuple[str, list[bytes]]]:
        """Each of these runs' id and journal lines, in this order."""
        if len(order) <= _FEW_RUNS:  # a sweep's runs, a group: searched for, not split out
            lines = journal.lines_of(self.journal_path, order)
        else:
            lines = journal.lines_by_run(self.journal_path, keep=set(order))
        for run_id in order:
            yield run_id, lines.pop(run_id, [])

    def get(self, run_id: str) -> Run:
        """A run by id or unique id prefix."""
        self._ensure_sound()
        lines = journal.lines_of(self.journal_path, [run_id]).get(run_id)
        record = journal.final_record(run_id, lines) if lines else None
        if record is not None:  # a whole id: found without reading every run's summary
            return Run.from_record(settle(record))
        full_id = self.resolve(run_id)
        lines = journal.lines_of(self.journal_path, [full_id]).get(full_id, [])
        record = journal.final_record(full_id, lines)
        if record is None:  # deleted between the two reads
            raise HistoryError(f"no run with id {run_id!r}")
        return Run.from_record(settle(record))

    def resolve(self, run_id: str) -> str:
        """The full id of a run named by its id or a unique prefix of it."""
        ids = [r["id"] for r in self._summary_records()]
        if run_id in ids:
            return run_id
        matches = [i for i in ids if run_id and i.startswith(run_id)]
        if not matches:
            raise HistoryError(f"no run with id {run_id!r}")
        if len(matches) > 1:
            raise HistoryError(f"id prefix {run_id!r} matches {len(matches)} runs; give more of it")
        return matches[0]

    # -- writing --------------------------------------------------------------------------------
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
        record["id"] = str(record["id"])
        self._append([journal.put_line(record)], "adding a run")
        self._added.add(record["id"])
        return record["id"]

    def update(self, run_id: str, **fields: Any) -> None:
        with self.lock:
            self._ensure_sound(locked=True)
            if run_id not in self._added:  # the runner updates what it added: no lookup then
                lines = journal.lines_of(self.journal_path, [run_id]).get(run_id, [])
                if journal.final_record(run_id, lines) is None:
                    raise HistoryError(f"no run with id {run_id}")
            self._append([journal.patch_line(run_id, fields)], "updating a run", locked=True)

    def delete(self, run_ids: Iterable[str]) -> int:
        """Delete runs and their files. A run in progress is refused: stop it first."""
        ids = set(run_ids)
        present = {r["id"]: r for r in self._summary_records() if r["id"] in ids}
        for record in present.values():
            if record.get("status") == RunStatus.RUNNING:
                raise HistoryError(
                    f"run {record['id']} is in progress: stop it first "
                    f"(tui-bench stop {record.get('batch') or record['id']})"
                )
        # Files first: a crash in between leaves a run without its series, never a deleted
        # run that a reader would take for a lost one and bring back.
        for run_id in ids:
            self.series_path(run_id).unlink(missing_ok=True)
            self.log_path(run_id).unlink(missing_ok=True)
        if present:
            self._append([journal.delete_line(i) for i in present], "deleting runs")
        return len(present)

    def import_records(self, records: list[dict[str, Any]]) -> list[str]:
        """Add the runs whose ids this history lacks (merging by run id); the ids added."""
        known = {r["id"] for r in self._summary_records()}
        new = [r for r in records if r["id"] not in known]
        if new:
            self._append([journal.put_line(r) for r in new], "importing runs")
        return [r["id"] for r in new]

    def mark_interrupted(self) -> int:
        """Write down what readers already see: runs still 'running' whose supervisor is gone.

        A run whose series file holds its result (the supervisor died between writing the
        series and the history) is recovered from it; any other becomes 'interrupted' with the
        reason, keeping what its series holds, and a worker it left behind is killed. Returns
        how many became interrupted."""
        from tui_bench.engine.machine import procs

        interrupted = 0
        procs.clean_stale_temp()  # FIFOs and sockets of runners that died with their runs
        running = (self._ensure_sound() or self._read_summaries(full=False)).running
        for run_id, record in list(running.items()):
            if record.get("status") != RunStatus.RUNNING or recorder_alive(record):
                continue
            _header, result = series_ends(self.series_path(run_id))
            if result is not None:
                self.update(run_id, **{k: v for k, v in result.items() if k != "id"})
                continue
            worker = last_worker(self.series_path(run_id))
            if worker:
                procs.kill_group(worker.get("pid"), worker.get("started"))
            self.update(
                run_id,
                status=RunStatus.INTERRUPTED,
                finished_at=now_iso(),
                reason=settle(record)["reason"],
            )
            interrupted += 1
        return interrupted

    def compact(self) -> None:
        """One ``put`` per live run, written aside and swapped in (superseded lines dropped)."""
        with self.lock:
            records = journal.replay(journal.scan(self.journal_path).entries)
            try:
                journal.rewrite(self.journal_path, _ordered(records.values()))
            except OSError as exc:
                raise _write_failed(exc, "compacting") from exc

    def _append(self, lines: list[bytes], what: str, locked: bool = False) -> None:
        if not locked:
            with self.lock:
                return self._append(lines, what, locked=True)
        self._ensure_sound(locked=True)
        try:
            journal.append(self.journal_path, lines)
        except OSError as exc:
            raise _write_failed(exc, what) from exc

    # -- integrity ------------------------------------------------------------------------------
    def _ensure_sound(self, locked: bool = False) -> summary_cache.Summaries | None:
        """Once per History: migrate a schema-1 file, and repair a damaged journal. Returns the
        summaries it read when they are current (nothing needed repair)."""
        if self._checked:
            return None
        found = self._read_summaries(full=False)
        if found.damage.header and "newer tui-bench" in found.damage.header:
            # Not damage: a format this version cannot read, and must never rewrite.
            raise HistoryError(f"{self.journal_path} was {found.damage.header}")
        if not self._needs_repair(found, locked):
            self._checked = True
            return found
        if not self.repair:
            self._checked = True  # check reports it; nothing is written
            return None
        if not locked:
            with self.lock:
                return self._ensure_sound(locked=True)
        if self.legacy_path.exists() and _progress is not None:
            size = self.legacy_path.stat().st_size / 1e6
            _progress(
                f"tui-bench: moving the history from {self.legacy_path} (schema 1, {size:.0f} MB) "
                f"to {journal.JOURNAL_NAME}; once, seconds at 10,000 runs"
            )
        self.warnings.extend(self._rebuild())
        self._checked = True
        return None

    def _needs_repair(self, found: summary_cache.Summaries, locked: bool) -> bool:
        return (
            self.legacy_path.exists()
            or bool(found.damage)
            or self._torn(found, locked)
            or self._lost_runs(found)
        )

    def _torn(self, found: summary_cache.Summaries, locked: bool) -> bool:
        """A partial last line is a write in flight while a writer holds the lock; with the
        lock free it was torn by a crash, and the run it held must come from its series."""
        if not found.torn:
            return False
        if locked:
            return True
        from filelock import Timeout

        try:
            with self.lock.acquire(timeout=0):
                return journal.scan(self.journal_path, only=b"\x00").torn
        except Timeout:
            return False

    def _lost_runs(self, found: summary_cache.Summaries) -> bool:
        """Does a series file hold a run the journal lacks (a line damaged into another valid
        line, a journal restored from a backup)? Empty or just-created files are runs being
        started, not lost."""
        missing = self._series_ids() - found.ids - found.deleted
        now = time.time()
        for run_id in missing:
            try:
                st = self.series_path(run_id).stat()
            except OSError:
                continue
            if st.st_size > 0 and now - st.st_mtime > _IN_FLIGHT_S:
                return True
        return False

    def _series_ids(self) -> set[str]:
        try:
            # listdir, not scandir: names alone, at 20,000 files twice as fast
            return {name[:-6] for name in os.listdir(self.runs_dir) if name.endswith(".jsonl")}
        except OSError:
            return set()

    def plan_repair(self) -> tuple[list[dict[str, Any]], list[str]]:
        """What a repair would write (every run the journal, the schema-1 file and the series
        files hold) and the problems that call for it, one line each."""
        return self._plan_repair(None)

    def _plan_repair(
        self, texts: dict[int, bytes] | None
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """``plan_repair``; ``texts``: filled with the stored JSON text of the schema-1 records
        that can be written as they are (``migration.read_legacy``)."""
        problems: list[str] = []
        found = journal.scan(self.journal_path)
        records = journal.replay(found.entries)
        if found.damage:
            problems.append(f"{journal.JOURNAL_NAME}: {found.damage.describe()}")
        if found.torn:
            problems.append(f"{journal.JOURNAL_NAME}: its last line was cut short (a crash)")
        if self.legacy_path.exists():
            legacy, why = migration.read_legacy(self.legacy_path, texts)
            if why:
                problems.append(f"{migration.LEGACY_NAME} (schema 1): {why}")
            for record in legacy:
                records.setdefault(record["id"], record)
            if texts:  # only the records kept (the others' ids may be reused once they are gone)
                kept = {id(r) for r in records.values()}
                for key in [k for k in texts if k not in kept]:
                    del texts[key]
        recovered = 0
        for run_id in sorted(self._series_ids() - set(records)):
            rebuilt = record_from_series(self.series_path(run_id))
            if rebuilt is not None:
                records[run_id] = {**rebuilt, "id": run_id}
                recovered += 1
        if recovered:
            problems.append(f"{recovered} run(s) are in their series files but not in the history")
        return _ordered(records.values()), problems

    def _rebuild(self) -> list[str]:
        with jsonlines.collector_paused():  # every run's record in memory at once, no cycles
            return self._rebuild_records()

    def _rebuild_records(self) -> list[str]:
        texts: dict[int, bytes] = {}
        records, problems = self._plan_repair(texts)
        stamp = journal.aside_name("history.damaged", ".jsonl")
        damaged = bool(problems) and self.journal_path.exists()
        try:
            kept = journal.rewrite(
                self.journal_path, records, keep_as=stamp if damaged else None, texts=texts
            )
            summary_cache.cache_records(
                self.journal_path, self.cache_path, records
            )  # not parsed again
            if self.legacy_path.exists():
                legacy_kept = self.legacy_path.with_name(journal.aside_name("history.v1", ".json"))
                os.replace(self.legacy_path, legacy_kept)
        except OSError as exc:
            raise _write_failed(exc, "repairing") from exc
        if not problems:
            return []  # a clean schema-1 history, moved to the journal: nothing to warn about
        kept_note = f"; kept the damaged file as {kept.name}" if kept else ""
        return [
            f"history repaired ({'; '.join(problems)}): rebuilt {len(records)} run(s) "
            f"from the history and the series files{kept_note}"
        ]

    # -- series ---------------------------------------------------------------------------------
    def series_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.jsonl"

    def log_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.log"

    def read_series(self, run_id: str) -> list[dict[str, Any]]:
        """Every event a run streamed (damaged lines skipped)."""
        return list(read_jsonl(self.series_path(run_id)))

    def step_events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``steps`` events in order: epoch, first step index and per-step losses
        (the per-step times stay in the worker; the summary's metrics carry their statistics)."""
        return [e for e in read_jsonl(self.series_path(run_id)) if e.get("type") == "steps"]


def records_of(runs: Iterable[tuple[str, list[bytes]]]) -> Iterator[dict[str, Any]]:
    """Each run's record from its journal lines, settled (``History.records``)."""
    for run_id, lines in runs:
        record = journal.final_record(run_id, lines)
        if record is not None:
            yield settle(record)


# Up to this many runs are read by searching the journal for each (History.records).
_FEW_RUNS = 200
# A series file younger than this that the journal lacks may be a run being added right now.
_IN_FLIGHT_S = 10.0
INTERRUPTED_REASON = "the run's supervisor stopped before the run ended"


def _ordered(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    # sorted() is stable: runs started in the same second keep the order they were added in.
    return sorted(records, key=lambda r: str(r.get("started_at") or ""))


def recorder_alive(record: dict[str, Any]) -> bool:
    """Is the process that records this run (its supervisor) still the one that started it?"""
    from tui_bench.engine.machine import procs

    return procs.alive(record.get("recorder_pid"), record.get("recorder_started"))


def settle(record: dict[str, Any]) -> dict[str, Any]:
    """The record as it stands now: 'running' with its supervisor gone reads 'interrupted'."""
    if record.get("status") != RunStatus.RUNNING or recorder_alive(record):
        return record
    pid = record.get("recorder_pid")
    gone = f" (its supervisor, pid {pid}, is gone)" if pid else ""
    return {
        **record,
        "status": RunStatus.INTERRUPTED,
        "reason": f"{INTERRUPTED_REASON}{gone}",
    }


def record_from_series(path: Path) -> dict[str, Any] | None:
    """A run's record rebuilt from its series file: the result if it has one, else the header
    (which the readers then settle)."""
    header, result = series_ends(path)
    record = result or header
    if record is None or not isinstance(record.get("id"), str):
        return None
    return record


def series_ends(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The header record and the result record of a series file (None where missing)."""
    header = result = None
    for event in read_jsonl(path):
        record = event.get("record")
        if not isinstance(record, dict):
            continue
        if event.get("type") == SeriesEvent.RECORD:
            header = record
        elif event.get("type") == SeriesEvent.RESULT:
            result = record
    return header, result


def last_worker(path: Path) -> dict[str, Any] | None:
    """The worker process a series file names (pid and start time), if any."""
    worker = None
    for event in read_jsonl(path):
        if event.get("type") == SeriesEvent.WORKER:
            worker = event
    return worker


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Complete JSON-object lines of a series or batch file; damaged lines (a torn last line
    after a crash, binary, another shape) are skipped."""
    return jsonlines.iter_lines(path)
