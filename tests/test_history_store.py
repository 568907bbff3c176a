"""The history store: journal layout, summary cache, schema-1 migration, ``history check``,
``export --jsonl`` / ``import``, settled status and the liveness helper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tinydb import Query, TinyDB

from tui_bench.cli import main
from tui_bench.engine.errors import HistoryError
from tui_bench.engine.machine import procs
from tui_bench.engine.results import check, journal, summary_cache, tinydb_storage, transfer
from tui_bench.engine.results.history import History


def record(n: int, **extra) -> dict:
    return {
        "status": "finished",
        "label": f"run {n}",
        "started_at": f"2026-11-01T10:00:{n:02d}+00:00",
        "spec": {"framework": "torch", "threads": n, "device": "cpu"},
        "metrics": {"step_median_s": 0.01 * n, "test_accuracy": 0.9},
        "env": {"host": "box", "cpu_model": "x"},
        **extra,
    }


def with_series(h: History, n: int, **extra) -> str:
    """A run as the runner leaves it: journal entry plus series file with header and result."""
    run_id = h.reserve_run_id()
    rec = record(n, id=run_id, **extra)
    h.add(rec)
    with open(h.series_path(run_id), "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "record", "record": {**rec, "status": "running"}}) + "\n")
        handle.write(json.dumps({"type": "steps", "epoch": 1, "first_step": 0, "losses": [2.3]}))
        handle.write("\n" + json.dumps({"type": "result", "record": rec}) + "\n")
    old = time.time() - 3600  # not a run being started right now
    os.utime(h.series_path(run_id), (old, old))
    return run_id


def test_a_write_appends_one_line_and_never_rewrites(isolated_home):
    h = History()
    first = h.add(record(1))
    size = h.journal_path.stat().st_size
    inode = h.journal_path.stat().st_ino
    h.update(first, status="failed", reason="boom")
    assert h.journal_path.stat().st_ino == inode  # same file, appended to
    tail = h.journal_path.read_bytes()[size:]
    assert tail.count(b"\n") == 1 and json.loads(tail)["op"] == "patch"
    assert h.get(first).reason == "boom" and h.get(first).env["cpu_model"] == "x"


def test_summaries_hold_what_lists_show_and_the_cache_follows_new_writes(isolated_home):
    h = History()
    ids = [h.add(record(i)) for i in range(1, 4)]
    first = History().summaries()
    assert [r.id for r in first] == ids
    assert first[0].spec == {"framework": "torch", "threads": 1, "device": "cpu"}
    assert first[0].env == {"host": "box"} and "cpu_model" not in first[0].env
    summary_cache._write_cache(
        h.cache_path, {}
    )  # a cache of the wrong shape is ignored, not trusted
    h.update(ids[0], metrics={"step_median_s": 5.0})
    assert History().summaries()[0].metrics["step_median_s"] == 5.0
    # A cache written for another journal (compacted, replaced) is not used.
    state = {"v": summary_cache._CACHE_VERSION, "journal": (0, 0), "end": 0, "lines": 0}
    head = {"damage": journal.Damage(), "deleted": set(), "ids": set(), "running": {}, "groups": {}}
    summary_cache._write_cache(h.cache_path, {**state, **head, "records": {}})
    assert len(History().summaries()) == 3


def test_the_cache_is_written_once_a_reader_replayed_enough(isolated_home, monkeypatch):
    monkeypatch.setattr(summary_cache, "_CACHE_REFRESH_BYTES", 1)
    h = History()
    h.add(record(1))
    assert len(History().summaries()) == 1
    assert h.cache_path.exists()
    h.add(record(2))
    assert [r.label for r in History().summaries()] == ["run 1", "run 2"]


class _Planted:
    """Pickles as a call to os.system: what a planted cache would hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_cache_naming_anything_but_plain_data_is_ignored_never_run(isolated_home, monkeypatch):
    import pickle

    monkeypatch.setattr(summary_cache, "_CACHE_REFRESH_BYTES", 1)
    h = History()
    h.add(record(1))
    assert len(History().summaries()) == 1 and h.cache_path.exists()  # a real cache loads
    marker = isolated_home / "ran"
    h.cache_path.write_bytes(pickle.dumps({"v": 4, "records": _Planted(marker)}))
    assert [r.label for r in History().summaries()] == ["run 1"]  # from the journal
    assert not marker.exists()
    # A sound head (the index a run's start reads) followed by planted summaries: refused too.
    with open(h.cache_path, "rb") as handle:
        head = pickle.load(handle)
    h.cache_path.write_bytes(pickle.dumps(head) + pickle.dumps(_Planted(marker)))
    assert History().mark_interrupted() == 0  # the head alone is plain data
    assert [r.label for r in History().summaries()] == ["run 1"]
    assert not marker.exists()


