"""Command palette (ctrl+p): every action, and the presets."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui_bench.tui.presets_io import list_presets, load_preset

ACTIONS = [  # (name, help, action string run on the app)
    ("Setup: choose a benchmark", "F2", "switch_mode('setup')"),
    ("Live: the running benchmark", "F3", "switch_mode('live')"),
    ("History: recorded runs", "F4", "switch_mode('history')"),
    ("Compare: marked runs side by side", "F5", "switch_mode('compare')"),
    ("System: hardware and runtimes", "F6", "switch_mode('system')"),
    ("Cancel the running benchmark", "asks first", "cancel_run"),
    ("Next theme", "F9; ansi-dark works without truecolor", "cycle_theme"),
    ("Help", "F1 / ?", "help"),
]


class TuiBenchCommands(Provider):
    async def startup(self) -> None:
        worker = self.app.run_worker(list_presets, thread=True)
        self.presets: list[Path] = await worker.wait()

    def _commands(self) -> list[tuple[str, str, object]]:
        out: list[tuple[str, str, object]] = [
            (name, help_text, partial(self.app.run_action, action))
            for name, help_text, action in ACTIONS
        ]
        for path in getattr(self, "presets", []):
            out.append(
                (
                    f"Preset: {path.stem}",
                    f"load {path} into Setup",
                    partial(self._load_preset, path),
                )
            )
        return out

    async def _load_preset(self, path: Path) -> None:
        try:
            spec = await asyncio.to_thread(load_preset, path)  # never read disk on the UI thread
        except Exception as exc:  # SpecError / OSError: one line, nothing lost
            self.app.notify(f"{path.name}: {exc}", title="preset not loaded", severity="error")
            return
        self.app.load_spec(spec, source=path.name)

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
