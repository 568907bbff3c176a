"""Trends: every configuration with its last value, last change and verdict; the selected one's
series over time with its change points; enter opens the run under the cursor.

The same trends as ``tui-bench history trends`` (``tui_bench.engine.results.trends``); this screen
only lays them out."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual_plotext import PlotextPlot

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.results.history import History
from tui_bench.engine.results.identity import versions
from tui_bench.engine.results.trends import Trend, trends
from tui_bench.tui.messages import Notice
from tui_bench.tui.screens.run_detail import RunDetailScreen
from tui_bench.tui.widgets.mode_bar import ModeBar
from tui_bench.tui.widgets.plots import downsample


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.1f}"


def last_change_text(item: Trend) -> str:
    change = item.last_change
    if change is None:
        return "—"
    day = change.when.strftime("%m-%d") if change.when else "?"
    return f"{change.change * 100:+.0f} % {day}"


class TrendPlot(PlotextPlot):
    """One configuration's per-run values in time order, change points as vertical lines."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.trend: Trend | None = None

    def show(self, item: Trend | None) -> None:
        self.trend = item
        self.replot()

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        item = self.trend
        if item is None or not item.points:
            plt.title("no configuration selected")
            self.refresh()
            return
        plt.title(f"{item.metric} (ms) per run, oldest → newest; │ change point")
        width = max(self.size.width - 10, 10)
        values = [p.value * 1000 for p in item.points]
        xs, ys = downsample(values, width)  # x: run numbers from 1, as in the runs table
        plt.plot(xs, ys, marker="braille")
        for change in item.change_points:
            plt.vline(change.index + 1, "red")
        plt.xlabel("run")
        self.refresh()


class TrendsScreen(Screen):
    @dataclass
    class Loaded(Message):
        found: list[Trend]

    BINDINGS = [
        Binding("enter", "open_run", "Open run", id="trends_open"),
        Binding("g", "reload", "Reload", id="trends_reload"),
        Binding("tab", "app.focus_next", "Next table", id="trends_next", show=False),
    ]

    DEFAULT_CSS = """
    TrendsScreen #trends-configs { height: 7; }
    TrendsScreen #trends-plot { height: 1fr; min-height: 6; }
    TrendsScreen #trends-runs { height: 6; }
    TrendsScreen #trends-status { height: 1; color: $text-muted; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Trend] = []
        self.selected: Trend | None = None

    def compose(self) -> ComposeResult:
        yield ModeBar("history")
        configs = DataTable(id="trends-configs", cursor_type="row", zebra_stripes=True)
        # 80 columns: the figures first, the long label last (cut at the edge, not the figures)
        configs.add_columns("last ms", "last change", "verdict", "runs", "configuration")
        yield configs
        yield TrendPlot(id="trends-plot")
        yield Static("loading…", id="trends-status", markup=False)
        runs = DataTable(id="trends-runs", cursor_type="row", zebra_stripes=True)
        # no date column: a run id starts with the date and time the run started
        runs.add_columns("#", "run", "ms", "IQR", "verdict", "version")
        yield runs
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#trends-configs", DataTable).focus()
        self._load()

    def on_screen_resume(self) -> None:
        self._load()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="trends-load", exit_on_error=False)
    def _load(self) -> None:
        history = History()
        try:
            found = trends(history.all())
        except (TuiBenchError, OSError) as exc:  # unreadable beyond recovery: say so, stay up
            title = exc.title if isinstance(exc, TuiBenchError) else ""
            self.post_message(Notice(f"cannot read history: {exc}", title, "error"))
            found = []
        self.post_message(self.Loaded(found))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        message.stop()
        keep = self.selected.configuration.id if self.selected else None
        self.found = [t for t in message.found if t.points]
        table = self.query_one("#trends-configs", DataTable)
        table.clear()
        for item in self.found:
            last = item.last
            table.add_row(
                _ms(last.value if last else None),
                last_change_text(item),
                (last.verdict if last else None) or "—",
                str(len(item.points)),
                item.title,  # the name and every field that varies between those shown
                key=item.configuration.id,
            )
        status = self.query_one("#trends-status", Static)
        if not self.found:
            status.update("no finished runs yet: run a benchmark, then its trend shows here")
            self._select(None)
            return
        row = next((i for i, t in enumerate(self.found) if t.configuration.id == keep), 0)
        table.move_cursor(row=row)
        self._select(self.found[row])

    @on(DataTable.RowHighlighted, "#trends-configs")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.found):
            self._select(self.found[event.cursor_row])

    def _select(self, item: Trend | None) -> None:
        self.selected = item
        self.query_one(TrendPlot).show(item)
        runs = self.query_one("#trends-runs", DataTable)
        runs.clear()
        status = self.query_one("#trends-status", Static)
        if item is None:
            return
        changed_at = {c.index for c in item.change_points}
        framework = str(item.configuration.get("framework") or "")
        for i, point in enumerate(item.points):
            runs.add_row(
                f"{'▶' if i in changed_at else ' '}{i + 1}",
                point.run_id,
                _ms(point.value),
                _ms(point.iqr),
                point.verdict or "—",
                f"{framework} {versions(point.run).get(framework) or '?'}",
                key=point.run_id,
            )
        runs.move_cursor(row=len(item.points) - 1)  # the newest run
        described = [c.describe(item.metric) for c in item.change_points]
        status.update(described[-1] if described else f"{item.configuration.id}: no change point")

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def action_open_run(self) -> None:
        """Enter: on the runs table, open that run; on the configurations, go to its runs."""
        runs = self.query_one("#trends-runs", DataTable)
        if self.focused is not runs:
            if runs.row_count:
                runs.focus()
            return
        if not runs.row_count:
            return
        row_key, _ = runs.coordinate_to_cell_key(runs.cursor_coordinate)
        if row_key.value:
            self.app.push_screen(RunDetailScreen(row_key.value))
