"""The regress gate's page: its question, its verdict read off the gate's rows, and the table
of baseline against candidate per configuration (``regress.Report``)."""

from __future__ import annotations

from tui_bench.engine.results import regress as regress_module
from tui_bench.engine.results import render as render_module
from tui_bench.engine.results.html.markup import esc, metric_label, table_open
from tui_bench.engine.results.html.page import Page
from tui_bench.engine.results.html.shared import machine, runs_table

# -- regress ---------------------------------------------------------------------------------------
# How a page colours a row of the gate: its mark's meaning is regress.MARKS's.
REGRESS_ROW_CLASS = {
    regress_module.WORSE: "unreliable",
    regress_module.FAILED: "unreliable",
    regress_module.UNSTABLE: "noisy",
    regress_module.BETTER: "stable",
    regress_module.MISSING: "unjudged",
}


def regress_parts(found: regress_module.Report) -> list[tuple[str, str]]:
    """The gate's verdict as (answer, evidence) pairs, read off its rows."""
    out: list[tuple[str, str]] = []
    worse = found.regressions
    if worse:
        out.append((f"{len(worse)} regression(s) among {len(found.rows)} configuration(s): ", ""))
    else:
        out.append((f"No regression among {len(found.rows)} configuration(s).", ""))
    for row in found.rows:
        if row.mark == regress_module.SAME:
            continue
        what = regress_module.MARKS.get(row.mark, row.mark)
        change = f"{row.change * 100:+.0f} %" if row.change is not None else ""
        p = f"p={row.p:.3g}, " if row.p is not None else ""
        evidence = f" ({change}, {p}n={row.baseline.n}/{row.candidate.n})" if change else ""
        note = f"; {row.note}" if row.note else ""
        out.append((f"{row.configuration.name}: {what}", f"{evidence}{note}."))
    same = sum(r.mark == regress_module.SAME for r in found.rows)
    if same:
        out.append(("", f"{same} configuration(s) within the noise."))
    return out


def regress_sections(page: Page, found: regress_module.Report) -> list[str]:
    label, lower = metric_label(found.metric)
    verdict = " ".join(
        (f"<strong>{esc(lead)}</strong>" if lead else "") + esc(rest)
        for lead, rest in regress_parts(found)
    )
    t = found.table()  # the terminal's and the CSV's table, as the terminal shows it
    headers, shown_rows = render_module.shown_rows(t)
    body = [table_open("table-regress", t.title)]
    body.append(
        "<thead><tr>"
        + "".join(f"<th scope=col>{esc(c)}</th>" for c in headers)
        + "</tr></thead><tbody>"
    )
    for row, shown in zip(found.rows, shown_rows, strict=True):
        row_class = REGRESS_ROW_CLASS.get(row.mark, "")
        cells = []
        for text, numeric in shown:
            kind = "num" if numeric else "short" if len(text) <= 24 else ""
            cells.append(f"<td{f' class={kind}' if kind else ''}>{esc(text)}</td>")
        body.append(f'<tr class="{row_class}">' + "".join(cells) + "</tr>")
    marks = "; ".join(f"{mark} {what}" for mark, what in regress_module.MARKS.items())
    body.append(f'</tbody></table></div><p class="note">{esc(t.note)}; marks: {esc(marks)}</p>')
    return [
        '<section id="question"><h2>The question</h2>'
        f"<p>Did <strong>{esc(label)}</strong> ({'lower' if lower else 'higher'} is better) get "
        f"worse from the baseline runs to the candidate runs, configuration by configuration, "
        f"over {len(page.records)} run(s)?</p></section>",
        f'<section id="verdict"><h2>The verdict</h2><p class="verdict">{verdict}</p></section>',
        machine(page),
        f'<section id="regress"><h2>Baseline against candidate</h2>{"".join(body)}'
        "<h3>Each run</h3>" + runs_table(page) + "</section>",
    ]
