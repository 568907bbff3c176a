"""HTML text from a file's values, safely: escaping (every text that comes from a file), a
verdict's badge, a computed table as the terminal shows it (``render.shown_rows``), key/value
tables, and inline SVG that can neither run nor fetch anything."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from tui_bench.engine.results import render as render_module
from tui_bench.engine.results import stability
from tui_bench.engine.results import tables as tables_module
from tui_bench.engine.results.tables import Table, Verdicts, metric_info


def strings(value: Any) -> list[str]:
    return [str(x) for x in value] if isinstance(value, list) else []


# -- rendering ------------------------------------------------------------------------------------
# C0/C1 controls (but tab, newline, return) and Unicode noncharacters: not allowed in HTML text
_NOT_TEXT = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff"
    "\U0001fffe\U0001ffff\U0010fffe\U0010ffff]"
)


def esc(value: Any) -> str:
    """Text from a file, safe to put in the page: escaped, and any character HTML may not
    carry shown as U+FFFD."""
    return escape(_NOT_TEXT.sub("\ufffd", str(value)), quote=True)


def cell(value: Any) -> str:
    return esc(render_module.cell_text(value))


def verdict_class(text: str) -> str:
    text = text.lower()
    if not text or text == "stable":
        return "stable"
    if "unreliable" in text or "no finished" in text:
        return "unreliable"
    if "not judged" in text and "not stable" not in text:
        return "unjudged"
    return "noisy"


def badge(text: str, state: str | None = None) -> str:
    css = verdict_class(state if state is not None else text)
    return f'<span class="badge {css}">{esc(text or "stable")}</span>'


def row_verdict(verdicts: Sequence[tuple[str, Verdicts]]) -> tuple[str, str]:
    """(state, text) of the runs behind a row's numbers: the worst side's state, and the sides
    that are not stable by name ("this: not stable: 1 noisy of 5"); ("", "") for a row that is
    not a measurement."""
    if not verdicts:
        return "", ""
    states = [v.state for _, v in verdicts if v.state]
    for state in (stability.UNRELIABLE, stability.NOISY, "not judged", stability.STABLE):
        if state in states:
            marks = tables_module.marks_text(verdicts)
            if len(verdicts) == 1 and marks:
                marks = verdicts[0][1].note  # one side: its note says it, no side name
            return state, marks or state
    return "", ""


FOLD_AT = 90  # characters of a long text shown before it folds


def _head(text: str) -> str:
    """The first ``FOLD_AT`` characters of a text, cut after a space where there is one."""
    if len(text) <= FOLD_AT:
        return text
    cut = text.rfind(" ", 0, FOLD_AT)
    return text[: cut if cut > FOLD_AT // 2 else FOLD_AT].rstrip() + " …"


def folded(lines: Sequence[str]) -> str:
    """Lines of text (a run's reasons) folded: the first (its first ``FOLD_AT`` characters) in
    the table, the whole a click away (``<details>``, no script); a short single line as it
    is."""
    lines = [line for line in lines if line]
    if not lines:
        return ""
    if len(lines) == 1 and len(lines[0]) <= FOLD_AT:
        return esc(lines[0])
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    whole = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return (
        f'<details class="fold"><summary>{esc(_head(lines[0]))}'
        f'<span class="more">{more}</span></summary><ul>{whole}</ul></details>'
    )


def table_open(table_id: str, title: str = "") -> str:
    """A table's title above its own scroll box (so a long title wraps with the page, not with
    a table wider than it) and the table's opening tag, labelled by that title."""
    if not title:
        return f'<div class="scroll"><table id="{esc(table_id)}">'
    return (
        f'<p class="caption" id="caption-{esc(table_id)}">{esc(title)}</p>'
        f'<div class="scroll"><table id="{esc(table_id)}" '
        f'aria-labelledby="caption-{esc(table_id)}">'
    )


def html_table(t: Table, *, caption: bool = True) -> str:
    """A computed table as HTML: the columns and cell texts a terminal shows
    (``render_module.shown_rows``), numbers to the right, its note below; a table whose rows are
    measurements ends each row with the verdict of the runs behind it, and a row whose runs are
    not all stable is marked."""
    headers, rows = render_module.shown_rows(t)
    judged = any(row.verdicts for row in t.rows)
    out = [table_open(f"table-{t.name}", t.title if caption else "")]
    heads = [*headers, *(["verdict"] if judged else [])]
    out.append(
        "<thead><tr>" + "".join(f'<th scope="col">{esc(c)}</th>' for c in heads) + "</tr></thead>"
    )
    out.append("<tbody>")
    for row, shown in zip(t.rows, rows, strict=True):
        cells = []
        for text, numeric in shown:
            kind = "num" if numeric else "short" if len(text) <= 24 else "long"
            cells.append(f"<td{f' class={kind}' if kind else ''}>{esc(text)}</td>")
        row_class = ""
        if judged:
            state, text = row_verdict(row.verdicts)
            said = any(text in cell for cell, _ in shown)
            # each side not stable, by name; more than two fold under the first
            sides = text.split("; ")
            why = esc(text) if len(sides) <= 2 else folded(sides)
            detail = f'<br><span class="why">{why}</span>' if text != state and not said else ""
            cells.append(
                f'<td class="verdict">{badge(state, state) + detail if state else ""}</td>'
            )
            row_class = f' class="{verdict_class(state)}"' if state else ""
        out.append(f"<tr{row_class}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if t.note:
        out.append(f'<p class="note">{esc(t.note)}</p>')
    return "\n".join(out)


def kv_table(rows: Sequence[tuple[str, Any]], table_id: str) -> str:
    body = "".join(
        f'<tr><th scope="row">{esc(k)}</th><td>{esc(v)}</td></tr>'
        for k, v in rows
        if v not in (None, "")
    )
    return f'<div class="scroll"><table id="{esc(table_id)}" class="kv"><tbody>{body}</tbody></table></div>'


def metric_label(metric: str) -> tuple[str, bool]:
    info = metric_info(metric)
    return info.label, info.lower_is_better


def _times(value: float) -> str:
    return f"{value:.2f}×"


def distinct(values: Sequence[Any]) -> str:
    shown = [str(v) for v in dict.fromkeys(values) if v not in (None, "")]
    return " / ".join(shown)


def minute(when: Any) -> str:
    """'2026-12-02 12:50' of an ISO time (as written; unreadable text as it is)."""
    return str(when or "")[:16].replace("T", " ")


_SVG_START = re.compile(r"<svg\b", re.IGNORECASE)
_UNSAFE_SVG = re.compile(
    r"<script|<foreignObject|<[^>]*\son[a-z]+\s*=|(?:href|src)\s*=\s*(?![\"']?#)|url\(\s*(?![\"']?#)",
    re.IGNORECASE,
)


def inline_svg(svg: str) -> str | None:
    """SVG text ready to sit in the page (prologue and doctype cut), or None when it holds
    anything that could run or fetch (a script, an event handler, a reference outside itself)."""
    match = _SVG_START.search(svg)
    if match is None:
        return None
    body = svg[match.start() :]
    return None if _UNSAFE_SVG.search(body) else body
