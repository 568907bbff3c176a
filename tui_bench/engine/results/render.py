"""Compare's tables (``results/tables.py``) as text: a terminal (rich), markdown, CSV, JSON.

Formatting only: every number here was computed in ``tables``. A terminal and markdown show a
table's ``shown`` columns: numbers to 3 significant figures, times in the unit that reads best
(ms where a column's times are all under a second) named in the column's header ("median ms"),
fractions as percentages, "mean ± std" and "min–max" made of their own columns. CSV and JSON
get every column, numbers at full precision, as numbers and in their base units (seconds),
so pandas loads each numeric column as float. Text a spreadsheet would run is neutralised
(``export_safety``).

A terminal fits each table to its width: a text column that holds one value in every row is
said once in the title ("differs in framework/api") or, when empty, left out, and the widths
are shared out so no word is split across lines while the table can fit without it.

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
from typing import Any, TypeGuard

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from tui_bench.engine.results.export_safety import csv_header, csv_row, markdown_cell
from tui_bench.engine.results.tables import (
    FRACTION,
    NUMBER,
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
SECONDS, MILLISECONDS = "s", "ms"


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number_text(value: float, digits: int = 3, measured: bool = True) -> str:
    """A number to ``digits`` significant figures, never in exponent form from 100 up (1234,
    not 1.23e+03): what a terminal reads at a glance (exports keep every digit). A measured
    figure keeps its trailing zeros (51.0 ms, not 51); a ratio or a quoted figure does not
    (a paper's 2 is not 2.00)."""
    if math.isfinite(value) and abs(value) >= 10 ** (digits - 1):
        return f"{value:.0f}"
    return f"{value:#.{digits}g}" if measured else f"{value:.{digits}g}"


def cell_text(value: Cell, column: Column | None = None, scale: float = 1.0) -> str:
    """One cell as a terminal shows it: 3 significant figures (``scale``: the factor to the
    unit its column is shown in), a fraction as a percentage."""
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
        return number_text(value * scale, measured=kind == NUMBER and bool(column and column.unit))
    return str(value)


def display_unit(table: Table, shown: Shown) -> tuple[str, float]:
    """The unit a shown column's numbers are displayed in and the factor from their base unit:
    seconds become ms where every time the table shows is under a second (a step's 0.0523 s
    reads 52.3 ms); ("", 1) for a column without a unit."""
    column = table.column(shown.sources[0])
    if column.kind != NUMBER or not column.unit:
        return "", 1.0
    if column.unit != SECONDS:
        return column.unit, 1.0
    # one unit for every time a table shows: a median in s beside an IQR in ms misleads
    numbers = [
        table.index(n)
        for s in table.shown
        for n in s.sources
        if table.column(n).kind == NUMBER and table.column(n).unit == SECONDS
    ]
    values = [
        abs(v)
        for row in table.rows
        for i in numbers
        if _is_number(v := row.cells[i]) and math.isfinite(v)
    ]
    if values and max(values) < 1:
        return MILLISECONDS, 1000.0
    return SECONDS, 1.0


def shown_header(table: Table, shown: Shown, unit: tuple[str, float] | None = None) -> str:
    """A shown column's header with the unit its numbers are displayed in: "median ms"."""
    name, _scale = unit if unit is not None else display_unit(table, shown)
    base = table.column(shown.sources[0]).unit
    header = shown.header
    if not name or header == base:  # "samples/s" is its own unit
        return header
    if base and header.endswith(f" {base}"):
        header = header[: -len(base) - 1]
    return f"{header} {name}"


def shown_cell(table: Table, row: Row, shown: Shown, unit: tuple[str, float] | None = None) -> str:
    """The text of one shown column of a row (``Shown.form`` says how its sources combine),
    its numbers in the column's display unit (``unit``: ``display_unit``'s answer, worked out
    here when not given)."""
    _name, scale = unit if unit is not None else display_unit(table, shown)
    values = [row.cells[table.index(name)] for name in shown.sources]
    first = values[0]
    if shown.form == PLUS_MINUS:
        mean, std = values
        if not _is_number(mean):
            return MISSING
        mean_text = number_text(mean * scale)
        if not _is_number(std):
            return mean_text
        return f"{mean_text} ± {number_text(std * scale, 2)}"
    if shown.form == RANGE:
        low, high = values
        if not _is_number(low) or not _is_number(high):
            return MISSING
        return f"{number_text(low * scale)}–{number_text(high * scale)}"
    if shown.form == WITH_N:
        median, n = values
        if median is None:
            return MISSING
        return f"{cell_text(median, table.column(shown.sources[0]), scale)} (n={n})"
    if shown.form == PAIR:
        a, b = values
        return str(a) if b is None else f"{a}/{b}"
    return cell_text(first, table.column(shown.sources[0]), scale)


def _numeric(table: Table, shown: Shown) -> bool:
    return table.column(shown.sources[0]).numeric


def shown_rows(table: Table) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """The shown headers (with their display unit), and each row as (text, numeric) per shown
    column: numbers are right-aligned wherever a table is drawn."""
    shown = table.shown
    numeric = [_numeric(table, s) for s in shown]
    units = [display_unit(table, s) for s in shown]
    rows = [
        [(shown_cell(table, row, s, units[i]), numeric[i]) for i, s in enumerate(shown)]
        for row in table.rows
    ]
    return [shown_header(table, s, units[i]) for i, s in enumerate(shown)], rows


Shaped = tuple[str, list[str], list[list[tuple[str, bool]]]]


def hoisted(title: str, headers: list[str], rows: list[list[tuple[str, bool]]]) -> Shaped:
    """A text column with one value in every row (two rows or more) said once, in the title
    ("… — differs in framework/api"), or left out when that value is empty ("", "—"): a
    narrow table spends its width on what tells the rows apart. Numbers always stay."""
    if len(rows) < 2:
        return title, headers, rows
    keep, said = [], []
    for i, header in enumerate(headers):
        texts = {row[i][0] for row in rows}
        numeric = any(row[i][1] for row in rows)
        if numeric or len(texts) != 1:
            keep.append(i)
            continue
        (value,) = texts
        if value not in ("", MISSING):
            said.append(f"{header} {value}")
    if not keep:
        return title, headers, rows
    if said:
        title = f"{title} — {'; '.join(said)}"
    return title, [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


SHORT = 20  # a text column whose cells are all this short keeps each on one line if it can


def fit_widths(
    headers: list[str], rows: list[list[tuple[str, bool]]], width: int
) -> list[int] | None:
    """Column widths that fit a bordered table into ``width`` without splitting a word (or a
    number) across lines: a numeric column gets its widest cell, a text column of short cells
    (a configuration's name) too where the table can afford it, any other column its longest
    word; what is left goes to the columns that would wrap most. None where the table fits
    as it is, or cannot fit whole words (then rich folds)."""
    available = width - (3 * len(headers) + 1)  # a border and a space each side per column
    words, whole, most = [], [], []
    for i, header in enumerate(headers):
        texts = [header, *(row[i][0] for row in rows)]
        longest_word = max(cell_len(w) for t in texts for w in (t.split() or [""]))
        cells = max((cell_len(row[i][0]) for row in rows), default=0)
        numeric = any(row[i][1] for row in rows)
        words.append(max(longest_word, cells if numeric else 0))
        whole.append(max(longest_word, cells if numeric or cells <= SHORT else 0))
        most.append(max(words[-1], *(cell_len(t) for t in texts)))
    if sum(most) <= available:
        return None
    least = whole if sum(whole) <= available else words
    if sum(least) > available:
        return None
    widths = list(least)
    spare = available - sum(least)
    wants = [m - lo for m, lo in zip(most, least, strict=True)]
    total = sum(wants)
    for i, want in enumerate(wants):
        widths[i] += want * spare // total
    left = available - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: wants[i], reverse=True):
        if left <= 0:
            break
        if widths[i] < most[i]:
            widths[i] += 1
            left -= 1
    return widths


def terminal(out: Console, tables: Sequence[Table]) -> None:
    """The tables as rich tables fitted to the console's width (``hoisted``, ``fit_widths``)."""
    for t in tables:
        title, headers, rows = hoisted(t.title, *shown_rows(t))
        widths = fit_widths(headers, rows, out.width)
        numeric = [any(row[i][1] for row in rows) for i in range(len(headers))]
        # title and note are paragraphs at the console's width, not squeezed to a narrow table's
        out.print(Text(title, style="italic"))
        rich_table = RichTable()
        for i, (header, right) in enumerate(zip(headers, numeric, strict=True)):
            rich_table.add_column(
                header,
                justify="right" if right else "left",
                overflow="fold",
                width=widths[i] if widths else None,
            )
        for row in rows:
            rich_table.add_row(*(text for text, _ in row))
        out.print(rich_table)
        if t.note:
            out.print(Text(t.note, style="dim"))


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
