"""The Compare screen's limits tab: MFU per configuration and who uses the machine best."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.test_limits_compare import record
from tests.tui.helpers import show_in_compare
from tui_bench.tui.app import TuiBenchApp


async def test_the_compare_screen_has_a_limits_tab(tui_home):
    records = [record("a1", "torch", "eager", 0.3), record("b1", "tensorflow", "graph", 0.2)]
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await show_in_compare(app, pilot, records)
        assert screen.query_one("#table-limits", DataTable).row_count == 2
        note = str(screen.query_one("#note-limits", Static).render())
        assert "uses the machine best: torch" in note
