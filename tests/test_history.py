from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from tui_bench.engine.machine import procs
from tui_bench.engine.results import csv_export
from tui_bench.engine.results import history as history_module
from tui_bench.engine.results.history import History, HistoryError


def record(n: int, **extra) -> dict:
    return {
        "status": "finished",
        "label": f"run {n}",
        "spec": {"framework": "torch", "threads": n},
        "metrics": {"step_median_s": 0.01 * n, "test_accuracy": 0.9},
        **extra,
    }


def test_round_trip_prefix_lookup_update_delete(isolated_home):
    h = History()
    first = h.add(record(1))
    second = h.add(record(2))
    assert [r.id for r in h.all()] == [first, second]
    assert h.get(first).label == "run 1"
    h.update(first, status="failed", reason="boom")
    assert h.get(first).reason == "boom"
    h.series_path(first).write_text('{"type":"record"}\n')
    assert h.delete([first]) == 1
    assert not h.series_path(first).exists()
    with pytest.raises(HistoryError, match="no run with id"):
        h.get(first)


def test_ambiguous_prefix_is_an_error():
    h = History()
    h.add(record(1, id="20260101-000000-aaaa"))
    h.add(record(2, id="20260101-000000-aaab"))
    with pytest.raises(HistoryError, match="matches 2 runs"):
        h.get("20260101-000000-aa")


def _writer(home: str, offset: int) -> None:
    os.environ["TUI_BENCH_HOME"] = home
    h = History()
    for i in range(15):
        h.add(record(offset + i))


def test_concurrent_writers_lose_nothing(isolated_home):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(isolated_home), k * 100)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    threads = sorted(r.spec["threads"] for r in History().all())
    assert threads == sorted(k * 100 + i for k in range(3) for i in range(15))


def test_a_crash_mid_write_leaves_a_readable_history(isolated_home):
    """A write is one appended line: a crash tears at most that line. With no writer holding
    the lock, a reader knows it is torn (not in flight), says so and repairs."""
    h = History()
    kept = h.add(record(1))
    with open(h.journal_path, "ab") as handle:
        handle.write(b'{"id":"torn","op":"put","record":{"sta')  # the process died here
    again = History()
    assert [r.id for r in again.all()] == [kept]
    assert "cut short" in again.warnings[0] and len(again.warnings) == 1
    after = History().add(record(2))
    assert [r.id for r in History().all()] == [kept, after] and not History().warnings


def test_a_partial_line_while_a_writer_holds_the_lock_is_a_write_in_flight(isolated_home):
    h = History()
    kept = h.add(record(1))
    with open(h.journal_path, "ab") as handle:
        handle.write(b'{"id":"next","op":"put","rec')
    writer = multiprocessing.get_context("spawn").Process(target=_hold_lock, args=(str(h.home),))
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while not (h.home / "held").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        reader = History()
        assert [r.id for r in reader.summaries()] == [kept] and not reader.warnings
    finally:
        (h.home / "release").touch()
        writer.join(30)


def _hold_lock(home: str) -> None:
    h = History(Path(home))
    with h.lock:
        (Path(home) / "held").touch()
        while not (Path(home) / "release").exists():
            time.sleep(0.05)


def test_a_failed_write_raises_one_line_and_leaves_no_half_line(monkeypatch):
    h = History()
    h.add(record(1))
    before = h.journal_path.read_bytes()

    def full(fd, data):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch, pytest.raises(HistoryError, match="No space left"):
        patch.setattr(history_module.journal.os, "write", full)
        h.add(record(2))
    assert h.journal_path.read_bytes() == before
    assert len(History().all()) == 1


def test_a_corrupt_journal_is_kept_aside_and_rebuilt_from_series(isolated_home):
    h = History()
    finished = h.add(record(1))
    h.series_path(finished).write_text(
        json.dumps({"type": "record", "record": {**record(1), "id": finished, "status": "running"}})
        + "\n"
        + json.dumps({"type": "result", "record": {**record(1), "id": finished}})
        + "\n"
    )
    running = h.add(record(2, status="running"))
    h.series_path(running).write_text(
        json.dumps({"type": "record", "record": {**record(2), "id": running, "status": "running"}})
        + '\n{"type": "epoch_fin'  # torn last line: the app died mid-write
    )
    h.journal_path.write_text('{"schema": "tui-bench-history", "vers\n{"id": "x", "sta\n')
    again = History()
    records = {r.id: r for r in again.all()}
    assert records[finished].status == "finished"
    assert records[running].status == "interrupted"
    assert len(again.warnings) == 1 and "\n" not in again.warnings[0]
    assert "rebuilt 2 run(s)" in again.warnings[0]
    aside = list(isolated_home.glob("history.damaged-*.jsonl"))
    assert len(aside) == 1 and aside[0].read_text().startswith('{"schema": "tui-bench-history", "v')


def test_runs_left_running_by_a_dead_app_become_interrupted():
    h = History()
    dead = h.add(record(1, status="running", recorder_pid=2**22 + 12345, recorder_started=1.0))
    parent = procs.identity(os.getppid())
    alive = h.add(
        record(2, status="running", recorder_pid=parent["pid"], recorder_started=parent["started"])
    )
    # No start time: the pid alone proves nothing (it may be reused), so the run is settled.
    bare = h.add(record(3, status="running", recorder_pid=parent["pid"]))
    assert h.get(dead).status == "interrupted"  # every reader sees it settled already
    assert h.mark_interrupted() == 2
    assert h.get(dead).status == "interrupted" and h.get(bare).status == "interrupted"
    assert h.get(alive).status == "running"


def test_csv_export_loads_in_pandas_one_row_per_run(tmp_path):
    h = History()
    h.add(record(1))
    h.add(record(2, reason="a, comma\nand a newline"))
    out = tmp_path / "runs.csv"
    assert csv_export.export_csv(h, out) == 2
    frame = pd.read_csv(out)
    assert len(frame) == 2
    assert list(frame.columns[:5]) == ["id", "started_at", "finished_at", "status", "reason"]
    assert frame["spec.threads"].tolist() == [1, 2]
    assert frame["metrics.step_median_s"].tolist() == pytest.approx([0.01, 0.02])
    assert frame["reason"].iloc[1] == "a, comma\nand a newline"


def test_a_finished_run_whose_last_history_write_was_lost_is_recovered_from_its_series():
    """The supervisor wrote the run's result to its series, then died before the history
    write: the next look takes the result from the series instead of calling it interrupted."""
    h = History()
    run_id = h.reserve_run_id()
    started = record(1, id=run_id, status="running", recorder_pid=2**22 + 12345)
    h.add(started)
    finished = {**started, "status": "finished", "recorder_pid": None, "finished_at": "later"}
    with open(h.series_path(run_id), "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "record", "record": started}) + "\n")
        handle.write(json.dumps({"type": "result", "record": finished}) + "\n")
    assert h.mark_interrupted() == 0
    assert h.get(run_id).status == "finished" and h.get(run_id).ended_text == "later"


def test_a_run_without_its_result_keeps_its_series_and_names_the_dead_supervisor():
    h = History()
    run_id = h.reserve_run_id()
    h.add(record(1, id=run_id, status="running", recorder_pid=2**22 + 12345))
    steps = {"type": "steps", "epoch": 1, "first_step": 0, "losses": [2.3, 2.2]}
    h.series_path(run_id).write_text(json.dumps(steps) + "\n")
    assert h.mark_interrupted() == 1
    settled = h.get(run_id)
    assert settled.status == "interrupted" and f"pid {2**22 + 12345}" in (settled.reason or "")
    assert h.read_series(run_id) == [steps]
