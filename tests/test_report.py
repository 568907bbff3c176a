"""Comparison tables over constructed run records (no workers): statistics, ratios with
significance, GPU vs CPU, thread scaling, the study-shaped table, time to accuracy, exports.
``tables`` computes them as typed rows of numbers; ``render`` writes them out."""

from __future__ import annotations

import csv
import io
import json

import pytest
from histories import as_runs
from rich.console import Console

from tui_bench.engine.results import identity, published, render, tables
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


def build(records, **kwargs) -> list[tables.Table]:
    return tables.compute(as_runs(records), **kwargs).tables()


def table(shown, name):
    return next(t for t in shown if t.name == name)


def rows_as_dicts(t: tables.Table) -> list[dict]:
    return t.records()


def test_summary_statistics_per_configuration():
    records = runs("a", [1.0, 2.0, 3.0, 4.0, 10.0], threads=1) + [
        record("a-failed", 0, status="failed", threads=1)
    ]
    (row,) = rows_as_dicts(table(build(records), "summary"))
    assert row["configuration"] == "torch/eager cnn synthetic-mnist cpu×1"
    assert row["n"] == 5 and row["median"] == 3.0 and row["IQR"] == 2.0
    assert row["mean"] == 4.0 and row["min"] == 1.0 and row["max"] == 10.0
    assert row["failed"] == 1 and "injected crash" in row["notes"]
    assert "high spread" in row["warning"]  # std 3.5 is 87 % of the mean


def test_gpu_against_cpu_with_significance():
    records = runs("c", [4.0, 4.1, 3.9, 4.2, 4.05], device="cpu") + runs(
        "g", [1.0, 1.1, 0.9, 0.95, 1.05], device="gpu"
    )
    rows = rows_as_dicts(table(build(records), "comparisons"))
    (row,) = rows
    assert row["differs in"] == "device"
    assert row["configuration"] == "gpu" and row["baseline"] == "cpu"
    assert row["ratio"] == pytest.approx(1.0 / 4.05)
    assert row["speed-up"] == pytest.approx(4.05)
    assert row["significance"].startswith("significant (p=0.00794")


def test_few_repeats_never_give_a_bare_verdict():
    records = runs("e", [1.0, 1.1, 1.2], api="eager") + runs("c", [2.0, 2.1, 2.2], api="compile")
    (row,) = rows_as_dicts(table(build(records), "comparisons"))
    assert row["configuration"] == "compile" and row["baseline"] == "eager"
    assert row["ratio"] == pytest.approx(2.1 / 1.1)
    assert row["significance"].startswith("not enough repeats (n=3/3")


def test_thread_scaling_table_with_efficiency_and_oversubscription():
    records = (
        runs("t1", [1.00, 1.01, 0.99, 1.02, 0.98], threads=1)
        + runs("t2", [0.55, 0.56, 0.54, 0.57, 0.53], threads=2)
        + runs("t4", [0.60, 0.61, 0.59, 0.62, 0.58], threads=4)
    )
    rows = rows_as_dicts(table(build(records), "scaling"))
    assert [r["threads"] for r in rows] == [1, 2, 4]
    assert rows[0]["speed-up"] == 1.0 and rows[0]["vs fewest threads"] == "baseline"
    assert rows[1]["speed-up"] == pytest.approx(1.0 / 0.55)
    assert rows[1]["efficiency"] == pytest.approx(1.0 / 0.55 / 2)  # a number; shown as 91%
    _headers, shown = render.shown_rows(table(build(records), "scaling"))
    assert shown[1][4] == (f"{1.0 / 0.55 / 2:.0%}", True)
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
    study = table(build(records), "study")
    headers, shown = render.shown_rows(study)
    # the API alone tells the stacks apart (as the configurations' names say), in seconds;
    # the columns themselves keep "framework/api"
    assert headers == ["model", "dataset", "device", "threads", "eager s", "compile s"]
    assert [row.cells[1:4] for row in study.rows] == [
        ("synthetic-mnist", "cpu", 1),
        ("synthetic-mnist", "cpu", 2),
        ("synthetic-cifar10", "cpu", 1),
        ("synthetic-cifar10", "cpu", 2),
    ]
    # train_wall_s median, the study's figure, and its n: two numbers, shown as one cell
    assert study.records()[1]["torch/eager"] == 200 and study.records()[1]["torch/eager n"] == 1
    assert shown[1][4] == ("200 (n=1)", True)


