"""Inference runs flow like training runs (docs/inference.md, issue 43): a comma list of batch
sizes on the command line is a sweep; compare, the Compare screen's tables and the HTML report
draw latency and samples/s against the batch; history list, the summary cache, CSV/JSON and
MLflow exports, trends and regress read an inference run's p50 and samples/s where a training
run's step time and samples/s go; a field a mode never reads splits no configuration.

Each test here fails if an inference run dropped out of that path. The records are constructed
(tests/histories.py's shape); a real torch worker's run through the same paths is the slow test
at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.histories import as_runs, fill, record
from tui_bench import cli
from tui_bench.engine.results import (
    csv_export,
    html_report,
    identity,
    metrics,
    regress,
    stability,
    tables,
    transfer,
    trends,
)
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import presets, sweep
from tui_bench.engine.spec import RunSpec

# p50 ms by (api, batch): compile is faster from batch 8 on
P50_MS = {("eager", 1): 0.25, ("eager", 8): 0.8, ("eager", 64): 4.8}
P50_MS |= {("compile", 1): 0.27, ("compile", 8): 0.7, ("compile", 64): 4.0}


def served(
    index: int, api: str = "eager", batch: int = 1, p50_ms: float | None = None, **spec: object
) -> dict:
    """A finished torch inference record of 200 requests at this batch."""
    made = RunSpec(api=api, threads=1, seed=index, mode="inference", batch_size=batch, **spec)  # type: ignore[arg-type]
    p50 = (p50_ms if p50_ms is not None else P50_MS[(api, batch)]) / 1000
    figures = {
        "latency_p50_s": p50,
        "latency_p90_s": p50 * 1.2,
        "latency_p99_s": p50 * 1.5,
        "latency_max_s": p50 * 2,
        "latency_mean_s": p50 * 1.05,
        "latency_requests": 200,
        "inference_samples_per_s": batch / (p50 * 1.05),
        "steady_steps": 200,
    }
    return record(
        index, 10.0, api=api, threads=1, spec=made.to_dict(), label=made.label(), metrics=figures
    )


def trained(index: int, step_ms: float = 10.0, **spec: object) -> dict:
    made = RunSpec(threads=1, seed=index, **spec)  # type: ignore[arg-type]
    out = record(index, step_ms, threads=1, spec=made.to_dict(), label=made.label())
    out["metrics"] |= {"train_wall_s": step_ms * 0.1, "test_s": step_ms * 0.01}
    return out


def sweep_records() -> list[dict]:
    return [served(i, api, batch) for i, (api, batch) in enumerate(P50_MS)]


# -- the command line: a comma list sweeps the batch size ---------------------------------------
def test_a_comma_list_of_batch_sizes_parses_to_a_list_and_one_value_stays_one():
    parser = cli.build_parser()
    assert parser.parse_args(["run", "--batch-size", "1,8,64,8"]).batch_size == [1, 8, 64]
    assert parser.parse_args(["run", "--batch-size", "8"]).batch_size == 8


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--threads", "1,2"], "--threads takes one value"),
        (["--framework", "torch,mxnet"], "--framework takes one value"),
        (["--batch-size", "1,0"], "batch_size must be between 1 and 65536"),
        (["--batch-size", "1,,8"], "batch_size must be a whole number"),
        (["--batch-size", "1,8", "--dry-run"], "--batch-size lists 2 values"),
    ],
)
def test_a_bad_list_is_one_line_and_exit_2(flags, said, capsys):
    assert cli.main(["run", "--mode", "inference", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1


def test_a_listed_batch_size_is_a_sweep_of_one_configuration_each():
    made = sweep.listed_preset(
        {"mode": "inference", "requests": 50, "threads": 1}, {"batch_size": [1, 8, 64]}
    )
    configs = presets.expand(made, probe=None)
    assert [c.spec.batch_size for c in configs] == [1, 8, 64]
    assert {c.spec.mode for c in configs} == {"inference"} and made.name == "batch-size-sweep"
    assert [c.key for c in configs] == ["batch_size=1", "batch_size=8", "batch_size=64"]


def test_a_list_replaces_the_field_a_preset_sets_and_multiplies_its_matrix(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(
        'mode = "inference"\nbatch_size = 4\nthreads = 1\n'
        'matrix = [{framework = "torch", api = "eager"}, {framework = "torch", api = "compile"}]\n'
    )
    made = sweep.with_listed(presets.load(path), {"batch_size": [1, 8]})
    configs = presets.expand(made, probe=None)
    assert sorted((c.spec.api, c.spec.batch_size) for c in configs) == [
        ("compile", 1), ("compile", 8), ("eager", 1), ("eager", 8)
    ]  # fmt: skip


# -- compare: the default figure, the batch-size table, the study rows ---------------------------
def test_compare_of_inference_runs_is_about_their_p50_unless_asked():
    runs = as_runs(sweep_records())
    comparison = tables.compute(runs)
    assert comparison.metric.key == "latency_p50_s"
    medians = sorted(v for v in comparison.summary.values("median") if v is not None)
    assert medians == sorted(p / 1000 for p in P50_MS.values())
    mixed = tables.compute(as_runs([*sweep_records(), trained(9)]))
    assert mixed.metric.key == "step_median_s"
    assert tables.compute(runs, metric="inference_samples_per_s").metric.key == (
        "inference_samples_per_s"
    )


def test_compare_on_the_command_line_follows_the_runs_mode(capsys):
    history = fill(sweep_records())
    ids = [r.id for r in history.summaries()]
    assert cli.main(["compare", *ids, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    summary = next(t for t in shown if t["name"] == "summary")
    assert "latency p50" in summary["title"]
    batches = next(t for t in shown if t["name"] == "batches")
    assert len(batches["rows"]) == 6


def test_the_batch_size_table_gives_each_family_its_curve():
    table = tables.compute(as_runs(sweep_records())).table("batches")
    assert table is not None
    rows = table.records()
    curve = {(r["with"], r["batch"]): r for r in rows}
    assert set(curve) == {(api, b) for api, b in P50_MS}
    eager_64 = curve[("eager", 64)]
    assert eager_64["p50"] == pytest.approx(4.8e-3)
    assert eager_64["p99"] == pytest.approx(4.8e-3 * 1.5)
    assert eager_64["infer samples/s"] == pytest.approx(64 / (4.8e-3 * 1.05))
    assert [r["batch"] for r in rows if r["with"] == "compile"] == [1, 8, 64]


def test_a_curve_holds_its_points_whatever_requests_each_batch_served():
    # inference-quick serves 60 requests at batch 1 and 10 at batch 64: one curve, not two points
    records = [served(i, "eager", b, requests=n) for i, (b, n) in enumerate(((1, 60), (64, 10)))]
    rows = tables.compute(as_runs(records)).table("batches").records()
    assert [(r["with"], r["batch"], r["requests"]) for r in rows] == [
        ("—", 1, 200),
        ("—", 64, 200),
    ]


def test_no_batch_size_table_without_two_batch_sizes_of_inference_runs():
    one_batch = [served(1, "eager", 8), served(2, "compile", 8)]
    assert tables.compute(as_runs(one_batch)).table("batches") is None
    training = [trained(1, batch_size=8), trained(2, batch_size=64)]
    assert tables.compute(as_runs(training)).table("batches") is None


def test_the_study_table_gains_inference_rows_and_keeps_the_training_figure():
    runs = as_runs([trained(20, framework="torch"), *sweep_records()])
    study = tables.compute(runs, study_metric="train_wall_s").table("study")
    assert study is not None
    rows = study.records()
    inference = [r for r in rows if r["figure"] == "inference latency p50"]
    assert sorted(r["batch"] for r in inference) == [1, 8, 64]
    assert next(r for r in inference if r["batch"] == 8)["torch/eager"] == pytest.approx(8e-4)
    (training,) = [r for r in rows if r["figure"] != "inference latency p50"]
    assert training["torch/eager"] == pytest.approx(1.0)  # train_wall_s, as the study reads it
    test_time = tables.compute(runs, study_metric="test_s").table("study")
    assert test_time is not None
    assert [r["torch/eager"] for r in test_time.records() if r["batch"] is None] == [
        pytest.approx(0.1)
    ]


def test_the_report_shows_the_batch_sizes_and_draws_the_curves():
    pytest.importorskip("matplotlib")
    runs = as_runs(sweep_records())
    comparison = tables.compute(runs)
    page = html_report.collect(runs, comparison, history=runs)
    titles = [f.title for f in page.figures]
    assert any(t.startswith("inference over batch sizes") for t in titles), titles
    text = html_report.render(page)
    assert 'id="batches"' in text
    svg = next(f.svg for f in page.figures if f.title.startswith("inference over batch"))
    assert "batch size" in svg and "inference samples/s" in svg
    training = as_runs([trained(1, batch_size=8), trained(2, batch_size=64)])
    assert 'id="batches"' not in html_report.render(
        html_report.collect(training, tables.compute(training), with_figures=False)
    )


# -- identity: a field the mode never reads splits nothing --------------------------------------
def test_requests_splits_no_training_configuration_and_epochs_no_inference_one():
    runs = as_runs([trained(1), trained(2, requests=50)])
    assert len(identity.group_by_configuration(runs)) == 1
    served_runs = as_runs([served(1, batch=8, requests=50), served(2, batch=8, requests=500)])
    assert len(identity.group_by_configuration(served_runs)) == 2
    epochs = as_runs([served(1, batch=8, epochs=1), served(2, batch=8, epochs=9, lr=0.1)])
    assert len(identity.group_by_configuration(epochs)) == 1


def test_a_training_configuration_keeps_its_id_whatever_requests_says():
    (one,) = as_runs([trained(1)])
    (other,) = as_runs([trained(2, requests=7)])
    assert identity.configuration_of(one).id == identity.configuration_of(other).id
    assert identity.configuration_of(one).get("requests") == RunSpec().requests


# -- history: the list, the summary cache, the exports ---------------------------------------------
def test_history_list_and_the_summary_cache_carry_p50_and_samples_per_s(capsys):
    fill([served(1, batch=8, p50_ms=0.812), trained(2, step_ms=12.5)])
    summaries = {r.mode: r for r in History().summaries()}
    assert summaries["inference"].metric("latency_p50_s") == pytest.approx(8.12e-4)
    assert summaries["inference"].figure("samples_per_s") == pytest.approx(8 / 8.526e-4, 1e-3)
    assert cli.main(["history", "list"]) == 0
    out = capsys.readouterr().out
    assert "0.812" in out and "12.5" in out  # p50 to 3 decimals, the step to 1


def test_the_history_screen_reads_an_inference_run_s_p50_and_samples_served():
    from tui_bench.tui.screens.history import VALUES

    (run,) = as_runs([served(1, batch=8, p50_ms=0.8)])
    assert VALUES["step_ms"](run) == pytest.approx(0.8)  # ms, as the column's header says
    assert VALUES["samples_s"](run) == pytest.approx(8 / (0.8e-3 * 1.05))


def test_csv_and_json_exports_carry_the_latency_figures(tmp_path):
    history = fill(sweep_records())
    csv_path = tmp_path / "runs.csv"
    csv_export.export_csv(history, csv_path)
    header, *rows = csv_path.read_text().splitlines()
    columns = header.split(",")
    for key in ("latency_p50_s", "latency_p90_s", "latency_p99_s", "inference_samples_per_s"):
        assert f"metrics.{key}" in columns
    p50 = columns.index("metrics.latency_p50_s")
    assert sorted(float(r.split(",")[p50]) for r in rows) == sorted(
        p / 1000 for p in P50_MS.values()
    )
    jsonl = tmp_path / "runs.jsonl"
    transfer.export_jsonl(history, jsonl)
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    exported = [line["run"]["metrics"]["latency_p99_s"] for line in lines if "run" in line]
    assert len(exported) == len(P50_MS)


def test_mlflow_gets_the_latency_figures_and_each_request(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from tui_bench.engine.results import mlflow_export

    events = [
        {"type": "epoch_started", "epoch": 1, "epochs": 1, "steps": 4},
        {"type": "requests", "done": 3, "latencies": [0.001, 0.002]},
        {"type": "requests", "done": 4, "latencies": [0.003]},
    ]
    points = list(mlflow_export.series_points(events))
    assert points == [
        ("request_latency_s", 0.001, 0),
        ("request_latency_s", 0.002, 1),
        ("request_latency_s", 0.003, 2),
    ]
    history = fill([served(1, batch=8)])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_export.export(history.all(), history, uri)
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.metrics["latency_p50_s"] == pytest.approx(8e-4)
    assert run.data.metrics["inference_samples_per_s"] > 0


# -- trends and regress ----------------------------------------------------------------------------
def test_trends_follow_an_inference_configuration_by_its_p50():
    runs = as_runs([served(i, batch=8, p50_ms=0.8 if i < 4 else 1.2) for i in range(8)])
    (found,) = trends.trends(runs)
    assert found.metric == "latency_p50_s"
    assert [p.value for p in found.points][:2] == [pytest.approx(8e-4)] * 2
    assert len(found.change_points) == 1 and found.change_points[0].index == 4


def test_regress_gates_inference_runs_on_their_p50_lower_is_better():
    base = as_runs([served(i, batch=8, p50_ms=0.80 + i * 0.001) for i in range(6)])
    slower = as_runs([served(10 + i, batch=8, p50_ms=1.0 + i * 0.001) for i in range(6)])
    report = regress.compare(base, slower)
    assert report.metric == "latency_p50_s"
    (row,) = report.rows
    assert row.mark == regress.WORSE and row.ratio == pytest.approx(1.25, rel=0.01)
    # samples/s: an inference run's own, better higher (the faster side serves more)
    faster = regress.compare(slower, base, metric="samples_per_s")
    assert faster.metric == "inference_samples_per_s" and faster.rows[0].mark == regress.BETTER


# -- the verdict's words ---------------------------------------------------------------------------
def test_an_inference_verdict_speaks_of_requests_not_steps():
    times = [1e-3] * 30 + [5e-3] * 30  # a level change and more
    judged = stability.assess(times, timing=stability.INFERENCE_TIMING)
    text = " ".join(r.message for r in judged.reasons)
    assert "request" in text and "step" not in text.replace("--warmup-steps", "")
    trained_text = " ".join(r.message for r in stability.assess(times).reasons)
    assert "step" in trained_text


# -- a real torch worker, through the command line -------------------------------------------------
@pytest.mark.slow
def test_a_real_batch_size_sweep_reaches_compare_history_and_trends(capsys):
    from conftest import require_module

    require_module("torch")
    code = cli.main(
        ["run", "--mode", "inference", "--batch-size", "1,4", "--requests", "20", "--threads", "1",
         "--model", "mlp", "--warmup-steps", "2", "--train-samples", "200", "--test-samples", "50",
         "--quiet"]
    )  # fmt: skip
    assert code in (0, 1)  # 1: a run's verdict may be noisy; both must be recorded
    runs = History().all()
    assert sorted(r.spec["batch_size"] for r in runs if r.finished) == [1, 4]
    comparison = tables.compute(runs)
    assert comparison.metric.key == "latency_p50_s"
    batches = comparison.table("batches")
    assert batches is not None and [r["batch"] for r in batches.records()] == [1, 4]
    assert all(t.metric == "latency_p50_s" for t in trends.trends(runs))
    capsys.readouterr()
    assert cli.main(["history", "list"]) == 0
    assert "inference" in capsys.readouterr().out
    assert metrics.in_mode("step_median_s", "inference") == "latency_p50_s"
    assert Path(History().home).is_dir()
