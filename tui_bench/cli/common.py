"""What the command modules share: consoles and error lines, and the tables several commands
print. The rest lives by concern: ``help`` (the examples), ``spec_flags`` (the run flags and
what they make), ``following`` (starting and following a batch, Ctrl-C). Command modules import
these, never each other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tui_bench.engine.errors import PresetError
from tui_bench.engine.errors import UsageError as UsageError  # the commands raise it from here
from tui_bench.engine.results.record import Run

if TYPE_CHECKING:  # imported where used: `history list` at 10,000 runs must start in < 0.5 s
    from rich.console import Console
    from rich.table import Table

    from tui_bench.engine.runs import presets


def one_line(message: object) -> str:
    """The message with control characters (a newline or a terminal escape typed into an
    argument) shown escaped: an error stays one line and cannot restyle the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(message))


def error_line(message: object) -> str:
    """What every error looks like on stderr."""
    return f"tui-bench: error: {one_line(message)}"


def load_preset(name_or_path: str) -> presets.Preset:
    """A preset by name or path; a wrong one is a UsageError (one line, exit 2)."""
    from tui_bench.engine.runs import presets  # the whole catalog: only commands that need it

    try:
        return presets.load(presets.find(name_or_path))
    except PresetError as exc:
        raise UsageError(str(exc)) from None


def console(stderr: bool = False) -> Console:
    # NO_COLOR is honoured by rich itself.
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


# -- tables -------------------------------------------------------------------------------------
def fmt(value: Any, scale: float = 1.0, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "—"
    return f"{value * scale:.{digits}f}{suffix}"


# The fairness card's settings a single run's table shows above its numbers.
SHOWN_SETTINGS = (
    "precision",
    "compilation",
    "attention kernel",
    "initial weights",
    "input path",
    "timing mode",
)


def summary_table(runs: Sequence[Run]) -> Table:
    """Metrics as rows, runs as columns: stays readable at 80 columns."""
    from rich.markup import escape
    from rich.table import Table

    from tui_bench.engine.machine.peaks import MFU_ABOVE_ONE

    table = Table(title="tui-bench results", title_justify="left")
    table.add_column("metric")
    for r in runs:
        spec = r.spec
        table.add_column(f"{r.id}\n{spec.get('framework')}/{spec.get('api')}", justify="right")
    table.add_row("status", *(r.status if r.finished else f"[red]{r.status}[/red]" for r in runs))
    # The settings that decide the numbers below, read as the fairness card reads them.
    from tui_bench.engine.results import tables  # only where a table is shown: a heavy import

    readers = dict(tables.FAIRNESS_SETTINGS)
    for label in SHOWN_SETTINGS:
        values = [readers[label](r) for r in runs]
        if any(v is not None for v in values):
            table.add_row(label, *(escape(tables.setting_text(v)) for v in values))
    # An emulated bf16 number is not a bf16 number: said beside it, not only in a comparison.
    bf16_notes = [r.settings.get("bf16_note") for r in runs]
    if any(bf16_notes):
        table.add_row("bf16", *(f"[yellow]{escape(str(n))}[/]" if n else "—" for n in bf16_notes))
    from tui_bench.engine.results import metrics  # labels, scale and digits: the registry's

    shown = metrics.placed(metrics.RUN)
    for m in shown:
        label, key = m.short, m.key
        values = [r.metric(key) for r in runs]
        # an MFU above 1 is a wrong count or peak: its limits line says so, never a number
        wrong = [r.metric_text(f"{key}_error") == MFU_ABOVE_ONE for r in runs]
        if all(v is None for v in values) and not any(wrong):
            continue
        table.add_row(
            label,
            *(
                "[red]error[/red]"
                if bad
                else fmt(v, m.scale, m.digits)
                if key != "param_count" or v is None
                else f"{v:,.0f}"
                for v, bad in zip(values, wrong, strict=True)
            ),
        )
    notes = [
        f"{m.short}: {m.note}"
        for m in shown
        if m.note and any(r.metric(m.key) is not None for r in runs)
    ]
    table.caption = "; ".join(notes)
    return table
