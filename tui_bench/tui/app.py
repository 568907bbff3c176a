"""The tui-bench Textual app: app-wide concerns only (modes, keys, theme, notifications, the
modals), over a headless engine.

Modes (F2…F6): Setup, Live, History, Compare, System; each keeps its own screen, so a run goes on
while you browse history. Runs belong to the engine's supervisor; the run controller
(``tui.live.RunController``) starts, attaches to and follows them through the engine's follower,
whose view the Live screen draws on a timer at ``ui.refresh_hz`` (config.py declares its
default) whatever the event rate. Run handling is ``tui.app_runs.LiveRuns``, opening presets
``tui.app_presets.PresetFlow``: both mixed in here, each typed against the protocol of what it
needs from this app (checked below, under TYPE_CHECKING).
This process never imports a DL framework: they live in the worker subprocesses.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from textual import on, work
from textual.app import App, InvalidThemeError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tui_bench.engine.config import ConfigError, load_config, setting_value
from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app_presets import PresetFlow, PresetsHost
from tui_bench.tui.app_runs import LiveRuns, RunsHost
from tui_bench.tui.commands import TuiBenchCommands
from tui_bench.tui.keys import KeyLabels
from tui_bench.tui.live import RunController, newest_in_progress
from tui_bench.tui.messages import (
    AttachRequested,
    BatchesInProgress,
    CompareRequested,
    Notice,
    SpecLoaded,
)
from tui_bench.tui.screens.dialogs import HelpScreen, MessageScreen
from tui_bench.tui.screens.setup import SetupScreen


# Screens other than Setup (the first one drawn) are imported when first shown: plotext, the
# runner and tinydb are not needed for the first frame.
def _lazy(module: str, name: str) -> Callable[[], Screen]:
    def make() -> Screen:
        return getattr(importlib.import_module(f"tui_bench.tui.screens.{module}"), name)()

    return make


# The screen keys are shown (and clickable) in the ModeBar on top, not again in the footer.
SCREENS = Binding.Group("screens", compact=True)
THEMES = ("textual-dark", "textual-light", "ansi-dark", "ansi-light")


class TuiBenchApp(LiveRuns, PresetFlow, App[None]):
    TITLE = "tui-bench"
    CSS_PATH = Path(__file__).with_name("tui.tcss")  # absolute: subclasses may live elsewhere
    COMMANDS = App.COMMANDS | {TuiBenchCommands}
    MODES = {
        "setup": SetupScreen,
        "live": _lazy("live", "LiveScreen"),
        "history": _lazy("history", "HistoryScreen"),
        "compare": _lazy("compare", "CompareScreen"),
        "system": _lazy("system", "SystemScreen"),
        "trends": _lazy("trends", "TrendsScreen"),
    }
    DEFAULT_MODE = "setup"
    # Every key is declared once, here or in a screen's BINDINGS, with an id the config's [keys]
    # can remap; the mode bar, help, palette and button labels read their keys from these.
    # Tooltips double as the command palette's entries.
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help", id="help", tooltip="Help"),
        Binding(
            "f2",
            "switch_mode('setup')",
            "Setup",
            id="show_setup",
            group=SCREENS,
            show=False,
            tooltip="Setup: choose a benchmark",
        ),
        Binding(
            "f3",
            "switch_mode('live')",
            "Live",
            id="show_live",
            group=SCREENS,
            show=False,
            tooltip="Live: the running benchmark",
        ),
        Binding(
            "f4",
            "switch_mode('history')",
            "History",
            id="show_history",
            group=SCREENS,
            show=False,
            tooltip="History: recorded runs",
        ),
        Binding(
            "f5",
            "switch_mode('compare')",
            "Compare",
            id="show_compare",
            group=SCREENS,
            show=False,
            tooltip="Compare: statistics of marked runs or the last sweep",
        ),
        Binding(
            "f6",
            "switch_mode('system')",
            "System",
            id="show_system",
            group=SCREENS,
            show=False,
            tooltip="System: hardware and runtimes",
        ),
        # Not a switch_mode binding, so the mode bar keeps its five screens within 80 columns.
        # F7/F8 belong to Setup's presets, F9 to the theme; F10 opens many terminals' menu.
        Binding(
            "ctrl+t,f10",
            "show_trends",
            "Trends",
            id="show_trends",
            show=False,
            tooltip="Trends: each configuration over time and where it stepped",
        ),
        Binding("f9", "cycle_theme", "Theme", id="cycle_theme", show=False, tooltip="Next theme"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding(
            "ctrl+p",
            "command_palette",
            "Commands",
            id="command_palette",
            show=False,
            priority=True,
            tooltip="Open the command palette",
        ),
    ]

    def __init__(
        self,
        refresh_hz: float | None = None,
        start_mode: str | None = None,
        machine: dict[str, float] | None = None,
    ) -> None:
        # A run in progress is what someone reconnecting wants first: its backlog is folded
        # before the first frame, which is Live's (Setup is not even built until shown).
        following = None if start_mode else newest_in_progress()
        if following is not None:
            # Per instance on purpose: this app opens on Live, the class's default stays Setup.
            self.DEFAULT_MODE = "live"  # type: ignore[misc]
        super().__init__()
        # Fixed graph ranges come from the machine (all cores = 100 % each, RAM); tests pin them.
        self.machine = machine or {
            "logical_cores": psutil.cpu_count(logical=True) or 1,
            "ram_mib": psutil.virtual_memory().total / 2**20,
        }
        self.start_mode = start_mode
        self.runs = RunController(self)
        self.live: BatchView | None = None  # the batch shown on Live (the controller's view)
        if following is not None:
            self.live = self.runs.adopt(following)
        self.left_running: str | None = None  # batch id the user chose to leave running on quit
        self._watch: Any = None  # follow.BatchWatch, made by the first look (off the UI thread)
        self.config_error: str | None = None
        try:
            self.config = load_config()  # checked there: types, ranges, key names
        except ConfigError as exc:
            self.config, self.config_error = {}, str(exc)
        self.refresh_hz = refresh_hz or float(setting_value(self.config, "ui.refresh_hz"))
        keymap = dict(self.config.get("keys", {}))
        self.set_keymap(keymap)
        self.key_labels = KeyLabels(keymap, binding_owners)
        theme = os.environ.get("TUI_BENCH_THEME") or setting_value(self.config, "ui.theme")
        if not theme and os.environ.get("COLORTERM", "") not in ("truecolor", "24bit"):
            theme = "ansi-dark"  # no truecolor advertised: use the terminal's own palette
        self.initial_theme = theme
        if theme in self.available_themes:
            # Before the first frame: a theme switch after mount re-applies all CSS (~0.5 s).
            self.theme = theme

    # -- lifecycle ----------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.initial_theme and self.theme != self.initial_theme:
            try:
                self.theme = self.initial_theme
            except InvalidThemeError:  # unknown theme name in the config: keep the default
                self.notify(f"unknown theme {self.initial_theme!r}", severity="warning")
        if self.start_mode:
            self.switch_mode(self.start_mode)
        if self.live is not None:
            self.runs.follow_adopted()
            self.redraw_live(force=True)
        self.set_interval(1 / self.refresh_hz, self.redraw_live, name="live-redraw")
        # Runs started elsewhere (another shell's `tui-bench run --detach`, another app) reach
        # Live within a redraw: the watch looks for them as often as Live is drawn.
        self.set_interval(1 / self.refresh_hz, self.watch_runs, name="run-watch")
        self.mode_change_signal.subscribe(self, self.mode_changed)
        if self.config_error:
            self.notify(
                self.config_error, title="config file ignored", severity="error", timeout=10
            )
        # After the first frame: switching to Live while Setup still composes races with it.
        self.call_after_refresh(self.check_history)

    @work(thread=True, group="history", exit_on_error=False)
    def check_history(self) -> None:
        """Say which run in progress Live follows (and how many others there are); then settle
        runs whose supervisor died and report corrupt history files."""
        from tui_bench.engine.results.history import History
        from tui_bench.engine.runs import supervisor

        running = supervisor.in_progress()
        newest = running[-1] if running else None
        if newest is not None and self.live is None and not self.start_mode:
            self.post_message(AttachRequested(newest.id))  # it started while this app did
        if newest is not None and self.live is not None and self.live.batch_id == newest.id:
            palette = self.key_labels.label("command_palette")
            others = (
                f"; {len(running) - 1} more in progress ({palette}: Follow)"
                if len(running) > 1
                else ""
            )
            self.post_message(
                Notice(f"following {newest.label}{others}", title="run in progress", timeout=10)
            )
        history = History()
        history.mark_interrupted()
        for warning in history.warnings:
            self.post_message(Notice(warning, title="history", severity="warning", timeout=15))

    @work(thread=True, exclusive=True, group="watch", exit_on_error=False)
    def watch_runs(self) -> None:
        """Which batches are in progress on this home (``follow.BatchWatch``: a batch is read
        until it ends, then never again); the app decides on its own thread what Live follows."""
        if self._watch is None:
            from tui_bench.engine.runs.follow import BatchWatch

            self._watch = BatchWatch()
        try:
            running = self._watch.in_progress()
        except OSError:  # an unreadable batch directory: nothing to pick up this time
            return
        if running:
            self.post_message(BatchesInProgress([b.id for b in running]))

    @on(Notice)
    def _notice(self, message: Notice) -> None:
        self.notify(
            message.message,
            title=message.title,
            severity=message.severity,
            timeout=message.timeout,
        )

    def get_system_commands(self, screen: Screen) -> Any:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Terminal colours theme", "ansi-dark: works without truecolor", self.use_ansi_theme
        )

    # -- actions ------------------------------------------------------------------------------
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def action_cycle_theme(self) -> None:
        index = THEMES.index(self.theme) if self.theme in THEMES else -1
        self.theme = THEMES[(index + 1) % len(THEMES)]
        self.notify(f"theme: {self.theme}")

    def use_ansi_theme(self) -> None:
        self.theme = "ansi-dark"

    def show_error(self, title: str, message: str) -> None:
        self.push_screen(MessageScreen(title, message))

    def show_failure(self, error: BaseException, what: str = "") -> None:
        """A user-facing failure (a ``TuiBenchError``) under its own title; anything else as
        ``what failed`` with its type, so an unexpected bug is reported, not hidden."""
        if isinstance(error, TuiBenchError):
            self.show_error(error.title, str(error))
        else:
            self.show_error(
                f"{what or 'background task'} failed", f"{type(error).__name__}: {error}"
            )

    # -- runs (the app's side is tui.app_runs.LiveRuns; these are app-wide) ----------------
    def screens_of(self, mode: str) -> list[Any]:
        """The screens of a mode that has been shown (a mode never shown has none yet)."""
        try:
            return self.get_screen_stack(mode)
        except KeyError:
            return []

    def action_show_trends(self) -> None:
        self.switch_mode("trends")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a failure inside any worker thread lands: a modal, and the app stays
        up. A ``TuiBenchError`` shows under its own title; anything else names its type."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.show_failure(event.worker.error, event.worker.name)

    # -- navigation asked for by screens and the palette ------------------------------------
    @on(SpecLoaded)
    def load_spec(self, message: SpecLoaded) -> None:
        self.switch_mode("setup")
        self.call_after_refresh(self._load_spec_into_setup, message.spec, message.source)

    def _load_spec_into_setup(self, spec: RunSpec, source: str) -> None:
        screen = self.screen
        if isinstance(screen, SetupScreen):
            screen.set_form(spec)
            if source:
                self.notify(f"loaded {source}")

    @on(CompareRequested)
    def _compare_requested(self, message: CompareRequested) -> None:
        self.open_compare(message.run_ids)

    def open_compare(self, run_ids: list[str]) -> None:
        self.switch_mode("compare")  # builds the Compare screen the first time, synchronously
        self.hand_compare_ids(run_ids)

    def hand_compare_ids(self, run_ids: list[str]) -> None:
        """Attributes down: the app tells the Compare screen what to compare."""
        from tui_bench.tui.screens.compare import CompareScreen

        for screen in self.screens_of("compare"):
            if isinstance(screen, CompareScreen):
                screen.compare(run_ids)


if TYPE_CHECKING:
    # The mixins' handlers take ``self`` as their protocol: this is where a type checker sees
    # that the app really gives them what the protocols ask for.
    def _hosts(app: TuiBenchApp) -> tuple[RunsHost, PresetsHost]:
        return app, app


def binding_owners() -> list[type]:
    """Every class that declares bindings: the app and each screen (imported when the first
    label is needed, not for the first frame)."""
    from tui_bench.tui.screens import compare, dialogs, history, live, setup, system, trends

    return [
        TuiBenchApp,
        setup.SetupScreen,
        live.LiveScreen,
        history.HistoryScreen,
        compare.CompareScreen,
        system.SystemScreen,
        trends.TrendsScreen,
        dialogs.ConfirmScreen,
        dialogs.MessageScreen,
        dialogs.HelpScreen,
        dialogs.PromptScreen,
    ]


def run_app() -> int:
    app = TuiBenchApp()
    app.run()
    if app.left_running:
        from tui_bench.engine.runs.follow import left_running_hint

        print(f"{app.left_running} is still running; {left_running_hint(app.left_running)}")
    return 0


if __name__ == "__main__":
    run_app()