def test_time_to_accuracy_reached_and_not_reached():
    reached = runs("r", [1.0, 1.0], target_accuracy=0.5)
    for i, r in enumerate(reached):
        r["metrics"].update(target_reached_epoch=2, target_reached_s=10.0 + i)
    missed = runs("m", [1.0], target_accuracy=0.99, threads=1)
    for r in missed:
        r["metrics"].update(target_reached_epoch=None, target_reached_s=None)
    rows = rows_as_dicts(table(build(reached + missed), "summary"))
    assert rows[0]["time to accuracy"] == "epoch 2, 10.5 s (2/2 reached 0.5)"
    assert rows[1]["time to accuracy"] == "not reached (1 run(s))"


def test_skipped_configurations_are_listed():
    tables = build(runs("a", [1.0]), skipped=[("framework=mxnet", "skipped: not here")])
    assert table(tables, "skipped").records() == [
        {"configuration": "framework=mxnet", "reason": "skipped: not here"}
    ]


def test_csv_and_markdown_exports():
    records = runs("c", [4.0, 4.1, 3.9, 4.2, 4.05], device="cpu") + runs(
        "g", [1.0, 1.1, 0.9, 0.95, 1.05], device="gpu"
    )
    tables = build(records)
    rows = list(csv.DictReader(io.StringIO(render.csv_text(tables))))
    assert {r["table"] for r in rows} == {"summary", "comparisons", "study"}
    summary = [r for r in rows if r["table"] == "summary"]
    assert float(summary[0]["median"]) == 4.05  # full precision in CSV
    markdown = render.markdown(tables)
    assert "| differs in | with | configuration | baseline | ratio | speed-up | test |" in markdown
    # 3 significant figures and the test in a few characters; the words stay in the CSV
    assert "| device | — | gpu | cpu | 0.247 | 4.05 | sig p=0.0079 |" in markdown
    comparison = next(r for r in rows if r["table"] == "comparisons")
    assert comparison["significance"].startswith("significant (p=0.00794")
    assert float(comparison["ratio"]) == pytest.approx(1.0 / 4.05)


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
    (row,) = rows_as_dicts(table(build(same, metric="test_accuracy"), "comparisons"))
    assert row["significance"].startswith("no test: every run used seed 0")
    # step time does not come from the seed: the test stands
    (row,) = rows_as_dicts(table(build(same), "comparisons"))
    assert row["significance"].startswith("not significant") or "p=" in row["significance"]


def test_accuracy_significance_is_tested_when_repeats_vary_the_seed():
    varied = accuracy_runs("e", [0.90, 0.91, 0.92, 0.93, 0.94], range(5), api="eager")
    varied += accuracy_runs("c", [0.80, 0.81, 0.82, 0.83, 0.84], range(5), api="compile")
    tables = build(varied, metric="test_accuracy")
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
    card = table(build(a + b), "fairness")
    rows = [row.cells for row in card.rows]
    # One row per setting and value, naming the configurations that have it: three columns
    # however many are compared. The API tells these two apart, so their names are the API
    # alone, and the precision that changes with it is on the card, not hidden.
    assert rows == [
        ("precision", "fp32", "eager"),
        ("precision", "tf32", "compile"),
        ("compilation", "no (eager)", "eager"),
        ("compilation", "yes (torch.compile, inductor)", "compile"),
        ("machine load", "quiet (load ≈0 on 2)", "eager"),
        ("machine load", "busy (load ≈4 on 2)", "compile"),
    ]
    assert card.names == ["setting", "value", "configurations"]


def test_fairness_card_names_a_hidden_difference_and_the_thread_flag():
    a = runs("a", [1.0], framework="torch", api="eager")
    b = runs("b", [2.0], framework="tensorflow", api="graph", timing="pipelined")
    b[0]["metrics"]["threads_flag"] = "used 1.9 cores with 1 thread(s) configured"
    b[0]["metrics"]["cores_observed"] = 1.9
    a[0]["metrics"]["cores_observed"] = 1.02
    rows = [row.cells for row in table(build(a + b), "fairness").rows]
    # the timing mode changes with the framework, and the names ("torch") do not say it
    assert ("timing mode", "pipelined", "tensorflow") in rows
    assert ("threads observed", "≈1 cores", "torch") in rows
    assert ("threads observed", "≈2 cores", "tensorflow") in rows
    assert rows[-1] == ("thread flag", "used more cores than configured", "tensorflow")
    # a field the names do say is not repeated on the card
    c = runs("c", [1.0], timing="pipelined")
    named = [row.cells for row in table(build(a + c), "fairness").rows]
    assert "timing mode" not in {row[0] for row in named}


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
    rows = [row.cells for row in table(build(a + b), "fairness").rows]
    kernels = {row[2]: row[1] for row in rows if row[0] == "attention kernel"}
    assert kernels["torch"].startswith("SDPA math") and kernels["keras"].endswith("XLA on")
    # the same in both, shown all the same: an emulated bf16 number is not a bf16 one
    assert ("bf16", emulated, "torch, keras") in rows


