"""The Compare screen's published tab: a study sweep's published figures beside ours, the same
table as ``tui-bench compare``, reached by cycling tables with t."""

from __future__ import annotations

from textual.widgets import DataTable, Static, TabbedContent

from tests.tui.helpers import show_in_compare, wait_for
from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs import presets
from tui_bench.engine.runs import sweep as sweep_module
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.compare import CompareScreen


def nayak_sweep() -> sweep_module.Sweep:
    """nayak-jain-2019-quick recorded without workers: PyTorch and Keras-on-TensorFlow runs on
    the CPU with the CNN's lines of code; every other API not run, one Keras run noisy."""
    preset = presets.load(presets.find("nayak-jain-2019-quick"))
    sweep = sweep_module.create(preset, probe=None)
    history = History()
    for config in sweep.configs:
        spec = config.spec
        if spec.device != "cpu" or (spec.framework, spec.api) not in {
            ("torch", "eager"),
            ("tensorflow", "keras"),
        }:
            continue
        for repeat in range(2):
            noisy = spec.framework == "tensorflow" and repeat == 1
            history.add(
                {
                    "id": f"run-{spec.framework}-{repeat}",
                    "status": "finished",
                    "spec": spec.to_dict(),
                    "group": sweep.id,
                    "config": config.key,
                    "repeat": repeat,
                    "metrics": {"step_median_s": 0.02, "loc_model": 15, "loc_step": 20},
                    "stability": {"verdict": "noisy" if noisy else "stable"},
                }
            )
    return sweep


def cells(table: DataTable, row: int) -> list[str]:
    return [str(c) for c in table.get_row_at(row)]


async def test_compare_loads_a_study_sweep_with_its_published_tab(tui_home):
    sweep = nayak_sweep()
    screen = CompareScreen([sweep.id])
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(screen)
        figures = screen.query_one("#table-published", DataTable)
        await wait_for(pilot, lambda: figures.row_count == 4, 10, "the four published figures")
        keras = cells(figures, 0)
        # the numbers first: at 80 columns a long figure title is cut, not them
        assert keras[:5] == ["11", "35", "2", "lines of code: tensorflow/keras model=cnn", "—"]
        # lines of code are not timed: a noisy run does not mark them
        assert "not stable" not in " ".join(keras)
        estimator = cells(figures, 1)
        assert estimator[0:2] == ["32", "—"]
        assert estimator[5] == "not run here: no run of tensorflow/estimator model=cnn"
        note = str(screen.query_one("#note-published", Static).render())
        assert "Source: Nayak & Jain (2019)" in note  # once, under the table
        title = str(screen.query_one("#title-published", Static).render())
        assert title == "published figures beside ours"
        # t cycles the tables and reaches the published tab
        tabs = screen.query_one(TabbedContent)
        seen = set()
        for _ in range(len(screen.tables)):
            await pilot.press("t")
            seen.add(tabs.active)
        assert "tab-published" in seen


async def test_published_tab_marks_unstable_runs_and_hides_without_figures(tui_home):
    from tui_bench.engine.results import published
    from tui_bench.engine.spec import RunSpec

    records = [
        {
            "id": f"{api}{i}",
            "status": "finished",
            "spec": RunSpec(api=api).to_dict(),
            "label": api,
            "metrics": {"step_median_s": 0.01, "train_wall_s": wall},
            "stability": {"verdict": "unreliable" if (api, i) == ("eager", 0) else "stable"},
        }
        for api, walls in (("eager", [4.0, 4.0]), ("compile", [2.0, 2.0]))
        for i, wall in enumerate(walls)
    ]
    figure = published.parse_figure(
        {
            "source": "A paper (2020), Table 3",
            "metric": "train_time",
            "kind": "ratio",
            "value": 3.0,
            "numerator": {"framework": "torch", "api": "eager"},
            "denominator": {"framework": "torch", "api": "compile"},
        },
        "published[0]",
        RunSpec.__dataclass_fields__,
    )
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await show_in_compare(app, pilot, records)
        tabs = screen.query_one(TabbedContent)
        assert tabs.get_tab("tab-published").display is False  # no figures: no tab
        runs = [Run.from_record(r) for r in records]
        screen.show(runs, source="two apis", published=[figure])
        await pilot.pause()
        assert tabs.get_tab("tab-published").display is True
        row = cells(screen.query_one("#table-published", DataTable), 0)
        assert row[0:3] == ["3", "2", "2/2"]
        assert "torch/eager: not stable: 1 unreliable of 2" in row[5]