def test_tinydb_still_opens_and_writes_the_history(isolated_home):
    h = History()
    h.add(record(1, id="a"))
    h.add(record(2, id="b"))
    with h.lock:
        db = TinyDB(h.journal_path, storage=tinydb_storage.JournalStorage)
        assert db.get(Query().id == "b")["label"] == "run 2"
        db.update({"label": "renamed"}, Query().id == "a")
        db.close()
    assert History().get("a").label == "renamed" and History().get("b").label == "run 2"


def test_compaction_keeps_every_run_and_drops_superseded_lines(isolated_home):
    h = History()
    ids = [h.add(record(i)) for i in range(1, 4)]
    for run_id in ids:
        h.update(run_id, status="failed")
    h.delete([ids[1]])
    before = [History().get(i) for i in (ids[0], ids[2])]
    h.compact()
    assert h.journal_path.read_bytes().count(b"\n") == 3  # header + two puts
    assert [History().get(i) for i in (ids[0], ids[2])] == before


def test_a_schema_1_history_json_migrates_and_is_kept(isolated_home):
    legacy = {
        "_default": {
            "1": {"id": "20260101-000000-aaaa", "status": "finished", "spec": {}},
            "2": {"id": 7, "status": "failed", "started_at": "2026-01-02T00:00:00+00:00"},
        }
    }
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "history.json").write_text(json.dumps(legacy))
    h = History()
    records = h.all()
    assert [r.id for r in records] == ["20260101-000000-aaaa", "7"]
    assert records[0].started_text.startswith("2026-01-01T00:00:00")  # from the id's date
    assert not h.warnings  # a clean migration is silent
    assert not (isolated_home / "history.json").exists()
    assert len(list(isolated_home.glob("history.v1-*.json"))) == 1
    assert len(History().all()) == 2


def test_moving_a_schema_1_history_says_so_once_and_leaves_its_cache(isolated_home, capsys):
    """The CLI says what the wait is (stderr), and the journal's summaries are cached from the
    records in hand, not parsed again (issue 28: < 3 s at 10,000 runs)."""
    legacy = {"_default": {str(i): record(i, id=f"run-{i}", group="g") for i in range(1, 4)}}
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "history.json").write_text(json.dumps(legacy))
    assert main(["history", "list"]) == 0
    said = capsys.readouterr().err
    assert said.count("moving the history from") == 1 and "schema 1" in said
    head = summary_cache.read_summaries(
        isolated_home / "history.jsonl", isolated_home / "history.cache"
    )
    assert head.state["end"] == (isolated_home / "history.jsonl").stat().st_size  # from cache
    assert [head.records[f"run-{i}"]["label"] for i in (1, 2, 3)] == ["run 1", "run 2", "run 3"]
    assert sorted(head.records) == ["run-1", "run-2", "run-3"] and head.groups == {
        "g": {"run-1", "run-2", "run-3"}
    }
    assert main(["history", "list"]) == 0
    assert "moving" not in capsys.readouterr().err


