"""The Trends screen at 80×24: configurations, the selected series with its change point, enter
opens the run under the cursor; its key in help and the palette."""

from __future__ import annotations

from tests.histories import fill, record
from tests.test_trends import noisy
from tests.tui.helpers import wait_for
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.commands import PALETTE_BINDINGS
from tui_bench.tui.screens.dialogs import help_text
from tui_bench.tui.screens.run_detail import RunDetailScreen
from tui_bench.tui.screens.trends import TrendPlot, TrendsScreen


def stepped():
    runs = [record(i, v) for i, v in enumerate(noisy(10, 40.0))]
    runs += [record(10 + i, v, version="2.13.0") for i, v in enumerate(noisy(5, 48.0, seed=5))]
    runs += [record(i, v, framework="mxnet", api="gluon") for i, v in enumerate(noisy(4, 24.0))]
    return runs


async def test_trends_screen_lists_plots_and_opens_a_run(tui_home):
    runs = fill(stepped()).all()
    app = TuiBenchApp(refresh_hz=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TrendsScreen) and app.screen.found)
        screen = app.screen
        configs = screen.query_one("#trends-configs")
        assert configs.row_count == 2
        # both configurations' newest runs are on the same day; torch stepped, mxnet did not
        # the figures first, the label last: at 80 columns a long label is cut, not the figures
        texts = {str(configs.get_row_at(i)[-1]): configs.get_row_at(i) for i in range(2)}
        torch_row = next(v for k, v in texts.items() if k.startswith("torch"))
        assert torch_row[1].startswith("+") and torch_row[3] == "15"
        while not screen.selected.configuration.name.startswith("torch"):
            await pilot.press("down")
        plot = screen.query_one(TrendPlot)
        assert plot.trend is screen.selected and [c.index for c in plot.trend.change_points] == [10]
        status = str(screen.query_one("#trends-status").render())
        assert "torch 2.12.1 → 2.13.0" in status
        assert screen.region.width == 80 and plot.size.height >= 6
        await pilot.press("enter")  # to the runs table, on the newest run
        runs_table = screen.query_one("#trends-runs")
        assert app.focused is runs_table and runs_table.cursor_row == 14
        await pilot.press("up", "enter")
        await pilot.pause()
        assert isinstance(app.screen, RunDetailScreen)
        newest_torch = [r for r in runs if r.spec["framework"] == "torch"]
        assert app.screen.run_id == newest_torch[-2].id


async def test_trends_screen_with_an_empty_history(tui_home):
    app = TuiBenchApp(refresh_hz=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+t")
        await wait_for(
            pilot,
            lambda: "no finished runs" in str(app.screen.query_one("#trends-status").render()),
        )
        await pilot.press("enter")  # nothing to open: no crash
        assert isinstance(app.screen, TrendsScreen)


def test_trends_key_is_in_help_and_palette(tui_home):
    assert "show_trends" in PALETTE_BINDINGS
    app = TuiBenchApp(refresh_hz=1)
    assert "ctrl+t      Trends: each configuration over time" in help_text(app.key_labels)
