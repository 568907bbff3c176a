"""Comparison tables over constructed run records (no workers): statistics, ratios with
significance, GPU vs CPU, thread scaling, the study-shaped table, time to accuracy, exports."""

from __future__ import annotations

import csv
import io

import pytest

from tui_bench.engine.results import published, report
from tui_bench.engine.spec import RunSpec


def record(run_id: str, value: float, status: str = "finished", **spec_fields) -> dict:
    spec = RunSpec(**spec_fields).to_dict()
    return {
        "id": run_id,
        "status": status,
        "started_at": f"2026-11-21T05:{len(run_id):02d}:00",
        "spec": spec,
        "label": RunSpec(**spec_fields).label(),
        "env": {"logical_cores": 2},
        "metrics": {"step_median_s": value, "train_wall_s": value * 100}
        if status == "finished"
        else {},
        "reason": None if status == "finished" else "injected crash",
    }


def runs(prefix: str, values, **spec_fields) -> list[dict]:
    return [record(f"{prefix}{i}", v, **spec_fields) for i, v in enumerate(values)]


def table(tables, name):
    return next(t for t in tables if t.name == name)


def rows_as_dicts(t: report.Table) -> list[dict]:
    return [dict(zip(t.columns, row, strict=True)) for row in t.rows]


def test_summary_statistics_per_configuration():
    records = runs("a", [1.0, 2.0, 3.0, 4.0, 10.0], threads=1) + [
        record("a-failed", 0, status="failed", threads=1)
    ]
    (row,) = rows_as_dicts(table(report.build(records), "summary"))
    assert row["configuration"] == "torch/eager cnn synthetic-mnist cpu×1"
    assert row["n"] == 5 and row["median"] == 3.0 and row["IQR"] == 2.0
    assert row["mean"] == 4.0 and row["min"] == 1.0 and row["max"] == 10.0
    assert row["failed"] == 1 and "injected crash" in row["notes"]
    assert "high spread" in row["warning"]  # std 3.5 is 87 % of the mean


def test_gpu_against_cpu_with_significance():
    records = runs("c", [4.0, 4.1, 3.9, 4.2, 4.05], device="cpu") + runs(
        "g", [1.0, 1.1, 0.9, 0.95, 1.05], device="gpu"
    )
    rows = rows_as_dicts(table(report.build(records), "comparisons"))
    (row,) = rows
    assert row["differs in"] == "device"
    assert row["configuration"] == "device=gpu" and row["baseline"] == "device=cpu"
    assert row["ratio"] == pytest.approx(1.0 / 4.05)
    assert row["speed-up"] == pytest.approx(4.05)
    assert row["significance"].startswith("significant (p=0.00794")


def test_few_repeats_never_give_a_bare_verdict():
    records = runs("e", [1.0, 1.1, 1.2], api="eager") + runs("c", [2.0, 2.1, 2.2], api="compile")
    (row,) = rows_as_dicts(table(report.build(records), "comparisons"))
    assert row["configuration"] == "torch/compile" and row["baseline"] == "torch/eager"
    assert row["ratio"] == pytest.approx(2.1 / 1.1)
    assert row["significance"].startswith("not enough repeats (n=3/3")


def test_thread_scaling_table_with_efficiency_and_oversubscription():
    records = (
        runs("t1", [1.00, 1.01, 0.99, 1.02, 0.98], threads=1)
        + runs("t2", [0.55, 0.56, 0.54, 0.57, 0.53], threads=2)
        + runs("t4", [0.60, 0.61, 0.59, 0.62, 0.58], threads=4)
    )
    rows = rows_as_dicts(table(report.build(records), "scaling"))
    assert [r["threads"] for r in rows] == [1, 2, 4]
    assert rows[0]["speed-up"] == 1.0 and rows[0]["vs fewest threads"] == "baseline"
    assert rows[1]["speed-up"] == pytest.approx(1.0 / 0.55)
    assert rows[1]["efficiency"] == f"{1.0 / 0.55 / 2:.0%}"
    assert rows[2]["oversubscribed"] is True and rows[1]["oversubscribed"] is False
    assert rows[2]["vs fewest threads"].startswith("significant")


