"""Live: the running benchmark. Redrawn by the app's timer, never per event."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Collapsible, Footer

from tui_bench.engine.results.history import History
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.tui.widgets.mode_bar import ModeBar
from tui_bench.tui.widgets.run_view import RunView

LOG_POLL_S = 1.0
LOG_CHUNK = 64 * 1024


class LiveScreen(Screen):
    BINDINGS = [
        Binding(
            "x",
            "app.cancel_run",
            "Cancel run",
            id="cancel_run",
            tooltip="Cancel the running benchmark",
        ),
        Binding("l", "toggle_log", "Log", id="toggle_log"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._log_run_id: str | None = None
        self._log_offset = 0
        self.shown_run: BatchView | None = None  # set by the app through show(): attributes down

    def compose(self) -> ComposeResult:
        yield ModeBar("live")
        yield RunView()
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.set_interval(LOG_POLL_S, self.poll_log, name="log-tail")
        if self.shown_run is not None:
            self.show(self.shown_run)

    def on_screen_resume(self) -> None:
        if self.shown_run is not None:
            self.show(self.shown_run)

    def show(self, run: BatchView) -> None:
        self.shown_run = run
        views = self.query(RunView)  # none yet while the screen composes: on_mount shows it
        if self.is_mounted and views:
            views.first().show(run)

    def action_toggle_log(self) -> None:
        pane = self.query_one(Collapsible)
        pane.collapsed = not pane.collapsed

    def poll_log(self) -> None:
        live = self.shown_run
        if live is None or live.run_id is None:
            return
        if self.query_one(Collapsible).collapsed and live.run_id == self._log_run_id:
            return  # nobody is looking: read the log when the pane opens, from where we were
        if live.run_id != self._log_run_id:
            self._log_run_id, self._log_offset = live.run_id, 0
            self.query_one(RunView).clear_log()
        self._read_log(live.run_id, self._log_offset)

    @work(thread=True, exclusive=True, group="log-tail", exit_on_error=False)
    def _read_log(self, run_id: str, offset: int) -> None:
        """Read new bytes of the worker's log off the UI thread."""
        try:
            with open(History().log_path(run_id), "rb") as handle:
                handle.seek(offset)
                chunk = handle.read(LOG_CHUNK)
        except OSError:
            return
        if chunk:
            self.app.call_from_thread(self._append_log, run_id, offset + len(chunk), chunk)

    def _append_log(self, run_id: str, offset: int, chunk: bytes) -> None:
        if run_id != self._log_run_id:
            return
        self._log_offset = offset
        self.query_one(RunView).append_log(chunk.decode("utf-8", errors="replace"))
