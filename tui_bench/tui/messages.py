"""What screens, the command palette and background workers ask of the app, as typed messages.

Attributes down, messages up: a screen posts one of these and the app decides (with ``@on``), so
no screen imports the app module or calls a method no type declares. Workers post their results
the same way (``post_message`` is safe from a thread)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from tui_bench.engine.runs.presets import Preset
    from tui_bench.engine.runs.reducer import BatchView
    from tui_bench.engine.spec import RunSpec
    from tui_bench.tui.presets_io import LoadedPreset


# -- asked by screens and the palette ---------------------------------------------------------------
@dataclass
class StartRequested(Message):
    """Run one configuration (``spec.repeats`` runs, or with ``auto_repeats`` until its median
    is known: ``{"max": N, "target_ci": 0.02}``)."""

    spec: RunSpec
    auto_repeats: dict[str, Any] | None = None


@dataclass
class SweepRequested(Message):
    """Run a sweep (planned and interleaved by engine.sweep, resumable from the CLI); with
    ``auto_repeats``, each configuration until its median is known."""

    preset: Preset
    auto_repeats: dict[str, Any] | None = None


@dataclass
class PresetRequested(Message):
    """Load a preset by name or file: one run fills the Setup form, a sweep asks to run."""

    name_or_path: str


@dataclass
class CompareRequested(Message):
    """Show these runs (or a sweep id) side by side on the Compare screen."""

    run_ids: list[str]


@dataclass
class SpecLoaded(Message):
    """Put this spec into the Setup form; ``source`` says where it came from."""

    spec: RunSpec
    source: str = ""


@dataclass
class AttachRequested(Message):
    """Follow a batch started elsewhere (another terminal, an earlier session)."""

    batch_id: str


# -- results of the app's background work -----------------------------------------------------------
@dataclass
class PresetLoaded(Message):
    """A preset read off the UI thread, with what it would run and skip here."""

    loaded: LoadedPreset


@dataclass
class RunShown(Message):
    """The run controller attached to a batch: show its view on Live (``switch``: and go to
    Live; a run picked up because it started elsewhere leaves the user where they are)."""

    live: BatchView
    switch: bool = True


@dataclass
class BatchesInProgress(Message):
    """The batches in progress on this home, oldest first, as the app's watch found them (a
    run another shell or app started appears here)."""

    batch_ids: list[str]


@dataclass
class BatchFinished(Message):
    """A launched or followed batch ended (or never started: ``title`` says why, briefly)."""

    live: BatchView
    title: str = ""


@dataclass
class Notice(Message):
    """A notification from a thread: ``App.notify``'s arguments."""

    message: str
    title: str = ""
    severity: SeverityLevel = "information"
    timeout: float | None = None
