"""A comparison as one self-contained HTML page, for a team to read away from the terminal
(``tui-bench report TARGET --html FILE``, ``compare --html``, the Compare screen's key).

It renders the tables ``compare`` prints (``tables.compute``: the one place a statistic over
runs is computed; formatted by ``render``, as the terminal shows them) and adds only what the
records carry as they are (per-run values, verdicts
and their reasons, the machine, versions, the doctor's check at run time), each configuration's
trend with its change points (``trends``), and figures drawn from those same tables
(``figures.report_svgs``, the optional ``figures`` extra). It computes no statistic itself.

The page is one file: no request to any other address when opened (no CDN, fonts or scripts;
figures are inline SVG), readable without JavaScript, printable, light or dark by the reader's
preference. Every text that comes from a file (run ids, labels, reasons, notes) is escaped.

Two calls::

    comparison = tables.compute(records, metric=..., skipped=..., published=...)
    page = html_report.collect(records, comparison, history=History().all())
    text = html_report.render(page)
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from tui_bench import __version__
from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.results import figures as figures_module
from tui_bench.engine.results import identity as identity_module
from tui_bench.engine.results import metrics, stability
from tui_bench.engine.results import regress as regress_module
from tui_bench.engine.results import render as render_module
from tui_bench.engine.results import tables as tables_module
from tui_bench.engine.results import trends as trends_module
from tui_bench.engine.results import verdict as verdict_module
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.tables import Comparison, Table, Verdicts, metric_info

MAX_VERDICT_LINES = 8  # comparisons spelled out in the verdict paragraph; the rest in the table


@dataclass(frozen=True)
class SvgFigure:
    """A figure as inline SVG text (no XML prologue) and what it shows."""

    title: str
    svg: str


@dataclass
class Page:
    """Everything a report shows, computed elsewhere; ``render`` only lays it out."""

    title: str
    metric: str
    tables: Sequence[Table]  # the comparison's (``Comparison.tables()``), summary first
    records: Sequence[Run]
    labels: dict[str, str]  # run id → its configuration's short name (the summary's)
    trends: Sequence[trends_module.Trend] = ()
    figures: Sequence[SvgFigure] = ()
    figures_note: str = ""  # why there are no figures, and how to get them
    study: str = ""
    command: str = ""
    # `regress --html`: the gate's rows (baseline against candidate per configuration) take
    # the place of compare's question, verdict and tables
    regress: regress_module.Report | None = None
    generated_at: str = field(
        default_factory=lambda: dt.datetime.now().astimezone().isoformat(timespec="seconds")
    )


# -- gathering ------------------------------------------------------------------------------------
def collect(
    records: Sequence[Run],
    comparison: Comparison | None,
    *,
    metric: str = "step_median_s",
    history: Sequence[Run] = (),
    title: str = "",
    study: str = "",
    command: str = "",
    with_figures: bool = True,
    regress: regress_module.Report | None = None,
) -> Page:
    """The page for ``records`` and the comparison ``tables.compute`` made of them (None for
    ``regress``'s page): each compared configuration's trend over ``history`` (every record
    kept), and the figures when the ``figures`` extra is installed."""
    runs = list(records)
    if comparison is not None:
        metric = comparison.metric.key
        groups = comparison.groups
    else:
        groups, _varying = tables_module.group(runs)
    labels = {r.id: g.label for g in groups for r in g.runs}
    keys = {identity_module.configuration_of(r).key for r in runs}
    found = [
        t
        for t in trends_module.trends(history or runs, metric=metric)
        if t.configuration.key in keys
    ]
    page = Page(
        title=title or _default_title(runs),
        metric=metric,
        tables=comparison.tables() if comparison is not None else [],
        records=runs,
        labels=labels,
        trends=found,
        study=study,
        command=command,
        regress=regress,
    )
    if with_figures:
        try:  # matplotlib is an optional extra, imported only here
            page.figures = [SvgFigure(t, s) for t, s in figures_module.report_svgs(page)]
        except TuiBenchError as exc:
            page.figures_note = str(exc)
    else:
        page.figures_note = (
            f"figures left out; with matplotlib ({figures_module.INSTALL_HINT}) they are drawn"
        )
    return page


def _default_title(records: Sequence[Run]) -> str:
    groups = {r.group for r in records if r.group}
    if len(groups) == 1:
        return f"comparison of sweep {next(iter(groups))}"
    return f"comparison of {len(records)} run(s)"


def write(path: str | Path, page: Page) -> Path:
    """The page rendered into ``path`` (its folder must exist): the one place a report is
    written, for the CLI and the TUI alike."""
    target = Path(path)
    target.write_text(render(page), encoding="utf-8")
    return target


def _strings(value: Any) -> list[str]:
    return [str(x) for x in value] if isinstance(value, list) else []


# -- the seam onto the computed tables: the verdict's (one reading of a table by name) ----------
table, rows_of, _number = verdict_module.table, verdict_module.rows_of, verdict_module.number


# -- rendering ------------------------------------------------------------------------------------
# C0/C1 controls (but tab, newline, return) and Unicode noncharacters: not allowed in HTML text
_NOT_TEXT = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff"
    "\U0001fffe\U0001ffff\U0010fffe\U0010ffff]"
)


def _e(value: Any) -> str:
    """Text from a file, safe to put in the page: escaped, and any character HTML may not
    carry shown as U+FFFD."""
    return escape(_NOT_TEXT.sub("\ufffd", str(value)), quote=True)


def _cell(value: Any) -> str:
    return _e(render_module.cell_text(value))


def _verdict_class(text: str) -> str:
    text = text.lower()
    if not text or text == "stable":
        return "stable"
    if "unreliable" in text or "no finished" in text:
        return "unreliable"
    if "not judged" in text and "not stable" not in text:
        return "unjudged"
    return "noisy"


def _badge(text: str, state: str | None = None) -> str:
    css = _verdict_class(state if state is not None else text)
    return f'<span class="badge {css}">{_e(text or "stable")}</span>'


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


def _html_table(t: Table, *, caption: bool = True) -> str:
    """A computed table as HTML: the columns and cell texts a terminal shows
    (``render_module.shown_rows``), numbers to the right, its note below; a table whose rows are
    measurements ends each row with the verdict of the runs behind it, and a row whose runs are
    not all stable is marked."""
    headers, rows = render_module.shown_rows(t)
    judged = any(row.verdicts for row in t.rows)
    out = [f'<div class="scroll"><table id="table-{_e(t.name)}">']
    if caption:
        out.append(f"<caption>{_e(t.title)}</caption>")
    heads = [*headers, *(["verdict"] if judged else [])]
    out.append(
        "<thead><tr>" + "".join(f'<th scope="col">{_e(c)}</th>' for c in heads) + "</tr></thead>"
    )
    out.append("<tbody>")
    for row, shown in zip(t.rows, rows, strict=True):
        cells = []
        for text, numeric in shown:
            kind = "num" if numeric else "short" if len(text) <= 24 else ""
            cells.append(f"<td{f' class={kind}' if kind else ''}>{_e(text)}</td>")
        row_class = ""
        if judged:
            state, text = row_verdict(row.verdicts)
            said = any(text in cell for cell, _ in shown)
            detail = (
                f'<br><span class="why">{_e(text)}</span>' if text != state and not said else ""
            )
            cells.append(f"<td>{_badge(state, state) + detail if state else ''}</td>")
            row_class = f' class="{_verdict_class(state)}"' if state else ""
        out.append(f"<tr{row_class}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if t.note:
        out.append(f'<p class="note">{_e(t.note)}</p>')
    return "\n".join(out)


def _kv_table(rows: Sequence[tuple[str, Any]], table_id: str) -> str:
    body = "".join(
        f'<tr><th scope="row">{_e(k)}</th><td>{_e(v)}</td></tr>'
        for k, v in rows
        if v not in (None, "")
    )
    return f'<div class="scroll"><table id="{_e(table_id)}" class="kv"><tbody>{body}</tbody></table></div>'


def _metric_label(metric: str) -> tuple[str, bool]:
    info = metric_info(metric)
    return info.label, info.lower_is_better


def _times(value: float) -> str:
    return f"{value:.2f}×"


# -- sections -------------------------------------------------------------------------------------
def _question(page: Page) -> str:
    label, lower = _metric_label(page.metric)
    summary = rows_of(table(page.tables, "summary"))
    names = [str(r.get("configuration")) for r in summary]
    items = "".join(f"<li>{_e(n)}</li>" for n in names)
    study = f"<p>Study: {_e(page.study)}</p>" if page.study else ""
    better = "lower is better" if lower else "higher is better"
    return (
        '<section id="question"><h2>The question</h2>'
        f"<p>Which of these {len(names)} configuration(s) does better on <strong>{_e(label)}</strong> "
        f"({better}), over {len(page.records)} run(s)?</p>{study}<ul class=configs>{items}</ul></section>"
    )


def verdict_sentences(page: Page) -> list[str]:
    """The verdict in plain sentences (``verdict.sentences``: the terminal and the Compare
    screen state the same)."""
    return verdict_module.sentences(page.tables, page.metric)


def verdict_parts(page: Page) -> list[tuple[str, str]]:
    return verdict_module.parts(page.tables, page.metric)


def _verdict(page: Page) -> str:
    text = " ".join(
        (f"<strong>{_e(lead)}</strong>" if lead else "") + _e(rest)
        for lead, rest in verdict_parts(page)
    )
    return f'<section id="verdict"><h2>The verdict</h2><p class="verdict">{text}</p></section>'


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


def _regress_sections(page: Page, found: regress_module.Report) -> list[str]:
    label, lower = _metric_label(found.metric)
    verdict = " ".join(
        (f"<strong>{_e(lead)}</strong>" if lead else "") + _e(rest)
        for lead, rest in regress_parts(found)
    )
    t = found.table()  # the terminal's and the CSV's table, as the terminal shows it
    headers, shown_rows = render_module.shown_rows(t)
    body = ['<div class="scroll"><table id="table-regress">', f"<caption>{_e(t.title)}</caption>"]
    body.append(
        "<thead><tr>"
        + "".join(f"<th scope=col>{_e(c)}</th>" for c in headers)
        + "</tr></thead><tbody>"
    )
    for row, shown in zip(found.rows, shown_rows, strict=True):
        row_class = REGRESS_ROW_CLASS.get(row.mark, "")
        cells = []
        for text, numeric in shown:
            kind = "num" if numeric else "short" if len(text) <= 24 else ""
            cells.append(f"<td{f' class={kind}' if kind else ''}>{_e(text)}</td>")
        body.append(f'<tr class="{row_class}">' + "".join(cells) + "</tr>")
    marks = "; ".join(f"{mark} {what}" for mark, what in regress_module.MARKS.items())
    body.append(f'</tbody></table></div><p class="note">{_e(t.note)}; marks: {_e(marks)}</p>')
    return [
        '<section id="question"><h2>The question</h2>'
        f"<p>Did <strong>{_e(label)}</strong> ({'lower' if lower else 'higher'} is better) get "
        f"worse from the baseline runs to the candidate runs, configuration by configuration, "
        f"over {len(page.records)} run(s)?</p></section>",
        f'<section id="verdict"><h2>The verdict</h2><p class="verdict">{verdict}</p></section>',
        _machine(page),
        f'<section id="regress"><h2>Baseline against candidate</h2>{"".join(body)}'
        "<h3>Each run</h3>" + _runs_table(page) + "</section>",
    ]


def _distinct(values: Sequence[Any]) -> str:
    shown = [str(v) for v in dict.fromkeys(values) if v not in (None, "")]
    return " / ".join(shown)


def _machine(page: Page) -> str:
    envs = [r.env for r in page.records]
    hosts = list(dict.fromkeys(r.host or "?" for r in page.records))
    gpus = _distinct(
        [
            f"{e.get('gpu_model')} (driver {e.get('gpu_driver')})" if e.get("gpu_model") else None
            for e in envs
        ]
    )
    facts = [
        ("host" if len(hosts) == 1 else "hosts", ", ".join(hosts)),
        ("CPU", _distinct([e.get("cpu_model") for e in envs])),
        (
            "cores (physical / logical)",
            _distinct(
                [
                    f"{e.get('physical_cores', '?')} / {e.get('logical_cores', '?')}"
                    for e in envs
                    if e.get("logical_cores")
                ]
            ),
        ),
        ("memory GiB", _distinct([e.get("ram_gib") for e in envs])),
        ("GPU", gpus or "none recorded"),
        ("OS", _distinct([e.get("os") for e in envs])),
        ("tui-bench", _distinct([e.get("tui_bench") for e in envs])),
    ]
    checks: dict[tuple[str, str], int] = {}  # (check text, badge class) → runs
    for r in page.records:
        snap = r.machine_check
        if snap:
            fail, warn = _strings(snap.get("fail")), _strings(snap.get("warn"))
            text = str(snap.get("banner") or "?") + (
                f" ({', '.join([*fail, *warn])})" if fail or warn else ""
            )
            css = "unreliable" if fail else "noisy" if warn else "stable"
        else:
            text, css = "not recorded (a run from before the check was kept)", "unjudged"
        checks[(text, css)] = checks.get((text, css), 0) + 1
    doctor_items = "".join(
        f'<li><span class="badge {css}">{_e(text)}</span> — {count} run(s)</li>'
        for (text, css), count in checks.items()
    )
    loads = _distinct([tables_module.load_text(r) for r in page.records])  # the card's own words
    versions: dict[str, dict[str, Any]] = {}
    for r in page.records:
        name = page.labels.get(r.id, r.label)
        for k, v in identity_module.versions(r).items():
            if v is not None and k != "machine":
                versions.setdefault(name, {}).setdefault(k, []).append(v)
    version_rows = "".join(
        f"<tr><th scope=row>{_e(name)}</th><td>"
        + _e("; ".join(f"{k} {_distinct(vs)}" for k, vs in found.items()))
        + "</td></tr>"
        for name, found in versions.items()
    )
    return (
        '<section id="machine"><h2>The machine</h2>'
        + _kv_table(facts, "table-machine")
        + f"<h3>Machine check at run time (tui-bench doctor)</h3><ul class=checks>{doctor_items}</ul>"
        + (f"<p>Load when runs started: {_e(loads)}</p>" if loads else "")
        + "<h3>Versions and runtimes</h3>"
        + '<div class="scroll"><table id="table-versions"><thead><tr><th scope=col>configuration</th>'
        + "<th scope=col>versions</th></tr></thead><tbody>"
        + version_rows
        + "</tbody></table></div></section>"
    )


def _fairness(page: Page) -> str:
    card = table(page.tables, "fairness")
    body = (
        _html_table(card)
        if card is not None
        else "<p>No setting the fairness card checks (precision, compilation, autotune, input "
        "path, timing mode, threads, versions, driver, load) differs between the compared "
        "configurations beyond what the comparison varies.</p>"
    )
    return f'<section id="fairness"><h2>Fairness card</h2>{body}</section>'


def _per_configuration(page: Page) -> str:
    summary = table(page.tables, "summary")
    out = ['<section id="configurations"><h2>Per configuration</h2>']
    if summary is not None:
        out.append(_html_table(summary))
    out.append("<h3>Each run</h3>")
    out.append(_runs_table(page))
    out.append("</section>")
    return "\n".join(out)


def _runs_table(page: Page) -> str:
    label, _ = _metric_label(page.metric)
    extras = [
        # per-run facts beside the compared metric (the registry's PAGE), where some run has one
        (m.key, m.label)
        for m in metrics.placed(metrics.PAGE)
        if any(r.metric(m.key) is not None for r in page.records)
    ]
    sides: dict[str, str] = {}  # regress: which side each run is on
    for row in page.regress.rows if page.regress is not None else []:
        sides.update(dict.fromkeys(row.baseline.runs, "baseline"))
        sides.update(dict.fromkeys(row.candidate.runs, "candidate"))
    heads = [
        "run",
        *(["side"] if sides else []),
        "configuration",
        "status",
        page.metric,
        "verdict",
        "reasons",
        *(n for _, n in extras),
    ]
    out = [
        '<div class="scroll"><table id="table-runs">',
        f"<caption>{_e(label)}: each run as recorded</caption>",
    ]
    out.append(
        "<thead><tr>"
        + "".join(f"<th scope=col>{_e(h)}</th>" for h in heads)
        + "</tr></thead><tbody>"
    )
    for r in page.records:
        status = r.status or "?"
        verdict = r.verdict or ("not judged" if r.finished else "")
        reasons = "; ".join(x.message for x in r.reasons) or (
            (r.text_field("reason") or "") if not r.finished else ""
        )
        value = r.metric(page.metric)
        cells = [
            f"<td><code>{_e(r.id)}</code></td>",
            *([f"<td>{_e(sides.get(r.id, ''))}</td>"] if sides else []),
            f"<td>{_e(page.labels.get(r.id, r.label))}</td>",
            f"<td>{_e(status)}</td>",
            f'<td class="num">{_cell(value)}</td>' if value is not None else "<td>—</td>",
            f"<td>{_badge(verdict) if verdict else ''}</td>",
            f"<td>{_e(reasons)}</td>",
            *(
                f'<td class="num">{_cell(r.metric(key))}</td>'
                if r.metric(key) is not None
                else "<td>—</td>"
                for key, _ in extras
            ),
        ]
        row_class = _verdict_class(verdict if r.finished else "unreliable")
        out.append(f'<tr class="{row_class}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append(
        '<p class="note">verdict: the run\'s own stability check (stable / noisy / unreliable) '
        "with the rules it broke; a run that did not finish gives no number.</p>"
    )
    return "\n".join(out)


def _section_of(page: Page, section_id: str, heading: str, names: Sequence[str], empty: str) -> str:
    found = [t for name in names if (t := table(page.tables, name)) is not None]
    if not found:
        return f'<section id="{section_id}"><h2>{_e(heading)}</h2><p>{_e(empty)}</p></section>'
    body = "\n".join(_html_table(t) for t in found)
    return f'<section id="{section_id}"><h2>{_e(heading)}</h2>{body}</section>'


def _trends(page: Page) -> str:
    out = ['<section id="trends"><h2>Trends over history</h2>']
    if not page.trends:
        out.append(
            "<p>No configuration here has a finished run with this metric in history.</p></section>"
        )
        return "".join(out)
    out.append(
        '<div class="scroll"><table id="table-trends"><thead><tr><th scope=col>configuration</th>'
        "<th scope=col>runs</th><th scope=col>first</th><th scope=col>last</th>"
        "<th scope=col>last value</th><th scope=col>last verdict</th><th scope=col>change points</th>"
        "</tr></thead><tbody>"
    )
    for t in page.trends:
        first = t.points[0].run.started_text if t.points else ""
        last = t.last
        changes = "; ".join(c.describe(t.metric) for c in t.change_points) or "none found"
        out.append(
            "<tr>"
            f"<td>{_e(t.configuration.name)}</td>"
            f'<td class="num">{len(t.points)}{f" (+{t.failed} failed)" if t.failed else ""}</td>'
            f"<td class=short>{_e(_minute(first))}</td>"
            f"<td class=short>{_e(_minute(last.run.started_text)) if last else ''}</td>"
            f'<td class="num">{_cell(last.value) if last else "—"}</td>'
            f"<td>{_badge(last.run.verdict or 'not judged') if last else ''}</td>"
            f"<td>{_e(changes)}</td></tr>"
        )
    out.append("</tbody></table></div>")
    out.append(
        '<p class="note">one value per run (its own median), in time order; change points by '
        "penalised least squares on log values (tui-bench trends), with the versions or machine "
        "state that changed at each.</p></section>"
    )
    return "".join(out)


def _minute(when: Any) -> str:
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


def _figures(page: Page) -> str:
    out = ['<section id="figures"><h2>Figures</h2>']
    if page.figures_note:
        out.append(
            f'<p class="note">{_e(page.figures_note)} The tables above hold every number.</p>'
        )
    if (
        page.figures
        and page.trends
        and not any(len(t.points) >= figures_module.MIN_TREND_POINTS for t in page.trends)
    ):
        out.append(
            f'<p class="note">No trend figure: no configuration has '
            f"{figures_module.MIN_TREND_POINTS} finished runs in history yet (the trends table "
            "lists what there is).</p>"
        )
    for index, fig in enumerate(page.figures, 1):
        svg = inline_svg(fig.svg)
        if svg is None:
            out.append(
                f"<p>Figure {index} ({_e(fig.title)}) left out: its SVG referred outside itself.</p>"
            )
            continue
        out.append(
            f'<figure id="figure-{index}">{svg}<figcaption>Figure {index}. {_e(fig.title)}</figcaption></figure>'
        )
    out.append("</section>")
    return "\n".join(out)


CSS = """
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1b1f24; --muted: #57606a;
  --line: #d0d7de; --head: #f3f5f7; --stable: #1a7f37; --noisy: #9a6700; --unreliable: #cf222e;
  --unjudged: #57606a; --row-warn: #fff8c5; --row-bad: #ffebe9; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #30363d; --head: #161b22;
    --stable: #3fb950; --noisy: #d29922; --unreliable: #f85149; --unjudged: #9198a1;
    --row-warn: #2d2410; --row-bad: #3a1618; }
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 72rem; padding: 1.5rem; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; } h2 { font-size: 1.25rem; margin: 2rem 0 .5rem;
  padding-bottom: .25rem; border-bottom: 1px solid var(--line); } h3 { font-size: 1rem; margin: 1.25rem 0 .4rem; }