def test_fairness_card_says_where_the_initial_weights_came_from():
    # A transformer run with the shared draw beside a record from before it (each framework's own
    # draw, no "init" setting): the starting points differ, and the card says so.
    shared = with_worker(
        runs("s", [1.0], framework="torch", model="transformer", dataset="synthetic-imdb"),
        init="shared: numpy RandomState draw, seed 0 (adapters/shared_init.py)",
    )
    own = with_worker(
        runs(
            "o",
            [2.0],
            framework="mxnet",
            api="gluon",
            model="transformer",
            dataset="synthetic-imdb",
        )
    )
    rows = [row.cells for row in table(build(shared + own), "fairness").rows]
    weights = {row[2]: row[1] for row in rows if row[0] == "initial weights"}
    assert weights["torch"].startswith("shared: numpy RandomState draw, seed 0")
    assert weights["mxnet"] == "—"


def test_no_fairness_card_when_nothing_else_differs():
    records = runs("a", [1.0, 1.1], api="eager") + runs("b", [2.0, 2.1], api="compile")
    assert "fairness" not in [t.name for t in build(records)]


def test_old_records_without_the_new_spec_fields_group_with_defaults():
    old = runs("o", [1.0, 1.1], api="eager")
    for r in old:
        for key in ("precision", "autotune", "input", "timing", "timing_window"):
            r["spec"].pop(key)
    new = runs("n", [1.2, 1.3], api="eager")
    (row,) = rows_as_dicts(table(build(old + new), "summary"))
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
    rows = rows_as_dicts(table(build(records), "workers"))
    torch_weak = [r for r in rows if r["scaling"] == "weak" and "torch" in r["with"]]
    assert [r["workers"] for r in torch_weak] == [1, 2]
    weak2 = torch_weak[1]
    # efficiency = throughput_N / (N x throughput_1): 150 / (2 x 100)
    assert weak2["speed-up"] == pytest.approx(1.5) and weak2["efficiency"] == pytest.approx(0.75)
    assert weak2["global batch"] == 32 and torch_weak[0]["global batch"] == 16
    strong = [r for r in rows if r["scaling"] == "strong"]
    assert [r["workers"] for r in strong] == [1, 2]
    assert strong[1]["efficiency"] == pytest.approx(0.9) and strong[1]["global batch"] == 32
    assert strong[1]["comm set-up s"] == 0.2 and strong[1]["slowest/fastest rank"] == 1.1
    # A family with no one-worker run of its own is not compared with another framework's.
    assert not any("tensorflow" in r["with"] for r in rows)


def test_worker_scaling_table_only_when_workers_differ():
    same = [scaling_run("a", 100.0, workers=2), scaling_run("b", 120.0, workers=2, threads=2)]
    assert "workers" not in [t.name for t in build(same)]
    differ = build([scaling_run("a", 100.0, workers=1), scaling_run("b", 190.0, workers=2)])
    assert table(differ, "workers").records()[1]["efficiency"] == pytest.approx(0.95)
    assert "| 95% |" in render.markdown([table(differ, "workers")])


def test_oversubscription_counts_threads_of_every_worker():
    fits = runs("a", [1.0], threads=1, workers=2)
    over = runs("b", [1.0], threads=2, workers=2)
    summary = table(build(fits + over), "summary")
    assert summary.values("oversubscribed") == [False, True]
    assert summary.values("notes") == ["", "oversubscribed"]


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
    tables = build(records, published=figures, skipped=skipped)
    return rows_as_dicts(table(tables, "published"))