def test_study_table_rows_dataset_threads_columns_framework():
    records = []
    for dataset in ("synthetic-mnist", "synthetic-cifar10"):
        for threads in (1, 2):
            for api in ("eager", "compile"):
                records += runs(
                    f"{dataset}{threads}{api}",
                    [threads * 1.0],
                    dataset=dataset,
                    threads=threads,
                    api=api,
                )
    study = table(report.build(records), "study")
    assert study.columns == [
        "model",
        "dataset",
        "device",
        "threads",
        "torch/eager",
        "torch/compile",
    ]
    assert [row[1:4] for row in study.rows] == [
        ["synthetic-mnist", "cpu", 1],
        ["synthetic-mnist", "cpu", 2],
        ["synthetic-cifar10", "cpu", 1],
        ["synthetic-cifar10", "cpu", 2],
    ]
    assert study.rows[1][4] == "200 (n=1)"  # train_wall_s median, the study's figure


def test_time_to_accuracy_reached_and_not_reached():
    reached = runs("r", [1.0, 1.0], target_accuracy=0.5)
    for i, r in enumerate(reached):
        r["metrics"].update(target_reached_epoch=2, target_reached_s=10.0 + i)
    missed = runs("m", [1.0], target_accuracy=0.99, threads=1)
    for r in missed:
        r["metrics"].update(target_reached_epoch=None, target_reached_s=None)
    rows = rows_as_dicts(table(report.build(reached + missed), "summary"))
    assert rows[0]["time to accuracy"] == "epoch 2, 10.5 s (2/2 reached 0.5)"
    assert rows[1]["time to accuracy"] == "not reached (1 run(s))"


def test_skipped_configurations_are_listed():
    tables = report.build(runs("a", [1.0]), skipped=[("framework=mxnet", "skipped: not here")])
    assert table(tables, "skipped").rows == [["framework=mxnet", "skipped: not here"]]


def test_csv_and_markdown_exports():
    records = runs("c", [4.0, 4.1, 3.9, 4.2, 4.05], device="cpu") + runs(
        "g", [1.0, 1.1, 0.9, 0.95, 1.05], device="gpu"
    )
    tables = report.build(records)
    rows = list(csv.DictReader(io.StringIO(report.to_csv(tables))))
    assert {r["table"] for r in rows} == {"summary", "comparisons", "study"}
    summary = [r for r in rows if r["table"] == "summary"]
    assert float(summary[0]["median"]) == 4.05  # full precision in CSV
    markdown = report.to_markdown(tables)
    assert (
        "| differs in | with | configuration | baseline | ratio | speed-up | significance |"
        in markdown
    )
    assert (
        "| device | — | device=gpu | device=cpu | 0.2469 | 4.05 | significant (p=0.00794"
        in markdown
    )


# -- seeds and the fairness card -------------------------------------------------------------------
def accuracy_runs(prefix, values, seeds, **spec_fields):
    out = []
    for i, (value, seed) in enumerate(zip(values, seeds, strict=True)):
        r = record(f"{prefix}{i}", 0.01, seed=seed, **spec_fields)
        r["metrics"]["test_accuracy"] = value
        out.append(r)
    return out


def test_accuracy_significance_is_refused_when_every_run_used_one_seed():
    same = accuracy_runs("e", [0.90, 0.91, 0.92, 0.93, 0.94], [0] * 5, api="eager")
    same += accuracy_runs("c", [0.80, 0.81, 0.82, 0.83, 0.84], [0] * 5, api="compile")
    (row,) = rows_as_dicts(table(report.build(same, metric="test_accuracy"), "comparisons"))
    assert row["significance"].startswith("no test: every run used seed 0")
    # step time does not come from the seed: the test stands
    (row,) = rows_as_dicts(table(report.build(same), "comparisons"))
    assert row["significance"].startswith("not significant") or "p=" in row["significance"]


def test_accuracy_significance_is_tested_when_repeats_vary_the_seed():
    varied = accuracy_runs("e", [0.90, 0.91, 0.92, 0.93, 0.94], range(5), api="eager")
    varied += accuracy_runs("c", [0.80, 0.81, 0.82, 0.83, 0.84], range(5), api="compile")
    tables = report.build(varied, metric="test_accuracy")
    (summary_row,) = [
        r for r in rows_as_dicts(table(tables, "summary")) if "eager" in r["configuration"]
    ]
    assert summary_row["n"] == 5  # seeds of repeats do not split a configuration
    (row,) = rows_as_dicts(table(tables, "comparisons"))
    assert row["significance"].startswith("significant (p=0.00794")


