"""The Compare screen at 80×24 (issue 48 item 3): after a batch-size inference sweep, every
table is visible, reached with the keys the footer shows (t, PageDown); the tables come before
the plots, which have a tab of their own (p); the verdict is one line that v opens."""

from __future__ import annotations

from textual.widgets import DataTable, Footer, Static, TabbedContent

from tests.tui.helpers import show_in_compare
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.widgets.plots import BarPlot, LinePlot


def batch_sweep(frameworks: tuple[str, ...] = ("torch",)) -> list[dict]:
    """Inference runs over batch sizes 1…64, two repeats each (as inference-quick serves)."""
    records = []
    for framework in frameworks:
        for batch in (1, 2, 4, 8, 16, 32, 64):
            p50 = 0.0002 * batch**0.8
            for repeat in range(2):
                spec = RunSpec(framework=framework, mode="inference", batch_size=batch)
                records.append(
                    {
                        "id": f"{framework}-b{batch}-{repeat}",
                        "status": "finished",
                        "spec": spec.to_dict(),
                        "label": spec.label(),
                        "metrics": {
                            "latency_p50_s": p50 * (1 + repeat / 100),
                            "latency_p90_s": p50 * 1.2,
                            "latency_p99_s": p50 * 1.5,
                            "latency_requests": 600,
                            "inference_samples_per_s": batch / p50,
                            "steady_step_times": [p50] * 40,
                        },
                    }
                )
    return records


def _visible(screen, widget) -> bool:
    """On screen, with room for a header and a row."""
    region = widget.region
    return region.height >= 2 and region.y + 2 <= screen.size.height and widget.display


async def test_every_table_is_visible_at_80x24_with_the_footers_keys(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await show_in_compare(app, pilot, batch_sweep(), "an inference batch sweep")
        await pilot.pause()
        tabs = screen.query_one(TabbedContent)
        names = [t.name for t in screen.tables]
        assert "batches" in names
        # The plots are not drawn until asked: the tables have the room.
        assert not screen.query_one(BarPlot).region.height
        footer_keys = {k.key for k in screen.query_one(Footer).query("FooterKey")}
        assert {"t", "pagedown", "v", "p"} <= footer_keys, (footer_keys, screen.focused)
        seen = []
        for _ in names:
            active = tabs.active.removeprefix("tab-")
            table = screen.query_one(f"#table-{active}", DataTable)
            assert _visible(screen, table), (active, table.region)
            seen.append(active)
            await pilot.press("t")
            await pilot.pause()
        assert sorted(seen) == sorted(names)  # every table, each in its turn
        while tabs.active != "tab-batches":
            await pilot.press("t")
            await pilot.pause()
        batches = screen.query_one("#table-batches", DataTable)
        assert batches.row_count == 7 and _visible(screen, batches)
        # The plots: a tab of their own, and back.
        await pilot.press("p")
        await pilot.pause()
        assert tabs.active == "tab-plots"
        assert screen.query_one(LinePlot).region.height >= 9
        await pilot.press("p")
        await pilot.pause()
        assert tabs.active == "tab-summary"


async def test_pagedown_scrolls_a_table_longer_than_the_screen(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        records = batch_sweep(("torch", "keras", "mxnet"))  # 21 configurations
        screen = await show_in_compare(app, pilot, records, "three frameworks × seven batches")
        await pilot.pause()
        summary = screen.query_one("#table-summary", DataTable)
        assert summary.row_count == 21
        assert summary.region.height < 21  # more rows than fit
        await pilot.press("pagedown")
        await pilot.pause()
        assert summary.scroll_y > 0 or summary.cursor_row > 0
        assert summary.cursor_row >= summary.region.height - 3


async def test_the_verdict_is_one_line_that_opens(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await show_in_compare(app, pilot, batch_sweep(("torch", "keras")), "a sweep")
        await pilot.pause()
        verdict = screen.query_one("#compare-verdict", Static)
        full = screen.verdict_text
        assert full.startswith("verdict: ")
        assert len(full) > 80 or "\n" in full  # more than a line at 80 columns
        assert verdict.region.height == 1
        shown = str(verdict.render())
        assert shown.startswith("verdict: ") and "(v: open)" in shown and len(shown) <= 78
        await pilot.press("v")
        await pilot.pause()
        assert str(verdict.render()) == full
        assert verdict.region.height > 1
        await pilot.press("v")
        await pilot.pause()
        assert verdict.region.height == 1
