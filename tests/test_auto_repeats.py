"""`--repeats auto`: a preset's configurations, or one spec's runs, repeat until the median's
95 % CI is within the target, or the maximum; why each stopped is kept (a sweep's manifest, a
batch's end). A fake executor stands in for workers where the stopping rule is what is tested
(real sweeps are in test_sweep.py); two tiny real torch runs check the CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_cli import cli

from tui_bench.cli import build_parser, following
from tui_bench.engine.errors import HistoryError
from tui_bench.engine.kinds import BatchEvent
from tui_bench.engine.machine import peaks
from tui_bench.engine.results.history import History, read_jsonl
from tui_bench.engine.runs import batch, presets, runner, supervisor
from tui_bench.engine.runs import sweep as sweep_module
from tui_bench.engine.runs.batch import BatchRequest
from tui_bench.engine.spec import RunSpec

PRESET = """
name = "auto"
description = "two configurations"
study = "none: a test"
model = "mlp"
dataset = "synthetic-mnist"
threads = [1, 2]
"""

# threads=1 repeats agree to 0.5 %; threads=2 repeats scatter by 10 %
MEDIANS = {
    "threads=1": [0.0400, 0.0401, 0.0399, 0.0402, 0.0400, 0.0398, 0.0401, 0.0400],
    "threads=2": [0.030, 0.033, 0.029, 0.032, 0.030, 0.034, 0.028, 0.031],
}


def fake_executor(spec, history, group=None, repeat=None, extra=None, **_):
    key = extra["config"]
    record = {"status": "finished", "group": group, "repeat": repeat, **extra}
    record["metrics"] = {"step_median_s": MEDIANS[key][repeat]}
    run_id = history.add(record)
    return runner.RunResult(run_id=run_id, spec=spec, status="finished")


def test_auto_repeats_stop_each_configuration_when_its_median_is_known(tmp_path: Path):
    path = tmp_path / "auto.toml"
    path.write_text(PRESET)
    history = History()
    sweep = sweep_module.create(
        presets.load(path), probe=None, auto_repeats={"max": 8, "target_ci": 0.02}
    )
    assert sweep.repeats == 8
    sweep_module.run(sweep, history, executor=fake_executor)
    ran = {}
    for r in sweep_module.records(sweep, history):
        ran[r.config] = ran.get(r.config, 0) + 1
    assert ran == {"threads=1": 6, "threads=2": 8}  # 6: the fewest for a 95 % CI of a median
    found = sweep_module.find(sweep.id)  # the reasons survive in the manifest
    assert "after 6 repeats (target ±2 %)" in found.stopped["threads=1"]
    assert found.stopped["threads=2"].startswith("stopped at the maximum of 8 repeats")
    assert sweep_module.pending(found, history) == []


# -- one spec's runs (no preset): planned by engine.batch as a one-configuration sweep --------
SPEC = RunSpec(model="mlp", threads=1)
TIGHT = [0.0400, 0.0401, 0.0399, 0.0402, 0.0400, 0.0398, 0.0401, 0.0400]
WIDE = [0.030, 0.033, 0.029, 0.032, 0.030, 0.034, 0.028, 0.031]


def run_auto_batch(monkeypatch, medians, auto) -> tuple[str, list[dict]]:
    """A batch of SPEC with ``auto`` repeats, run in-process; each run's step median is the next
    of ``medians``. Returns the batch id and its batch events."""
    ran = []

    def fake_execute(spec, history, group=None, repeat=None, extra=None, on_start=None, **_):
        record = {"status": "finished", "group": group, "repeat": repeat, "spec": spec.to_dict()}
        record.update(extra or {}, metrics={"step_median_s": medians[len(ran)]})
        ran.append(repeat)
        return runner.RunResult(run_id=history.add(record), spec=spec, status="finished")

    monkeypatch.setattr(runner, "execute", fake_execute)
    request = BatchRequest(spec=SPEC.to_dict(), auto_repeats=auto)
    batch_id = batch.create(request)
    events: list[dict] = []
    batch.run_batch(batch_id, request, History(), events.append)
    return batch_id, events


def test_one_spec_repeats_until_its_median_is_known_in_one_group(monkeypatch):
    batch_id, events = run_auto_batch(monkeypatch, TIGHT, {"max": 8, "target_ci": 0.02})
    plan, done = events[0], events[-1]
    assert plan["type"] == BatchEvent.PLAN and plan["total"] == 8  # at most
    assert plan["auto_repeats"] == {"max": 8, "target_ci": 0.02}
    runs = History().all()
    assert len(runs) == 6  # the fewest repeats that give a 95 % CI of a median
    assert {r.group for r in runs} == {batch_id}  # `compare GROUP` finds them
    assert sorted(r.repeat for r in runs) == list(range(6))
    assert sorted(r.spec["seed"] for r in runs) == list(range(6))  # a seed per repeat
    assert done["type"] == BatchEvent.BATCH_DONE and done["error"] is None
    (why,) = done["stopped"].values()
    assert "after 6 repeats (target ±2 %)" in why
    assert not sweep_module.sweeps_dir().exists()  # a batch's sweep writes no manifest
    assert [r.id for r in sweep_module.collect([batch_id], History())[0]] == [
        r.id for r in sorted(runs, key=lambda r: (r.started_text, r.id))
    ]


def test_one_spec_stops_at_the_maximum_and_says_so(monkeypatch):
    _batch_id, events = run_auto_batch(monkeypatch, WIDE, {"max": 7, "target_ci": 0.02})
    assert len(History().all()) == 7
    (why,) = events[-1]["stopped"].values()
    assert why.startswith("stopped at the maximum of 7 repeats")


def test_the_stopping_rule_decides_how_many_runs(monkeypatch):
    """Not a count of its own: the batch asks auto_repeats.enough_repeats after every run."""
    asked = []

    def stop_at_two(medians, target, max_repeats):
        asked.append((len(medians), target, max_repeats))
        return len(medians) >= 2, "enough: told so"

    monkeypatch.setattr(sweep_module.auto_repeats, "enough_repeats", stop_at_two)
    _batch_id, events = run_auto_batch(monkeypatch, WIDE, {"max": 9, "target_ci": 0.05})
    assert asked == [(1, 0.05, 9), (2, 0.05, 9)]
    assert len(History().all()) == 2
    assert events[-1]["stopped"] == {SPEC.label(): "enough: told so"}


@pytest.mark.parametrize(
    ("auto", "message"),
    [
        ({"max": 1}, "auto repeats: max must be a whole number from 2 to 1000, got 1"),
        ({"max": 1001}, "auto repeats: max must be a whole number from 2 to 1000, got 1001"),
        ({"max": "5"}, "auto repeats: max must be a whole number from 2 to 1000, got '5'"),
        ({"max": True}, "auto repeats: max must be a whole number from 2 to 1000, got True"),
        ({}, "auto repeats: max must be a whole number from 2 to 1000, got None"),
        (
            {"max": 5, "target_ci": 0},
            "auto repeats: target_ci must be a fraction between 0 and 1, got 0",
        ),
        (
            {"max": 5, "target_ci": float("nan")},
            "auto repeats: target_ci must be a fraction between 0 and 1, got nan",
        ),
        (
            {"max": 5, "target_ci": "2%"},
            "auto repeats: target_ci must be a fraction between 0 and 1, got '2%'",
        ),
        ([5], "auto repeats: expected a table of max and target_ci, got [5]"),
        ("x" * 100, "auto repeats: expected a table of max and target_ci, got 'xxxxxxxxxxxx"),
    ],
)
def test_a_bad_request_fails_its_batch_in_one_line(monkeypatch, auto, message):
    """A batch request is a file the supervisor reads: bad settings end the batch with why."""
    _batch_id, events = run_auto_batch(monkeypatch, WIDE, auto)
    (done,) = events
    assert done["type"] == BatchEvent.BATCH_DONE and done["statuses"] == []
    assert done["error"].startswith(message) and "\n" not in done["error"]
    assert History().all() == []


def test_auto_repeats_of_a_planned_sweep_are_refused_in_its_batch(monkeypatch):
    monkeypatch.setattr(runner, "execute", None)  # nothing may run
    events: list[dict] = []
    request = BatchRequest(sweep_id="sweep-x", auto_repeats={"max": 3})
    batch.run_batch("batch-x", request, History(), events.append)
    assert events == [
        {
            "type": BatchEvent.BATCH_DONE,
            "statuses": [],
            "error": "auto repeats are part of a sweep's plan, not of its batch",
        }
    ]


def test_a_damaged_manifest_setting_is_one_line(tmp_path: Path):
    path = tmp_path / "auto.toml"
    path.write_text(PRESET)
    sweep = sweep_module.create(
        presets.load(path), probe=None, auto_repeats={"max": 8, "target_ci": 0.02}
    )
    data = json.loads(sweep.manifest_path.read_text())
    data["auto_repeats"] = {"max": -3}
    sweep.manifest_path.write_text(json.dumps(data))
    with pytest.raises(HistoryError, match=r"unreadable: auto repeats: max must be .* got -3$"):
        sweep_module.Sweep.load(sweep.manifest_path)


@pytest.mark.parametrize(
    "request_field",
    [{"spec": RunSpec().to_dict(), "auto_repeats": {"max": "many"}}, ["not", "a", "table"], None],
)
def test_the_supervisor_ends_a_batch_with_a_bad_request_in_one_line(request_field):
    """Through the real supervisor process: its request line is read, refused, and the batch
    ends with the reason (never a traceback in its log, never a wait for a start)."""
    request = BatchRequest(spec=RunSpec().to_dict())
    batch_id = batch.create(request)
    path = batch.events_path(batch_id)
    header = json.loads(path.read_text())
    header["request"] = request_field
    path.write_text(json.dumps(header) + "\n")
    home = str(batch.batches_dir().parent)
    out = subprocess.run(  # its output ends when the forked supervisor does
        [sys.executable, "-m", "tui_bench.engine.runs.supervisor", "--home", home, batch_id],
        cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "Traceback" not in out.stdout + out.stderr
    state = supervisor.wait_done(batch_id, timeout=60)
    error = state.done["error"]
    assert "\n" not in error and (
        "auto repeats: max must be" in error or "has an unreadable request" in error
    )
    assert state.run_ids == [] and History().all() == []


# -- the CLI -----------------------------------------------------------------------------------
def planned_request(monkeypatch, *argv: str) -> BatchRequest:
    """What ``tui-bench run ARGV`` hands to a supervisor (nothing is started: not the batch,
    nor the matmul peak probe that `run` measures before it, here a probe that cannot run)."""
    handed = []
    monkeypatch.setattr(following, "start_batch", lambda request, args, err: handed.append(request))
    monkeypatch.setattr(peaks, "run_probe", lambda *_, **__: {"error": "not measured in a test"})
    args = build_parser().parse_args(["run", *argv])
    args.func(args)
    (request,) = handed
    return request


def test_cli_repeats_auto_for_one_spec_goes_into_the_batch_request(monkeypatch):
    request = planned_request(
        monkeypatch, "--repeats", "auto", "--max-repeats", "3", "--target-ci", "5"
    )
    assert request.auto_repeats == {"max": 3, "target_ci": 0.05}
    assert request.spec["repeats"] == 1  # each run is one repeat; the batch decides how many
    assert planned_request(monkeypatch, "--repeats", "auto").auto_repeats == {
        "max": 20,
        "target_ci": 0.02,
    }
    assert planned_request(monkeypatch, "--repeats", "4").auto_repeats is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-repeats", "5"], "--max-repeats only applies with --repeats auto"),
        (["--target-ci", "3"], "--target-ci only applies with --repeats auto"),
        (
            ["--repeats", "3", "--max-repeats", "5"],
            "--max-repeats only applies with --repeats auto",
        ),
        (
            ["--preset", "shatnawi-2018-quick", "--target-ci", "1"],
            "--target-ci only applies with --repeats auto",
        ),
        (["--repeats", "auto", "--max-repeats", "1"], "--max-repeats must be between 2 and 1000"),
        (
            ["--repeats", "auto", "--max-repeats", "1001"],
            "--max-repeats must be between 2 and 1000",
        ),
        (
            ["--repeats", "auto", "--target-ci", "0"],
            "--target-ci is a percentage between 0 and 100",
        ),
        (
            ["--repeats", "auto", "--target-ci", "100"],
            "--target-ci is a percentage between 0 and 100",
        ),
        (["--repeats", "sometimes"], "repeats must be a whole number, got 'sometimes'"),
    ],
)
def test_bad_auto_repeat_flags_are_one_line_and_exit_2(args, message):
    out = cli("run", *args, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"tui-bench: error: {message}") and out.stderr.count("\n") == 1
    assert not batch.batches_dir().exists()  # nothing was started


# Repeats do not depend on the framework: the example numpy plugin's workers (conftest's
# numpy_framework) start in ~0.3 s, torch's in ~4 s.
TINY_AUTO = [
    "--framework", "numpy-mlp", "--api", "numpy", "--model", "mlp",
    "--epochs", "1", "--steps-per-epoch", "6", "--warmup-steps", "2", "--train-samples", "512",
    "--test-samples", "64", "--threads", "1", "--batch-size", "32",
]  # fmt: skip


@pytest.mark.slow
def test_cli_repeats_auto_real_runs_json(numpy_framework):
    out = cli("run", *TINY_AUTO, "--repeats", "auto", "--max-repeats", "3", "--json", timeout=300)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    runs = found["runs"]
    # A 95 % CI of a median needs 6 values: 3 repeats always stop at the maximum.
    assert len(runs) == 3 and all(r["status"] == "finished" for r in runs)
    assert {r["group"] for r in runs} == {found["group"]}
    assert [r["repeat"] for r in runs] == [0, 1, 2]
    assert found["stopped"].startswith("stopped at the maximum of 3 repeats")
    done = list(read_jsonl(batch.events_path(found["group"])))[-1]  # recorded with the batch
    assert list(done["stopped"].values()) == [found["stopped"]]
    compared = cli("compare", found["group"], "--json")
    assert compared.returncode == 0, compared.stderr
    summary = next(t for t in json.loads(compared.stdout) if t["name"] == "summary")
    assert [row[1] for row in summary["rows"]] == [3]  # one configuration, n = 3


@pytest.mark.slow
def test_cli_repeats_auto_real_runs_say_why_they_stopped(numpy_framework):
    out = cli("run", *TINY_AUTO, "--repeats", "auto", "--max-repeats", "2", timeout=300)
    assert out.returncode == 0, out.stderr
    assert "run 2 of at most 2" in out.stderr
    runs = History().all()
    (group,) = {r.group for r in runs}
    assert len(runs) == 2
    assert f"repeats: 2 run(s) in group {group}; stopped at the maximum of 2 repeats" in out.stdout
    assert f"tui-bench compare {group}" in out.stdout
