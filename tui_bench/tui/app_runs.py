"""The app's side of runs, mixed into ``TuiBenchApp``: start, attach, show on Live, say how a
batch ended, cancel, and ask before quitting over a run in progress.

The run controller (``tui.live.RunController``) does the work and posts messages; these handlers
are where they and the screens' messages land (``on_<message>`` names, found through the app's
MRO). This module sits above the screens: it imports them, and no screen imports it. What it
needs from the app is declared once, as the protocol ``RunsHost``, instead of ``Any``."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from tui_bench.engine.runs.reducer import BatchView
from tui_bench.tui.host import AppHost
from tui_bench.tui.keys import KeyLabels
from tui_bench.tui.live import RunController, outcome
from tui_bench.tui.messages import (
    AttachRequested,
    BatchesInProgress,
    BatchFinished,
    RunShown,
    StartRequested,
    SweepRequested,
)
from tui_bench.tui.screens.dialogs import ChoiceScreen, ConfirmScreen, MessageScreen

if TYPE_CHECKING:
    from textual.worker import Worker


class RunsHost(AppHost, Protocol):
    """What ``LiveRuns`` needs from the app it is mixed into (``TuiBenchApp``)."""

    runs: RunController  # the controller of the batch the app shows
    live: BatchView | None  # the batch shown on Live
    left_running: str | None  # the batch the user chose to leave running on quit
    key_labels: KeyLabels

    @property
    def return_code(self) -> int | None: ...  # set once the app is exiting

    def switch_mode(self, mode: str) -> Any: ...

    def run_worker(
        self, work: Coroutine[Any, Any, None], *, group: str, exit_on_error: bool
    ) -> Worker[None]: ...

    def exit(self) -> None: ...

    def screens_of(self, mode: str) -> list[Any]: ...

    def hand_compare_ids(self, run_ids: list[str]) -> None: ...

    # LiveRuns' own members that its handlers reach through the same ``self``.
    @property
    def running(self) -> bool: ...

    def refuse_if_running(self) -> bool: ...

    def attach(self, batch_id: str) -> None: ...

    def show_live(self, view: BatchView) -> None: ...

    def redraw_live(self, force: bool = False) -> None: ...

    async def cancel_then_exit(self) -> None: ...


class LiveRuns:
    """The app's handlers for runs; every method that needs the app takes ``self: RunsHost``."""

    # Its state, which the app sets in ``__init__`` (it may adopt a run before the first frame).
    live: BatchView | None
    left_running: str | None

    @property
    def running(self: RunsHost) -> bool:
        return self.live is not None and not self.live.done

    def refuse_if_running(self: RunsHost) -> bool:
        """True (and says why) while a batch is running: one batch is shown at a time."""
        if self.running:
            self.notify(
                "a run is in progress: cancel it first (x on the Live screen)", severity="warning"
            )
        return self.running

    def on_start_requested(self: RunsHost, message: StartRequested) -> None:
        """Start one configuration (``spec.repeats`` runs), unless a batch is still running."""
        if not self.refuse_if_running():
            self.show_live(self.runs.start(message.spec, message.auto_repeats))

    def on_sweep_requested(self: RunsHost, message: SweepRequested) -> None:
        """Run a preset's sweep (engine.sweep: planned, interleaved, resumable from the CLI)."""
        if not self.refuse_if_running():
            self.show_live(self.runs.start_sweep(message.preset, message.auto_repeats))

    def on_attach_requested(self: RunsHost, message: AttachRequested) -> None:
        self.attach(message.batch_id)

    def attach(self: RunsHost, batch_id: str) -> None:
        """Follow a batch started elsewhere (another terminal, an earlier session of the app)."""
        self.runs.attach(batch_id)

    def on_run_shown(self: RunsHost, message: RunShown) -> None:
        if self.return_code is not None or message.live is not self.runs.view:
            return
        if message.switch:
            self.show_live(message.live)
            return
        # Picked up by the watch: Live shows it from now on; the user stays where they are.
        view = message.live
        self.live = view
        self.redraw_live(force=True)
        label = (view.header or {}).get("label") or view.batch_id or "a run"
        key = self.key_labels.label("show_live")
        self.notify(f"following {label} ({key}: Live)", title="run started elsewhere", timeout=8)

    def on_batches_in_progress(self: RunsHost, message: BatchesInProgress) -> None:
        """The app's watch found batches in progress: Live follows the newest when it follows
        none (nothing yet, or a batch that has ended), whoever started it."""
        if self.running or not message.batch_ids or self.return_code is not None:
            return
        newest = message.batch_ids[-1]
        if self.live is not None and self.live.batch_id == newest:
            return  # the batch Live showed end, read before its supervisor left
        self.runs.attach(newest, picked_up=True)

    def show_live(self: RunsHost, view: BatchView) -> None:
        self.live = view
        self.switch_mode("live")
        self.redraw_live(force=True)

    def on_batch_finished(self: RunsHost, message: BatchFinished) -> None:
        view = message.live
        self.redraw_live(force=True)
        told = outcome(view, message.title, self.key_labels.label("show_compare"))
        if told.modal:
            self.push_screen(MessageScreen(told.title, told.message))
        else:
            self.notify(
                told.message,
                title=told.title,
                severity=told.severity,
                timeout=told.timeout,
            )
        if view.sweep_id is not None and not view.lost:
            # Compare (F5) now shows this sweep; a Compare screen not built yet shows the latest.
            self.hand_compare_ids([view.sweep_id])
        from tui_bench.tui.screens.history import HistoryScreen  # downward, as redraw_live

        for screen in self.screens_of("history"):  # a run opened from it sits on top
            if isinstance(screen, HistoryScreen):
                screen.reload()

    def action_cancel_run(self: RunsHost) -> None:
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

    async def action_quit(self: RunsHost) -> None:
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
                self.run_worker(self.cancel_then_exit(), group="quit", exit_on_error=False)

        self.push_screen(
            ChoiceScreen(
                "Quit?",
                "A run is in progress. It can go on without this window: "
                f"tui-bench attach {live.batch_id or ''} (or just tui-bench) follows it again.",
                [("leave", "Leave running"), ("cancel", "Cancel & quit"), ("stay", "Stay")],
            ),
            chosen,
        )

    async def cancel_then_exit(self: RunsHost) -> None:
        if self.running:
            self.notify("cancelling the run before quitting…")
            await self.runs.cancel_and_wait()
        self.exit()

    def mode_changed(self: RunsHost, mode: str) -> None:
        """A Live screen shown for the first time gets the current run (attributes down)."""
        if mode == "live":
            self.redraw_live(force=True)

    def redraw_live(self: RunsHost, force: bool = False) -> None:
        """The one place live plots are redrawn, at the app's ``refresh_hz``."""
        # Imported here, downward, on purpose: plotext and the history store behind the Live
        # screen are not needed for the first frame (app.py's MODES load it when first shown),
        # and this runs from the app's first timer tick on.
        from tui_bench.tui.screens.live import LiveScreen

        live = self.live
        if live is None:
            return
        changed = live.drain()
        if not (changed or force):
            return
        for screen in self.screens_of("live"):
            if isinstance(screen, LiveScreen):
                screen.show(live)
