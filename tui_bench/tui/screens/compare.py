"""Compare: the statistics of ``tui_bench.engine.results.tables`` over runs, groups or a sweep — median,
IQR and n per configuration, ratios of medians with the Mann-Whitney verdict (or why there is
none), speed-ups, thread scaling and data-parallel (workers) scaling with efficiency, the
study-shaped table, the study's published figures beside ours, the fairness card (the
settings that differ between the compared runs) and what was skipped.
The same tables as ``tui-bench compare``; this screen only lays them out. ``w`` writes them as
the self-contained HTML report (``tui-bench report``) into the data home's reports/ folder.

80×24 first (an SSH terminal): the tables come first and take the room; the verdict is one line
that ``v`` opens; the plots are a tab of their own (``p``); ``t`` steps through the tables and
PageDown/PageUp scroll the one shown, whatever has the focus."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from tui_bench.engine.results import metrics, render, tables, verdict
from tui_bench.engine.results.published import Figure
from tui_bench.engine.results.record import Run
from tui_bench.tui.keys import key_labels
from tui_bench.tui.widgets.mode_bar import ModeBar
from tui_bench.tui.widgets.plots import BarPlot, LinePlot

TAB_NAMES = tables.TABS  # table name -> tab label: the table registry's, one per table
METRIC_ORDER = list(metrics.choices())  # m cycles through what compare offers
PLOTS_TAB = "tab-plots"  # the plots' own tab, after every table's


def table_cells(table: tables.Table) -> tuple[list[str], list[list[Text]]]:
    """A table's shown columns and its cells as ``render`` writes them, numbers right-aligned;
    the summary's rows are numbered so the bar plot's #k labels point at them."""
    columns, rows = render.shown_rows(table)
    cells = []
    for index, row in enumerate(rows, 1):
        line = [Text(text, justify="right" if numeric else "left") for text, numeric in row]
        if table.name == "summary":
            line.insert(0, Text(f"#{index}", justify="right"))
        cells.append(line)
    if table.name == "summary":
        columns = ["#", *columns]
    return columns, cells


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def scaling_line(
    table: tables.Table, x_column: str = "threads", y_column: str = "speed-up", scale: float = 1
) -> tuple[str, list[float], list[float]] | None:
    """(context, threads or workers, speed-ups) of a scaling table's first family; (context,
    batch sizes, p50 latencies × ``scale``) of the batch-size table's."""
    if not table.rows:
        return None
    rows = table.records()
    context = rows[0]["with"]
    points = [
        (float(row[x_column]), float(row[y_column]) * scale)  # type: ignore[arg-type]
        for row in rows
        if row["with"] == context and _numeric(row[y_column]) and _numeric(row[x_column])
    ]
    if len(points) < 2:
        return None
    return context, [p[0] for p in points], [p[1] for p in points]


