"""Configuration identity, change points and `tui-bench history trends` on constructed histories."""

from __future__ import annotations

import json
import math
import random

import pytest
from histories import as_runs

from tests.histories import fill, record
from tui_bench.cli import main
from tui_bench.engine.results import trends
from tui_bench.engine.results.identity import configuration_of, group_by_configuration, versions
from tui_bench.engine.results.record import Run


def noisy(n, level, rel=0.02, seed=1):
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, rel)) for _ in range(n)]


# -- identity -----------------------------------------------------------------------------------
def test_identity_ignores_seed_and_versions_but_not_what_decides_a_number():
    a = record(0, 40)
    assert (
        configuration_of(Run.from_record(a)).key
        == configuration_of(Run.from_record(record(1, 50, version="9.9"))).key
    )
    assert (
        configuration_of(Run.from_record(a)).key
        != configuration_of(Run.from_record(record(0, 40, threads=1))).key
    )
    assert (
        configuration_of(Run.from_record(a)).key
        != configuration_of(Run.from_record(record(0, 40, host="box-b"))).key
    )
    gpu = record(0, 40)
    gpu["spec"] = {**gpu["spec"], "device": "gpu"}
    gpu["worker"]["device_name"] = "NVIDIA H100"
    assert (
        configuration_of(Run.from_record(gpu)).key != configuration_of(Run.from_record(a)).key
        and configuration_of(Run.from_record(gpu)).facts["device_model"] == "NVIDIA H100"
    )


def test_a_record_from_before_a_spec_field_existed_keeps_its_configuration():
    old = record(0, 40)
    del old["spec"]["timing_window"]  # written before the field existed: it ran with the default
    assert (
        configuration_of(Run.from_record(old)).key
        == configuration_of(Run.from_record(record(1, 40))).key
    )
    changed = record(2, 40)
    changed["spec"]["timing_window"] = 50
    assert (
        configuration_of(Run.from_record(changed)).key != configuration_of(Run.from_record(old)).key
    )


def test_versions_and_grouping():
    v = versions(Run.from_record(record(0, 40, version="2.13.0")))
    assert v["torch"] == "2.13.0" and v["tui-bench"] == "0.1.0" and v["machine"]
    groups = group_by_configuration(
        as_runs([record(0, 40), record(1, 41, threads=1), record(2, 42)])
    )
    assert sorted(len(runs) for runs in groups.values()) == [1, 2]


# -- change points ------------------------------------------------------------------------------
def test_a_flat_noisy_series_has_no_change_point():
    for seed in range(20):
        logs = [math.log(v) for v in noisy(40, 40.0, seed=seed)]
        assert trends.steps(logs) == [], seed


def test_one_step_is_found_where_it_is():
    series = noisy(20, 40.0) + noisy(15, 47.2, seed=2)
    assert trends.steps([math.log(v) for v in series]) == [20]


def test_two_steps_and_an_outlier():
    series = noisy(12, 40.0) + noisy(10, 60.0, seed=3) + noisy(10, 45.0, seed=4)
    series[5] = 80.0  # one loaded run: not a level of its own
    logs = [math.log(v) for v in series]
    assert trends.steps(logs) == [12, 22]
    assert 5 in trends.change_points(logs)  # least squares alone would make it one


def test_a_change_needs_a_second_run_to_confirm_it():
    flat = noisy(10, 40.0)
    assert trends.steps([math.log(v) for v in [*flat, 60.0]]) == []
    assert trends.steps([math.log(v) for v in [*flat, 60.0, 61.0]]) == [10]


def test_small_steps_are_merged_away():
    series = [math.log(v) for v in [40.0] * 10 + [41.2] * 10]  # 3 %, noiseless: a real step
    assert trends.change_points(series) == [10]
    assert trends.steps(series) == []
    assert trends.steps(series, min_step=0.02) == [10]


def test_pruning_gives_the_exact_optimum():
    rng = random.Random(7)
    series = [rng.choice([0.0, 0.3, 0.5]) + rng.gauss(0, 0.05) for _ in range(60)]
    penalty = 0.05
    found = trends.change_points(series, penalty=penalty)

    def cost(points):
        bounds = [0, *points, len(series)]
        total = 0.0
        for a, b in zip(bounds, bounds[1:], strict=False):
            seg = series[a:b]
            mean = sum(seg) / len(seg)
            total += sum((x - mean) ** 2 for x in seg)
        return total + penalty * len(points)

    # no single move, removal or insertion of a change point does better
    base = cost(found)
    for i in range(len(found)):
        assert cost(found[:i] + found[i + 1 :]) >= base - 1e-12
        for delta in (-1, 1):
            moved = sorted({*found[:i], found[i] + delta, *found[i + 1 :]})
            bounds = [0, *moved, len(series)]
            if all(b - a >= 2 for a, b in zip(bounds, bounds[1:], strict=False)):
                assert cost(moved) >= base - 1e-12


