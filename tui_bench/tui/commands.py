"""Command palette (ctrl+p): every action, the runs in progress (to follow), and the presets.

The actions are bindings: their palette entry is the binding's tooltip, their help its keys as the
user has them. Choosing an entry posts the same message a screen would, so the app decides."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui_bench.tui.keys import key_labels
from tui_bench.tui.messages import AttachRequested, PresetRequested
from tui_bench.tui.presets_io import preset_summaries

# Binding ids offered in the palette, in this order; a note adds what the key alone does not say.
PALETTE_BINDINGS = {
    "show_setup": "",
    "show_live": "",
    "show_history": "",
    "show_compare": "",
    "show_system": "",
    "show_trends": "",
    "cancel_run": "asks first",
    "cycle_theme": "ansi-dark works without truecolor",
    "help": "",
}


def _runs_in_progress() -> list[tuple[str, str, str]]:
    """(batch id, label, start time) of every batch whose supervisor is alive, newest first."""
    from tui_bench.engine.runs import supervisor

    return [(b.id, b.label, b.created_at[11:19]) for b in reversed(supervisor.in_progress())]


class TuiBenchCommands(Provider):
    async def startup(self) -> None:
        worker = self.app.run_worker(preset_summaries, thread=True)
        self.presets: list[tuple[str, Path, str]] = await worker.wait()
        self.running = await self.app.run_worker(_runs_in_progress, thread=True).wait()

    def _actions(self) -> list[tuple[str, str, object]]:
        keys = key_labels(self.screen)
        out: list[tuple[str, str, object]] = []
        for binding_id, note in PALETTE_BINDINGS.items():
            binding = keys.binding(binding_id)
            shown = keys.label(binding_id, every=True)
            action = binding.action.removeprefix("app.")
            out.append(
                (
                    binding.tooltip or binding.description,
                    f"{shown}; {note}" if note else shown,
                    partial(self.app.run_action, action),
                )
            )
        return out

    def _commands(self) -> list[tuple[str, str, object]]:
        out = self._actions()
        post = self.app.post_message
        for batch_id, label, started in getattr(self, "running", []):
            # The id's random tail tells apart two runs of one configuration (tui-bench ps shows it).
            name = f"Follow: {label} · {batch_id[-8:]}"
            help_text = f"in progress since {started} · {batch_id}"
            out.append((name, help_text, partial(post, AttachRequested(batch_id))))
        for name, path, line in getattr(self, "presets", []):
            out.append((f"Preset: {name}", line, partial(post, PresetRequested(str(path)))))
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
