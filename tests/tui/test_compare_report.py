"""The Compare screen's key writes the HTML report of what it shows (the same computed
comparison), into the data home's reports/ folder, and says where in its note line."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.tui.fakes import write_fake_history
from tests.tui.helpers import wait_for
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.compare import CompareScreen


async def test_w_writes_the_report_of_the_shown_comparison(tui_home):
    ids = write_fake_history(
        tui_home,
        [
            ("20260102-030405-aaaa", RunSpec(threads=1, epochs=1), 0.068),
            ("20260102-030406-bbbb", RunSpec(threads=2, epochs=1), 0.039),
        ],
    )
    screen = CompareScreen(ids)
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(screen)
        summary = screen.query_one("#table-summary", DataTable)
        await wait_for(pilot, lambda: summary.row_count == 2, 10, "the two runs")
        await pilot.press("w")
        await wait_for(pilot, lambda: bool(screen.report_path), 60, "the report")
        written = list((tui_home / "reports").glob("compare-*.html"))
        assert [str(p) for p in written] == [screen.report_path]
        text = written[0].read_text(encoding="utf-8")
        assert 'id="table-summary"' in text and ids[0] in text
        note = str(screen.query_one("#compare-note", Static).render())
        assert note.endswith(f"report: {screen.report_path}")


async def test_w_with_nothing_shown_writes_nothing(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = CompareScreen()
        await app.push_screen(screen)
        await pilot.press("w")
        await pilot.pause(0.3)
        assert not (tui_home / "reports").exists() and not screen.report_path
