"""One line at the top: the five screens with their keys; clickable; the current one highlighted."""

from __future__ import annotations

from textual.widgets import Static

MODES = [
    ("setup", "F2", "Setup"),
    ("live", "F3", "Live"),
    ("history", "F4", "History"),
    ("compare", "F5", "Compare"),
    ("system", "F6", "System"),
]


class ModeBar(Static):
    DEFAULT_CSS = """
    ModeBar { height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(self, current: str) -> None:
        super().__init__("")
        self.current = current

    def on_mount(self) -> None:
        # Keys as remapped in the config's [keys] (binding ids show_<mode>), else the defaults.
        keymap = getattr(self.app, "_keymap", {}) or {}
        parts = []
        for mode, default_key, label in MODES:
            key = keymap.get(f"show_{mode}", default_key).split(",")[0].upper()
            current = self.current
            text = f" {key} {label} "
            if mode == current:
                parts.append(f"[reverse b]{text}[/]")
            else:
                parts.append(f"[@click=app.switch_mode('{mode}')]{text}[/]")
        parts.append(" [dim]F1 help · ^p commands[/]")
        self.update("".join(parts))
