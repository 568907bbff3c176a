"""A stored run shown again from its series file: the same view as Live."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

from tui_bench.engine.results.history import History
from tui_bench.engine.runs.reducer import stored_run
from tui_bench.tui.widgets.mode_bar import ModeBar
from tui_bench.tui.widgets.run_view import RunView


class RunDetailScreen(Screen):
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back", id="detail_back")]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        yield ModeBar("history")
        yield RunView(id="detail-view")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._load()

    @work(thread=True, exit_on_error=False)
    def _load(self) -> None:
        history = History()
        events = history.read_series(self.run_id)
        try:
            log = history.log_path(self.run_id).read_text(encoding="utf-8", errors="replace")[
                -64_000:
            ]
        except OSError:
            log = ""
        self.app.call_from_thread(self._loaded, events, log)

    def _loaded(self, events: list[dict[str, Any]], log: str) -> None:
        if not events:
            self.notify(f"run {self.run_id} has no stored series", severity="warning")
        view = self.query_one(RunView)
        view.show(stored_run(events))
        view.clear_log()
        view.append_log(log)
