"""History: every recorded run. Sort, filter, open, mark, compare, delete, export, run again.
All disk access happens in thread workers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import CellDoesNotExist

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.machine.peaks import MFU_ABOVE_ONE
from tui_bench.engine.results import csv_export, metrics
from tui_bench.engine.results.history import History, HistoryError
from tui_bench.engine.results.record import Run
from tui_bench.engine.spec import RunSpec, SpecError
from tui_bench.tui.messages import CompareRequested, Notice, SpecLoaded
from tui_bench.tui.screens.dialogs import ConfirmScreen, PromptScreen
from tui_bench.tui.screens.run_detail import RunDetailScreen
from tui_bench.tui.widgets.mode_bar import ModeBar

# Columns that show a registered metric: header, scale and digits are the registry's
# (``results/metrics.py``); accuracy falls back to the validation accuracy.
METRIC_COLUMNS = {
    "train_s": "train_wall_s",
    "step_ms": "step_median_s",
    "samples_s": "samples_per_s",
    "tokens_s": "tokens_per_s",  # a language model's rate (the gpt's); "—" for the rest
    "mfu": "mfu",
    "accuracy": "test_accuracy",
}


def _header(key: str) -> str:
    return metrics.BY_KEY[METRIC_COLUMNS[key]].header


COLUMNS = [  # (key, header)
    ("mark", "✓"),
    ("date", "date"),
    ("framework", "framework"),
    ("api", "API"),
    ("model", "model"),
    ("dataset", "dataset"),
    ("device", "device"),
    ("threads", "thr"),
    ("train_s", _header("train_s")),
    ("step_ms", _header("step_ms")),
    ("samples_s", _header("samples_s")),
    ("tokens_s", _header("tokens_s")),
    ("mfu", _header("mfu")),
    ("accuracy", _header("accuracy")),
    ("verdict", "verdict"),
    ("status", "status"),
]
# Below NARROW_BELOW columns (80×24 over SSH) the essentials fit without scrolling sideways.
NARROW_BELOW = 136
COLUMNS_NARROW = [
    ("mark", "✓"),
    ("short_date", "date"),
    ("run", "run"),
    ("data", "data"),
    ("where", "dev"),
    ("step_ms", _header("step_ms")),
    ("state", "verdict"),  # a finished run's verdict (of the step time beside it), else status
    ("accuracy", _header("accuracy")),  # last: at 80 columns the one cut short
]
SORTABLE = [key for key, _ in COLUMNS if key != "mark"]
# A table of 10,000 rows takes seconds to fill and nobody scrolls it: the filter and the sort
# still cover every run, the table shows the first rows of the result. Textual's layout of the
# rows was most of the History screen's first paint at 10,000 runs: 300 rows painted in 1.21 s
# against 2.34 s for 1,000, side by side under load 4.6 (benchmarks/history_scale.py).
ROW_LIMIT = 300


def _short_date(started_at: str) -> str:
    """Five characters, like ``ls -l``: the time for today's runs, else the month and day."""
    today = dt.date.today().isoformat()
    return started_at[11:16] if started_at[:10] == today else started_at[5:10]


def _shown(key: str, value: float | None) -> float | None:
    """A metric column's value in the unit its header names (the step time in ms)."""
    return None if value is None else value * metrics.BY_KEY[METRIC_COLUMNS[key]].scale


def _where(run: Run) -> Any:
    device = run.spec.get("device")
    return f"{device}×{run.spec.get('threads')}" if device == "cpu" else device