def test_published_ratio_is_the_ratio_of_medians_over_runs():
    # medians 4 and 2: the means (4 and 34.3) would say the opposite
    records = timed_runs("e", [2.0, 4.0, 6.0], api="eager") + timed_runs(
        "c", [1.0, 2.0, 100.0], api="compile"
    )
    (row,) = published_rows(records, [figure(says="compile trains 2x faster")])
    assert row["figure"] == "training time: torch/eager ÷ torch/compile"
    assert row["published"] == 2.0 and row["here"] == pytest.approx(2.0)
    assert (row["n"], row["n denominator"]) == (3, 3) and row["with"] == "—"  # shown "3/3"
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
    assert row["here"] == 35 and row["n"] == 3 and row["n denominator"] is None
    assert row["stability"] == ""


def test_published_figure_not_run_here_says_why():
    records = timed_runs("e", [2.0, 2.0], api="eager")  # no compile run at all
    (row,) = published_rows(records, [figure()])
    assert row["here"] is None and (row["n"], row["n denominator"]) == (2, 0)
    assert row["notes"] == "not run here: no run of torch/compile"
    skipped = [("api=compile", "skipped: no runtime for torch/compile")]
    (row,) = published_rows(records, [figure()], skipped)
    assert row["notes"] == "not run here: torch/compile: skipped: no runtime for torch/compile"
    failed = records + [record("c-failed", 0, status="failed", api="compile")]
    (row,) = published_rows(failed, [figure()])
    assert row["notes"] == "not run here: torch/compile has no finished run (1 not finished)"
    other = figure(where={"model": "vgg16"})  # neither side was run
    (row,) = published_rows(records, [other])
    assert row["here"] is None and (row["n"], row["n denominator"]) == (0, 0)
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
    assert [(r["with"], r["here"]) for r in rows] == [("1 thr", 2.0), ("2 thr", 3.0)]


def test_published_table_is_only_there_with_figures_and_exports():
    records = timed_runs("e", [2.0], api="eager") + timed_runs("c", [1.0], api="compile")
    assert "published" not in [t.name for t in build(records)]
    tables = build(records, published=[figure()])
    (row,) = [
        r for r in csv.DictReader(io.StringIO(render.csv_text(tables))) if r["table"] == "published"
    ]
    assert float(row["published"]) == 2.0 and float(row["here"]) == 2.0
    assert row["source"] == "A paper (2020), Table 3"
    markdown = render.markdown(tables)
    assert "### published figures beside ours" in markdown
    assert (
        "| 2 | 2 | 1/1 | training time: torch/eager ÷ torch/compile | — | same direction |"
        in markdown
    )


# -- numbers stay numbers; names stay short ----------------------------------------------------------
def every_table() -> list[tables.Table]:
    """Runs that give every table: threads, workers, framework/api, a published figure, a
    setting that differs and a skipped configuration."""
    records = []
    spread = [1.0, 1.1, 0.9, 1.05, 0.95]  # five repeats a side: the Mann-Whitney test runs
    for threads, wall in ((1, 4.0), (2, 2.5)):
        walls = [wall * x for x in spread]
        records += timed_runs(f"e{threads}", walls, api="eager", threads=threads)
        records += timed_runs(f"c{threads}", [w / 2 for w in walls], api="compile", threads=threads)
    records += [scaling_run("w1", 100.0, workers=1), scaling_run("w2", 170.0, workers=2)]
    for r in records:
        r["worker"] = {"settings": {"compile": r["spec"]["api"] == "compile"}}
        r["metrics"]["warmup_s"] = 0.5
    records[0]["metrics"]["cores_observed"] = 1.9
    shown = build(
        records,
        published=[figure()],
        skipped=[("framework=mxnet", "skipped: no runtime")],
    )
    names = {t.name for t in shown}
    expected = {"summary", "comparisons", "scaling", "workers", "study", "published", "fairness"}
    assert names == expected | {"skipped"}
    return shown


