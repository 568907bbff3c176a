"""The sections every report has, a comparison's and the regress gate's alike: the machine
(facts, the doctor's check at run time, versions), each run as recorded, the trends over history
and the figures."""

from __future__ import annotations

from typing import Any

from tui_bench.engine.results import figures as figures_module
from tui_bench.engine.results import identity as identity_module
from tui_bench.engine.results import metrics
from tui_bench.engine.results import tables as tables_module
from tui_bench.engine.results.html.markup import (
    badge,
    cell,
    distinct,
    esc,
    folded,
    inline_svg,
    kv_table,
    metric_label,
    minute,
    strings,
    table_open,
    verdict_class,
)
from tui_bench.engine.results.html.page import Page


def machine(page: Page) -> str:
    envs = [r.env for r in page.records]
    hosts = list(dict.fromkeys(r.host or "?" for r in page.records))
    gpus = distinct(
        [
            f"{e.get('gpu_model')} (driver {e.get('gpu_driver')})" if e.get("gpu_model") else None
            for e in envs
        ]
    )
    facts = [
        ("host" if len(hosts) == 1 else "hosts", ", ".join(hosts)),
        ("CPU", distinct([e.get("cpu_model") for e in envs])),
        (
            "cores (physical / logical)",
            distinct(
                [
                    f"{e.get('physical_cores', '?')} / {e.get('logical_cores', '?')}"
                    for e in envs
                    if e.get("logical_cores")
                ]
            ),
        ),
        ("memory GiB", distinct([e.get("ram_gib") for e in envs])),
        ("GPU", gpus or "none recorded"),
        ("OS", distinct([e.get("os") for e in envs])),
        ("tui-bench", distinct([e.get("tui_bench") for e in envs])),
    ]
    checks: dict[tuple[str, str], int] = {}  # (check text, badge class) → runs
    for r in page.records:
        snap = r.machine_check
        if snap:
            fail, warn = strings(snap.get("fail")), strings(snap.get("warn"))
            text = str(snap.get("banner") or "?") + (
                f" ({', '.join([*fail, *warn])})" if fail or warn else ""
            )
            css = "unreliable" if fail else "noisy" if warn else "stable"
        else:
            text, css = "not recorded (a run from before the check was kept)", "unjudged"
        checks[(text, css)] = checks.get((text, css), 0) + 1
    doctor_items = "".join(
        f'<li><span class="badge {css}">{esc(text)}</span> — {count} run(s)</li>'
        for (text, css), count in checks.items()
    )
    loads = distinct([tables_module.load_text(r) for r in page.records])  # the card's own words
    versions: dict[str, dict[str, Any]] = {}
    for r in page.records:
        name = page.labels.get(r.id, r.label)
        for k, v in identity_module.versions(r).items():
            if v is not None and k != "machine":
                versions.setdefault(name, {}).setdefault(k, []).append(v)
    version_rows = "".join(
        f"<tr><th scope=row>{esc(name)}</th><td>"
        + esc("; ".join(f"{k} {distinct(vs)}" for k, vs in found.items()))
        + "</td></tr>"
        for name, found in versions.items()
    )
    return (
        '<section id="machine"><h2>The machine</h2>'
        + kv_table(facts, "table-machine")
        + f"<h3>Machine check at run time (tui-bench doctor)</h3><ul class=checks>{doctor_items}</ul>"
        + (f"<p>Load when runs started: {esc(loads)}</p>" if loads else "")
        + "<h3>Versions and runtimes</h3>"
        + '<div class="scroll"><table id="table-versions"><thead><tr><th scope=col>configuration</th>'
        + "<th scope=col>versions</th></tr></thead><tbody>"
        + version_rows
        + "</tbody></table></div></section>"
    )


def _figure_cell(m: metrics.Metric, value: float | None) -> str:
    """A run's figure in the unit its header names (``Metric.text``: scaled, its digits)."""
    return "<td>—</td>" if value is None else f'<td class="num">{esc(m.text(value))}</td>'


def runs_table(page: Page) -> str:
    label, _ = metric_label(page.metric)
    compared = metrics.get(page.metric)
    extras = [
        # per-run facts beside the compared metric (the registry's PAGE), where some run has one,
        # under their short header in the unit they are shown in ("p99 ms", not a sentence)
        m
        for m in metrics.placed(metrics.PAGE)
        if m.key != page.metric and any(r.metric(m.key) is not None for r in page.records)
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
        compared.short,
        "verdict",
        "reasons",
        *(m.short for m in extras),
    ]
    out = [
        table_open("table-runs", f"{label}: each run as recorded"),
    ]
    out.append(
        "<thead><tr>"
        + "".join(f"<th scope=col>{esc(h)}</th>" for h in heads)
        + "</tr></thead><tbody>"
    )
    for r in page.records:
        status = r.status or "?"
        verdict = r.verdict or ("not judged" if r.finished else "")
        reasons = [x.message for x in r.reasons] or (
            [r.text_field("reason") or ""] if not r.finished else []
        )
        value = r.metric(page.metric)
        cells = [
            f"<td><code>{esc(r.id)}</code></td>",
            *([f"<td>{esc(sides.get(r.id, ''))}</td>"] if sides else []),
            f"<td>{esc(page.labels.get(r.id, r.label))}</td>",
            f"<td>{esc(status)}</td>",
            _figure_cell(compared, value),
            f"<td>{badge(verdict) if verdict else ''}</td>",
            f'<td class="reasons">{folded(reasons)}</td>',
            *(_figure_cell(m, r.metric(m.key)) for m in extras),
        ]
        row_class = verdict_class(verdict if r.finished else "unreliable")
        out.append(f'<tr class="{row_class}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append(
        '<p class="note">verdict: the run\'s own stability check (stable / noisy / unreliable) '
        "with the rules it broke (the first shown, the rest folded under it); a run that did "
        "not finish gives no number.</p>"
    )
    return "\n".join(out)


def trends_section(page: Page) -> str:
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
            f"<td>{esc(t.configuration.name)}</td>"
            f'<td class="num">{len(t.points)}{f" (+{t.failed} failed)" if t.failed else ""}</td>'
            f"<td class=short>{esc(minute(first))}</td>"
            f"<td class=short>{esc(minute(last.run.started_text)) if last else ''}</td>"
            f'<td class="num">{cell(last.value) if last else "—"}</td>'
            f"<td>{badge(last.run.verdict or 'not judged') if last else ''}</td>"
            f"<td>{esc(changes)}</td></tr>"
        )
    out.append("</tbody></table></div>")
    out.append(
        '<p class="note">one value per run (its own median), in time order; change points by '
        "penalised least squares on log values (tui-bench trends), with the versions or machine "
        "state that changed at each.</p></section>"
    )
    return "".join(out)


def figures_section(page: Page) -> str:
    out = ['<section id="figures"><h2>Figures</h2>']
    if page.figures_note:
        out.append(
            f'<p class="note">{esc(page.figures_note)} The tables above hold every number.</p>'
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
                f"<p>Figure {index} ({esc(fig.title)}) left out: its SVG referred outside itself.</p>"
            )
            continue
        out.append(
            f'<figure id="figure-{index}">{svg}<figcaption>Figure {index}. {esc(fig.title)}</figcaption></figure>'
        )
    out.append("</section>")
    return "\n".join(out)
