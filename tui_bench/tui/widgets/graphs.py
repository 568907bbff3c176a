"""A one-line utilisation graph with a FIXED range (0–100 % unless told otherwise).

Textual's Sparkline scales to its data's own min..max, so a flat 3 % line would fill the cell like
a flat 100 % one. nvitop/btop draw percentages against a fixed scale; so does this.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"
LABEL_WIDTH = 9
VALUE_WIDTH = 11


def bar_cells(values: list[float], width: int, maximum: float) -> str:
    """The newest ``width`` values as block characters against 0..maximum (clipped)."""
    if width <= 0:
        return ""
    shown = values[-width:]
    levels = len(BLOCKS) - 1
    cells = []
    for value in shown:
        fraction = 0.0 if maximum <= 0 else min(max(value / maximum, 0.0), 1.0)
        cells.append(BLOCKS[round(fraction * levels)])
    return "".join(cells).rjust(width)


class FixedRangeGraph(Widget):
    """``label ▁▂▅▇█ value``; newest sample on the right, one cell per sample."""

    DEFAULT_CSS = """
    FixedRangeGraph { height: 1; width: 1fr; }
    """

    def __init__(
        self,
        label: str,
        maximum: float = 100.0,
        unit: str = "%",
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.label = label
        self.maximum = maximum
        self.unit = unit
        self.values: list[float] = []
        self.message: str | None = "waiting"

    def set_values(self, values: list[float], maximum: float | None = None) -> None:
        self.values = values
        if maximum is not None:
            self.maximum = maximum
        self.message = None
        self.refresh()

    def set_message(self, message: str) -> None:
        """Shown instead of a graph, e.g. 'no GPU'."""
        self.message = message
        self.values = []
        self.refresh()

    def render(self) -> Content:
        width = max(self.size.width - LABEL_WIDTH - VALUE_WIDTH - 2, 1)
        label = (self.label.ljust(LABEL_WIDTH)[:LABEL_WIDTH], "bold")
        if self.message is not None:
            return Content.assemble(label, " ", (self.message.ljust(width)[:width], "dim"))
        latest = self.values[-1] if self.values else None
        value = "—" if latest is None else f"{latest:.0f}{self.unit}"
        scale = f"/{self.maximum:.0f}" if self.unit != "%" else ""
        return Content.assemble(
            label,
            " ",
            (bar_cells(self.values, width, self.maximum), "$accent"),
            " " + f"{value}{scale}".rjust(VALUE_WIDTH)[:VALUE_WIDTH],
        )
