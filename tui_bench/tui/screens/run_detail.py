"""A stored run shown again from its series file: the same view as Live. A run still in
progress (its supervisor alive: the engine's word, never a guess from a quiet series) is
followed live from there, until it ends."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results.history import History, HistoryError
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs.reducer import BatchView, stored_run
from tui_bench.tui.widgets.mode_bar import ModeBar
from tui_bench.tui.widgets.run_view import RunView

FOLLOW_POLL_S = 0.5  # how often a run in progress is read (redraws at the app's refresh rate)


class RunDetailScreen(Screen):
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back", id="detail_back")]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.view: BatchView | None = None  # what is shown; a run in progress fills it

    def compose(self) -> ComposeResult:
        yield ModeBar("history")
        yield RunView(id="detail-view")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._load()
        refresh_hz = float(getattr(self.app, "refresh_hz", 0.5) or 0.5)
        self.set_interval(1 / refresh_hz, self._redraw, name="detail-redraw")

    @work(thread=True, exit_on_error=False)
    def _load(self) -> None:
        history = History()
        try:
            record: Run | None = history.get(self.run_id)  # settled: 'running' while it lives
        except HistoryError:
            record = None
        if record is not None and record.status == RunStatus.RUNNING:
            self._follow(record)
            return
        events = history.read_series(self.run_id)
        self.app.call_from_thread(self._loaded, events, self._log(history), record)

    def _log(self, history: History) -> str:
        try:
            return history.log_path(self.run_id).read_text(encoding="utf-8", errors="replace")[
                -64_000:
            ]
        except OSError:
            return ""

    def _follow(self, record: Run) -> None:
        """In this worker's thread: the run's backlog folded at once, then what its supervisor
        writes, until the run ends (or this screen goes)."""
        from tui_bench.engine.runs.follow import BatchFollower

        follower = BatchFollower.of_run(self.run_id, record.text_field("batch"))
        view = follower.catch_up()
        self.app.call_from_thread(self._shown, view, self._log(follower.tail.history))
        worker = get_current_worker()
        follower.follow(should_stop=lambda: worker.is_cancelled, interval=FOLLOW_POLL_S)

    def _loaded(self, events: list[dict[str, Any]], log: str, record: Run | None) -> None:
        if not events:
            self.notify(f"run {self.run_id} has no stored series", severity="warning")
        self._shown(stored_run(events, record), log)

    def _shown(self, view: BatchView, log: str) -> None:
        self.view = view
        run_view = self.query_one(RunView)
        run_view.show(view)
        run_view.clear_log()
        run_view.append_log(log)

    def _redraw(self) -> None:
        """A run in progress, redrawn at the app's rate from what its follower queued."""
        view = self.view
        if view is not None and view.drain():
            self.query_one(RunView).show(view)
