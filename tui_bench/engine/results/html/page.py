"""What a report shows, gathered: the ``Page`` (computed elsewhere; the renderers only lay it
out) and ``collect``, which gathers it from the records, compare's computed tables, the trends
over history and the figures."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.results import figures as figures_module
from tui_bench.engine.results import identity as identity_module
from tui_bench.engine.results import regress as regress_module
from tui_bench.engine.results import tables as tables_module
from tui_bench.engine.results import trends as trends_module
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.tables import Comparison, Table


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