def test_every_numeric_csv_column_loads_as_a_float_with_pandas(tmp_path):
    pandas = pytest.importorskip("pandas")
    shown = every_table()
    path = tmp_path / "compare.csv"
    render.write_exports(shown, path, None)
    frame = pandas.read_csv(path)
    numeric = {c.name for t in shown for c in t.columns if c.numeric}
    # spread, efficiency, p-values and n are numbers of their own, not text in another cell
    assert {"IQR", "std", "min", "max", "efficiency", "p", "noise", "n", "here"} <= numeric
    assert {"median samples/s", "median warm-up s"} <= numeric  # beside the compared metric
    assert not {"mean ± std", "min–max"} & set(frame.columns)
    for name in numeric:
        column = frame[name]
        assert column.dtype.kind in "fi", f"{name}: {column.dtype} ({column.dropna().tolist()[:3]})"
        assert column.notna().any(), name  # each holds numbers somewhere in these runs
    efficiency = frame.loc[frame["table"] == "scaling", "efficiency"].astype(float)
    assert efficiency.iloc[1] == pytest.approx(0.5)  # same step time at 2 threads: not "50%"


def test_json_numbers_are_numbers_with_their_kind_and_unit():
    data = json.loads(render.json_text(every_table()))
    for t in data:
        assert len(t["columns"]) == len(t["kinds"]) == len(t["units"])
        for row in t["rows"]:
            for value, kind in zip(row, t["kinds"], strict=True):
                if kind in tables.NUMERIC_KINDS:
                    assert value is None or type(value) in (int, float), (t["name"], value)
                elif kind == tables.FLAG:
                    assert isinstance(value, bool)
    summary = next(t for t in data if t["name"] == "summary")
    assert summary["units"][summary["columns"].index("median")] == "s"
    assert summary["verdicts"][0]  # each measured row says whose runs and their verdicts
    (side,) = summary["verdicts"][0].values()
    assert side["state"] == "stable" and side["n"] == 5


def workload_matrix() -> list[dict]:
    """A study-shaped sweep: framework/api × a workload matrix whose model, dataset and batch
    size vary together, and a compile setting that differs with the framework."""
    records = []
    for framework, api in (("torch", "eager"), ("keras", "tensorflow")):
        for model, dataset, batch in (
            ("mlp", "synthetic-mnist", 80),
            ("cnn", "synthetic-cifar10", 64),
        ):
            fields = dict(
                framework=framework, api=api, model=model, dataset=dataset, batch_size=batch
            )
            records += with_worker(
                runs(f"{framework}{model}", [1.0, 1.1, 1.2], **fields),
                compile="no (eager)" if framework == "torch" else "yes (tf.function)",
            )
    return records


def test_compare_at_80_columns_names_configurations_briefly():
    shown = build(workload_matrix())
    summary = table(shown, "summary")
    # the fewest fields that tell them apart (identity's labels): the framework stands for its
    # API, the model for its dataset and batch size
    assert summary.values("configuration") == [
        "torch · mlp",
        "torch · cnn",
        "keras · mlp",
        "keras · cnn",
    ]
    out = io.StringIO()
    render.terminal(Console(file=out, width=80, color_system=None), shown)
    text = out.getvalue()
    for long_form in ("framework=", "api=", "model=", "dataset=", "batch_size="):
        assert long_form not in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    ratios = table(shown, "comparisons").records()
    assert [(r["with"], r["configuration"], r["baseline"]) for r in ratios] == [
        ("mlp", "keras", "torch"),
        ("cnn", "keras", "torch"),
    ]
    # every name whole on one line (not folded), in the summary and on the fairness card
    for name in summary.values("configuration"):
        assert any(str(name) in line for line in lines), name
    # the card's one setting is said once, above it; each row its value and who has it
    assert "fairness card: settings that differ between the compared runs — setting" in text
    card = [line for line in lines if line.startswith(("│ no (eager)", "│ yes (tf.function)"))]
    assert len(card) == 2 and "keras · mlp" in card[1] and "torch · mlp" in card[0]


def test_the_card_names_a_setting_that_varies_along_with_the_names():
    """The card leaves out what the names say, never what they leave out: threads that change
    with the model are on it when the model alone names the configurations."""
    records = runs("a", [1.0], model="mlp", threads=1) + runs("b", [2.0], model="cnn", threads=2)
    shown = build(records)
    assert table(shown, "summary").values("configuration") == ["mlp", "cnn"]
    assert ("threads configured", "1", "mlp") in [r.cells for r in table(shown, "fairness").rows]


def test_compare_groups_runs_as_trends_and_regress_do():
    """identity's configurations: a run whose dataset lives in another directory is a repeat of
    the same configuration (compare split it off before), another thread count is not."""
    records = runs("a", [1.0, 1.1], threads=1) + runs("b", [1.2], threads=1, data_dir="/elsewhere")
    records += runs("c", [2.0], threads=2)
    comparison = tables.compute(as_runs(records))
    assert [g.config for g in comparison.groups] == list(
        identity.group_by_configuration(as_runs(records))
    )
    assert comparison.summary.values("n") == [3, 1]
    assert comparison.summary.values("configuration") == ["1 thr", "2 thr"]


