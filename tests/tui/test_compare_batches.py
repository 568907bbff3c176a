"""The Compare screen's batch-size tab: inference runs over several batch sizes."""

from __future__ import annotations

from textual.widgets import DataTable

from tests.tui.helpers import show_in_compare
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.widgets.plots import LinePlot


async def test_compare_shows_inference_latency_against_batch(tui_home):
    """Inference runs at batch 1 and 16: the screen compares their p50 (not the step time it
    starts on), lists each batch's p50/p90/p99 and samples/s in the batch sizes tab, and the
    line plot draws the p50 against the batch."""
    records = [
        {
            "id": f"b{batch}",
            "status": "finished",
            "spec": RunSpec(mode="inference", batch_size=batch).to_dict(),
            "label": f"b{batch}",
            "metrics": {
                "latency_p50_s": p50,
                "latency_p90_s": p50 * 1.2,
                "latency_p99_s": p50 * 1.5,
                "latency_requests": 600,
                "inference_samples_per_s": batch / p50,
            },
        }
        for batch, p50 in ((1, 0.0002), (16, 0.0016))
    ]
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await show_in_compare(app, pilot, records)
        assert screen.metric == "latency_p50_s"
        table = screen.query_one("#table-batches", DataTable)
        assert table.row_count == 2
        cells = [str(c) for c in table.get_row_at(1)]
        assert "16" in cells and "1.60" in cells and "10000" in cells
        assert "p50 latency" in screen.query_one(LinePlot).title
