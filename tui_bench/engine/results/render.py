"""Compare's tables (``results/tables.py``) as text: a terminal (rich), markdown, CSV, JSON.

Formatting only: every number here was computed in ``tables``. A terminal and markdown show a
table's ``shown`` columns (numbers to 4 significant figures, fractions as percentages, "mean ±
std" and "min–max" made of their own columns); CSV and JSON get every column, numbers at full
precision and as numbers (spread in its own columns), so pandas loads each numeric column as
float. Text a spreadsheet would run is neutralised (``export_safety``).

    text = render.markdown(comparison.tables())
    render.terminal(console, comparison.tables())
    render.write_exports(comparison.tables(), csv_path, markdown_path)
    rows = render.shown_rows(table)        # [(text, numeric)] per shown column, for a TUI
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from tui_bench.engine.results.export_safety import csv_header, csv_row, markdown_cell
from tui_bench.engine.results.tables import (
    FRACTION,
    P_VALUE,
    PAIR,
    PLUS_MINUS,
    RANGE,
    WITH_N,
    Cell,
    Column,
    Row,
    Shown,
    Table,
)

MISSING = "—"


def cell_text(value: Cell, column: Column | None = None) -> str:
    """One cell as a terminal shows it: 4 significant figures, a fraction as a percentage."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else ""
    kind = column.kind if column is not None else ""
    if kind == FRACTION and isinstance(value, (int, float)):
        return f"{value:.0%}"
    if kind == P_VALUE and isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def shown_cell(table: Table, row: Row, shown: Shown) -> str:
    """The text of one shown column of a row (``Shown.form`` says how its sources combine)."""
    values = [row.cells[table.index(name)] for name in shown.sources]
    first = values[0]
    if shown.form == PLUS_MINUS:
        mean, std = values
        if not isinstance(mean, (int, float)):
            return MISSING
        return f"{mean:.4g} ± {std:.2g}" if isinstance(std, (int, float)) else f"{mean:.4g}"
    if shown.form == RANGE:
        low, high = values
        if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
            return MISSING
        return f"{low:.4g}–{high:.4g}"
    if shown.form == WITH_N:
        median, n = values
        return MISSING if median is None else f"{cell_text(median)} (n={n})"
    if shown.form == PAIR:
        a, b = values
        return str(a) if b is None else f"{a}/{b}"
    return cell_text(first, table.column(shown.sources[0]))


def _numeric(table: Table, shown: Shown) -> bool:
    return table.column(shown.sources[0]).numeric


def shown_rows(table: Table) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """The shown headers, and each row as (text, numeric) per shown column: numbers are
    right-aligned wherever a table is drawn."""
    shown = table.shown
    numeric = [_numeric(table, s) for s in shown]
    rows = [
        [(shown_cell(table, row, s), numeric[i]) for i, s in enumerate(shown)] for row in table.rows
    ]
    return [s.header for s in shown], rows


def terminal(out: Console, tables: Sequence[Table]) -> None:
    """The tables as rich tables, folded to the console's width."""
    for t in tables:
        headers, rows = shown_rows(t)
        numeric = [_numeric(t, s) for s in t.shown]
        rich_table = RichTable(title=t.title, title_justify="left", caption=t.note or None)
        for header, right in zip(headers, numeric, strict=True):
            rich_table.add_column(header, justify="right" if right else "left", overflow="fold")
        for row in rows:
            rich_table.add_row(*(text for text, _ in row))
        out.print(rich_table)


def markdown(tables: Sequence[Table]) -> str:
    out = []
    for t in tables:
        headers, rows = shown_rows(t)
        out.append(f"### {markdown_cell(t.title)}\n")
        out.append("| " + " | ".join(markdown_cell(h) for h in headers) + " |")
        out.append("|" + "|".join("---" for _ in headers) + "|")
        for row in rows:
            out.append("| " + " | ".join(markdown_cell(text) for text, _ in row) + " |")
        if t.note:
            out.append(f"\n{t.note}")
        out.append("")
    return "\n".join(out)


def csv_text(tables: Sequence[Table]) -> str:
    """One file, one row per table row; the ``table`` column says which table it belongs to.
    Every column of every table; numbers at full precision, an empty cell where there is none."""
    columns: dict[str, None] = {"table": None}
    for t in tables:
        for name in t.names:
            columns.setdefault(name, None)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns))
    writer.writerow(csv_header(list(columns)))
    for t in tables:
        for row in t.rows:
            cells = {c: ("" if v is None else v) for c, v in zip(t.names, row.cells, strict=True)}
            writer.writerow(csv_row({"table": t.name, **cells}))
    return buffer.getvalue()


def as_dict(table: Table) -> dict[str, Any]:
    """A table as JSON-ready data: rows as lists (numbers as numbers, None as null), columns
    with their kind and unit, and each row's verdicts per side."""
    return {
        "name": table.name,
        "title": table.title,
        "note": table.note,
        "columns": table.names,
        "kinds": [c.kind for c in table.columns],
        "units": [c.unit for c in table.columns],
        "shown": [s.header for s in table.shown],
        "rows": [[_finite(v) for v in row.cells] for row in table.rows],
        "verdicts": [
            {
                side: {
                    "state": v.state,
                    "n": v.n,
                    "stable": v.stable,
                    "noisy": v.noisy,
                    "unreliable": v.unreliable,
                    "unjudged": v.unjudged,
                }
                for side, v in row.verdicts
            }
            for row in table.rows
        ],
    }


def _finite(value: Cell) -> Cell:
    # JSON has no NaN or infinity: a number that is not finite is no number (null)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(tables: Sequence[Table]) -> str:
    return json.dumps([as_dict(t) for t in tables], indent=2, allow_nan=False)


def write_exports(
    tables: Sequence[Table], csv_path: Path | None, markdown_path: Path | None
) -> None:
    if csv_path is not None:
        csv_path.write_text(csv_text(tables), encoding="utf-8")
    if markdown_path is not None:
        markdown_path.write_text(markdown(tables), encoding="utf-8")
