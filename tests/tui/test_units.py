"""Fast tests of the UI's plain logic and of the process boundaries."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.tui.fakes import fake_events
from tui_bench.engine.results import tables as report_tables
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs import presets
from tui_bench.engine.runs.batch import BatchRequest, plan
from tui_bench.engine.runs.reducer import BatchView, stored_run
from tui_bench.engine.spec import RunSpec, SpecError
from tui_bench.tui.live import outcome
from tui_bench.tui.presets_io import threads_sweep
from tui_bench.tui.screens.compare import scaling_line, table_cells
from tui_bench.tui.screens.history import matches, sort_records
from tui_bench.tui.screens.setup import (
    NUMBER_FIELDS,
    form_auto_repeats,
    parse_form,
    sweep_thread_counts,
)
from tui_bench.tui.widgets.graphs import BLOCKS, bar_cells
from tui_bench.tui.widgets.plots import downsample
from tui_bench.tui.widgets.run_view import header_text


def test_downsample_caps_points_at_width_and_keeps_the_mean():
    values = [float(i) for i in range(10_000)]
    xs, ys = downsample(values, 80)
    assert len(xs) == len(ys) == 80
    assert abs(sum(ys) / len(ys) - sum(values) / len(values)) < 1.0
    assert xs[0] < xs[-1]
    assert downsample([1.0, None, 3.0], 80) == ([1.0, 3.0], [1.0, 3.0])  # NaN loss travels as null


def test_fixed_range_graph_does_not_autoscale():
    # Textual's Sparkline would draw a flat 3 % like a flat 100 %; a fixed range must not.
    low = bar_cells([3.0] * 5, 5, 100.0)
    high = bar_cells([100.0] * 5, 5, 100.0)
    assert high == BLOCKS[-1] * 5
    assert low != high and set(low) <= set(BLOCKS[:2])
    assert bar_cells([500.0], 1, 100.0) == BLOCKS[-1]  # clipped, not rescaled
    assert bar_cells([50.0], 4, 100.0) == "   " + BLOCKS[4]  # newest on the right


def test_live_run_coalesces_until_drained_and_tracks_progress():
    spec = RunSpec(epochs=3, batch_size=64)
    run = BatchView(spec=spec)
    events = fake_events(spec, "r1", steps_per_epoch=40, finish=False, stop_after_epoch=2)
    for event in events:
        run.push(event)
    assert run.losses == [] and run.status == "starting"  # nothing applied before a drain
    assert run.drain() is True
    assert run.drain() is False
    assert len(run.losses) == 80 and len(run.epoch_records) == 2
    assert run.overall_fraction() == pytest.approx(2 / 3)
    assert run.eta_s() == pytest.approx(40 * 0.04, rel=0.05)  # one epoch left at 40 ms/step
    assert run.latest_figures()["step_median_s"] == 0.04


def test_live_run_batch_resets_per_run_state():
    spec = RunSpec(epochs=1)
    run = BatchView(spec=spec, runs_total=2)
    for event in fake_events(spec, "r1", steps_per_epoch=10) + fake_events(
        spec, "r2", steps_per_epoch=10
    ):
        run.apply(event)
    assert run.run_ids == ["r1", "r2"] and run.run_index == 1
    assert len(run.losses) == 10 and len(run.results) == 2


def test_series_without_result_shows_interrupted():
    spec = RunSpec(epochs=2)
    events = fake_events(spec, "r1", finish=False, stop_after_epoch=1)
    run = stored_run(events)
    assert run.status == "interrupted" and run.done


def test_parse_form_one_line_errors_and_sweep():
    base = {
        "framework": "torch",
        "api": "eager",
        "model": "cnn",
        "dataset": "synthetic-mnist",
        "device": "cpu",
        "threads": "2",
        "batch_size": "64",
        "epochs": "1",
        "lr": "0.001",
        "repeats": "2",
        "seed": "0",
        "steps_per_epoch": "",
        "train_samples": "",
        "test_samples": "",
        "dropout": "0.25",
        "warmup_steps": "5",
        "target_accuracy": "",
        "timing_window": "10",
        "workers": "1",
        "scaling": "weak",
        "mode": "train",
        "requests": "1000",
    }
    spec, sweep = parse_form(base, [1, 2])
    assert spec.threads == 2 and sweep is None and spec.steps_per_epoch is None
    with pytest.raises(SpecError, match="^lr must be a number, got 'fast'$"):
        parse_form({**base, "lr": "fast"}, [1, 2])
    with pytest.raises(SpecError, match="needs a sequence dataset"):
        parse_form({**base, "model": "lstm"}, [1, 2])
    spec, sweep = parse_form({**base, "threads": "sweep"}, [1, 2])
    assert sweep == [1, 2]
    single = plan("batch-x", BatchRequest(spec=spec.to_dict()))  # one configuration: its repeats
    assert [c.spec.threads for c in single.configs] == [2] and single.repeats == 2
    # The threads sweep is a preset run by engine.sweep: one configuration per count, repeats
    # interleaved (1 2 1 2) so drift does not masquerade as a difference.
    configs = presets.expand(threads_sweep(spec, sweep), probe=None)
    assert [c.key for c in configs] == ["threads=1", "threads=2"]
    assert all(c.skip_reason is None and c.spec.epochs == 1 for c in configs)
    order = presets.interleave(configs, 2)
    assert [(c.spec.threads, r) for c, r in order] == [(1, 0), (2, 0), (1, 1), (2, 1)]
    assert sweep_thread_counts(6) == [1, 2, 4, 6]


def test_repeats_auto_in_the_form_is_a_batch_that_repeats_until_the_median_is_known():
    values = {
        "framework": "torch", "api": "eager", "model": "cnn", "dataset": "synthetic-mnist",
        "device": "cpu", "threads": "2", "mode": "train", "scaling": "weak", "repeats": " Auto ",
        **{
            n: "" if d.default is None else str(d.default)
            for n, d in NUMBER_FIELDS.items()
            if n != "repeats"
        },
    }  # fmt: skip
    spec, sweep = parse_form(values, [1, 2])  # not refused as "repeats must be a whole number"
    assert spec.repeats == 1 and sweep is None
    auto = form_auto_repeats(values)
    assert auto == {"max": 20, "target_ci": 0.02}  # the CLI's defaults
    planned = plan("batch-x", BatchRequest(spec=spec.to_dict(), auto_repeats=auto))
    assert planned.auto_repeats == auto and planned.repeats == 20  # at most
    assert form_auto_repeats({**values, "repeats": "3"}) is None
    with pytest.raises(SpecError, match="^repeats must be a whole number, got 'autoo'$"):
        parse_form({**values, "repeats": "autoo"}, [1, 2])


def test_a_batch_that_stopped_its_repeats_says_why_when_it_ends():
    view = BatchView(spec=RunSpec())
    view.fold(
        [
            {"type": "plan", "total": 20, "auto_repeats": {"max": 20, "target_ci": 0.02}},
            {"type": "result", "record": {"status": "finished", "metrics": {}}},
            {
                "type": "batch_done",
                "statuses": ["finished"],
                "stopped": {"k": "95 % CI of the median ±1.0 % after 6 repeats (target ±2 %)"},
            },
        ]
    )
    said = outcome(view, "done", "c")
    assert "repeats: 95 % CI of the median ±1.0 % after 6 repeats" in said.message
    assert "run 1/≤20" in header_text(view)


def runs_of_records(records: list[dict]) -> list[Run]:
    """Constructed records as History hands them out."""
    return [Run.from_record(r) for r in records]


def _record(run_id, threads, step, status="finished", fw="torch"):
    spec = RunSpec(threads=threads, framework=fw).to_dict()
    return {
        "id": run_id,
        "spec": spec,
        "label": run_id,
        "status": status,
        "started_at": run_id,
        "metrics": {"step_median_s": step, "samples_per_s": 128 / step},
    }


def test_compare_view_lays_out_engine_report_tables():
    # Five repeats a side: the Mann-Whitney test runs; its verdict reaches the scaling table.
    one = [_record(f"a{i}", 1, 0.080 + i / 1000) for i in range(5)]
    two = [_record(f"b{i}", 2, 0.040 + i / 1000) for i in range(5)]
    tables = {t.name: t for t in report_tables.compute(runs_of_records(one + two)).tables()}
    columns, rows = table_cells(tables["summary"])
    assert columns[:5] == ["#", "configuration", "n", "median ms", "IQR ms"]
    assert [str(r[0]) for r in rows] == ["#1", "#2"] and str(rows[0][2]) == "5"
    assert str(rows[0][3]) == "82.0" and rows[0][3].justify == "right"
    context, xs, ys = scaling_line(tables["scaling"])
    assert xs == [1.0, 2.0] and ys[0] == 1.0 and ys[1] == pytest.approx(0.082 / 0.042)
    _columns, rows = table_cells(tables["scaling"])
    # The terminal's short test cell; the whole sentence stays in CSV/JSON (tests/test_report.py).
    assert str(rows[1][-1]).startswith("sig p=")
    # Too few repeats: the verdict says so instead of guessing.
    few = {t.name: t for t in report_tables.compute(runs_of_records(one[:2] + two[:2])).tables()}
    assert str(table_cells(few["scaling"])[1][1][-1]) == "n<5"
    # Runs that differ in more than threads give no scaling line.
    mixed = report_tables.compute(
        runs_of_records([_record("a", 1, 0.08), _record("c", 2, 0.04, fw="mxnet")])
    ).tables()
    assert all(t.name != "scaling" or scaling_line(t) is None for t in mixed)


def test_history_filter_and_sort():
    records = runs_of_records(
        [
            _record("r1", 1, 0.08),
            _record("r2", 2, 0.04, status="cancelled"),
            {**_record("r3", 4, 0.03), "metrics": {}},
        ]
    )
    assert [r.id for r in records if matches(r, "cancelled")] == ["r2"]
    assert [r.id for r in records if matches(r, "torch 2")] == ["r2"]
    by_step = sort_records(records, "step_ms", reverse=False)
    assert [r.id for r in by_step] == ["r2", "r1", "r3"]  # unknown last
    assert [r.id for r in sort_records(records, "step_ms", reverse=True)] == ["r1", "r2", "r3"]


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_ui_process_never_imports_a_framework():
    loaded = _modules_after("import tui_bench.cli, tui_bench.tui.app")
    assert "textual" in loaded
    assert not loaded & {"torch", "tensorflow", "keras", "mxnet", "jax"}


def test_engine_never_imports_textual():
    loaded = _modules_after(
        "import tui_bench.engine.runs.runner, tui_bench.engine.results.history, tui_bench.cli"
    )
    assert not any(m == "textual" or m.startswith("textual.") for m in loaded)


def test_no_screen_widget_or_palette_imports_the_app_module():
    """Screens ask through tui/messages.py; importing the app back would tie them in a circle."""
    import ast
    from pathlib import Path

    import tui_bench.tui as tui

    root = Path(tui.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "app.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n == "tui_bench.tui.app" for n in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
    assert (root / "screens" / "setup.py").exists()  # the walk really saw the screens


def test_key_text_names_keys_the_way_help_and_buttons_write_them():
    from tui_bench.tui.keys import key_text

    assert key_text("f2") == "F2"
    assert key_text("ctrl+r") == "ctrl+r" and key_text("ctrl+r", compact=True) == "^r"
    assert key_text("question_mark") == "?" and key_text("slash") == "/"
    assert key_text("escape") == "esc" and key_text("space") == "space"