def test_a_newer_journal_is_refused_not_rewritten(isolated_home):
    h = History()
    h.add(record(1))
    text = h.journal_path.read_text().replace('"version":2', '"version":99')
    h.journal_path.write_text(text)
    report = check.check()
    assert any("newer tui-bench" in p for p in report.problems)


def test_check_lists_every_problem_repairs_only_when_asked(isolated_home, capsys):
    h = History()
    kept = with_series(h, 1)
    lost = with_series(h, 2)
    stale = with_series(h, 3, status="running", recorder_pid=2**22 + 7, recorder_started=1.0)
    batches = isolated_home / "batches"
    batches.mkdir()
    (batches / "b1.jsonl").write_text(
        json.dumps({"type": "run", "run_id": "gone-forever"}) + "\n\xff not json\n"
    )
    # A journal line damaged into another valid line: run `lost` vanishes from the journal.
    text = h.journal_path.read_text().replace(f'"id":"{lost}"', '"id":"zzz"', 1)
    h.journal_path.write_text(text)
    before = h.journal_path.read_bytes()
    assert main(["history", "check"]) == 1
    out = capsys.readouterr().out
    assert "1 run(s) are in their series files but not in the history" in out
    assert f"run {stale} is still 'running'" in out
    assert "b1.jsonl: 1 damaged line(s)" in out and "gone-forever" in out
    assert h.journal_path.read_bytes() == before  # no repair without --repair
    main(["history", "check", "--repair"])
    out = capsys.readouterr().out
    assert "repaired:" in out
    ids = {r.id: r for r in History().all()}
    assert {kept, lost, stale} <= ids.keys()
    assert ids[stale].status == "interrupted"
    assert len(list(isolated_home.glob("history.damaged-*.jsonl"))) == 1  # the original, kept
    assert "still: batch file b1.jsonl" in out  # what cannot be repaired keeps being listed


def test_check_on_a_sound_history_exits_0(isolated_home, capsys):
    with_series(History(), 1)
    assert main(["history", "check"]) == 0
    assert "history is sound" in capsys.readouterr().out


def test_jsonl_export_import_round_trip_is_idempotent(isolated_home, tmp_path, monkeypatch):
    h = History()
    ids = [with_series(h, i) for i in (1, 2)]
    out = tmp_path / "runs.jsonl"
    assert transfer.export_jsonl(h, out) == 2
    header = json.loads(out.read_text().splitlines()[0])
    assert header["format"] == "tui-bench-runs" and header["version"] == journal.VERSION
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("TUI_BENCH_HOME", str(other))
    target = History()
    target.add(record(9, id="local"))
    assert transfer.import_jsonl(target, out) == (2, 0)
    assert transfer.import_jsonl(History(), out) == (0, 2)  # twice: nothing new
    again = History()
    assert [r.id for r in again.all()] == [*ids, "local"]
    assert again.get(ids[0]) == h.get(ids[0])
    assert again.step_events(ids[1]) == h.step_events(ids[1])


def test_jsonl_export_copies_series_lines_and_leaves_out_damaged_ones(isolated_home, tmp_path):
    """The series lines are copied as stored, not re-encoded: a damaged one (binary, torn, not
    an object, a byte-order mark) must still never reach the file, which must stay JSON."""
    h = History()
    run_id = with_series(h, 1)
    path = h.series_path(run_id)
    good = path.read_bytes()
    event = {"type": "steps", "epoch": 2, "first_step": 1, "losses": [1.5], "note": "é"}
    path.write_bytes(
        b"\xff\xfe binary\n[1, 2]\n"
        + good
        + b"\xef\xbb\xbf"
        + json.dumps(event, ensure_ascii=False).encode()
        + b"\r\n"
        + b'  {"type": "steps", "epoch": 3}  \n{"type": "torn'
    )
    out = tmp_path / "runs.jsonl"
    assert transfer.export_jsonl(h, out) == 1
    line = json.loads(out.read_text(encoding="utf-8").splitlines()[1])
    assert line["series"] == [
        *(json.loads(raw) for raw in good.splitlines()),
        event,
        {"type": "steps", "epoch": 3},
    ]