# Each column's value of a run, one function per column: sorting reads one column of every run
# (all twenty for 10,000 runs was most of opening the screen), a row reads them all.
VALUES: dict[str, Callable[[Run], Any]] = {
    "short_date": lambda run: _short_date(run.started_text),
    "run": lambda run: f"{run.spec.get('framework')}/{run.spec.get('api')} {run.spec.get('model')}",
    "data": lambda run: str(run.spec.get("dataset", "")).replace("synthetic-", "syn-"),
    "where": _where,
    "date": lambda run: run.started_text[:16].replace("T", " "),
    "framework": lambda run: run.spec.get("framework"),
    "api": lambda run: run.spec.get("api"),
    "model": lambda run: run.spec.get("model"),
    "dataset": lambda run: run.spec.get("dataset"),
    "device": lambda run: run.spec.get("device"),
    "threads": lambda run: run.spec.get("threads"),
    "train_s": lambda run: _shown("train_s", run.metric("train_wall_s")),
    # an inference run's own figures here: its p50 request (ms too), its samples served
    "step_ms": lambda run: _shown("step_ms", run.figure("step_median_s")),
    "samples_s": lambda run: _shown("samples_s", run.figure("samples_per_s")),
    "tokens_s": lambda run: _shown("tokens_s", run.metric("tokens_per_s")),
    # of the measured peak; above 1 the count or the peak is wrong: said, never a number
    "mfu": lambda run: (
        "error"
        if run.metric_text("mfu_error") == MFU_ABOVE_ONE
        else _shown("mfu", run.metric("mfu"))
    ),
    "accuracy": lambda run: _shown(
        "accuracy",
        acc if (acc := run.metric("test_accuracy")) is not None else run.metric("val_accuracy"),
    ),
    "status": lambda run: run.status or None,
    # its own column, so "unreliable" filters and sorts like any other value
    "verdict": lambda run: run.verdict,
    # 80 columns hold one of the two: a finished run's verdict says more than "finished"
    "state": lambda run: run.state,
}


def row_values(run: Run) -> dict[str, Any]:
    """Sortable values of a run; None where unknown."""
    return {key: value(run) for key, value in VALUES.items()}


def cell(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key in METRIC_COLUMNS and isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:,.{metrics.BY_KEY[METRIC_COLUMNS[key]].digits}f}"
    return str(value)


def matches(run: Run, query: str) -> bool:
    """Every word of the filter appears somewhere in the row (or the run id)."""
    haystack = " ".join([run.id] + [str(v) for v in row_values(run).values()]).lower()
    return all(word in haystack for word in query.lower().split())


def sort_records(records: list[Run], key: str, reverse: bool) -> list[Run]:
    # Each record's value of this column alone, once. Unknown values last whatever the
    # direction; numbers and text never compared.
    value = VALUES[key]
    values = [(value(r), r) for r in records]
    known = [pair for pair in values if pair[0] is not None]
    unknown = [r for value, r in values if value is None]
    try:
        known.sort(key=lambda pair: pair[0], reverse=reverse)
    except TypeError:
        known.sort(key=lambda pair: str(pair[0]), reverse=reverse)
    return [r for _, r in known] + unknown


