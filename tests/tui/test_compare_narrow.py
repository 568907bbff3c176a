"""The Compare screen at 80 columns: a sweep that varies many fields at once names each
configuration by the fewest fields that tell them apart, and the fairness card stays three
columns (setting, value, who has it) however many configurations there are."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.tui.helpers import show_in_compare
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp


def workload_sweep() -> list[dict]:
    records = []
    for framework, api, compiles in (("torch", "eager", "no"), ("keras", "tensorflow", "yes")):
        for model, dataset, batch in (
            ("mlp", "synthetic-mnist", 80),
            ("cnn", "synthetic-cifar10", 64),
        ):
            spec = RunSpec(
                framework=framework, api=api, model=model, dataset=dataset, batch_size=batch
            )
            records += [
                {
                    "id": f"{framework}-{model}-{i}",
                    "status": "finished",
                    "spec": spec.to_dict(),
                    "label": spec.label(),
                    "worker": {"settings": {"compile": compiles}},
                    "metrics": {"step_median_s": 0.05 + i / 1000},
                }
                for i in range(2)
            ]
    return records


async def test_compare_at_80_columns_names_configurations_briefly(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await show_in_compare(app, pilot, workload_sweep(), "a workload sweep")
        summary = screen.query_one("#table-summary", DataTable)
        names = [str(summary.get_row_at(i)[1]) for i in range(summary.row_count)]
        assert names == ["torch · mlp", "torch · cnn", "keras · mlp", "keras · cnn"]
        card = screen.query_one("#table-fairness", DataTable)
        rows = [[str(c) for c in card.get_row_at(i)] for i in range(card.row_count)]
        assert rows == [
            ["compilation", "no", "torch · mlp, torch · cnn"],
            ["compilation", "yes", "keras · mlp, keras · cnn"],
        ]
        assert [str(c.label) for c in card.columns.values()] == [
            "setting",
            "value",
            "configurations",
        ]
        note = str(screen.query_one("#compare-note", Static).render())
        assert "also differs: compilation (fairness tab)" in note  # once, not once per value
