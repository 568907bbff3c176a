"""A comparison's page: the question it answers, the verdict (``verdict.parts``: the words the
terminal and the Compare screen use), and a section for each of the table registry's page
sections (``tables.SECTIONS``), holding the tables declared in it (``tables.TABLES``): the page
names no table family."""

from __future__ import annotations

from tui_bench.engine.results import verdict as verdict_module
from tui_bench.engine.results.html.markup import esc, html_table, metric_label
from tui_bench.engine.results.html.page import Page
from tui_bench.engine.results.html.shared import machine, runs_table
from tui_bench.engine.results.tables import SECTIONS, Section, in_section, tradeoff
from tui_bench.engine.results.tables import summary as summary_columns

table = verdict_module.table  # a computed table of the page's, by its registry name


def question(page: Page) -> str:
    label, lower = metric_label(page.metric)
    summary = table(page.tables, "summary")
    names = (
        [summary.text(r, summary_columns.CONFIGURATION) for r in summary.rows]
        if summary is not None
        else []
    )
    items = "".join(f"<li>{esc(n)}</li>" for n in names)
    study = f"<p>Study: {esc(page.study)}</p>" if page.study else ""
    better = "lower is better" if lower else "higher is better"
    asked = [
        f"Which of these {len(names)} configuration(s) does better on "
        f"<strong>{esc(label)}</strong> ({better}), over {len(page.records)} run(s)?"
    ]
    traded = table(page.tables, "tradeoff")
    if traded is not None:
        asked = _trade_off_question(
            page, traded, asked if table(page.tables, "comparisons") else []
        )
    return (
        '<section id="question"><h2>The question</h2>'
        + "".join(f"<p>{q}</p>" for q in asked)
        + f"{study}<ul class=configs>{items}</ul></section>"
    )


def _trade_off_question(page: Page, traded, also: list[str]) -> list[str]:
    """A batch sweep asks what each larger batch buys and what it costs (not which batch is
    'faster'); with a latency bound, which configuration serves the most within it."""
    keys = dict.fromkeys(traded.text(r, tradeoff.PAIR) for r in traded.rows)
    out = []
    for key in keys:
        pair = tradeoff.by_key(key)
        if pair is None:
            continue
        throughput = esc(pair.throughput_words)
        latency = esc(pair.latency_words)
        out.append(
            f"What does each larger batch buy in <strong>{throughput}</strong>, and what does it "
            f"cost in <strong>{latency}</strong>, over "
            f"{len(page.records)} run(s)?"
        )
        if traded.has(tradeoff.BOUND) and traded.rows:
            bound = tradeoff.LatencyBound(traded.number(traded.rows[0], tradeoff.BOUND) or 0.0)
            out.append(
                f"Which configuration serves the most {throughput} with its {latency} within "
                f"<strong>{esc(bound.ms_text)}</strong>?"
            )
    return [*out, *also]


def verdict_sentences(page: Page) -> list[str]:
    """The verdict in plain sentences (``verdict.sentences``: the terminal and the Compare
    screen state the same)."""
    return verdict_module.sentences(page.tables, page.metric)


def verdict_parts(page: Page) -> list[tuple[str, str]]:
    return verdict_module.parts(page.tables, page.metric)


def verdict_section(page: Page) -> str:
    text = " ".join(
        (f"<strong>{esc(lead)}</strong>" if lead else "") + esc(rest)
        for lead, rest in verdict_parts(page)
    )
    return f'<section id="verdict"><h2>The verdict</h2><p class="verdict">{text}</p></section>'


def section(page: Page, declared: Section) -> str:
    """One of the registry's sections: its tables with rows, or what it says when it has none
    (a section with nothing to say is left out). The configurations' section ends with each
    run as recorded."""
    found = [t for name in in_section(declared.id) if (t := table(page.tables, name)) is not None]
    extra = ["<h3>Each run</h3>", runs_table(page)] if declared.id == "configurations" else []
    if not found and not extra:
        if declared.empty is None:
            return ""
        body = f"<p>{esc(declared.empty)}</p>"
    else:
        body = "\n".join([*(html_table(t) for t in found), *extra])
    return f'<section id="{esc(declared.id)}"><h2>{esc(declared.heading)}</h2>{body}</section>'


def sections(page: Page, tail: bool = False) -> list[str]:
    """The registry's sections in order: those before the trends and figures, or (``tail``)
    those after them."""
    return [s for d in SECTIONS if d.tail == tail and (s := section(page, d))]


def compare_sections(page: Page) -> list[str]:
    return [question(page), verdict_section(page), machine(page), *sections(page)]
