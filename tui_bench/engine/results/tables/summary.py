"""The summary: the compared metric per configuration (median, IQR, spread, n, notes), and the
median of each figure the registry places in ``metrics.MEDIAN`` beside it."""

from __future__ import annotations

from dataclasses import replace

from tui_bench.engine.results import metrics, stability, stats
from tui_bench.engine.results.tables.groups import Group, median_of
from tui_bench.engine.results.tables.model import (
    COUNT,
    FLAG,
    NUMBER,
    PLUS_MINUS,
    RANGE,
    Cell,
    Column,
    Shown,
    Table,
    metric_info,
)

# -- summary ---------------------------------------------------------------------------------------
# The columns the verdict and the figures read (by column, never by header text); the median's
# and the IQR's unit is the compared metric's.
CONFIGURATION = Column("configuration")
N = Column("n", COUNT)
MEDIAN = Column("median", NUMBER)
IQR = Column("IQR", NUMBER)
Q1 = Column("q1", NUMBER, terminal=False)
Q3 = Column("q3", NUMBER, terminal=False)
MIN = Column("min", NUMBER, terminal=False)
MAX = Column("max", NUMBER, terminal=False)


def _time_to_accuracy(c: Group) -> str | None:
    target = c.spec.get("target_accuracy")
    if target is None:
        return None
    finished = c.finished()
    reached = [
        (epoch, seconds)
        for epoch, seconds in (
            (r.metric("target_reached_epoch"), r.metric("target_reached_s")) for r in finished
        )
        if epoch is not None and seconds is not None
    ]
    if not reached:
        return f"not reached ({len(finished)} run(s))"
    seconds = stats.median([s for _e, s in reached])
    epochs = stats.median([e for e, _s in reached])
    return f"epoch {epochs:g}, {seconds:.3g} s ({len(reached)}/{len(finished)} reached {target:g})"


def summary_table(configs: list[Group], metric: str) -> Table:
    m = metric_info(metric)
    # What else it carries per configuration, beside the compared metric: the median over
    # finished runs of each figure the registry places in MEDIAN (``metrics``), in a column of
    # its own (CSV, JSON and a page; not a terminal's width).
    extras = [
        (e.key, f"median {e.short}", NUMBER, e.unit)
        for e in metrics.placed(metrics.MEDIAN)
        if e.key != metric
    ]
    number = lambda name, terminal=False: Column(name, NUMBER, m.unit, terminal)  # noqa: E731
    table = Table(
        "summary",
        f"{m.what}: per configuration",
        (
            CONFIGURATION,
            N,
            replace(MEDIAN, unit=m.unit),
            replace(IQR, unit=m.unit),
            Column("notes"),
            replace(Q1, unit=m.unit),
            replace(Q3, unit=m.unit),
            number("mean"),
            number("std"),
            replace(MIN, unit=m.unit),
            replace(MAX, unit=m.unit),
            Column("failed", COUNT, terminal=False),
            Column("oversubscribed", FLAG, terminal=False),
            Column("time to accuracy", terminal=False),
            Column("warning", terminal=False),
            Column("stability", terminal=False),
            *(Column(name, kind, unit, terminal=False) for _key, name, kind, unit in extras),
        ),
        note="median and IQR over repeats (linear-interpolation quartiles); std is the sample std; "
        "each repeat ran in its own worker process.",
        layout=(
            Shown("configuration", ("configuration",)),
            Shown("n", ("n",)),
            Shown("median", ("median",)),
            Shown("IQR", ("IQR",)),
            Shown("mean ± std", ("mean", "std"), PLUS_MINUS),
            Shown("min–max", ("min", "max"), RANGE),
            Shown("notes", ("notes",)),
        ),
    )
    for c in configs:
        values = c.values(metric)
        failed = [r for r in c.runs if not r.finished]
        failed_text = (
            f"{len(failed)} not finished (last: {failed[-1].status}: "
            f"{failed[-1].text_field('reason') or ''})"
            if failed
            else ""
        )
        tta = _time_to_accuracy(c) or ""
        numbers: list[Cell]
        if values:
            s = stats.summarize(values)
            head: list[Cell] = [c.label, s.n, s.median, s.iqr]
            numbers = [s.q1, s.q3, s.mean, s.std, s.min, s.max]
            warning = s.warning or ""
        else:
            head = [c.label, 0, None, None]
            numbers = [None] * 6
            warning = "no finished run"
        verdicts = c.verdicts()
        notes = [
            verdicts.note,
            "oversubscribed" if c.oversubscribed else "",
            f"time to accuracy: {tta}" if tta else "",
            warning,
            failed_text,
        ]
        judged = stability.stability_note(c.runs)
        table.add(
            [
                *head,
                "; ".join(n for n in notes if n),
                *numbers,
                len(failed),
                c.oversubscribed,
                tta,
                warning,
                judged or "stable",
                *(median_of(c.values(key)) for key, *_ in extras),
            ],
            [(c.label, verdicts)],
        )
    return table