def test_damaged_records_give_tables_not_a_traceback():
    good = runs("a", [1.0, 1.1], api="eager")
    damaged = [
        {"id": "x", "status": "finished", "spec": "garbage", "metrics": {"step_median_s": "fast"}},
        {"id": "y", "status": "finished", "spec": RunSpec(api="compile").to_dict(), "metrics": []},
        {"status": 7, "spec": {"threads": "two"}, "stability": "noisy", "worker": "?"},
        {**good[0], "id": "z", "metrics": {"step_median_s": float("nan")}},
        "not a record",
    ]
    shown = build(good + damaged)
    summary = table(shown, "summary").records()
    assert summary[0]["n"] == 2 and summary[0]["median"] == pytest.approx(1.05)  # NaN left out
    assert all(r["median"] is None for r in summary[1:])  # no usable number: none shown
    data = json.loads(render.json_text(shown))  # strict JSON: no NaN anywhere
    assert {t["name"] for t in data} >= {"summary"}
    assert render.csv_text(shown) and render.markdown(shown)


def eight_configuration_sweep() -> list[dict]:
    """framework/api × threads, 4 repeats each (too few for the test), one keras run noisy."""
    records = []
    stacks = (("torch", "eager"), ("keras", "tensorflow"), ("tensorflow", "function"))
    stacks += (("mxnet", "gluon"),)
    for k, (framework, api) in enumerate(stacks):
        for threads in (1, 2):
            base = (0.03 + 0.01 * k) * (1.7 if threads == 1 else 1.0)
            values = [base * (1 + i / 100) for i in range(4)]
            batch = runs(f"{framework}{threads}-", values, framework=framework, api=api)
            for i, r in enumerate(batch):
                r["spec"]["threads"] = threads
                noisy = framework == "keras" and threads == 1 and i == 0
                r["stability"] = {"verdict": "noisy" if noisy else "stable"}
            records += batch
    return records


def test_an_eight_configuration_sweep_reads_at_80_columns():
    shown = build(eight_configuration_sweep())
    out = io.StringIO()
    render.terminal(Console(file=out, width=80, color_system=None), shown)
    text = out.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    names = table(shown, "summary").values("configuration")
    assert len(names) == 8 and "tensorflow · 1 thr" in names
    firsts = [line for line in lines if line.startswith("│ ") and not line.startswith("│  ")]
    summary_rows = firsts[: len(names)]  # each row's first line
    for name, line in zip(names, summary_rows, strict=True):
        assert line.startswith(f"│ {name} "), (name, line)  # whole, on its own row's first line
    # no word of a header or a configuration split across lines
    for word in ("configuration", "tensorflow", "speed-up", "efficiency"):
        assert word in text
    # step times in ms, 3 significant figures, the unit in the header; exports in seconds
    assert "median ms" in text or ("median" in text and "ms" in text)
    torch_2 = next(line for line in lines if line.startswith("│ torch · 2 thr "))
    assert "│ 4 │" in torch_2 and " 30.4 " in torch_2 and "0.0304" not in text
    assert " 30.0–30.9 " in torch_2  # 30.0, not 30: three figures each
    csv_rows = list(csv.DictReader(io.StringIO(render.csv_text(shown))))
    first = next(r for r in csv_rows if r["table"] == "summary")
    assert float(first["median"]) == pytest.approx(0.03 * 1.7 * 1.015)  # seconds, every digit
    # what every row shares is said once, above the table; a test in a few characters
    assert text.count("framework/api") == 1 and "not enough repeats" not in text
    words = " ".join(text.split())
    assert "differs in framework/api; baseline torch" in words
    assert "n<5: a side has fewer than 5 repeats" in words
    # a number whose runs are not all stable says so beside it
    keras = [line for line in lines if line.startswith("│ 1 thr │ keras")]
    assert len(keras) == 1 and "n<5; unstable: this 1 noisy of 4" in keras[0]
    scaling = [line for line in lines if line.startswith("│ keras ") and "baseline" in line]
    assert len(scaling) == 1 and "baseline; unstable:" in scaling[0]
