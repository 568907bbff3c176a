"""Command palette (ctrl+p): every action, the runs in progress (to follow), and the presets."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from textual.command import DiscoveryHit, Hit, Hits, Provider

ACTIONS = [  # (name, help, action string run on the app)
    ("Setup: choose a benchmark", "F2", "switch_mode('setup')"),
    ("Live: the running benchmark", "F3", "switch_mode('live')"),
    ("History: recorded runs", "F4", "switch_mode('history')"),
    ("Compare: statistics of marked runs or the last sweep", "F5", "switch_mode('compare')"),
    ("System: hardware and runtimes", "F6", "switch_mode('system')"),
    ("Cancel the running benchmark", "asks first", "cancel_run"),
    ("Next theme", "F9; ansi-dark works without truecolor", "cycle_theme"),
    ("Help", "F1 / ?", "help"),
]


def _runs_in_progress() -> list[tuple[str, str, str]]:
    """(batch id, label, start time) of every batch whose supervisor is alive, newest first."""
    from tui_bench.engine import supervisor

    return [(b.id, b.label, b.created_at[11:19]) for b in reversed(supervisor.in_progress())]


class TuiBenchCommands(Provider):
    async def startup(self) -> None:
        from tui_bench.tui.presets_io import preset_summaries  # not needed for the first frame

        worker = self.app.run_worker(preset_summaries, thread=True)
        self.presets: list[tuple[str, Path, str]] = await worker.wait()
        self.running = await self.app.run_worker(_runs_in_progress, thread=True).wait()

    def _commands(self) -> list[tuple[str, str, object]]:
        out: list[tuple[str, str, object]] = [
            (name, help_text, partial(self.app.run_action, action))
            for name, help_text, action in ACTIONS
        ]
        for batch_id, label, started in getattr(self, "running", []):
            # The id's random tail tells apart two runs of one configuration (tui-bench ps shows it).
            name = f"Follow: {label} · {batch_id[-8:]}"
            help_text = f"in progress since {started} · {batch_id}"
            out.append((name, help_text, partial(self.app.attach, batch_id)))
        for name, path, line in getattr(self, "presets", []):
            out.append((f"Preset: {name}", line, partial(self.app.open_preset, str(path))))
        return out

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
