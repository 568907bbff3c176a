"""Compare: runs (or groups of repeats) side by side, ratios to the first, thread scaling."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui_bench.engine.history import History
from tui_bench.tui.comparison import (
    METRICS,
    describe_difference,
    group_runs,
    speedup,
    thread_scaling,
)
from tui_bench.tui.widgets.mode_bar import ModeBar
from tui_bench.tui.widgets.plots import BarPlot, LinePlot


def short_label(spec: dict[str, Any]) -> str:
    where = spec.get("device", "?")
    if where == "cpu":
        where = f"cpu×{spec.get('threads')}"
    return f"{spec.get('framework')}/{spec.get('api')} {spec.get('model')} {where}"


def fmt(value: float | None, scale: float, digits: int) -> str:
    return "—" if value is None else f"{value * scale:,.{digits}f}"


class CompareScreen(Screen):
    BINDINGS = []

    def compose(self) -> ComposeResult:
        yield ModeBar("compare")
        yield Static(
            "mark two or more runs in History (F4, space) and press c",
            id="compare-note",
            markup=False,
        )
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="compare-plots"):
            yield BarPlot("step time, ms (median, steady)", id="compare-bars")
            yield LinePlot("thread scaling: samples/s", id="compare-scaling")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        if self.app.compare_ids:
            self.load(self.app.compare_ids)

    def load(self, run_ids: list[str]) -> None:
        self._load(run_ids)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _load(self, run_ids: list[str]) -> None:
        history = History()
        records = []
        for run_id in run_ids:
            try:
                records.append(history.get(run_id))
            except Exception as exc:
                self.app.call_from_thread(self.notify, str(exc), severity="warning")
        self.app.call_from_thread(self.show, records)

    def show(self, records: list[dict[str, Any]]) -> None:
        groups = group_runs(records)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        note = self.query_one("#compare-note", Static)
        if len(groups) < 2:
            note.update(
                "pick two or more different runs (or groups of repeats) in History to compare"
            )
            return
        table.add_column("figure", key="figure")
        for index, group in enumerate(groups, 1):
            table.add_column(
                f"#{index}" + (f" (n={group.n})" if group.n > 1 else ""), key=str(index)
            )
        table.add_row("run", *(short_label(g.spec) for g in groups))
        for key, label, scale, digits, _lower in METRICS:
            values = [g.figures.get(key) for g in groups]
            if all(v is None for v in values):
                continue
            table.add_row(label, *(fmt(v, scale, digits) for v in values))
        base = groups[0].figures.get("step_median_s")
        table.add_row(
            "speedup vs #1 (step)",
            *(
                "1.00×"
                if i == 0
                else (f"{s:.2f}×" if (s := speedup(base, g.figures.get("step_median_s"))) else "—")
                for i, g in enumerate(groups)
            ),
        )
        note.update(
            f"{len(groups)} group(s), #1 is the baseline · {describe_difference(groups)} · "
            "repeats show the median of their runs"
        )
        steps = [g.figures.get("step_median_s") for g in groups]
        self.query_one(BarPlot).set_bars(
            [f"#{i}" for i, s in enumerate(steps, 1) if s is not None],
            [s * 1000 for s in steps if s is not None],
        )
        scaling = thread_scaling(groups)
        plot = self.query_one(LinePlot)
        if scaling:
            plot.set_line([float(x) for x in scaling[0]], scaling[1], "threads", "samples/s")
        else:
            plot.title = "no thread scaling: runs differ in more"
            plot.set_line([], [], "threads", "samples/s")
