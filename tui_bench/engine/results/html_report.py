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

The page lives in ``results/html/``, one concern a module: ``page`` (the Page and ``collect``),
``markup`` (escaping, a computed table as HTML), ``compare`` (question, verdict, and a section
per page section of the table registry, ``tables.SECTIONS``), ``shared`` (machine, each run,
trends, figures), ``regress`` (the gate's page), ``style`` (the CSS). This module puts them
together.

Two calls::

    comparison = tables.compute(records, metric=..., skipped=..., published=...)
    page = html_report.collect(records, comparison, history=History().all())
    text = html_report.render(page)
"""

from __future__ import annotations

from pathlib import Path

from tui_bench import __version__
from tui_bench.engine.results.html.compare import (
    compare_sections,
    sections,
    verdict_parts,
    verdict_sentences,
)
from tui_bench.engine.results.html.markup import esc, inline_svg, row_verdict
from tui_bench.engine.results.html.page import Page, SvgFigure, collect
from tui_bench.engine.results.html.regress import regress_parts, regress_sections
from tui_bench.engine.results.html.shared import figures_section, trends_section
from tui_bench.engine.results.html.style import CSS

__all__ = [
    "CSS",
    "Page",
    "SvgFigure",
    "collect",
    "inline_svg",
    "regress_parts",
    "render",
    "row_verdict",
    "verdict_parts",
    "verdict_sentences",
    "write",
]


def write(path: str | Path, page: Page) -> Path:
    """The page rendered into ``path`` (its folder must exist): the one place a report is
    written, for the CLI and the TUI alike."""
    target = Path(path)
    target.write_text(render(page), encoding="utf-8")
    return target


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
        f'<meta name="generator" content="tui-bench {esc(__version__)}">',
        f"<title>{esc(page.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<header><h1>{esc(page.title)}</h1>",
        f'<p class="meta">tui-bench {esc(__version__)} · generated {esc(page.generated_at)}'
        + (f" · <code>{esc(page.command)}</code>" if page.command else "")
        + "</p></header>",
        "<main>",
        *(compare_sections(page) if page.regress is None else regress_sections(page, page.regress)),
        trends_section(page),
        figures_section(page),
        *([] if page.regress is not None else sections(page, tail=True)),
        "</main>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)
