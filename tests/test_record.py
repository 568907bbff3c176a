"""The run record (``results/record.Run``) and configuration identity (``results/identity``):
the one rule for a usable number, damaged records, and compare/trends/regress agreeing on which
runs are one configuration."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from tests.histories import as_runs, record
from tui_bench.engine.results import regress, trends
from tui_bench.engine.results.identity import (
    NOT_DECIDING,
    Configuration,
    configuration_of,
    deciding_fields,
    group_by_configuration,
    label_fields,
    varying_fields,
)
from tui_bench.engine.results.record import Run, number


# -- the one rule for a number ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1.0),
        (0.25, 0.25),
        (0, 0.0),
        (-2.5, -2.5),
        (True, None),
        (False, None),
        (math.nan, None),
        (math.inf, None),
        (-math.inf, None),
        ("0.1", None),
        (None, None),
        ([0.1], None),
        ({"x": 1}, None),
    ],
)
def test_number_is_a_finite_int_or_float_and_never_a_bool(value, expected):
    assert number(value) == expected


def test_metric_reads_usable_numbers_only():
    run = Run.from_record(
        {"id": "r", "status": "finished", "metrics": {"a": 0.5, "b": True, "c": "x", "d": math.nan}}
    )
    assert run.metric("a") == 0.5
    assert [run.metric(k) for k in "bcde"] == [None] * 4
    assert run.metric_names() == ["a"]
    assert run.finished and not run.failed


def test_a_record_from_before_the_energy_key_was_renamed_still_has_its_figure():
    """GPU samples per joule was stored as ``samples_per_joule`` until it took the device in
    its name (``gpu_samples_per_joule``, beside ``cpu_samples_per_joule``): an old history is
    never rewritten, so the old key answers under the new name, and the run's summary and the
    page (which read the registry's key through ``Run.metric``) still show it."""
    from rich.console import Console

    from tui_bench.cli import common

    old = Run.from_record(
        {"id": "old", "status": "finished", "metrics": {"samples_per_joule": 8.5}}
    )
    assert old.metric("gpu_samples_per_joule") == 8.5
    assert old.metric_names() == ["gpu_samples_per_joule"]
    both = {"samples_per_joule": 1.0, "gpu_samples_per_joule": 2.0}
    new = Run.from_record({"id": "new", "status": "finished", "metrics": both})
    assert new.metric("gpu_samples_per_joule") == 2.0  # the key a record has wins
    console = Console(width=120, record=True)
    console.print(common.summary_table([old]))
    shown = console.export_text()
    assert "GPU samples/J" in shown and "8.5" in shown


# -- damage: a record read from a file may be anything ------------------------------------------
DAMAGED = [
    None,
    "text",
    42,
    [],
    {},
    {"id": None, "status": 3},
    {"id": "x", "spec": "torch", "metrics": [1, 2], "env": 5, "worker": "w", "stability": []},
    {"id": "x", "started_at": "not a date", "finished_at": 17, "load_at_start": "busy"},
    {"id": "x", "stability": {"verdict": 3, "reasons": ["bad", {"rule": None, "value": "x"}]}},
    {"id": "x", "metrics": {"steady_step_times": "0.1", "step_source": 5}},
    {"id": "x", "metrics": {"steady_step_times": [0.1, "x", None, math.nan, 0.2]}},
    {"id": "x", "spec": {"threads": [1, 2], "framework": {"a": 1}}, "repeat": True},
]


@pytest.mark.parametrize("raw", DAMAGED)
def test_a_damaged_record_is_a_run_with_nothing_recorded_where_it_is_damaged(raw):
    run = Run.from_record(raw)
    # every accessor answers; none raises
    assert isinstance(run.id, str) and isinstance(run.status, str)
    assert run.metric("step_median_s") is None
    read = [
        *(run.spec, run.env, run.worker, run.settings, run.load, run.resources()),
        *(run.label, run.host, run.device_model, run.started, run.ended, run.started_text),
        *(run.verdict, run.reasons, run.state, run.step_times, run.windowed, run.timing),
        *(run.framework_version, run.backend_version, run.busy, run.oversubscribed),
        *(run.group, run.preset, run.config, run.repeat),
    ]
    assert len(read) == 26
    config = configuration_of(Run.from_record(raw))
    assert config.id and config.name
    hash(config)  # a key of hashable pairs even when a spec value is a list or a dict


def test_damaged_parts_read_as_not_recorded():
    run = Run.from_record(DAMAGED[10])
    assert run.step_times == (0.1, 0.2)
    assert Run.from_record(DAMAGED[9]).step_times is None
    reasons = Run.from_record(DAMAGED[8]).reasons
    assert len(reasons) == 1 and reasons[0].rule == "?" and reasons[0].value is None
    assert Run.from_record(DAMAGED[8]).verdict is None
    assert Run.from_record(DAMAGED[11]).repeat is None


def test_a_run_reads_what_the_runner_wrote():
    raw = record(0, 40, stability={"verdict": "noisy", "reasons": [{"rule": "cv", "message": "m"}]})
    run = Run.from_record(raw)
    assert run.raw is raw and Run.from_record(run) is run
    assert run.spec["threads"] == 2 and run.host == "box-a"
    assert run.started == dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
    assert run.verdict == "noisy" and run.state == "noisy" and run.reasons[0].rule == "cv"
    assert run.framework_version == "2.12.1"
    with pytest.raises(TypeError):
        run.spec["threads"] = 4  # read-only
    with pytest.raises(AttributeError):
        run.id = "other"  # frozen
    assert [r.id for r in as_runs([raw, run])] == [run.id, run.id]


def test_a_fleet_run_is_measured_on_its_node():
    raw = record(0, 40, host="head")
    raw["host"] = "node-2"
    assert Run.from_record(raw).host == "node-2"
    assert configuration_of(Run.from_record(raw)) != configuration_of(
        Run.from_record(record(0, 40, host="head"))
    )


# -- which fields decide a number ---------------------------------------------------------------
def test_seed_repeats_and_data_dir_do_not_decide_a_number():
    assert {"seed", "repeats", "data_dir"} == NOT_DECIDING
    assert not NOT_DECIDING & set(deciding_fields())
    assert {"framework", "api", "threads", "batch_size", "host", "device_model"} <= set(
        deciding_fields()
    )
    a = record(0, 40)
    b = record(1, 40, version="9.9")  # another seed, another version
    b["spec"] = {**b["spec"], "data_dir": "/elsewhere", "repeats": 5}
    assert configuration_of(Run.from_record(a)) == configuration_of(Run.from_record(b))
    assert configuration_of(Run.from_record(a)).id == configuration_of(Run.from_record(b)).id
    assert configuration_of(Run.from_record(a)) != configuration_of(
        Run.from_record(record(0, 40, threads=1))
    )


def test_configuration_key_is_structured_pairs():
    config = configuration_of(Run.from_record(record(0, 40)))
    assert isinstance(config.key, tuple)
    assert all(isinstance(pair, tuple) and len(pair) == 2 for pair in config.key)
    assert config.get("framework") == "torch" and config.get("host") == "box-a"
    assert [name for name, _ in config.key] == list(deciding_fields())


# -- short labels ---------------------------------------------------------------------------------
def test_labels_name_the_fewest_fields_that_tell_configurations_apart():
    runs = [
        record(0, 40, framework="torch", api="eager", threads=1),
        record(1, 40, framework="torch", api="eager", threads=2),
        record(2, 40, framework="tensorflow", api="keras", threads=1),
        record(3, 40, framework="tensorflow", api="keras", threads=2),
    ]
    groups = group_by_configuration(as_runs(runs))
    assert varying_fields(as_runs(runs)) == ["framework", "api", "threads"]
    assert [c.label for c in groups] == [
        "torch · 1 thr",
        "torch · 2 thr",
        "tensorflow · 1 thr",
        "tensorflow · 2 thr",
    ]


def test_an_api_is_named_with_its_framework():
    runs = [
        record(0, 40, framework="tensorflow", api="keras"),
        record(1, 40, framework="tensorflow", api="eager"),
        record(2, 40, framework="torch", api="eager"),
    ]
    configs = list(group_by_configuration(as_runs(runs)))
    assert label_fields(configs) == ["framework", "api"]
    assert configs[0].label == "tensorflow · keras"


def test_a_lone_configuration_keeps_its_run_label():
    (config,) = group_by_configuration(as_runs([record(0, 40), record(1, 41)]))
    assert config.label == "torch/eager cnn synthetic-mnist cpu×2"


def test_labels_stay_short_when_a_sweep_varies_many_fields_together():
    runs = []
    for i, (fw, api, batch) in enumerate([("torch", "eager", 64), ("keras", "tensorflow", 80)]):
        r = record(i, 40, framework=fw, api=api)
        r["spec"] = {**r["spec"], "batch_size": batch, "lr": 0.01 * (i + 1), "epochs": 3 + i}
        runs.append(r)
    configs = list(group_by_configuration(as_runs(runs)))
    assert len(varying_fields(as_runs(runs))) == 5
    assert [c.label for c in configs] == ["torch", "keras"]


# -- compare, trends and regress agree ------------------------------------------------------------
def test_compare_trends_and_regress_agree_on_configurations():
    """Two runs that differ only in where the dataset lives are one configuration for all three;
    another thread count or host is another."""
    runs = []
    for i in range(12):
        r = record(
            i, 40 + (i % 3), threads=1 + i % 2, host="box-a" if (i // 2) % 2 == 0 else "box-b"
        )
        if i % 3 == 0:
            r["spec"] = {**r["spec"], "data_dir": f"/data/{i}"}
        runs.append(r)
    expected = {configuration_of(Run.from_record(r)).id: set() for r in runs}
    for r in runs:
        expected[configuration_of(Run.from_record(r)).id].add(r["id"])
    assert len(expected) == 4

    grouped = {c.id: {r.id for r in rs} for c, rs in group_by_configuration(as_runs(runs)).items()}
    from_trends = {
        t.configuration.id: {p.run_id for p in t.points} for t in trends.trends(as_runs(runs))
    }
    report = regress.compare(as_runs(runs[:6]), as_runs(runs[6:]))
    from_regress = {
        row.configuration.id: set(row.baseline.runs) | set(row.candidate.runs)
        for row in report.rows
    }
    assert grouped == from_trends == from_regress == expected


def test_configurations_are_equal_by_key_whatever_their_labels():
    a = configuration_of(Run.from_record(record(0, 40)))
    assert a == Configuration(a.key, "another name", "another label")
    assert len({a, Configuration(a.key, "x", "y")}) == 1


def test_trends_and_regress_name_the_configuration_identity_gives():
    runs = [record(i, 40) for i in range(4)]
    config = configuration_of(Run.from_record(runs[0]))
    (item,) = trends.trends(as_runs(runs))
    assert item.configuration == config and item.points[0].run.id == runs[0]["id"]
    (row,) = regress.compare(as_runs(runs[:2]), as_runs(runs[2:])).rows
    assert row.configuration == config and row.configuration.name == config.name
    assert [r.id for r in regress.newest_per_configuration(as_runs(runs), 1)] == [runs[3]["id"]]


def test_the_reasons_a_verdict_writes_are_the_reasons_a_run_reads_back():
    """One Reason class: what stability stores round-trips through a record unchanged (a second
    class with its fields in another order once swapped value and threshold on the way back)."""
    from tui_bench.engine.results import stability

    times = [0.010] * 30 + [0.5] + [0.010] * 5 + [0.02, 0.03] * 10
    verdict = stability.assess(times, threads=1)
    assert verdict.reasons, "the series was built to break rules"
    run = Run.from_record({"id": "r1", "status": "finished", "stability": verdict.as_dict()})
    assert run.reasons == tuple(stability.Reason.from_dict(r.as_dict()) for r in verdict.reasons)
    assert [(r.rule, r.threshold) for r in run.reasons] == [
        (r.rule, r.threshold) for r in verdict.reasons
    ]
    assert stability.Reason is type(run.reasons[0])
