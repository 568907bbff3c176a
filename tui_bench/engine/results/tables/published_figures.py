"""Published figures beside ours: each figure a study published, computed the same way from
these runs (``results/published.py`` declares and checks the figures)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tui_bench.engine.results import identity, stats
from tui_bench.engine.results import published as published_module
from tui_bench.engine.results.tables.groups import Group, marks_text, noise_of, side_verdicts
from tui_bench.engine.results.tables.model import (
    COUNT,
    NUMBER,
    PAIR,
    Cell,
    Column,
    Shown,
    Table,
    Verdicts,
)


# -- published figures beside ours -----------------------------------------------------------------
def published_table(
    configs: list[Group],
    varying: list[str],
    figures: Sequence[published_module.Figure],
    skipped: Sequence[tuple[str, str]] = (),
) -> Table | None:
    """Each figure a study published beside ours, computed the same way from these runs.

    A ratio is the median over the numerator's runs / the median over the denominator's runs
    (each run, in its own worker, is one repetition), one row per pair of configurations that
    differ only in what the figure compares (so a sweep over threads gives a row per thread
    count). An absolute figure gives a row per configuration it is about. A configuration
    without a finished run is "not run here" (with the reason it was skipped, when it was);
    a timed figure whose runs are not all stable says so."""
    if not figures:
        return None
    table = Table(
        "published",
        "published figures beside ours",
        (
            Column("figure"),
            Column("with"),
            Column("published", NUMBER),
            Column("here", NUMBER),
            Column("n", COUNT),
            Column("n denominator", COUNT, terminal=False),
            Column("notes"),
            Column("source", terminal=False),
            Column("says", terminal=False),
            Column("metric", terminal=False),
            Column("kind", terminal=False),
            Column("direction", terminal=False),
            Column("stability", terminal=False),
        ),
        note="published: the study's figure, from the source named (the paper's table or "
        "figure, or where it was quoted); here: these runs computed the same way. A ratio is the "
        "median over runs of one configuration / the median over runs of the other, runs as the "
        "unit of repetition (n: runs on each side), so it compares machines only through the "
        "ratio: absolute times depend on the hardware and are never compared. Lines of code "
        "count the run's model and step alone.",
        # 80 columns: the figures first (a long title is cut, not the numbers), and a figure's
        # source named once below the table, not in every row
        layout=(
            Shown("published", ("published",)),
            Shown("here", ("here",)),
            Shown("n", ("n", "n denominator"), PAIR),
            Shown("figure", ("figure",)),
            Shown("with", ("with",)),
            Shown("notes", ("notes",)),
        ),
    )
    for figure in figures:
        rows = (_ratio_rows if figure.kind == "ratio" else _absolute_rows)(
            figure, configs, varying, skipped
        )
        for cells, verdicts in rows:
            table.add(cells, verdicts)
    sources = list(dict.fromkeys(f.source for f in figures))
    table.note += " Source" + ("s: " if len(sources) > 1 else ": ") + "; ".join(sources) + "."
    return table


_FigureRow = tuple[list[Cell], tuple[tuple[str, Verdicts], ...]]


def _figure_row(
    figure: published_module.Figure,
    context: str,
    here: float | None,
    n: tuple[int, int | None],
    notes: Sequence[str],
    direction: str = "",
    sides: tuple[tuple[str, Verdicts], ...] = (),
) -> _FigureRow:
    # Lines of code and accuracy are not timed: no run's verdict applies to them.
    if not published_module.METRICS[figure.metric].timed:
        sides = ()
    marks = marks_text(sides)
    cells: list[Cell] = [
        figure.title(),
        context,
        figure.value,
        here,
        n[0],
        n[1],
        "; ".join(x for x in [*notes, marks] if x),
        figure.source,
        figure.says,
        figure.metric,
        figure.kind,
        direction,
        marks,
    ]
    return cells, sides


def _figure_values(c: Group, metric: str) -> list[float]:
    values = (published_module.run_value(r, metric) for r in c.finished())
    return [v for v in values if v is not None]


def _differing(configs: list[Group], varying: list[str], named: set[str]) -> list[str]:
    """The fields, other than those a figure names, that tell its configurations apart (a
    workload matrix varies dataset and batch size with the model: not a context of their own)."""
    out = [f for f in varying if f not in named and len({repr(c.spec.get(f)) for c in configs}) > 1]
    if {"device", "host"} & (set(out) | named):
        out = [f for f in out if f != "device_model"]  # it goes along with them
    return out


def _context_text(c: Group, fields_: list[str]) -> str:
    return " · ".join(identity.short_value(f, c.spec.get(f)) for f in fields_) or "—"


def _not_run(
    conditions: dict[str, Any], configs: list[Group], skipped: Sequence[tuple[str, str]]
) -> str:
    """Why a figure's configuration has no number here: skipped (with its reason), its runs
    failed, or it is not in these runs at all."""
    want = published_module.conditions_text(conditions)
    matched = [c for c in configs if published_module.matches(c.spec, conditions)]
    if matched:
        runs = sum(len(c.runs) for c in matched)
        finished = sum(len(c.finished()) for c in matched)
        if finished:
            return f"not run here: {want} has no figure for this metric ({finished} run(s))"
        return f"not run here: {want} has no finished run ({runs} not finished)"
    for key, reason in skipped:
        # a sweep's configuration key ("framework=mxnet api=gluon"): the sweep's own words
        fields_ = dict(part.split("=", 1) for part in key.split() if "=" in part)
        if (
            fields_
            and all(k not in fields_ or fields_[k] == str(v) for k, v in conditions.items())
            and any(k in fields_ for k in conditions)
        ):
            return f"not run here: {want}: {reason}"
    return f"not run here: no run of {want}"


def _absolute_rows(figure, configs, varying, skipped) -> list[_FigureRow]:
    matched = [c for c in configs if published_module.matches(c.spec, figure.where)]
    if not matched:
        return [
            _figure_row(figure, "—", None, (0, None), [_not_run(figure.where, configs, skipped)])
        ]
    context_fields = _differing(matched, varying, set(figure.where))
    rows = []
    for c in matched:
        values = _figure_values(c, figure.metric)
        context = _context_text(c, context_fields)
        if not values:
            note = _not_run(figure.where, [c], skipped)
            rows.append(_figure_row(figure, context, None, (0, None), [note]))
            continue
        side = published_module.conditions_text(figure.where)
        rows.append(
            _figure_row(
                figure,
                context,
                stats.median(values),
                (len(values), None),
                [],
                "",
                side_verdicts([(side, c)]),
            )
        )
    return rows


def _direction(published: float, here: float, noise: float | None) -> str:
    """Whether ours points the way the paper's does (both above 1 or both below)."""
    if noise is not None and abs(here - 1) <= noise:
        return f"within the noise (±{100 * noise:.0f} %)"
    if (published - 1) * (here - 1) > 0:
        return "same direction"
    if (published - 1) * (here - 1) < 0:
        return "reversed"
    return ""