# -- trends over a history ----------------------------------------------------------------------
def stepped_history():
    runs = [record(i, v) for i, v in enumerate(noisy(12, 40.0))]
    runs += [record(12 + i, v, version="2.13.0") for i, v in enumerate(noisy(8, 47.2, seed=5))]
    runs += [record(i, v, framework="mxnet", api="gluon") for i, v in enumerate(noisy(6, 24.0))]
    return runs


def test_trend_annotates_the_step_with_what_changed():
    found = trends.trends(as_runs(stepped_history()), ["torch"])
    (item,) = found
    (cp,) = item.change_points
    assert cp.index == 12 and cp.what_changed == ["torch 2.12.1 → 2.13.0"]
    assert cp.change == pytest.approx(0.18, abs=0.03)
    assert cp.describe() == f"step {cp.change * 100:+.0f} % on 2026-11-13: torch 2.12.1 → 2.13.0"
    mx = trends.trends(as_runs(stepped_history()), ["mxnet"])[0]
    assert mx.change_points == [] and len(mx.points) == 6


def test_a_step_that_came_with_another_verdict_says_which_rules_the_new_runs_broke():
    runs = [record(i, 40) for i in range(6)] + [record(i, 60) for i in range(6, 12)]
    for r in runs:
        r["stability"] = {
            "verdict": "noisy",
            "reasons": [{"rule": "sample_size", "level": "noisy"}],
        }
    for r in runs[6:]:
        r["stability"] = {
            "verdict": "unreliable",
            "reasons": [
                {"rule": "cpu_stolen", "level": "unreliable"},
                {"rule": "outliers", "level": "noisy"},
            ],
        }
    (cp,) = trends.trends(as_runs(runs))[0].change_points
    assert cp.index == 6 and cp.what_changed == ["verdict noisy → unreliable (cpu_stolen)"]


def test_cli_trends_fit_80_columns_with_a_build_tagged_version(capsys):
    fill([record(i, 40 + i % 2, version="2.13.0+cu128") for i in range(4)])
    assert main(["history", "trends"]) == 0
    out = capsys.readouterr().out
    # one line per run, the version whole (no date column: the run id starts with the date)
    assert out.count("2.13.0+cu128") == 4 and max(map(len, out.splitlines())) <= 80


def test_failed_runs_are_counted_not_plotted():
    runs = [record(0, 40), record(1, 40, status="failed"), record(2, 41)]
    (item,) = trends.trends(as_runs(runs))
    assert len(item.points) == 2 and item.failed == 1


def test_cli_trends(capsys):
    fill(stepped_history())
    assert main(["history", "trends", "torch"]) == 0
    out = capsys.readouterr().out
    assert "step +" in out and "torch 2.12.1 → 2.13.0" in out and "mxnet" not in out
    assert max(map(len, out.splitlines())) <= 80
    assert main(["history", "trends", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == 2 and sum(len(t["change_points"]) for t in data) == 1
    assert main(["history", "trends", "tensorflow"]) == 2
    assert "no configuration matching" in capsys.readouterr().err


def _with_spec(run: dict, **changes) -> dict:
    from tui_bench.engine.spec import RunSpec

    spec = RunSpec.from_dict({**run["spec"], **changes})
    return {**run, "spec": spec.to_dict(), "label": spec.label()}


def test_trend_labels_carry_every_field_that_varies_between_the_configurations_shown(capsys):
    """Issue 48 item 8: two batch sizes read alike ('torch/eager cnn synthetic-mnist cpu×2')."""
    runs = [_with_spec(record(i, 40 + i % 2), batch_size=32) for i in range(3)]
    runs += [_with_spec(record(10 + i, 60), batch_size=64) for i in range(3)]
    runs += [_with_spec(record(20 + i, 70), batch_size=64, lr=0.01) for i in range(3)]
    found = trends.trends(as_runs(runs))
    titles = sorted(t.title for t in found)
    assert len(set(titles)) == 3, titles  # no two read alike
    name = "torch/eager cnn synthetic-mnist cpu×2 @box-a"
    assert titles == [
        f"{name} · batch 32 · lr 0.001",
        f"{name} · batch 64 · lr 0.001",
        f"{name} · batch 64 · lr 0.01",
    ]
    # threads, in the name already, is not said twice; a field that does not vary is not said
    assert not any("thr" in t or "adam" in t for t in titles)
    fill(runs)
    assert main(["history", "trends", "--json"]) == 0
    labels = sorted(t["label"] for t in json.loads(capsys.readouterr().out))
    assert labels == titles
    assert main(["history", "trends"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # a title folds at 80 columns
    assert all(title in out for title in titles)


def test_a_lone_configuration_keeps_its_name():
    (item,) = trends.trends(as_runs([record(i, 40) for i in range(3)]))
    assert item.title == "torch/eager cnn synthetic-mnist cpu×2 @box-a"
