"""``history check``: an fsck of the history, its series files and the batch files.

It reads without writing (``History(repair=False)``) and lists every problem, one line each;
``repair`` then fixes what can be fixed without losing anything: the journal is rebuilt (damaged
original kept), runs left 'running' by a dead supervisor are written down as interrupted, empty
series files nobody reserved recently are removed. What it cannot fix it keeps listing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from tui_bench.engine.kinds import BatchEvent, RunStatus
from tui_bench.engine.results import jsonlines, summary_cache
from tui_bench.engine.results.history import History, recorder_alive

# A series file with no record yet may be a reservation in flight (the run is being added).
_RESERVATION_GRACE_S = 120
_STATUSES = {s.value for s in RunStatus}


@dataclass
class CheckReport:
    problems: list[str] = field(default_factory=list)  # what is wrong (exit 1 when any)
    notes: list[str] = field(default_factory=list)  # worth knowing, not wrong
    repaired: list[str] = field(default_factory=list)  # what --repair did


def check(home: Path | None = None, repair: bool = False) -> CheckReport:
    report = CheckReport()
    history = History(home, repair=False)
    readable, problems = history.plan_repair()
    report.problems.extend(problems)
    records = {r["id"]: r for r in readable}
    summaries = summary_cache.read_summaries(history.journal_path, history.cache_path)
    stored = summaries.records
    series_ids = history._series_ids()
    now = time.time()
    orphans: list[Path] = []
    for run_id in sorted(series_ids - set(records)):
        path = history.series_path(run_id)
        try:
            empty = path.stat().st_size == 0
            old = now - path.stat().st_mtime > _RESERVATION_GRACE_S
        except OSError:
            continue
        if empty and old:
            orphans.append(path)
    if orphans:
        report.problems.append(f"{len(orphans)} empty series file(s) belong to no run")
    for run_id, record in stored.items():
        if record.get("status") == RunStatus.RUNNING and not recorder_alive(record):
            report.problems.append(f"run {run_id} is still 'running' but its supervisor is gone")
        status = record.get("status")
        if status not in _STATUSES:
            report.problems.append(f"run {run_id}: unknown status {str(status)[:30]!r}")
        if not isinstance(record.get("spec"), dict):
            report.problems.append(f"run {run_id}: no spec")
    missing_series = [i for i in records if i not in series_ids]
    if missing_series:
        report.notes.append(
            f"{len(missing_series)} run(s) have no series file (their summary is all there is)"
        )
    report.problems.extend(_check_batches(history.home / "batches", set(records) | series_ids))
    superseded = max(0, summaries.lines - 1 - len(stored))
    if superseded > len(stored):
        report.notes.append(
            f"the journal holds {superseded} superseded line(s) for {len(stored)} run(s): "
            "--repair compacts it"
        )
    if repair and report.problems:
        report.repaired = _repair(history.home, orphans)
    if repair and superseded > len(stored):
        History(history.home).compact()
        report.repaired.append(f"compacted the journal ({superseded} superseded line(s) dropped)")
    return report


def _check_batches(directory: Path, known: set[str]) -> list[str]:
    problems = []
    try:
        paths = sorted(directory.glob("*.jsonl"))
    except OSError:
        return []
    for path in paths:
        lines = damaged = 0
        try:
            raw = path.read_bytes()
        except OSError as exc:
            problems.append(f"batch file {path.name}: unreadable ({exc.strerror or exc})")
            continue
        ids = []
        for event in jsonlines.iter_lines(path):
            if event.get("type") == BatchEvent.RUN and isinstance(event.get("run_id"), str):
                ids.append(event["run_id"])
        lines = raw.count(b"\n")
        parsed = sum(1 for _ in jsonlines.iter_lines(path))
        damaged = lines - parsed
        if damaged > 0:
            problems.append(f"batch file {path.name}: {damaged} damaged line(s)")
        lost = [i for i in ids if i not in known]
        if lost:
            problems.append(
                f"batch file {path.name} names {len(lost)} run(s) neither the history nor a "
                f"series file holds ({lost[0]}{', …' if len(lost) > 1 else ''})"
            )
    return problems


def _repair(home: Path, orphans: list[Path]) -> list[str]:
    done = []
    history = History(home, repair=True)
    history.summaries()  # rebuilds a damaged journal (keeping the original), migrates schema 1
    done.extend(history.warnings)
    settled = history.mark_interrupted()
    if settled:
        done.append(f"wrote {settled} run(s) as interrupted (their supervisor is gone)")
    for path in orphans:
        path.unlink(missing_ok=True)
    if orphans:
        done.append(f"removed {len(orphans)} empty series file(s) that belonged to no run")
    return done
