"""Damage to every file the history store reads: the journal, the summary cache, series files and
batch files. Explicit cases (truncated, empty, wrong shape, binary, huge) and a hypothesis fuzz
of generated damage. Every case ends recovered, with never fewer runs than the files hold, or in
one line (a HistoryError); never a traceback, a hang or a lost run.

Replay a fuzz failure: hypothesis prints the falsifying example; the seed is fixed
(``derandomize``), so ``pytest tests/test_history_damage.py -k fuzz`` repeats it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui_bench.engine.errors import HistoryError
from tui_bench.engine.results import check, summary_cache
from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run

RUNS = 4


def build(home: Path) -> list[str]:
    """RUNS finished runs with series files, one batch file naming them, an hour old."""
    h = History(home)
    ids = []
    for n in range(RUNS):
        run_id = f"20261101-10000{n}-0000000{n}"
        rec = {
            "id": run_id,
            "status": "finished",
            "started_at": f"2026-11-01T10:00:0{n}+00:00",
            "label": f"run {n}",
            "spec": {"framework": "torch", "threads": n + 1},
            "metrics": {"step_median_s": 0.01 * (n + 1)},
        }
        h.add({**rec, "status": "running", "recorder_pid": None})
        h.update(run_id, status="finished")
        with open(h.series_path(run_id), "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"type": "record", "record": {**rec, "status": "running"}}))
            handle.write("\n" + json.dumps({"type": "steps", "epoch": 1, "losses": [2.0, 1.9]}))
            handle.write("\n" + json.dumps({"type": "result", "record": rec}) + "\n")
        ids.append(run_id)
    refresh, summary_cache._CACHE_REFRESH_BYTES = summary_cache._CACHE_REFRESH_BYTES, 0
    try:
        History(home).summaries()  # the summary cache exists too
    finally:
        summary_cache._CACHE_REFRESH_BYTES = refresh
    assert (home / "history.cache").exists()
    (home / "batches").mkdir()
    with open(home / "batches" / "b1.jsonl", "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "batch", "label": "b"}) + "\n")
        for run_id in ids:
            handle.write(json.dumps({"type": "run", "run_id": run_id}) + "\n")
    old = time.time() - 3600
    for path in home.rglob("*"):
        os.utime(path, (old, old))
    return ids


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, list[str]]:
    home = tmp_path_factory.mktemp("template") / "home"
    home.mkdir()
    return home, build(home)


def copy_of(template: tuple[Path, list[str]], into: Path) -> Path:
    home = into / "home"
    shutil.copytree(template[0], home, copy_function=shutil.copy2)
    return home


def targets(home: Path) -> dict[str, Path]:
    return {
        "journal": home / "history.jsonl",
        "cache": home / "history.cache",
        "series": sorted((home / "runs").glob("*.jsonl"))[1],
        "batch": home / "batches" / "b1.jsonl",
    }


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "wrong shape":
        path.write_text('[1, 2, 3]\n{"id": 5, "op": "explode"}\n"text"\n')
    elif how == "binary":
        path.write_bytes(bytes(range(256)) * 40)
    elif how == "huge":
        path.write_bytes(data + b"x" * (8 * 2**20) + b"\n" + data)  # an 8 MB line in the middle
    elif how == "bad line in the middle":
        lines = data.split(b"\n")
        lines.insert(len(lines) // 2, b'{"id": "x", "op"\xff')
        path.write_bytes(b"\n".join(lines))
    elif how == "missing":
        path.unlink()


def outcome(home: Path) -> tuple[list[str] | None, str | None]:
    """The runs every reader sees, or the one line it refused with."""
    try:
        history = History(home)
        summaries = [r.id for r in history.summaries()]
        full = [r.id for r in History(home).all()]
        assert summaries == full, "the fast and the full reader disagree"
        for warning in history.warnings:
            assert "\n" not in warning
        for run_id in summaries:
            History(home).read_series(run_id)
            History(home).get(run_id)
        check.check(home)
        return summaries, None
    except HistoryError as exc:
        assert "\n" not in str(exc)
        return None, str(exc)


DAMAGE = [
    "truncated",
    "empty",
    "wrong shape",
    "binary",
    "huge",
    "bad line in the middle",
    "missing",
]


@pytest.mark.parametrize("target", ["journal", "cache", "series", "batch"])
@pytest.mark.parametrize("how", DAMAGE)
def test_damage_to_one_file_loses_no_run(template, tmp_path, target, how):
    home = copy_of(template, tmp_path)
    damage(targets(home)[target], how)
    t0 = time.monotonic()
    runs, refused = outcome(home)
    assert time.monotonic() - t0 < 60  # no hang, even on the huge file
    assert refused is None, refused
    assert set(template[1]) <= set(runs)  # every run is still there
    if target == "journal" and how != "missing":
        history = History(home)
        history.summaries()
        assert not history.warnings  # the repair stuck: the next reader finds nothing wrong
        assert list(home.glob("history.damaged-*.jsonl"))  # and the damaged original is kept


def reading_methods(history: History, run_id: str, group: str) -> dict[str, list[object]]:
    """What every public reading method of the History API hands out."""
    return {
        "summaries": list(history.summaries()),
        "group_summaries": list(history.group_summaries(group)),
        "all": list(history.all()),
        "records": list(history.records()),
        "records(ids)": list(history.records([run_id])),
        "get": [history.get(run_id)],
        "get(prefix)": [history.get(run_id[:-1])],
    }


def test_every_reading_method_hands_out_runs_not_dicts(template, tmp_path):
    """Past the store a run is a ``Run`` (record.py), never the stored dict: a reader that
    indexes ``r["status"]`` again fails here, not in a screen."""
    home = copy_of(template, tmp_path)
    h = History(home)
    h.add({"id": "20261102-000000-0000000g", "status": "finished", "group": "g1"})
    found = reading_methods(History(home), template[1][0], "g1")
    for method, values in found.items():
        assert values, method
        assert all(isinstance(v, Run) and not isinstance(v, dict) for v in values), method
    assert [r.id for r in found["group_summaries"]] == ["20261102-000000-0000000g"]


# Fields a hand-edited or old history may hold with the wrong type: each a valid JSON line.
DAMAGED_FIELDS: list[dict[str, object]] = [
    {"status": 5, "spec": [1, 2], "metrics": "fast", "stability": "stable"},
    {"started_at": 7, "finished_at": {"when": "later"}, "group": ["g"], "repeat": "1"},
    {"env": None, "worker": "torch", "load_at_start": 3, "machine_check": [1]},
    {"metrics": {"step_median_s": "NaN", "steady_step_times": "none"}, "reason": 404},
    {"stability": {"verdict": 1, "reasons": ["a", {"value": "x"}]}, "label": None},
]


@pytest.mark.parametrize("fields", DAMAGED_FIELDS)
def test_a_record_with_damaged_fields_still_reads_as_a_run(tmp_path, fields):
    """A run whose fields are damaged reads, through every reading method, as a Run with those
    fields not recorded; nothing raises, and the other runs are untouched."""
    home = tmp_path / "home"
    h = History(home)
    good = h.add({"id": "20261103-000000-00000001", "status": "finished", "group": "g1"})
    bad = h.add({"id": "20261103-000001-00000002", "group": "g1", **fields})
    found = reading_methods(History(home), bad, "g1")
    for method, values in found.items():
        assert all(isinstance(v, Run) for v in values), method
    runs = {r.id: r for r in History(home).all()}
    assert set(runs) == {good, bad} and runs[good].finished
    run = runs[bad]
    read = [  # every accessor answers
        *(run.status, run.spec, run.metrics, run.stability, run.env, run.worker, run.load),
        *(run.machine_check, run.label, run.host, run.device_model, run.started, run.ended),
        *(run.verdict, run.reasons, run.state, run.step_times, run.metric("step_median_s")),
        *(run.group, run.repeat, run.reason, run.log_tail, run.limits, run.started_text),
    ]
    assert len(read) == 24
    assert run.metric("step_median_s") is None


def test_a_damaged_series_loses_its_own_events_only(template, tmp_path):
    home = copy_of(template, tmp_path)
    damage(targets(home)["series"], "bad line in the middle")
    run_id = targets(home)["series"].name[: -len(".jsonl")]
    events = History(home).read_series(run_id)
    assert [e["type"] for e in events] == ["record", "steps", "result"]
    assert History(home).step_events(run_id)[0]["losses"] == [2.0, 1.9]


def test_a_damaged_batch_file_is_reported_not_fatal(template, tmp_path):
    home = copy_of(template, tmp_path)
    damage(targets(home)["batch"], "binary")
    report = check.check(home)
    assert any("b1.jsonl" in p and "damaged" in p for p in report.problems)


# -- generated damage ---------------------------------------------------------------------------
FUZZ_CASES = 400

operations = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("insert line"), st.floats(0, 1), st.binary(max_size=80)),
    st.tuples(
        st.just("insert json"),
        st.floats(0, 1),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["id", "op", "record", "fields", "x"]), inner, max_size=3
                )
            ),
            max_leaves=6,
        ),
    ),
    st.tuples(st.just("drop line"), st.floats(0, 1)),
    st.tuples(st.just("flip byte"), st.floats(0, 1), st.integers(1, 255)),
)


def apply(path: Path, op: tuple) -> None:
    data = path.read_bytes() if path.exists() else b""
    at = int(op[1] * len(data))
    kind = op[0]
    if kind == "truncate":
        data = data[:at]
    elif kind == "overwrite":
        data = data[:at] + op[2] + data[at + len(op[2]) :]
    elif kind == "insert line":
        data = data[:at] + b"\n" + op[2].replace(b"\n", b"") + b"\n" + data[at:]
    elif kind == "insert json":
        line = json.dumps(op[2]).encode()
        cut = data.rfind(b"\n", 0, at) + 1
        data = data[:cut] + line + b"\n" + data[cut:]
    elif kind == "drop line":
        lines = data.split(b"\n")
        if lines:
            del lines[min(int(op[1] * len(lines)), len(lines) - 1)]
        data = b"\n".join(lines)
    elif kind == "flip byte" and data:
        at = min(at, len(data) - 1)
        data = data[:at] + bytes([data[at] ^ op[2]]) + data[at + 1 :]
    path.write_bytes(data)


@settings(
    max_examples=FUZZ_CASES,
    derandomize=True,  # a fixed seed: the same cases every run, so a failure replays
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(
    target=st.sampled_from(["journal", "journal", "journal", "cache", "series", "batch"]),
    ops=st.lists(operations, min_size=1, max_size=3),
)
def test_fuzz_generated_damage_to_one_file(template, target, ops):
    with tempfile.TemporaryDirectory(prefix="tui-bench-fuzz-") as tmp:
        home = copy_of(template, Path(tmp))
        path = targets(home)[target]
        for op in ops:
            apply(path, op)
        t0 = time.monotonic()
        runs, refused = outcome(home)
        assert time.monotonic() - t0 < 30, "a hang"
        if refused is None:
            # Damage can make a line valid under another id (an extra run), never lose one.
            assert set(template[1]) <= set(runs), (runs, template[1])
        else:
            assert target == "journal" and "newer tui-bench" in refused
