"""`history export --mlflow`: a real MLflow SQLite store, read back with mlflow.search_runs."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import require_module

from tests.histories import fill, record
from tui_bench.cli import main
from tui_bench.engine.results import mlflow_export
from tui_bench.engine.results.history import History


def write_series(history: History, run_id: str) -> None:
    events = [
        {"type": "epoch_started", "epoch": 1, "epochs": 2, "steps": 3},
        {"type": "steps", "epoch": 1, "first_step": 0, "losses": [2.3, 2.1]},
        {"type": "steps", "epoch": 1, "first_step": 2, "losses": [1.9]},
        {"type": "epoch_finished", "epoch": 1, "step_median_s": 0.041},
        {"type": "epoch_started", "epoch": 2, "epochs": 2, "steps": 3},
        {"type": "steps", "epoch": 2, "first_step": 0, "losses": [1.5, 1.4, None]},
        {"type": "epoch_finished", "epoch": 2, "step_median_s": 0.040},
    ]
    with open(history.series_path(run_id), "w", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")


def test_series_points_number_steps_across_epochs():
    history_events = [
        {"type": "epoch_started", "steps": 3},
        {"type": "steps", "first_step": 0, "losses": [2.0, 1.0]},
        {"type": "epoch_started", "steps": 3},
        {"type": "steps", "first_step": 1, "losses": [0.5]},
        {"type": "epoch_finished", "epoch": 2, "step_median_s": 0.04},
    ]
    assert list(mlflow_export.series_points(history_events)) == [
        ("loss", 2.0, 0),
        ("loss", 1.0, 1),
        ("loss", 0.5, 4),
        ("epoch_step_median_s", 0.04, 2),
    ]


def test_missing_mlflow_is_one_line_with_the_hint(monkeypatch, capsys):
    fill([record(0, 40)])
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    assert main(["history", "export", "--mlflow"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'tui-bench[mlflow]'" in err and "Traceback" not in err
    assert main(["history", "export"]) == 2  # neither --csv nor --mlflow


def test_export_to_sqlite_read_back_and_no_duplicates(tmp_path, monkeypatch, capsys):
    mlflow = require_module("mlflow")
    runs = [record(i, 40 + i, stability={"verdict": "stable"}) for i in range(3)]
    runs.append(record(3, 40, framework="mxnet", api="gluon", preset="study"))
    runs.append(record(4, 40, status="failed", reason="worker crashed"))
    history = fill(runs)
    write_series(history, runs[0]["id"])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["history", "export", "--mlflow", uri]) == 0
    assert "exported 5 run(s)" in capsys.readouterr().err
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    found = mlflow.search_runs(search_all_experiments=True)
    assert len(found) == 5
    assert sorted(found["tags.tui_bench.run_id"]) == sorted(r["id"] for r in runs)
    first = found[found["tags.tui_bench.run_id"] == runs[0]["id"]].iloc[0]
    assert first["params.framework"] == "torch" and first["params.threads"] == "2"
    assert first["metrics.step_median_s"] == pytest.approx(0.040)
    assert first["tags.tui_bench.version.torch"] == "2.12.1"
    assert first["tags.tui_bench.verdict"] == "stable" and first["tags.tui_bench.host"] == "box-a"
    assert first["status"] == "FINISHED"
    failed = found[found["tags.tui_bench.run_id"] == runs[4]["id"]].iloc[0]
    assert failed["status"] == "FAILED" and failed["tags.tui_bench.reason"] == "worker crashed"
    client = mlflow.tracking.MlflowClient(uri)
    losses = client.get_metric_history(first["run_id"], "loss")
    assert [(m.step, m.value) for m in sorted(losses, key=lambda m: m.step)] == [
        (0, 2.3),
        (1, 2.1),
        (2, 1.9),
        (3, 1.5),
        (4, 1.4),
    ]
    epochs = client.get_metric_history(first["run_id"], "epoch_step_median_s")
    assert sorted((m.step, m.value) for m in epochs) == [(1, 0.041), (2, 0.040)]
    # one experiment per configuration: torch (4 runs, one failed) and mxnet
    experiments = {e.name for e in client.search_experiments()} - {"Default"}
    assert len(experiments) == 2
    # again, plus one new run: only the new one is added
    fill([record(5, 41)])
    assert main(["history", "export", "--mlflow", uri]) == 0
    assert "exported 1 run(s)" in capsys.readouterr().err
    assert len(mlflow.search_runs(search_all_experiments=True)) == 6