def _ratio_rows(figure, configs, varying, skipped) -> list[_FigureRow]:
    named = set(figure.where) | set(figure.numerator) | set(figure.denominator)
    if "framework" in named:
        named.add("api")  # a framework's API varies with it (a matrix), not beside it
    sides = dict(figure.sides)
    found = {
        name: [c for c in configs if published_module.matches(c.spec, conditions)]
        for name, conditions in sides.items()
    }
    both = found["numerator"] + found["denominator"]
    context_fields = _differing(both, varying, named)

    def key(c: Group) -> tuple[str, ...]:
        return tuple(repr(c.spec.get(f)) for f in context_fields)

    contexts = {key(c): c for c in both}  # each context with one configuration that has it
    if not contexts:
        notes = [_not_run(sides[name], configs, skipped) for name in sides]
        return [_figure_row(figure, "—", None, (0, 0), notes)]
    rows = []
    for context, example in contexts.items():
        text = _context_text(example, context_fields)
        num = [c for c in found["numerator"] if key(c) == context]
        den = [c for c in found["denominator"] if key(c) == context]
        if not num or not den:
            name = "numerator" if not num else "denominator"
            want = {**sides[name], **{f: example.spec.get(f) for f in context_fields}}
            counts = [sum(len(_figure_values(c, figure.metric)) for c in s) for s in (num, den)]
            note = _not_run(want, configs, skipped)
            rows.append(_figure_row(figure, text, None, (counts[0], counts[1]), [note]))
            continue
        for n_config in num:
            for d_config in den:
                rows.append(_ratio_row(figure, text, n_config, d_config, skipped))
    return rows


def _ratio_row(figure, context: str, num: Group, den: Group, skipped) -> _FigureRow:
    num_values = _figure_values(num, figure.metric)
    den_values = _figure_values(den, figure.metric)
    n = (len(num_values), len(den_values))
    if not num_values or not den_values:
        name, missing = ("numerator", num) if not num_values else ("denominator", den)
        conditions = dict(figure.sides)[name]
        return _figure_row(figure, context, None, n, [_not_run(conditions, [missing], skipped)])
    num_median, den_median = stats.median(num_values), stats.median(den_values)
    if den_median == 0:
        return _figure_row(figure, context, None, n, ["the denominator's median is 0"])
    here = num_median / den_median
    timed = published_module.METRICS[figure.metric].timed
    noise = noise_of((num, num_values), (den, den_values)) if timed else None
    direction = _direction(figure.value, here, noise)
    sides = side_verdicts(
        [
            (published_module.conditions_text(figure.numerator), num),
            (published_module.conditions_text(figure.denominator), den),
        ]
    )
    return _figure_row(figure, context, here, n, [direction], direction, sides)
