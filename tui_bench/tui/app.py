"""The tui-bench Textual app: a thin view over ``tui_bench.engine``.

Modes (F2…F6): Setup, Live, History, Compare, System; each keeps its own screen, so a run goes on
while you browse history. Benchmarks run in a thread worker calling ``runner.execute``; events are
buffered in a ``LiveRun`` and drawn by a timer at ``REFRESH_HZ`` whatever the event rate.
This process never imports a DL framework: they live in the worker subprocesses.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import psutil
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tui_bench.engine.config import ConfigError, load_config
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.commands import TuiBenchCommands
from tui_bench.tui.live import LiveRun
from tui_bench.tui.screens.dialogs import ConfirmScreen, HelpScreen, MessageScreen
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


def _system_screen() -> Screen:
    from tui_bench.tui.screens.system import SystemScreen

    return SystemScreen()


QUIT_WAIT_S = 5.0  # how long quitting waits for a cancelled run to be recorded
# Redraws per second of the live view, whatever the event rate. 0.5 (every 2 s, like btop and
# nvitop) keeps the UI under 5 % of a core while a run streams; 1 Hz measured 8.8 %.
REFRESH_HZ = 0.5
# The screen keys are shown (and clickable) in the ModeBar on top, not again in the footer.
SCREENS = Binding.Group("screens", compact=True)
THEMES = ("textual-dark", "textual-light", "ansi-dark", "ansi-light")


def expand_batch(spec: RunSpec) -> list[RunSpec]:
    """The runs of one Start of a single configuration: ``repeats`` times the spec."""
    return [spec for _ in range(spec.repeats)]


class SweepStopped(Exception):
    """Cancel was asked for between two runs of a sweep."""


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
    }
    DEFAULT_MODE = "setup"
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help", id="help"),
        Binding("f2", "switch_mode('setup')", "Setup", id="show_setup", group=SCREENS, show=False),
        Binding("f3", "switch_mode('live')", "Live", id="show_live", group=SCREENS, show=False),
        Binding(
            "f4", "switch_mode('history')", "History", id="show_history", group=SCREENS, show=False
        ),
        Binding(
            "f5", "switch_mode('compare')", "Compare", id="show_compare", group=SCREENS, show=False
        ),
        Binding(
            "f6", "switch_mode('system')", "System", id="show_system", group=SCREENS, show=False
        ),
        Binding("f9", "cycle_theme", "Theme", id="cycle_theme", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(
        self,
        refresh_hz: float | None = None,
        start_mode: str | None = None,
        machine: dict[str, float] | None = None,
    ) -> None:
        super().__init__()
        # Fixed graph ranges come from the machine (all cores = 100 % each, RAM); tests pin them.
        self.machine = machine or {
            "logical_cores": psutil.cpu_count(logical=True) or 1,
            "ram_mib": psutil.virtual_memory().total / 2**20,
        }
        self.start_mode = start_mode
        self.live: LiveRun | None = None
        self.compare_ids: list[str] = []
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
        if isinstance(keys, dict):
            self.set_keymap({str(k): str(v) for k, v in keys.items()})
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
            except Exception:  # unknown theme name in the config: keep the default
                self.notify(f"unknown theme {self.initial_theme!r}", severity="warning")
        if self.start_mode:
            self.switch_mode(self.start_mode)
        self.set_interval(1 / self.refresh_hz, self.redraw_live, name="live-redraw")
        if self.config_error:
            self.notify(
                self.config_error, title="config file ignored", severity="error", timeout=10
            )
        # Background checks start after the first frame, not competing with it for the GIL.
        self.call_after_refresh(self.check_history)

    @work(thread=True, group="history", exit_on_error=False)
    def check_history(self) -> None:
        """Runs left 'running' by a killed app become 'interrupted'; corrupt files are reported."""
        from tui_bench.engine.history import History

        history = History()
        history.mark_interrupted()
        for warning in history.warnings:
            self.call_from_thread(
                self.notify, warning, title="history", severity="warning", timeout=15
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

    # -- runs ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.live is not None and not self.live.done

    def start_batch(self, specs: list[RunSpec]) -> bool:
        """Start runs one after another in a thread worker; False if a batch is still running."""
        if self.running:
            self.notify(
                "a run is in progress: cancel it first (x on the Live screen)", severity="warning"
            )
            return False
        live = LiveRun(spec=specs[0], runs_total=len(specs))
        self.live = live
        self._run_batch(live, specs)
        self.switch_mode("live")
        self.redraw_live(force=True)
        return True

    def start_sweep(self, preset: Any) -> bool:
        """Run a preset's sweep (engine.sweep: planned, interleaved, resumable from the CLI) in a
        thread worker, through the same event path as a single run."""
        if self.running:
            self.notify(
                "a run is in progress: cancel it first (x on the Live screen)", severity="warning"
            )
            return False
        from tui_bench.engine.spec import RunSpec as _RunSpec

        live = LiveRun(spec=_RunSpec(), runs_total=1)
        live.sweep_line = f"preparing the sweep of {preset.name}…"
        self.live = live
        self._run_sweep(live, preset)
        self.switch_mode("live")
        self.redraw_live(force=True)
        return True

    @work(thread=True, group="run", exit_on_error=False, name="benchmark sweep")
    def _run_sweep(self, live: LiveRun, preset: Any) -> None:
        from tui_bench.engine import sweep as sweep_module
        from tui_bench.engine.history import History

        history = History()
        outcome = sweep = None
        try:
            sweep = sweep_module.create(preset)
            live.sweep_id = sweep.id
            live.skipped = [(c.key, c.skip_reason) for c in sweep.configs if c.skip_reason]

            def before_run(config: Any, repeat: int, index: int, total: int) -> None:
                if live.cancel_requested:
                    raise SweepStopped
                live.push(
                    {
                        "type": "sweep_run",
                        "index": index,
                        "total": total,
                        "key": config.key,
                        "repeat": repeat,
                        "repeats": sweep.repeats,
                        "oversubscribed": config.oversubscribed,
                        "spec": config.spec.to_dict(),
                    }
                )

            def on_start(worker: Any) -> None:
                live.worker = worker
                live.push({"type": "record", "record": {"id": worker.run_id}})
                if live.cancel_requested:
                    worker.cancel()

            def after_run(config: Any, repeat: int, result: Any) -> None:
                live.push({"type": "result", "record": self._result_record(history, result)})

            outcome = sweep_module.run(
                sweep,
                history,
                on_event=live.push,
                on_start=on_start,
                before_run=before_run,
                after_run=after_run,
            )
        except SweepStopped:
            pass
        finally:
            if sweep is not None:
                live.sweep_left = len(sweep_module.pending(sweep, history))
            live.sweep_failed = dict(outcome.not_run) if outcome else {}
            live.push({"type": "batch_done"})
            self.call_from_thread(self._batch_finished, live)

    @staticmethod
    def _result_record(history: Any, result: Any) -> dict[str, Any]:
        try:
            return history.get(result.run_id)
        except Exception:
            return {
                "id": result.run_id,
                "status": result.status,
                "reason": result.reason,
                "metrics": result.metrics(),
            }

    @work(thread=True, group="run", exit_on_error=False, name="benchmark run")
    def _run_batch(self, live: LiveRun, specs: list[RunSpec]) -> None:
        from tui_bench.engine.history import History
        from tui_bench.engine.runner import execute

        history = History()
        group = None
        if len(specs) > 1:
            from tui_bench.engine.history import new_run_id

            group = new_run_id()
        try:
            for index, spec in enumerate(specs):
                if live.cancel_requested:
                    break

                def on_start(worker: Any, spec: RunSpec = spec) -> None:
                    live.worker = worker
                    live.push(
                        {"type": "record", "record": {"id": worker.run_id, "spec": spec.to_dict()}}
                    )
                    if live.cancel_requested:
                        worker.cancel()

                result = execute(
                    spec,
                    history,
                    on_event=live.push,
                    on_start=on_start,
                    group=group,
                    repeat=index if len(specs) > 1 else None,
                )
                live.push({"type": "result", "record": self._result_record(history, result)})
        finally:
            live.push({"type": "batch_done"})
            self.call_from_thread(self._batch_finished, live)

    def _batch_finished(self, live: LiveRun) -> None:
        self.redraw_live(force=True)
        statuses = [r.get("status") for r in live.results]
        if live.sweep_id is not None:
            self._sweep_finished(live, statuses)
        elif not statuses:
            self.notify("the run did not start", severity="error")
        elif all(s == "finished" for s in statuses):
            step = live.metrics.get("step_median_s")
            figure = f": step {step * 1000:.1f} ms median" if step else ""
            self.notify(f"{len(statuses)} run(s) finished{figure}", title="done", timeout=8)
        elif "cancelled" in statuses:
            self.notify("run cancelled; recorded as cancelled in History", severity="warning")
        else:
            failed = next(r for r in live.results if r.get("status") != "finished")
            self.push_screen(
                MessageScreen(
                    f"run {failed.get('status')}",
                    f"{failed.get('reason') or 'no reason recorded'}\n\n{failed.get('log_tail') or ''}",
                )
            )
        for screen in self._history_screens():
            screen.reload()

    def _sweep_finished(self, live: LiveRun, statuses: list[Any]) -> None:
        self.compare_ids = [live.sweep_id]  # Compare (F5) now shows this sweep
        left = live.sweep_left
        resume = f"resume later with: tui-bench run --resume {live.sweep_id}"
        if live.cancel_requested or "cancelled" in statuses:
            self.notify(
                f"sweep cancelled after {statuses.count('finished')} run(s), {left} left; {resume}",
                title="sweep cancelled",
                severity="warning",
                timeout=20,
            )
        elif left:
            why = "; ".join(f"{k}: {r}" for k, r in live.sweep_failed.items()) or "runs failed"
            self.notify(
                f"{left} run(s) not done ({why}); {resume}",
                title="sweep incomplete",
                severity="error",
                timeout=20,
            )
        else:
            self.notify(
                f"{len(statuses)} run(s) finished; F5 compares them",
                title="sweep done",
                timeout=10,
            )

    def _history_screens(self) -> list[Screen]:
        from tui_bench.tui.screens.history import HistoryScreen

        return [
            s
            for stack in self._screen_stacks.values()
            for s in stack
            if isinstance(s, HistoryScreen)
        ]

    def action_cancel_run(self) -> None:
        live = self.live
        if live is None or live.done:
            self.notify("nothing is running")
            return

        def confirmed(yes: bool | None) -> None:
            if yes and live is self.live and not live.done:
                live.cancel_requested = True
                if live.worker is not None:
                    live.worker.cancel()  # kills the worker's process group; recorded as cancelled
                self.notify("cancelling…")

        self.push_screen(
            ConfirmScreen(
                "Cancel the run?",
                "The worker is killed and the run recorded as cancelled.",
                yes="Cancel run",
                no="Keep running",
            ),
            confirmed,
        )

    async def action_quit(self) -> None:
        if not self.running:
            self.exit()
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._cancel_then_exit(), group="quit", exit_on_error=False)

        self.push_screen(
            ConfirmScreen(
                "Quit?",
                "A run is in progress: it will be cancelled and recorded so.",
                yes="Quit",
                no="Stay",
            ),
            confirmed,
        )

    async def _cancel_then_exit(self) -> None:
        """Cancel the run and let ``execute`` record it as cancelled before leaving (bounded:
        a stuck worker is killed by on_unmount and shows as interrupted at the next start)."""
        live = self.live
        if live is not None and not live.done:
            live.cancel_requested = True
            if live.worker is not None:
                live.worker.cancel()
            self.notify("cancelling the run before quitting…")
            runs = [w for w in self.workers if w.group == "run" and w.is_running]
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(w.wait() for w in runs), return_exceptions=True),
                    QUIT_WAIT_S,
                )
            except TimeoutError:
                pass
        self.exit()

    def on_unmount(self) -> None:
        """Leaving with a run in progress: stop its worker group, never leave it orphaned."""
        live = self.live
        if live is None or live.done or live.worker is None:
            return
        live.cancel_requested = True
        live.worker.cancel()
        process = getattr(live.worker, "process", None)
        if process is not None and process.poll() is None:
            import signal

            try:
                os.killpg(process.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass

    def feed(self, event: dict[str, Any]) -> None:
        """Events from any source (runner thread, tests' seeded fake) enter here."""
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

        for stack in self._screen_stacks.values():
            for screen in stack:
                if isinstance(screen, LiveScreen):
                    screen.show(live)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A crash inside a worker thread becomes a message; the app stays up."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.show_error(
                f"{event.worker.name or 'background task'} failed",
                f"{type(error).__name__}: {error}",
            )

    # -- presets ----------------------------------------------------------------------------
    @work(thread=True, group="preset", exit_on_error=False)
    def open_preset(self, name_or_path: str) -> None:
        """Load a preset (name or file) off the UI thread: a single run goes into the Setup form,
        a sweep is shown with what it would run and skip here, and runs if confirmed."""
        from tui_bench.engine.presets import PresetError
        from tui_bench.tui.presets_io import load

        try:
            loaded = load(name_or_path)
        except PresetError as exc:
            self.call_from_thread(
                self.notify, str(exc), title="preset not loaded", severity="error", timeout=15
            )
            return
        self.call_from_thread(self._preset_loaded, loaded)

    def _preset_loaded(self, loaded: Any) -> None:
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
            self.load_spec(config.spec, source=preset.shown_path)
            return
        if not loaded.runnable:
            self.push_screen(
                MessageScreen(f"{preset.name}: nothing can run here", loaded.summary())
            )
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_sweep(preset)

        self.push_screen(
            ConfirmScreen(
                f"Run the sweep {preset.name}?",
                loaded.summary(),
                yes="Run sweep",
                no="Not now",
            ),
            confirmed,
        )

    # -- navigation used by screens and the palette -----------------------------------------
    def load_spec(self, spec: RunSpec, source: str = "") -> None:
        self.switch_mode("setup")
        self.call_after_refresh(self._load_spec_into_setup, spec, source)

    def _load_spec_into_setup(self, spec: RunSpec, source: str) -> None:
        screen = self.screen
        if isinstance(screen, SetupScreen):
            screen.set_form(spec)
            if source:
                self.notify(f"loaded {source}")

    def open_compare(self, run_ids: list[str]) -> None:
        self.compare_ids = list(run_ids)
        self.switch_mode("compare")
        self.call_after_refresh(self._reload_compare)

    def _reload_compare(self) -> None:
        from tui_bench.tui.screens.compare import CompareScreen

        if isinstance(self.screen, CompareScreen):
            self.screen.load(self.compare_ids)


def run_app() -> int:
    TuiBenchApp().run()
    return 0


if __name__ == "__main__":
    run_app()