def with_worker(records, **settings):
    for r in records:
        r["worker"] = {"settings": settings, "framework_version": "2.13.0"}
    return records


def test_fairness_card_shows_only_the_settings_that_differ():
    a = with_worker(runs("a", [1.0, 1.1], api="eager", device="gpu"), compile="no (eager)")
    b = with_worker(
        runs("b", [0.8, 0.9], api="compile", device="gpu", precision="tf32"),
        compile="yes (torch.compile, inductor)",
    )
    for r in a:
        r["load_at_start"] = {"loadavg_1m": 0.1, "logical_cores": 2, "busy": False}
    for r in b:
        r["load_at_start"] = {"loadavg_1m": 3.9, "logical_cores": 2, "busy": True}
    card = table(report.build(a + b), "fairness")
    rows = {row[0]: row[1:] for row in card.rows}
    assert set(rows) == {"compilation", "machine load"}  # precision is what varies: in labels
    assert rows["compilation"] == ["no (eager)", "yes (torch.compile, inductor)"]
    assert rows["machine load"] == ["quiet (load ≈0 on 2)", "busy (load ≈4 on 2)"]
    assert card.columns[0] == "setting" and len(card.columns) == 3


def test_fairness_card_names_a_hidden_difference_and_the_thread_flag():
    a = runs("a", [1.0], framework="torch", api="eager")
    b = runs("b", [2.0], framework="tensorflow", api="graph", timing="pipelined")
    b[0]["metrics"]["threads_flag"] = "used 1.9 cores with 1 thread(s) configured"
    b[0]["metrics"]["cores_observed"] = 1.9
    a[0]["metrics"]["cores_observed"] = 1.02
    rows = {row[0]: row[1:] for row in table(report.build(a + b), "fairness").rows}
    assert "timing mode" not in rows  # varies on purpose: the labels say it
    assert rows["threads observed"] == ["≈1 cores", "≈2 cores"]
    assert rows["thread flag"] == ["", "used more cores than configured"]


def test_fairness_card_shows_the_attention_kernel_and_an_emulated_bf16_even_when_shared():
    emulated = "bf16 emulated: CPU lacks avx512_bf16/amx_bf16"
    a = with_worker(
        runs("a", [1.0], framework="torch", api="eager", precision="bf16"),
        attention="SDPA math (training, dropout 0.25), flash (evaluation) on CPU",
        bf16_note=emulated,
    )
    b = with_worker(
        runs("b", [2.0], framework="keras", api="jax", precision="bf16"),
        attention="MultiHeadAttention einsum + softmax + dropout, flash_attention=None; XLA on",
        bf16_note=emulated,
    )
    rows = {row[0]: row[1:] for row in table(report.build(a + b), "fairness").rows}
    assert rows["attention kernel"][0].startswith("SDPA math")
    assert rows["attention kernel"][1].endswith("XLA on")
    assert rows["bf16"] == [emulated, emulated]  # the same in both, shown all the same


def test_no_fairness_card_when_nothing_else_differs():
    records = runs("a", [1.0, 1.1], api="eager") + runs("b", [2.0, 2.1], api="compile")
    assert "fairness" not in [t.name for t in report.build(records)]


def test_old_records_without_the_new_spec_fields_group_with_defaults():
    old = runs("o", [1.0, 1.1], api="eager")
    for r in old:
        for key in ("precision", "autotune", "input", "timing", "timing_window"):
            r["spec"].pop(key)
    new = runs("n", [1.2, 1.3], api="eager")
    (row,) = rows_as_dicts(table(report.build(old + new), "summary"))
    assert row["n"] == 4


def scaling_run(run_id: str, rate: float, **spec_fields) -> dict:
    rec = record(run_id, 32 / rate, **spec_fields)
    rec["metrics"].update({"samples_per_s": rate, "comm_setup_s": 0.2, "rank_straggler_ratio": 1.1})
    return rec