def test_import_migrates_schema_1_files_and_refuses_bad_ones(isolated_home, tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text(
        json.dumps({"format": "tui-bench-runs", "version": 1})
        + "\n"
        + json.dumps({"run": {"id": "20250101-120000-beef", "status": "finished"}})
        + "\n"
    )
    assert transfer.import_jsonl(History(), old) == (1, 0)
    assert History().get("20250101-120000-beef").started_text.startswith("2025-01-01T12:00")
    for body, message in [
        ('{"format": "tui-bench-runs", "version": 3}\n', "newer tui-bench"),
        ("not json\n", "not a tui-bench runs file"),
        ('{"format": "tui-bench-runs", "version": 2}\n[1]\n', "line 2 holds no run record"),
        (
            '{"format": "tui-bench-runs", "version": 2}\n{"run": {"id": "../../etc/x"}}\n',
            "is not a run id",
        ),
    ]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(body)
        with pytest.raises(HistoryError, match=message):
            transfer.import_jsonl(History(), bad)
    assert len(History().all()) == 1  # a refused file adds nothing


def test_every_reader_sees_a_dead_supervisor_s_run_as_interrupted(isolated_home, capsys):
    h = History()
    run_id = with_series(h, 1, status="running", recorder_pid=2**22 + 9, recorder_started=1.0)
    assert History().summaries()[0].status == "interrupted"
    assert History().get(run_id).status == "interrupted"
    assert History().all()[0].reason.startswith("the run's supervisor stopped")
    assert main(["history", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "interrupted"
    assert main(["history", "show", run_id[:12], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"


def test_a_full_disk_fails_the_write_in_one_line_and_leaves_no_debris(isolated_home, monkeypatch):
    h = History()
    run_id = h.add(record(1))
    real_write = os.write

    def half_then_full(fd, data):
        real_write(fd, data[:10])  # part of the line reached the disk before it filled
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch, pytest.raises(HistoryError, match="No space left"):
        patch.setattr(journal.os, "write", half_then_full)
        h.update(run_id, status="failed")
    assert h.journal_path.read_bytes().endswith(b"\n")  # cut back to the last whole line
    assert History().get(run_id).status == "finished" and not History().warnings
    assert not list(isolated_home.glob(".*.tmp"))


def test_a_full_disk_during_a_repair_keeps_the_damaged_file(isolated_home, monkeypatch):
    h = History()
    with_series(h, 1)
    h.journal_path.write_bytes(b"\x00\xff binary junk\n")
    real_fsync = os.fsync

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal.os, "fsync", full)
    with pytest.raises(HistoryError, match="No space left"):
        History().summaries()
    monkeypatch.setattr(journal.os, "fsync", real_fsync)
    assert h.journal_path.read_bytes() == b"\x00\xff binary junk\n"  # never worse
    assert not list(isolated_home.glob(".*.tmp"))
    assert len(History().summaries()) == 1  # and the next start repairs it


def test_liveness_needs_the_start_time_and_never_signals_a_bare_pid():
    me = procs.identity()
    assert procs.alive(me["pid"], me["started"])
    assert not procs.alive(me["pid"], None)  # a bare pid proves nothing
    assert not procs.alive(me["pid"], me["started"] - 10)  # same pid, another process
    assert not procs.alive("junk", me["started"]) and not procs.alive(None, None)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        who = procs.identity(sleeper.pid)
        assert not procs.send_signal(sleeper.pid, None, signal.SIGTERM)
        assert not procs.send_signal(sleeper.pid, who["started"] + 5, signal.SIGTERM)
        assert sleeper.poll() is None
        assert procs.send_signal(sleeper.pid, who["started"], signal.SIGTERM)
        assert sleeper.wait(10) == -signal.SIGTERM
    finally:
        sleeper.kill()


def test_temp_dirs_of_dead_owners_are_cleaned_at_the_next_start(tmp_path):
    mine = Path(procs.owned_temp_dir("events"))
    try:
        dead = tmp_path / "tui-bench-events-4194000-1000-abc"
        dead.mkdir()
        os.mkfifo(dead / "rank0")
        foreign = tmp_path / "tui-bench-events-xyz"  # no owner named: not ours to judge
        foreign.mkdir()
        live = tmp_path / f"{mine.name}"
        live.mkdir()
        assert procs.clean_stale_temp(str(tmp_path)) == 1
        assert not dead.exists() and foreign.exists() and live.exists()
    finally:
        mine.rmdir()


def test_check_repair_compacts_a_journal_of_mostly_superseded_lines(isolated_home, capsys):
    h = History()
    run_id = with_series(h, 1)
    for n in range(5):
        h.update(run_id, label=f"relabelled {n}")
    assert main(["history", "check"]) == 0  # not a problem, a note
    assert "5 superseded line(s)" in capsys.readouterr().out
    main(["history", "check", "--repair"])
    assert "compacted the journal" in capsys.readouterr().out
    assert h.journal_path.read_bytes().count(b"\n") == 2
    assert History().get(run_id).label == "relabelled 4"


def test_a_run_s_start_reads_the_index_not_every_summary(isolated_home, monkeypatch):
    """What starting a run reads (settling dead runs, a new batch's group, one run by id) comes
    from the cache's small head and the lines since it: the summaries of every run are never
    loaded, so a run costs the same at 10,000 runs as at 10 (issue 28)."""
    monkeypatch.setattr(summary_cache, "_CACHE_REFRESH_BYTES", 1)
    h = History()
    done = [h.add(record(i, group="sweep-a" if i < 3 else None)) for i in range(1, 5)]
    dead = h.add(record(5, status="running", recorder_pid=2**22 + 7, recorder_started=1.0))
    me = procs.identity()
    live = h.add(
        record(6, status="running", recorder_pid=me["pid"], recorder_started=me["started"])
    )
    assert len(History().summaries()) == 6  # writes the cache
    monkeypatch.setattr(summary_cache, "_CACHE_REFRESH_BYTES", 10**9)
    full_reads = []
    real = summary_cache.read_summaries

    def counting(*args, **kwargs):
        found = real(*args, **kwargs)
        full_reads.extend([found] if found.full else [])
        return found

    monkeypatch.setattr(summary_cache, "read_summaries", counting)
    fresh = History()
    assert fresh.mark_interrupted() == 1  # the dead recorder's run, from the head's index
    assert fresh.group_summaries("batch-new") == []  # a new batch: no group yet
    assert fresh.get(done[3]).label == "run 4"  # a whole id: searched, not resolved
    assert full_reads == []
    assert [r.label for r in fresh.group_summaries("sweep-a")] == ["run 1", "run 2"]
    assert History().get(dead).status == "interrupted"
    assert History().get(live).status == "running"
    h.update(live, status="finished")
    assert History()._read_summaries(full=False).running == {}


def test_one_run_s_lines_are_found_by_search(isolated_home):
    h = History()
    a = h.add(record(1, id="20261101-100001-aaaa"))
    b = h.add(record(2, id="20261101-100001-aaaab"))  # a's id is a prefix of b's
    h.update(a, reason="patched")
    with open(h.journal_path, "ab") as handle:
        handle.write(journal.put_line(record(3, id=a))[:-9])  # a torn write of a's record
    found = journal.lines_of(h.journal_path, [a, b, "none"])
    assert sorted(found) == [a, b] and len(found[a]) == 2 and len(found[b]) == 1
    assert journal.final_record(a, found[a])["reason"] == "patched"
    assert History(repair=False).get(a).label == "run 1"
    assert journal.lines_of(isolated_home / "missing.jsonl", [a]) == {}
    (isolated_home / "empty.jsonl").write_bytes(b"")
    assert journal.lines_of(isolated_home / "empty.jsonl", [a]) == {}
