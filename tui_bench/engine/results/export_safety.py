"""What every export writes for a cell it did not compute: text a spreadsheet or a Markdown viewer
shows as text, never runs.

CSV (OWASP, "CSV Injection"): a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return is read by Excel, LibreOffice and Google Sheets as a formula, so a label, preset
name or data path such as ``=HYPERLINK(...)`` would run when the file is opened. Such a cell is
prefixed with a single quote, which the spreadsheet shows but does not evaluate; the csv module
then quotes it as needed. A number stays a number (``-0.5``, ``1e-3``: they are not formulas),
whether it arrives as a float or as text.

Markdown: a cell is one table cell — its ``|`` cannot open a column, its newline cannot end the
row, and ``<``, ``>``, ``&``, ``[``, ``]`` and backticks cannot become HTML, links or code.

JSON needs nothing here: ``json.dumps`` escapes strings itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Each start is one character: a cell whose first one is in this set may need quoting (a cheap
# test to run before csv_cell on two million cells).
FORMULA_FIRST = frozenset(FORMULA_STARTS)


def _is_number(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    # "-inf", "+nan" parse as floats but are words a spreadsheet does not compute either;
    # leaving them bare is safe, and they are honest about what was measured.
    return math.isfinite(value) or text.strip().lstrip("+-").lower() in ("inf", "nan", "infinity")


def csv_cell(value: Any) -> Any:
    """``value`` as a safe CSV cell: numbers and None unchanged, formula-like text quoted."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value if isinstance(value, str) else str(value)
    if text.startswith(FORMULA_STARTS) and not _is_number(text):
        return "'" + text
    return text


def csv_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row for ``csv.DictWriter``: every cell made safe (keys stay: they are column names
    chosen by the program, made safe where the header is written)."""
    return {key: csv_cell(value) for key, value in row.items()}


def csv_header(columns: list[str]) -> dict[str, Any]:
    """The header row as cells (``writer.writerow(csv_header(columns))`` instead of
    ``writeheader``): a column named after a record's own key is text like any other."""
    return {column: csv_cell(column) for column in columns}


_MARKDOWN_ESCAPES = {
    "\\": "\\\\",
    "&": "&amp;",
    "|": "\\|",
    "`": "\\`",
    "[": "\\[",
    "]": "\\]",
    "<": "&lt;",
    ">": "&gt;",
    "\r\n": " ",
    "\n": " ",
    "\r": " ",
}


def markdown_cell(text: str) -> str:
    """``text`` as one Markdown table cell, shown as written."""
    out = text
    for raw, escaped in _MARKDOWN_ESCAPES.items():
        out = out.replace(raw, escaped)
    return out