class HistoryScreen(Screen):
    @dataclass
    class Loaded(Message):
        """Every recorded run, read off the UI thread."""

        records: list[Run]

    BINDINGS = [
        Binding("slash", "focus_filter", "Filter", id="history_filter"),
        Binding("enter", "open_run", "Open", id="history_open", show=False),
        Binding("space", "mark", "Mark", id="history_mark"),
        Binding("c", "compare", "Compare", id="history_compare"),
        Binding("s", "sort_next", "Sort", id="history_sort"),
        Binding("d,delete", "delete", "Delete", id="history_delete"),
        Binding("e", "export", "Export", id="history_export"),
        Binding("r", "run_again", "Again", id="history_run_again"),
        Binding("g", "reload", "Reload", id="history_reload", show=False),
        Binding("escape", "focus_table", "Table", id="history_table", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.records: list[Run] = []
        self.shown: list[Run] = []
        self.marked: set[str] = set()
        self.sort_key = "date"
        self.sort_reverse = True
        self._stale = True  # the runs shown are not (or no longer) what the history holds

    def compose(self) -> ComposeResult:
        yield ModeBar("history")
        yield Input(
            placeholder="filter: words match any column (e.g. eager finished)",
            compact=True,
            id="history-filter",
        )
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Static("loading…", id="history-status", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.columns: list[tuple[str, str]] = []
        self.query_one(DataTable).focus()

    def on_resize(self) -> None:
        # Only the choice of columns depends on the size: a resize that keeps it costs nothing
        # (a refill of 10,000 runs does).
        if self.columns and self._wanted_columns() != self.columns:
            self.refill()

    def _wanted_columns(self) -> list[tuple[str, str]]:
        return COLUMNS if self.size.width >= NARROW_BELOW else COLUMNS_NARROW

    def _ensure_columns(self) -> None:
        wanted = self._wanted_columns()
        if wanted != self.columns:
            table = self.query_one(DataTable)
            table.clear(columns=True)
            for key, header in wanted:
                table.add_column(header, key=key)
            self.columns = wanted

    def on_screen_suspend(self) -> None:
        self._stale = True

    def on_screen_resume(self) -> None:
        # Shown for the first time, or back from another screen (runs may have been added or
        # deleted meanwhile). Textual resumes a new mode's screen twice: reading and drawing
        # 10,000 runs twice was a third of opening the screen.
        if self._stale and self.is_mounted:
            self._stale = False
            self.reload()

    # -- data ---------------------------------------------------------------------------------
    def reload(self) -> None:
        if self.is_mounted:
            self._load()

    @work(thread=True, exclusive=True, group="history-load", exit_on_error=False)
    def _load(self) -> None:
        history = History()
        try:
            records = history.summaries()
        except (TuiBenchError, OSError) as exc:  # unreadable beyond recovery: say so, stay up
            title = exc.title if isinstance(exc, TuiBenchError) else ""
            self.post_message(Notice(f"cannot read history: {exc}", title, "error"))
            records = []
        for warning in history.warnings:
            self.post_message(Notice(warning, title="history", severity="warning", timeout=15))
        self.post_message(self.Loaded(records))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        message.stop()
        records = message.records
        self.records = records
        known = {r.id for r in records}
        self.marked &= known
        self.refill()

    def refill(self) -> None:
        query = self.query_one("#history-filter", Input).value
        shown = (
            [r for r in self.records if matches(r, query)] if query.strip() else list(self.records)
        )
        self.shown = sort_records(shown, self.sort_key, self.sort_reverse)
        table = self.query_one(DataTable)
        cursor_id = self.cursor_id()
        self._ensure_columns()
        table.clear()
        for record in self.shown[:ROW_LIMIT]:
            values = row_values(record)
            mark = "✓" if record.id in self.marked else " "
            table.add_row(mark, *(cell(k, values[k]) for k, _ in self.columns[1:]), key=record.id)
        if cursor_id and cursor_id in [r.id for r in self.shown[:ROW_LIMIT]]:
            table.move_cursor(row=table.get_row_index(cursor_id))
        arrow = "↓" if self.sort_reverse else "↑"
        limited = (
            f" (first {ROW_LIMIT:,} shown: filter to narrow)" if len(self.shown) > ROW_LIMIT else ""
        )
        self.query_one("#history-status", Static).update(
            f"{len(self.shown)} of {len(self.records)} run(s){limited} · "
            f"{len(self.marked)} marked · "
            f"sort: {self.sort_key} {arrow} · enter opens a run"
        )

    def cursor_id(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        except CellDoesNotExist:
            return None
        return row_key.value

    def selection(self) -> list[Run]:
        """Marked runs, or the one under the cursor."""
        if self.marked:
            return [r for r in self.shown if r.id in self.marked] + [
                r for r in self.records if r.id in self.marked and r not in self.shown
            ]
        current = self.cursor_id()
        return [r for r in self.shown if r.id == current]

    # -- events -------------------------------------------------------------------------------
    @on(Input.Changed, "#history-filter")
    def _filter_changed(self) -> None:
        self.refill()

    @on(Input.Submitted, "#history-filter")
    def _filter_submitted(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key in ("short_date", "run", "data", "where"):
            key = {"short_date": "date"}.get(key, key)
        if key in SORTABLE or key in ("run", "data", "where", "state"):
            self.sort_by(key)

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_run()

    def sort_by(self, key: str) -> None:
        if key == self.sort_key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = (
                key,
                key in ("date", "samples_s", "tokens_s", "accuracy"),
            )
        self.refill()

    # -- actions ------------------------------------------------------------------------------
    def action_focus_filter(self) -> None:
        self.query_one("#history-filter", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one(DataTable).focus()

    def action_reload(self) -> None:
        self.reload()

    def action_sort_next(self) -> None:
        index = SORTABLE.index(self.sort_key)
        self.sort_key = SORTABLE[(index + 1) % len(SORTABLE)]
        self.sort_reverse = False
        self.refill()

    def action_mark(self) -> None:
        current = self.cursor_id()
        if current is None:
            return
        self.marked ^= {current}
        table = self.query_one(DataTable)
        table.update_cell(current, "mark", "✓" if current in self.marked else " ")
        self.refill()
        if table.cursor_row + 1 < table.row_count:
            table.move_cursor(row=table.cursor_row + 1)

    def action_open_run(self) -> None:
        current = self.cursor_id()
        if current:
            self.app.push_screen(RunDetailScreen(current))

    def action_compare(self) -> None:
        chosen = [r.id for r in self.selection()]
        if len(chosen) < 2:
            self.notify("mark two or more runs with space, then press c", severity="warning")
            return
        self.post_message(CompareRequested(chosen))

    def action_delete(self) -> None:
        chosen = self.selection()
        if not chosen:
            return
        ids = [r.id for r in chosen]
        detail = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._delete(ids)

        self.app.push_screen(
            ConfirmScreen(
                f"Delete {len(ids)} run(s)?",
                f"{detail}\nTheir series and logs go too.",
                yes="Delete",
                no="Keep",
            ),
            confirmed,
        )

    @work(thread=True, exit_on_error=False, group="history-write")
    def _delete(self, ids: list[str]) -> None:
        try:
            removed = History().delete(ids)
        except HistoryError as exc:  # a run in progress: nothing was deleted
            self.app.call_from_thread(self.notify, str(exc), title="not deleted", severity="error")
            return
        self.app.call_from_thread(self.notify, f"deleted {removed} run(s)")
        self.app.call_from_thread(self._after_delete, ids)

    def _after_delete(self, ids: list[str]) -> None:
        self.marked -= set(ids)
        self.reload()

    def action_export(self) -> None:
        chosen = self.selection() if self.marked else list(self.shown)
        what = f"{len(chosen)} marked run(s)" if self.marked else f"all {len(chosen)} shown run(s)"
        default = str(Path.cwd() / "tui-bench-runs.csv")

        def chosen_path(path: str | None) -> None:
            if path:
                self._export(Path(path).expanduser(), chosen)

        self.app.push_screen(PromptScreen(f"Export {what} to CSV file", default), chosen_path)

    @work(thread=True, exit_on_error=False, group="history-write")
    def _export(self, path: Path, records: list[Run]) -> None:
        try:
            count = csv_export.export_csv(History(), path, records)
        except OSError as exc:
            self.app.call_from_thread(
                self.notify,
                f"{path}: {exc.strerror or exc}",
                title="export failed",
                severity="error",
            )
            return
        self.app.call_from_thread(self.notify, f"wrote {count} run(s) to {path}", title="exported")

    def action_run_again(self) -> None:
        chosen = self.selection()
        if len(chosen) != 1:
            self.notify(
                "put the cursor on one run (unmark others) to run it again", severity="warning"
            )
            return
        try:
            spec = RunSpec.from_dict(dict(chosen[0].spec))
        except SpecError as exc:
            self.notify(f"this run's spec is no longer valid: {exc}", severity="error")
            return
        source = f"spec of {chosen[0].id} — check and press Start"
        self.post_message(SpecLoaded(spec, source=source))
