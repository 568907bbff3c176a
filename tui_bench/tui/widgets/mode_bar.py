"""One line at the top: the five screens with their keys; clickable; the current one highlighted.
Screens, labels and keys come from the app's bindings (``switch_mode`` ones), as remapped."""

from __future__ import annotations

import re

from textual.widgets import Static

from tui_bench.tui.keys import key_labels

_SWITCH = re.compile(r"switch_mode\('(\w+)'\)")


class ModeBar(Static):
    DEFAULT_CSS = """
    ModeBar { height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(self, current: str) -> None:
        super().__init__("")
        self.current = current

    def on_mount(self) -> None:
        keys = key_labels(self)
        parts = []
        for binding_id, binding in keys.bindings.items():
            switch = _SWITCH.fullmatch(binding.action)
            if switch is None:
                continue
            mode = switch.group(1)
            text = f" {keys.label(binding_id)} {binding.description} "
            if mode == self.current:
                parts.append(f"[reverse b]{text}[/]")
            else:
                parts.append(f"[@click=app.switch_mode('{mode}')]{text}[/]")
        help_key, palette_key = keys.label("help"), keys.label("command_palette", compact=True)
        parts.append(f" [dim]{help_key} help · {palette_key} commands[/]")
        self.update("".join(parts))
