"""Compare's tables, computed: typed rows of numbers over recorded runs, and nothing about how
they are shown. ``results/render.py`` turns them into terminal, markdown, CSV and JSON text; the
TUI's Compare screen lays the same rows out; an HTML report reads them too. No statistic is
computed anywhere else: a renderer formats, it never recomputes.

Runs are read through ``record.Run`` and grouped into *configurations* by
``identity.group_by_configuration`` (the grouping trends and regress use: the seed, the repeat
count and the dataset's directory aside); each is named by identity's short label, the fewest
fields that tell the compared configurations apart ('torch · eager', 'mlp · 2 thr'). Only
finished runs give figures; failed ones are counted and their reasons kept.

The API (all a front end or a renderer needs)::

    records, skipped, published = sweep.collect(ids, History())    # run, group or sweep ids
    comparison = tables.compute(records, metric=None, study_metric="train_wall_s",
                                skipped=skipped, published=published,
                                bound=tables.latency_bound("50"))  # --latency-bound, or None
    comparison.tables()             # the tables with rows, in order: summary first
    comparison.summary              # a Table; and .comparisons, .tradeoff, .scaling, .workers,
                                    # .batches, .study, .published, .fairness, .limits,
                                    # .skipped: Table | None (registry.TABLES names them)
    comparison.groups               # [Group]: .config (identity.Configuration), .label, .spec
                                    # (its deciding fields), .runs ([record.Run]), .values(m)
    comparison.varying              # the fields that differ between the groups
    comparison.metric               # Metric: key, label, unit, lower_is_better

    table.name, table.title, table.note
    table.columns                   # (Column(name, kind, unit, terminal), ...)
    table.rows                      # [Row]: .cells, one plain value per column (float, int,
                                    # str, bool or None: never a number formatted as text),
                                    # .verdicts: ((side, Verdicts), ...) of the runs behind the
                                    # numbers (stable / noisy / unreliable counts, n, note)
    table.records()                 # [{column name: cell}]
    table.shown                     # (Shown(header, sources, form), ...): the columns a
                                    # terminal or a page shows, and how cells combine
                                    # ("mean ± std" is mean and std, kept apart in the rows)

A column's ``kind`` (model.py) says what its cells are: ``text``; ``count`` (int); ``number``
(float, in ``unit``); ``ratio`` (dimensionless, ×); ``fraction`` (0..1, shown as a percentage: efficiency,
noise); ``p`` (a p-value); ``flag`` (bool). Spread has its own numeric columns (IQR, q1, q3,
std, min, max, noise), so a CSV or JSON reader gets every number at full precision.

The summary carries, beside the compared metric, the median of each per-run figure the registry
places in ``metrics.MEDIAN`` (throughput, warm-up): a metric's label, unit and
direction are ``results/metrics.py``'s.

Statistics come from ``results/stats.py`` (median, IQR, Mann-Whitney U, thread scaling) and
verdicts from ``results/stability.py``; the marks a number carries (whose runs are not stable,
how wide the noise is) are made once (``groups.side_verdicts``, ``groups.noise_of``).

The package, one concern a module:

    model.py        the typed table (Column, Shown, Row, Table, Verdicts) and the column kinds
    groups.py       configurations (Group), their short names, families, the marks numbers carry
    registry.py     THE list of tables (name, builder, tab label, page section) and compute()
    summary.py comparisons.py scaling.py tradeoff.py serving.py study.py
    published_figures.py fairness.py limits.py skipped.py     one table family each

A new table is a module with its builder and one ``TableKind`` in ``registry.TABLES``; the
Compare screen's tabs and the HTML page's sections follow that list. A reader (the verdict, the
figures) reads a cell by the column its family declares (``table.number(row, SPEEDUP)``), never
by the header a view shows.
"""

from __future__ import annotations

from tui_bench.engine.results.tables.comparisons import comparison_table
from tui_bench.engine.results.tables.fairness import (
    CARD_SPEC_FIELD,
    CONSEQUENCES,
    FAIRNESS_SETTINGS,
    fairness_card,
    load_text,
    setting_text,
)
from tui_bench.engine.results.tables.groups import (
    TEST_NOTE,
    Group,
    group,
    marks_short,
    marks_text,
    test_short,
)
from tui_bench.engine.results.tables.limits import limits_table
from tui_bench.engine.results.tables.model import (
    COUNT,
    FLAG,
    FRACTION,
    METRICS,
    NUMBER,
    NUMERIC_KINDS,
    P_VALUE,
    PAIR,
    PLUS_MINUS,
    RANGE,
    RATIO,
    SEED_DEPENDENT,
    TEXT,
    VALUE,
    WITH_N,
    Cell,
    Column,
    Metric,
    Row,
    Shown,
    Table,
    Verdicts,
    metric_info,
)
from tui_bench.engine.results.tables.published_figures import published_table
from tui_bench.engine.results.tables.registry import (
    SECTIONS,
    TABLES,
    TABS,
    Comparison,
    Inputs,
    Section,
    TableKind,
    compute,
    in_section,
)
from tui_bench.engine.results.tables.scaling import scaling_table, worker_scaling_table
from tui_bench.engine.results.tables.serving import CURVE, batch_curve_table
from tui_bench.engine.results.tables.skipped import skipped_table
from tui_bench.engine.results.tables.study import study_table
from tui_bench.engine.results.tables.summary import summary_table
from tui_bench.engine.results.tables.tradeoff import (
    TRADE_OFFS,
    LatencyBound,
    TradeOff,
    latency_bound,
    tradeoff_table,
)

__all__ = [
    "CARD_SPEC_FIELD", "CONSEQUENCES", "COUNT", "CURVE", "FAIRNESS_SETTINGS", "FLAG", "FRACTION",
    "METRICS", "NUMBER", "NUMERIC_KINDS", "PAIR", "PLUS_MINUS", "P_VALUE", "RANGE", "RATIO",
    "SECTIONS", "SEED_DEPENDENT", "TABLES", "TABS", "TEST_NOTE", "TEXT", "TRADE_OFFS", "VALUE",
    "WITH_N", "Cell", "Column", "Comparison", "Group", "Inputs", "LatencyBound", "Metric", "Row",
    "Section", "Shown", "Table", "TableKind", "TradeOff", "Verdicts", "batch_curve_table",
    "comparison_table", "compute", "fairness_card", "group", "in_section", "latency_bound",
    "limits_table", "load_text", "marks_short", "marks_text", "metric_info", "published_table",
    "scaling_table", "setting_text", "skipped_table", "study_table", "summary_table",
    "test_short", "tradeoff_table", "worker_scaling_table",
]  # fmt: skip
