"""The Compare screen's data-parallel (workers) tab."""

from __future__ import annotations

from textual.widgets import DataTable

from tests.tui.helpers import show_in_compare
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.widgets.plots import LinePlot


async def test_compare_shows_data_parallel_scaling_in_a_workers_tab(tui_home):
    """Runs that differ in workers: the workers tab shows throughput and DLBS efficiency, and
    the line plot follows the workers when threads do not vary."""
    records = [
        {
            "id": f"w{workers}",
            "status": "finished",
            "spec": RunSpec(workers=workers).to_dict(),
            "label": f"w{workers}",
            "metrics": {"step_median_s": 0.05 * workers, "samples_per_s": rate},
        }
        for workers, rate in ((1, 100.0), (2, 160.0))
    ]
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await show_in_compare(app, pilot, records)
        table = screen.query_one("#table-workers", DataTable)
        assert table.row_count == 2
        cells = [str(c) for c in table.get_row_at(1)]
        assert "2" in cells and "80%" in cells
        assert "data-parallel" in screen.query_one(LinePlot).title
