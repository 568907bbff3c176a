"""The Compare screen answers the serving question as `tui-bench compare --latency-bound` does:
b asks for a bound in ms, and the verdict line names the configuration with the most samples/s
inside it (the same ``tables.compute`` and ``verdict.text``); a bad value is one warning and
changes nothing. The trade-off table is a tab of its own (the table registry's)."""

from __future__ import annotations

from textual.widgets import Input, TabbedContent

from tests.test_tradeoff import batch_sweep
from tests.tui.helpers import show_in_compare
from tui_bench.tui.app import TuiBenchApp


def verdict_line(screen) -> str:
    """The screen's verdict, whole (at 80×24 it is folded to one line until v opens it)."""
    return screen.verdict_text


async def test_b_sets_a_latency_bound_and_the_verdict_names_the_best_inside_it(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await show_in_compare(app, pilot, batch_sweep(), source="gb")
        assert verdict_line(screen).startswith("verdict: batch 1 → 8: 2.50× the samples/s")
        assert "slower" not in verdict_line(screen)
        tabs = screen.query_one(TabbedContent)
        assert tabs.get_tab("tab-tradeoff").display  # the registry's table has its tab

        await pilot.press("b")
        await pilot.pause()
        app.screen.query_one(Input).value = "2"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        assert verdict_line(screen).startswith(
            "verdict: Within p99 latency ≤ 2 ms: batch 8 serves the most samples/s"
        )

        screen.set_latency_bound("fast")  # bad: a warning, the bound stays
        await pilot.pause()
        assert screen.latency_bound is not None and screen.latency_bound.seconds == 0.002
        assert verdict_line(screen).startswith("verdict: Within p99 latency ≤ 2 ms")

        screen.set_latency_bound(None)  # cleared: the trade-off alone again
        await pilot.pause()
        assert verdict_line(screen).startswith("verdict: batch 1 → 8")