def test_worker_scaling_table_weak_and_strong_efficiency_as_dlbs():
    records = [
        scaling_run("w1", 100.0, batch_size=16, workers=1),
        scaling_run("w2", 150.0, batch_size=16, workers=2),
        scaling_run("s1", 100.0, batch_size=32, workers=1, scaling="strong"),
        scaling_run("s2", 180.0, batch_size=32, workers=2, scaling="strong"),
        scaling_run("t2", 90.0, framework="tensorflow", api="graph", batch_size=16, workers=2),
    ]
    rows = rows_as_dicts(table(report.build(records), "workers"))
    torch_weak = [r for r in rows if r["scaling"] == "weak" and "torch" in r["with"]]
    assert [r["workers"] for r in torch_weak] == [1, 2]
    weak2 = torch_weak[1]
    # efficiency = throughput_N / (N x throughput_1): 150 / (2 x 100)
    assert weak2["speed-up"] == pytest.approx(1.5) and weak2["efficiency"] == "75%"
    assert weak2["global batch"] == 32 and torch_weak[0]["global batch"] == 16
    strong = [r for r in rows if r["scaling"] == "strong"]
    assert [r["workers"] for r in strong] == [1, 2]
    assert strong[1]["efficiency"] == "90%" and strong[1]["global batch"] == 32
    assert strong[1]["comm set-up s"] == 0.2 and strong[1]["slowest/fastest rank"] == 1.1
    # A family with no one-worker run of its own is not compared with another framework's.
    assert not any("tensorflow" in r["with"] for r in rows)


def test_worker_scaling_lines_only_when_workers_differ():
    same = [scaling_run("a", 100.0, workers=2), scaling_run("b", 120.0, workers=2, threads=2)]
    assert report.worker_scaling_lines(same) == []
    lines = report.worker_scaling_lines(
        [scaling_run("a", 100.0, workers=1), scaling_run("b", 190.0, workers=2)]
    )
    assert any("95%" in line for line in lines)


def test_oversubscription_counts_threads_of_every_worker():
    assert (
        report._oversubscribed({"spec": {"threads": 1, "workers": 2}, "env": {"logical_cores": 2}})
        is False
    )
    assert report._oversubscribed(
        {"spec": {"threads": 2, "workers": 2}, "env": {"logical_cores": 2}}
    )


# -- published figures beside ours -----------------------------------------------------------------
def figure(**fields) -> published.Figure:
    data = {
        "source": "A paper (2020), Table 3",
        "metric": "train_time",
        "kind": "ratio",
        "value": 2.0,
        "numerator": {"framework": "torch", "api": "eager"},
        "denominator": {"framework": "torch", "api": "compile"},
        **fields,
    }
    data = {k: v for k, v in data.items() if v is not None}  # None: leave the key out
    return published.parse_figure(data, "published[0]", RunSpec.__dataclass_fields__)


def timed_runs(prefix, train_walls, verdicts=None, **spec_fields):
    out = runs(prefix, [0.01] * len(train_walls), **spec_fields)
    for i, (r, wall) in enumerate(zip(out, train_walls, strict=True)):
        r["metrics"].update(train_wall_s=wall, test_s=wall / 10, loc_model=15, loc_step=20)
        r["stability"] = {"verdict": (verdicts or ["stable"] * len(out))[i]}
    return out


def published_rows(records, figures, skipped=()):
    tables = report.build(records, published=figures, skipped=skipped)
    return rows_as_dicts(table(tables, "published"))


def test_published_ratio_is_the_ratio_of_medians_over_runs():
    # medians 4 and 2: the means (4 and 34.3) would say the opposite
    records = timed_runs("e", [2.0, 4.0, 6.0], api="eager") + timed_runs(
        "c", [1.0, 2.0, 100.0], api="compile"
    )
    (row,) = published_rows(records, [figure(says="compile trains 2x faster")])
    assert row["figure"] == "training time: torch/eager ÷ torch/compile"
    assert row["published"] == 2.0 and row["here"] == pytest.approx(2.0)
    assert row["n"] == "3/3" and row["with"] == "—"
    assert row["source"] == "A paper (2020), Table 3" and row["says"] == "compile trains 2x faster"
    assert row["kind"] == "ratio" and row["metric"] == "train_time"
    assert row["stability"] == ""  # every run stable: nothing marked