p.meta, p.note, figcaption { color: var(--muted); font-size: .85rem; }
p.verdict { font-size: 1.05rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .85rem; }
caption { text-align: left; font-weight: 600; padding: .25rem 0; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; vertical-align: top; text-align: left; }
thead th, table.kv th { background: var(--head); }
td.short { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.noisy td, tr.unjudged td { background: var(--row-warn); } tr.unreliable td { background: var(--row-bad); }
.badge { display: inline-block; padding: 0 .4rem; border-radius: .6rem; border: 1px solid currentColor;
  font-size: .8rem; white-space: nowrap; }
.badge.stable { color: var(--stable); } .badge.noisy { color: var(--noisy); }
.badge.unreliable { color: var(--unreliable); } .badge.unjudged { color: var(--unjudged); }
code { font-size: .8rem; white-space: nowrap; }
.why { font-size: .8rem; color: var(--muted); }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; color: var(--fg); }
figure svg text { fill: currentColor; } /* matplotlib leaves black text's fill unset */
ul.configs li { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .9rem; }
@media print {
  :root { --bg: #fff; --fg: #000; --muted: #333; --head: #eee; }
  body { max-width: none; padding: 0; font-size: 10pt; }
  .scroll { overflow: visible; }
  table, figure { page-break-inside: avoid; break-inside: avoid; }
  h2 { page-break-after: avoid; break-after: avoid; }
}
"""


def render(page: Page) -> str:
    """The page as one HTML document (a str: the caller writes it)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # nothing may load from elsewhere, even if a figure or a label slipped something in
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        f'<meta name="generator" content="tui-bench {_e(__version__)}">',
        f"<title>{_e(page.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<header><h1>{_e(page.title)}</h1>",
        f'<p class="meta">tui-bench {_e(__version__)} · generated {_e(page.generated_at)}'
        + (f" · <code>{_e(page.command)}</code>" if page.command else "")
        + "</p></header>",
        "<main>",
        *(
            _compare_sections(page)
            if page.regress is None
            else _regress_sections(page, page.regress)
        ),
        _trends(page),
        _figures(page),
        *(
            []
            if page.regress is not None
            else [_section_of(page, "skipped", "Not run", ["skipped"], "Every configuration ran.")]
        ),
        "</main>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)


def _compare_sections(page: Page) -> list[str]:
    return [
        _question(page),
        _verdict(page),
        _machine(page),
        _fairness(page),
        _per_configuration(page),
        _section_of(
            page,
            "ratios",
            "Ratios",
            ["comparisons"],
            "No two configurations differ in one setting.",
        ),
        _section_of(
            page,
            "scaling",
            "Scaling",
            ["scaling", "workers"],
            "These runs do not vary threads or workers.",
        ),
        # inference runs over several batch sizes only: a training report has no empty section
        *(
            [_section_of(page, "batches", "Inference over batch sizes", ["batches"], "")]
            if table(page.tables, "batches") is not None
            else []
        ),
        _section_of(
            page,
            "published",
            "Published figures beside ours",
            ["published", "study"],
            "These runs are not a study preset's sweep: no published figure to set beside them.",
        ),
    ]
