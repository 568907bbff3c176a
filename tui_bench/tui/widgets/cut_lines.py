"""Text whose long paths are cut in the middle to the width, not wrapped: at 80 columns a
runtime's interpreter reads "/root/…/runtimes/tf/bin/python" on its own line, where a wrapped
path took three. A line without a path wraps as any text does."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

ELLIPSIS = "…"


def cut_path(path: str, room: int) -> str:
    """``path`` in at most ``room`` characters: its first component, an ellipsis, and as many
    of its last components as fit (the interpreter's name and its runtime matter most)."""
    if len(path) <= room:
        return path
    parts = path.split("/")
    lead = "/".join(parts[:2]) if path.startswith("/") else parts[0]
    tail = parts[-1]
    for index in range(len(parts) - 2, 1 if path.startswith("/") else 0, -1):
        longer = parts[index] + "/" + tail
        if len(lead) + len("/…/") + len(longer) > room:
            break
        tail = longer
    cut = f"{lead}/{ELLIPSIS}/{tail}"
    if len(cut) <= room:
        return cut
    # not even the last component fits beside the first: the end of the path, cut at its start
    return ELLIPSIS + path[-(room - 1) :] if room > 1 else ELLIPSIS


def cut_line(line: str, width: int) -> str:
    """A line made to fit ``width`` by cutting its longest path in the middle; a line with no
    path, or one that fits, as it is."""
    if len(line) <= width:
        return line
    words = line.split(" ")
    paths = [i for i, word in enumerate(words) if "/" in word and len(word) > 4]
    if not paths:
        return line
    longest = max(paths, key=lambda i: len(words[i]))
    word = words[longest]
    # keep the brackets and punctuation around it: "(/home/…/python)" stays bracketed
    start = next((k for k, c in enumerate(word) if c in "/~."), 0)
    end = len(word.rstrip("),;:"))
    core = word[start:end]
    room = len(core) - (len(line) - width)
    if room < 8:  # too little left to be a path worth reading: let the line wrap
        return line
    words[longest] = word[:start] + cut_path(core, room) + word[end:]
    return " ".join(words)


class CutLines(Widget):
    """Lines of text, each long path cut in the middle to the widget's width (redrawn as the
    terminal is resized)."""

    DEFAULT_CSS = """
    CutLines { height: auto; }
    """

    def __init__(self, text: str = "", id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = text

    def update(self, text: str) -> None:
        self.text = text
        self.refresh(layout=True)

    def render(self) -> Text:
        width = self.content_region.width or self.size.width or 80
        return Text("\n".join(cut_line(line, width) for line in self.text.splitlines()))