def test_published_ratio_direction_reversed_and_within_the_noise():
    slower = timed_runs("e", [1.0, 1.0, 1.0], api="eager") + timed_runs(
        "c", [2.0, 2.0, 2.0], api="compile"
    )
    (row,) = published_rows(slower, [figure()])
    assert row["here"] == pytest.approx(0.5) and row["direction"] == "reversed"
    close = timed_runs("e", [1.0, 1.1, 1.2], api="eager") + timed_runs(
        "c", [1.05, 1.1, 1.15], api="compile"
    )
    (row,) = published_rows(close, [figure()])
    assert row["direction"].startswith("within the noise (±")
    far = timed_runs("e", [3.0, 3.0, 3.0], api="eager") + timed_runs(
        "c", [1.0, 1.0, 1.0], api="compile"
    )
    assert published_rows(far, [figure()])[0]["direction"] == "same direction"


def test_published_marks_runs_that_are_not_stable():
    records = timed_runs("e", [2.0, 2.0, 2.0], ["stable", "noisy", "unreliable"], api="eager")
    records += timed_runs("c", [1.0, 1.0, 1.0], api="compile")
    (row,) = published_rows(records, [figure()])
    assert row["stability"] == "torch/eager: not stable: 1 noisy, 1 unreliable of 3"
    assert "torch/eager: not stable" in row["notes"]
    assert row["here"] == pytest.approx(2.0)  # still shown, with its mark
    # Lines of code are not measured: no verdict applies to them.
    loc_figure = figure(
        metric="lines_of_code",
        kind="absolute",
        value=11,
        where={"framework": "torch", "api": "eager"},
        numerator=None,
        denominator=None,
    )
    (row,) = published_rows(records, [loc_figure])
    assert row["here"] == 35 and row["n"] == "3" and row["stability"] == ""


def test_published_figure_not_run_here_says_why():
    records = timed_runs("e", [2.0, 2.0], api="eager")  # no compile run at all
    (row,) = published_rows(records, [figure()])
    assert row["here"] is None and row["n"] == "2/0"
    assert row["notes"] == "not run here: no run of torch/compile"
    skipped = [("api=compile", "skipped: no runtime for torch/compile")]
    (row,) = published_rows(records, [figure()], skipped)
    assert row["notes"] == "not run here: torch/compile: skipped: no runtime for torch/compile"
    failed = records + [record("c-failed", 0, status="failed", api="compile")]
    (row,) = published_rows(failed, [figure()])
    assert row["notes"] == "not run here: torch/compile has no finished run (1 not finished)"
    other = figure(where={"model": "vgg16"})  # neither side was run
    (row,) = published_rows(records, [other])
    assert row["here"] is None and row["n"] == "0/0"
    assert "no run of torch/eager model=vgg16" in row["notes"]
    assert "no run of torch/compile model=vgg16" in row["notes"]


def test_published_ratio_per_configuration_the_figure_does_not_name():
    """A sweep over threads: one row per thread count, each eager run against the compile run
    with the same threads, never against another thread count's."""
    records = []
    for threads, (eager, compiled) in {1: (4.0, 2.0), 2: (3.0, 1.0)}.items():
        records += timed_runs(f"e{threads}", [eager], api="eager", threads=threads)
        records += timed_runs(f"c{threads}", [compiled], api="compile", threads=threads)
    rows = published_rows(records, [figure()])
    assert [(r["with"], r["here"]) for r in rows] == [("threads=1", 2.0), ("threads=2", 3.0)]


def test_published_table_is_only_there_with_figures_and_exports():
    records = timed_runs("e", [2.0], api="eager") + timed_runs("c", [1.0], api="compile")
    assert "published" not in [t.name for t in report.build(records)]
    tables = report.build(records, published=[figure()])
    (row,) = [
        r for r in csv.DictReader(io.StringIO(report.to_csv(tables))) if r["table"] == "published"
    ]
    assert float(row["published"]) == 2.0 and float(row["here"]) == 2.0
    assert row["source"] == "A paper (2020), Table 3"
    markdown = report.to_markdown(tables)
    assert "### published figures beside ours" in markdown
    assert (
        "| 2 | 2 | 1/1 | training time: torch/eager ÷ torch/compile | — | same direction |"
        in markdown
    )