class CompareScreen(Screen):
    BINDINGS = [
        Binding("t", "next_table", "Table", id="compare_next_table"),
        # Before the focused table's own (hidden) PageDown, so the footer shows it.
        Binding(
            "pagedown",
            "page(1)",
            "Scroll",
            id="compare_page_down",
            key_display="PgDn",
            priority=True,
        ),
        Binding("pageup", "page(-1)", "Up", id="compare_page_up", show=False, priority=True),
        Binding("v", "toggle_verdict", "Verdict", id="compare_verdict"),
        Binding("p", "toggle_plots", "Plots", id="compare_plots"),
        Binding("m", "next_metric", "Metric", id="compare_metric"),
        Binding("w", "write_report", "Report", id="compare_write_report"),
        # off the footer until the screen's 80×24 layout makes room for it (snapshots unchanged)
        Binding("b", "latency_bound", "Latency bound", id="compare_latency_bound", show=False),
    ]

    def __init__(
        self, run_ids: Sequence[str] = (), latency_bound: tables.LatencyBound | None = None
    ) -> None:
        super().__init__()
        # --latency-bound's answer on this screen (b sets it): the verdict names the
        # configuration with the most samples/s within it (``tables.compute``'s ``bound``)
        self.latency_bound = latency_bound
        # What to compare, handed down by the app (no ids: the latest sweep).
        self.run_ids: list[str] = list(run_ids)
        self.metric = metrics.COMPARED_BY_DEFAULT
        self.metric_chosen = False  # m pressed: the metric no longer follows the runs' mode
        self.records: list[Run] = []
        self.skipped: list[tuple[str, str]] = []
        self.published: list[Figure] = []
        self.source = ""
        self.tables: list[tables.Table] = []
        self.comparison: tables.Comparison | None = None  # what the tabs show, for the report
        self.report_path = ""  # the last report written, said in the note line
        self.note_text = ""
        self.verdict_text = ""
        self.verdict_open = False  # folded to one line until v opens it

    def compose(self) -> ComposeResult:
        yield ModeBar("compare")
        yield Static(
            "mark two or more runs in History (F4, space) and press c; a sweep shows here "
            "when it ends",
            id="compare-note",
            markup=False,
        )
        yield Static("", id="compare-verdict", markup=False)
        with TabbedContent(id="compare-tabs"):
            for name, label in TAB_NAMES.items():
                with TabPane(label, id=f"tab-{name}"):
                    yield Static("", id=f"title-{name}", classes="compare-title", markup=False)
                    yield DataTable(id=f"table-{name}", cursor_type="row", zebra_stripes=True)
                    yield Static("", id=f"note-{name}", classes="compare-table-note", markup=False)
            with TabPane("plots", id=PLOTS_TAB), Horizontal(id="compare-plots"):
                yield BarPlot("median per configuration", id="compare-bars")
                yield LinePlot("thread scaling: speed-up", id="compare-scaling")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        tabs = self.query_one(TabbedContent)
        for name in TAB_NAMES:  # until there is something to compare, no empty tabs
            if name != "summary":
                tabs.hide_tab(f"tab-{name}")
        tabs.hide_tab(PLOTS_TAB)
        self.query_one("#compare-verdict", Static).display = False
        self._load(list(self.run_ids))

    def compare(self, run_ids: Sequence[str]) -> None:
        """Show these runs, groups or sweeps by id (no ids: the latest sweep, if there is one)."""
        self.run_ids = list(run_ids)
        if self.is_mounted:  # else on_mount loads them
            self._load(list(self.run_ids))

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _load(self, ids: list[str]) -> None:
        from tui_bench.engine.results.history import History, HistoryError
        from tui_bench.engine.runs import sweep as sweep_module

        try:
            records, skipped, published = sweep_module.collect(ids, History())
        except HistoryError as exc:
            if ids:  # with no ids, an empty history is the normal first view, not an error
                self.app.call_from_thread(self.notify, str(exc), severity="warning")
            return
        # Marked runs are listed by id only while they fit a line; more are counted (at 80
        # columns sixteen ids took six of the screen's 24 lines).
        source = (
            ", ".join(ids)
            if 0 < len(ids) <= 3
            else f"{len(ids)} marked runs, {ids[-1]} … {ids[0]}"
            if ids
            else "the latest sweep"
        )
        self.app.call_from_thread(self._loaded, ids, records, skipped, source, published)

    def _loaded(
        self,
        ids: list[str],
        records: list[Run],
        skipped: list[tuple[str, str]],
        source: str,
        published: list[Figure],
    ) -> None:
        # A thread worker cannot be stopped: the result of an earlier request that ends after a
        # later one is dropped, so the screen never shows ids it was no longer asked for.
        if ids == self.run_ids:
            self.show(records, skipped, source, published)

    def show(
        self,
        records: Sequence[Run],
        skipped: list[tuple[str, str]] | None = None,
        source: str = "",
        published: Sequence[Figure] = (),
    ) -> None:
        self.records, self.skipped, self.source = list(records), list(skipped or []), source
        self.published = list(published)
        if not self.metric_chosen:  # inference runs alone: their median request
            self.metric = metrics.compared_for(r.mode for r in self.records)
        self._rebuild()

    def action_next_table(self) -> None:
        shown = [f"tab-{t.name}" for t in self.tables if t.name in TAB_NAMES]
        if shown:
            tabs = self.query_one(TabbedContent)
            index = shown.index(tabs.active) if tabs.active in shown else -1
            tabs.active = shown[(index + 1) % len(shown)]
            self._focus_table()

    def action_toggle_plots(self) -> None:
        """The plots' tab, or back to the summary table from it."""
        if not self.tables:
            return
        tabs = self.query_one(TabbedContent)
        tabs.active = "tab-summary" if tabs.active == PLOTS_TAB else PLOTS_TAB
        self._focus_table()

    def action_toggle_verdict(self) -> None:
        self.verdict_open = not self.verdict_open
        self._show_verdict()

    def action_page(self, pages: int) -> None:
        """Scroll the table shown by a page, whatever has the focus (the tabs, at first)."""
        table = self._active_table()
        if table is None:
            return
        table.focus()
        if pages > 0:
            table.action_page_down()
        else:
            table.action_page_up()

    def _active_table(self) -> DataTable | None:
        active = self.query_one(TabbedContent).active.removeprefix("tab-")
        if active not in TAB_NAMES:
            return None
        return self.query_one(f"#table-{active}", DataTable)

    def _focus_table(self) -> None:
        table = self._active_table()
        if table is not None:
            table.focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self) -> None:
        self._focus_table()

    def action_next_metric(self) -> None:
        self.metric_chosen = True
        self.metric = METRIC_ORDER[(METRIC_ORDER.index(self.metric) + 1) % len(METRIC_ORDER)]
        if self.records:
            self._rebuild()
        else:
            self.notify(f"metric: {self.metric}")

    def action_write_report(self) -> None:
        if self.comparison is None or not self.records:
            self.notify("nothing to write: no runs are shown", severity="warning")
            return
        self.notify("writing the HTML report…")
        self._write_report(list(self.records), self.comparison)

    def action_latency_bound(self) -> None:
        from tui_bench.tui.screens.dialogs import PromptScreen

        now = f"{self.latency_bound.seconds * 1000:g}" if self.latency_bound else ""
        prompt = PromptScreen("latency bound, ms (p99; empty: none)", now, "e.g. 50")
        self.app.push_screen(prompt, self.set_latency_bound)

    def set_latency_bound(self, text: str | None) -> None:
        """The bound from its text in ms (None or "": no bound), read as --latency-bound reads
        it (``tables.latency_bound``); a bad value is one warning and changes nothing."""
        from tui_bench.engine.errors import UsageError

        try:
            self.latency_bound = tables.latency_bound(text) if text else None
        except UsageError as exc:
            self.notify(str(exc), severity="warning")
            return
        if self.records:
            self._rebuild()

    @work(thread=True, exclusive=True, group="report", exit_on_error=False)
    def _write_report(self, records: list[Run], comparison: tables.Comparison) -> None:
        """The page for what the tabs show (the same computed comparison), drawn off the UI
        thread: figures take seconds."""
        import datetime as dt

        from tui_bench.engine.errors import TuiBenchError
        from tui_bench.engine.paths import data_home
        from tui_bench.engine.results import html_report
        from tui_bench.engine.results.history import History
        from tui_bench.engine.runs import sweep as sweep_module

        try:
            folder = data_home() / "reports"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"compare-{dt.datetime.now():%Y%m%d-%H%M%S}.html"
            title, study = sweep_module.report_title(records)
            page = html_report.collect(
                records, comparison, history=History().all(), title=title, study=study
            )
            html_report.write(path, page)
        except (OSError, TuiBenchError) as exc:
            self.app.call_from_thread(self.notify, f"report not written: {exc}", severity="error")
            return
        self.app.call_from_thread(self._report_written, str(path))

    def _report_written(self, path: str) -> None:
        self.report_path = path
        self.notify(f"report written: {path}")
        self._show_note()

    def _show_note(self) -> None:
        report = f" · report: {self.report_path}" if self.report_path else ""
        self.query_one("#compare-note", Static).update(self.note_text + report)

    def _rebuild(self) -> None:
        comparison = tables.compute(
            self.records,
            metric=self.metric,
            skipped=self.skipped,
            published=self.published,
            bound=self.latency_bound,
        )
        self.comparison = comparison
        self.tables = comparison.tables()
        label = comparison.metric.label
        finished = sum(r.finished for r in self.records)
        # what differs besides the compared setting (and what is observed of it): the card's
        others = comparison.also_differs()
        differs = f" · [!] also differs: {', '.join(others)} (fairness tab)" if others else ""
        self.note_text = (
            f"{self.source}: {len(self.records)} run(s), {finished} finished · metric "
            f"{self.metric} (m: next) — {label}{differs}"
        )
        # the answer in the words the HTML page and `tui-bench compare` use
        self.verdict_text = f"verdict: {verdict.text(self.tables, self.metric)}"
        self._show_note()
        self._show_verdict()
        tabs = self.query_one(TabbedContent)
        by_name = {t.name: t for t in self.tables}
        for name in TAB_NAMES:
            table = by_name.get(name)
            data = self.query_one(f"#table-{name}", DataTable)
            data.clear(columns=True)
            if table is None:
                tabs.hide_tab(f"tab-{name}")
                continue
            columns, rows = table_cells(table)
            data.add_columns(*columns)
            data.add_rows(rows)
            self.query_one(f"#title-{name}", Static).update(table.title)
            self.query_one(f"#note-{name}", Static).update(table.note)
            tabs.show_tab(f"tab-{name}")
        tabs.show_tab(PLOTS_TAB)
        if tabs.active != PLOTS_TAB and tabs.active.removeprefix("tab-") not in by_name:
            tabs.active = "tab-summary"
        self._plot()

    def _show_verdict(self) -> None:
        """The verdict in one line (its first, cut to the width) until ``v`` opens it whole."""
        widget = self.query_one("#compare-verdict", Static)
        widget.display = bool(self.verdict_text)
        lines = self.verdict_text.splitlines()
        if self.verdict_open or not lines:
            widget.update(self.verdict_text)
            widget.set_class(False, "folded")
            return
        key = key_labels(self).label("compare_verdict")  # as remapped in the config
        more = f" ({key}: open)" if len(lines) > 1 or len(lines[0]) > self._width() else ""
        room = max(self._width() - len(more), 10)
        first = lines[0] if len(lines[0]) <= room else lines[0][: room - 1] + "…"
        widget.update(first + more)
        widget.set_class(True, "folded")

    def _width(self) -> int:
        width = self.query_one("#compare-verdict", Static).content_region.width
        return width or max(self.size.width - 2, 20)

    def on_resize(self) -> None:
        if self.verdict_text:
            self._show_verdict()

    def _plot(self) -> None:
        summary = next(t for t in self.tables if t.name == "summary")
        # the registry's display scale: a step in ms, where seconds read as 0.0x
        shown = metrics.get(self.metric)
        scale = shown.scale
        unit = "ms" if shown.unit == "s" and scale == 1000 else shown.unit
        bars = [
            (f"#{i}", median * scale)
            for i, median in enumerate(summary.values("median"), 1)
            if isinstance(median, (int, float)) and not isinstance(median, bool)
        ]
        self.query_one(BarPlot).set_bars(
            [b[0] for b in bars],
            [b[1] for b in bars],
            title=f"median {self.metric}" + (f" ({unit})" if unit else ""),
        )
        plot = self.query_one(LinePlot)
        batches = next((t for t in self.tables if t.name == "batches"), None)
        curve = scaling_line(batches, "batch", "p50", 1000) if batches is not None else None
        if curve is not None:  # inference over batch sizes: the first family's p50 curve
            context, xs, ys = curve
            plot.title = "inference: p50 latency ms against batch"
            plot.set_line(xs, ys, "batch" + (f" ({context})" if context != "—" else ""), "ms")
            return
        scaling = next((t for t in self.tables if t.name == "scaling"), None)
        line = scaling_line(scaling) if scaling is not None else None
        workers = next((t for t in self.tables if t.name == "workers"), None)
        if line is None and workers is not None:
            line = scaling_line(workers, "workers")
            if line is not None:
                context, xs, ys = line
                plot.title = "data-parallel scaling: speed-up ×"
                plot.set_line(xs, ys, "workers" + (f" ({context})" if context != "—" else ""), "")
                return
        if line is None:
            plot.title = "thread scaling: runs differ in more than threads"
            plot.set_line([], [], "threads", "speed-up")
        else:
            context, xs, ys = line
            plot.title = "thread scaling: speed-up ×"
            plot.set_line(xs, ys, "threads" + (f" ({context})" if context != "—" else ""), "")
