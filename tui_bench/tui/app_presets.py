"""The app's side of opening a preset, mixed into ``TuiBenchApp``: a single run goes into the
Setup form, a sweep is shown with what it would run and skip here, and runs if confirmed.

Handlers are ``on_<message>`` names, found through the app's MRO. This module sits above the
screens (it shows dialogs); no screen imports it. What it needs from the app is the protocol
``PresetsHost``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tui_bench.engine.errors import TuiBenchError
from tui_bench.tui.host import AppHost
from tui_bench.tui.messages import (
    Notice,
    PresetLoaded,
    PresetRequested,
    SpecLoaded,
    SweepRequested,
)
from tui_bench.tui.presets_io import load
from tui_bench.tui.screens.dialogs import ConfirmScreen, MessageScreen

if TYPE_CHECKING:
    from textual.message import Message
    from textual.worker import Worker


class PresetsHost(AppHost, Protocol):
    """What ``PresetFlow`` needs from the app it is mixed into (``TuiBenchApp``)."""

    def run_worker(
        self, work: Callable[[], None], *, thread: bool, group: str, exit_on_error: bool
    ) -> Worker[None]: ...

    def post_message(self, message: Message) -> bool: ...

    def load_spec(self, message: SpecLoaded) -> None: ...  # into the Setup form


class PresetFlow:
    """The app's handlers for presets; each takes ``self: PresetsHost``."""

    def on_preset_requested(self: PresetsHost, message: PresetRequested) -> None:
        """Load a preset (name or file) off the UI thread; ``PresetLoaded`` brings it back."""
        name_or_path = message.name_or_path

        def read() -> None:
            try:
                loaded = load(name_or_path)
            except TuiBenchError as exc:  # PresetError, or a spec in it that is not valid
                self.post_message(
                    Notice(str(exc), title="preset not loaded", severity="error", timeout=15)
                )
                return
            self.post_message(PresetLoaded(loaded))

        self.run_worker(read, thread=True, group="preset", exit_on_error=False)

    def on_preset_loaded(self: PresetsHost, message: PresetLoaded) -> None:
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
                self.post_message(SweepRequested(preset))  # LiveRuns starts it, as from Setup

        self.push_screen(
            ConfirmScreen(
                f"Run the sweep {preset.name}?", loaded.summary(), yes="Run sweep", no="Not now"
            ),
            confirmed,
        )
