"""The tui-bench Textual app: app-wide concerns only (modes, keys, theme, notifications, the
modals), over a headless engine.

Modes (F2…F6): Setup, Live, History, Compare, System; each keeps its own screen, so a run goes on
while you browse history. Runs belong to the engine's supervisor; the run controller
(``tui.live.RunController``) starts, attaches to and follows them through the engine's follower,
whose view the Live screen draws on a timer at ``REFRESH_HZ`` whatever the event rate.
This process never imports a DL framework: they live in the worker subprocesses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
from textual import on, work
from textual.app import App, InvalidThemeError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tui_bench.engine.config import ConfigError, load_config
from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.commands import TuiBenchCommands
from tui_bench.tui.keys import KeyLabels
from tui_bench.tui.live import RunController, newest_in_progress, outcome
from tui_bench.tui.messages import (
    AttachRequested,
    BatchFinished,
    CompareRequested,
    Notice,
    PresetLoaded,
    PresetRequested,
    RunShown,
    SpecLoaded,
    StartRequested,
    SweepRequested,
)
from tui_bench.tui.screens.dialogs import ChoiceScreen, ConfirmScreen, HelpScreen, MessageScreen
from tui_bench.tui.screens.setup import SetupScreen

# Screens other than Setup (the first one drawn) are imported when first shown: plotext, the
# runner and tinydb are not needed for the first frame.


def _live_screen() -> Screen:
    from tui_bench.tui.screens.live import LiveScreen

    return LiveScreen()


def _history_screen() -> Screen:
    from tui_bench.tui.screens.history import HistoryScreen

    return HistoryScreen()


def _compare_screen() -> Screen:
    from tui_bench.tui.screens.compare import CompareScreen

    return CompareScreen()


def _trends_screen() -> Screen:
    from tui_bench.tui.screens.trends import TrendsScreen

    return TrendsScreen()


def _system_screen() -> Screen:
    from tui_bench.tui.screens.system import SystemScreen

    return SystemScreen()


# Redraws per second of the live view, whatever the event rate. 0.5 (every 2 s, like btop and
# nvitop) keeps the UI under 5 % of a core while a run streams; 1 Hz measured 8.8 %.
REFRESH_HZ = 0.5
# The screen keys are shown (and clickable) in the ModeBar on top, not again in the footer.
SCREENS = Binding.Group("screens", compact=True)
THEMES = ("textual-dark", "textual-light", "ansi-dark", "ansi-light")


class TuiBenchApp(App[None]):
    TITLE = "tui-bench"
    CSS_PATH = Path(__file__).with_name("tui.tcss")  # absolute: subclasses may live elsewhere
    COMMANDS = App.COMMANDS | {TuiBenchCommands}
    MODES = {
        "setup": SetupScreen,
        "live": _live_screen,
        "history": _history_screen,
        "compare": _compare_screen,
        "system": _system_screen,
        "trends": _trends_screen,
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
            self.DEFAULT_MODE = "live"
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
        self.config_error: str | None = None
        try:
            self.config = load_config()
        except ConfigError as exc:
            self.config, self.config_error = {}, str(exc)
        ui = self.config.get("ui") if isinstance(self.config.get("ui"), dict) else {}
        try:
            configured_hz = float(ui.get("refresh_hz", REFRESH_HZ))
        except (TypeError, ValueError):
            configured_hz = REFRESH_HZ
        # 0.2–4 Hz: plotext redraws cost ~5–20 ms each; more would show in the run's figures.
        self.refresh_hz = min(max(refresh_hz or configured_hz, 0.2), 4.0)
        keys = self.config.get("keys", {})
        keymap = {str(k): str(v) for k, v in keys.items()} if isinstance(keys, dict) else {}
        self.set_keymap(keymap)
        self.key_labels = KeyLabels(keymap, binding_owners)
        theme = (
            self.config.get("ui", {}).get("theme")
            if isinstance(self.config.get("ui"), dict)
            else None
        )
        if os.environ.get("TUI_BENCH_THEME"):
            theme = os.environ["TUI_BENCH_THEME"]
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
        self.mode_change_signal.subscribe(self, self._mode_changed)
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

    # -- runs ---------------------------------------------------------------------------------
    # The run controller (tui.live) starts, attaches to, follows and cancels the batch; the app
    # shows the controller's view on Live (attributes down) and says how the batch ended.
    @property
    def running(self) -> bool:
        return self.live is not None and not self.live.done

    def _busy(self) -> bool:
        if self.running:
            self.notify(
                "a run is in progress: cancel it first (x on the Live screen)", severity="warning"
            )
        return self.running

    @on(StartRequested)
    def start_run(self, message: StartRequested) -> None:
        """Start one configuration (``spec.repeats`` runs), unless a batch is still running."""
        if not self._busy():
            self.show_live(self.runs.start(message.spec, message.auto_repeats))

    @on(SweepRequested)
    def start_sweep(self, message: SweepRequested) -> None:
        """Run a preset's sweep (engine.sweep: planned, interleaved, resumable from the CLI)."""
        if not self._busy():
            self.show_live(self.runs.start_sweep(message.preset, message.auto_repeats))

    @on(AttachRequested)
    def _attach_requested(self, message: AttachRequested) -> None:
        self.attach(message.batch_id)

    def attach(self, batch_id: str) -> None:
        """Follow a batch started elsewhere (another terminal, an earlier session of the app)."""
        self.runs.attach(batch_id)

    @on(RunShown)
    def _run_shown(self, message: RunShown) -> None:
        if self.return_code is None and message.live is self.runs.view:
            self.show_live(message.live)

    def show_live(self, view: BatchView) -> None:
        self.live = view
        self.switch_mode("live")
        self.redraw_live(force=True)

    @on(BatchFinished)
    def _batch_finished(self, message: BatchFinished) -> None:
        view = message.live
        self.redraw_live(force=True)
        told = outcome(view, message.title, self.key_labels.label("show_compare"))
        if told.modal:
            self.push_screen(MessageScreen(told.title, told.message))
        else:
            self.notify(
                told.message, title=told.title, severity=told.severity, timeout=told.timeout
            )
        if view.sweep_id is not None and not view.lost:
            # Compare (F5) now shows this sweep; a Compare screen not built yet shows the latest.
            self._hand_compare_ids([view.sweep_id])
        for screen in self._screens_of("history"):
            screen.reload()

    def _screens_of(self, mode: str) -> list[Any]:
        """The screens of a mode that has been shown (a mode never shown has none yet)."""
        try:
            return self.get_screen_stack(mode)
        except KeyError:
            return []

    def action_show_trends(self) -> None:
        self.switch_mode("trends")

    def action_cancel_run(self) -> None:
        live = self.live
        if live is None or live.done:
            self.notify("nothing is running")
            return

        def confirmed(yes: bool | None) -> None:
            if yes and live is self.live and not live.done:
                self.runs.cancel(live)
                self.notify("cancelling…")

        self.push_screen(
            ConfirmScreen(
                "Cancel the run?",
                "The worker is stopped and the run recorded as cancelled.",
                yes="Cancel run",
                no="Keep running",
            ),
            confirmed,
        )

    async def action_quit(self) -> None:
        if not self.running:
            self.exit()
            return
        live = self.live
        assert live is not None

        def chosen(choice: str | None) -> None:
            if choice == "leave":
                self.left_running = live.batch_id
                self.exit()
            elif choice == "cancel":
                self.run_worker(self._cancel_then_exit(), group="quit", exit_on_error=False)

        self.push_screen(
            ChoiceScreen(
                "Quit?",
                "A run is in progress. It can go on without this window: "
                f"tui-bench attach {live.batch_id or ''} (or just tui-bench) follows it again.",
                [("leave", "Leave running"), ("cancel", "Cancel & quit"), ("stay", "Stay")],
            ),
            chosen,
        )

    async def _cancel_then_exit(self) -> None:
        if self.running:
            self.notify("cancelling the run before quitting…")
            await self.runs.cancel_and_wait()
        self.exit()

    def feed(self, event: dict[str, Any]) -> None:
        """Events from any source (tests' seeded fake) enter the shown view here."""
        if self.live is not None:
            self.live.push(event)

    def redraw_live(self, force: bool = False) -> None:
        """The one place live plots are redrawn, at ``refresh_hz``."""
        live = self.live
        if live is None:
            return
        changed = live.drain()
        if not (changed or force):
            return
        from tui_bench.tui.screens.live import LiveScreen

        for screen in self._screens_of("live"):
            if isinstance(screen, LiveScreen):
                screen.show(live)

    def _mode_changed(self, mode: str) -> None:
        """A Live screen shown for the first time gets the current run (attributes down)."""
        if mode == "live":
            self.redraw_live(force=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a failure inside any worker thread lands: a modal, and the app stays
        up. A ``TuiBenchError`` shows under its own title; anything else names its type."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.show_failure(event.worker.error, event.worker.name)

    # -- presets ----------------------------------------------------------------------------
    @on(PresetRequested)
    def _preset_requested(self, message: PresetRequested) -> None:
        self.open_preset(message.name_or_path)

    @work(thread=True, group="preset", exit_on_error=False)
    def open_preset(self, name_or_path: str) -> None:
        """Load a preset (name or file) off the UI thread: a single run goes into the Setup form,
        a sweep is shown with what it would run and skip here, and runs if confirmed."""
        from tui_bench.tui.presets_io import load

        try:
            loaded = load(name_or_path)
        except TuiBenchError as exc:  # PresetError, or a spec in it that is not valid
            self.post_message(
                Notice(str(exc), title="preset not loaded", severity="error", timeout=15)
            )
            return
        self.post_message(PresetLoaded(loaded))

    @on(PresetLoaded)
    def _preset_loaded(self, message: PresetLoaded) -> None:
        loaded = message.loaded
        preset = loaded.preset
        if loaded.is_single:
            config = loaded.configs[0]
            if config.skip_reason:
                self.notify(
                    f"{preset.shown_path}: {config.skip_reason}",
                    title="preset not loaded",
                    severity="error",
                    timeout=15,
                )
                return
            self.load_spec(SpecLoaded(config.spec, source=preset.shown_path))
            return
        if not loaded.runnable:
            self.push_screen(
                MessageScreen(f"{preset.name}: nothing can run here", loaded.summary())
            )
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_sweep(SweepRequested(preset))

        self.push_screen(
            ConfirmScreen(
                f"Run the sweep {preset.name}?",
                loaded.summary(),
                yes="Run sweep",
                no="Not now",
            ),
            confirmed,
        )

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
        self._hand_compare_ids(run_ids)

    def _hand_compare_ids(self, run_ids: list[str]) -> None:
        """Attributes down: the app tells the Compare screen what to compare."""
        from tui_bench.tui.screens.compare import CompareScreen

        for screen in self._screens_of("compare"):
            if isinstance(screen, CompareScreen):
                screen.compare(run_ids)


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
