"""Figures a study published, carried by the preset that replays it, to print beside ours.

A preset lists them as ``[[published]]`` tables::

    [[published]]
    source = "Kabakus (2020), as quoted in tui-bench issue 20"   # the paper, and its table or figure
    metric = "train_time"                    # what was measured: a key of METRICS
    kind = "ratio"                           # "ratio" between two configurations, or "absolute"
    value = 3.8
    where = { model = "mlp" }                # the configurations it is about (spec fields)
    numerator = { framework = "torch", api = "eager" }          # ratio = numerator / denominator
    denominator = { framework = "keras", api = "tensorflow" }
    says = "Keras trains the FNN 3.8x faster than PyTorch"      # optional: the paper's claim

A time depends on the machine it was measured on, so a published time is only ever compared as a
ratio between two configurations measured on one machine: an absolute time is refused. Figures
that do not depend on the machine (accuracy, lines of code) may be absolute.

This module only declares and checks the figures; ``tables.published_table`` computes ours.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.errors import did_you_mean
from tui_bench.engine.results.identity import NOT_DECIDING
from tui_bench.engine.results.record import Run, number

# Far more than any study publishes, small enough to check against every configuration.
MAX_FIGURES = 200
MAX_TEXT = 1000


@dataclass(frozen=True)
class PublishedMetric:
    label: str
    keys: tuple[str, ...]  # per-run metrics of a record, summed (each must be there)
    timed: bool  # a measured time: machine-bound, and judged by the run's stability verdict


METRICS: dict[str, PublishedMetric] = {
    "train_time": PublishedMetric("training time", ("train_wall_s",), True),
    "test_time": PublishedMetric("test time", ("test_s",), True),
    "step_time": PublishedMetric("median step time", ("step_median_s",), True),
    "accuracy": PublishedMetric("test accuracy", ("test_accuracy",), False),
    # The model's lines and the step's (loss, optimizer, training call): the program a study
    # counts. Counted for the run's model alone (engine.results.loc).
    "lines_of_code": PublishedMetric("lines of code", ("loc_model", "loc_step"), False),
}
KINDS = ("ratio", "absolute")
FIELDS = ("source", "metric", "kind", "value", "where", "numerator", "denominator", "says")


class FigureError(ValueError):
    """A published figure that is wrong: one line, ``where: problem``."""


@dataclass(frozen=True)
class Figure:
    source: str
    metric: str
    kind: str
    value: float
    where: dict[str, Any] = field(default_factory=dict)
    numerator: dict[str, Any] = field(default_factory=dict)
    denominator: dict[str, Any] = field(default_factory=dict)
    says: str = ""

    @property
    def sides(self) -> list[tuple[str, dict[str, Any]]]:
        """(name, every condition) of the configurations the figure needs runs of."""
        if self.kind == "ratio":
            return [
                ("numerator", {**self.where, **self.numerator}),
                ("denominator", {**self.where, **self.denominator}),
            ]
        return [("where", dict(self.where))]

    def title(self) -> str:
        """e.g. ``training time, model=mlp: torch/eager ÷ keras/tensorflow``."""
        label = METRICS[self.metric].label
        where = conditions_text(self.where)
        if self.kind == "absolute":
            return f"{label}: {where}" if where else label
        ratio = f"{conditions_text(self.numerator)} ÷ {conditions_text(self.denominator)}"
        return f"{label}, {where}: {ratio}" if where else f"{label}: {ratio}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "metric": self.metric,
            "kind": self.kind,
            "value": self.value,
            "where": dict(self.where),
        }
        if self.kind == "ratio":
            out.update(numerator=dict(self.numerator), denominator=dict(self.denominator))
        if self.says:
            out["says"] = self.says
        return out


def conditions_text(conditions: dict[str, Any]) -> str:
    """``torch/eager model=mlp``: framework and API as a stack, the other fields as k=v."""
    rest = dict(conditions)
    parts = []
    if "framework" in rest and "api" in rest:
        parts.append(f"{rest.pop('framework')}/{rest.pop('api')}")
    parts += [f"{k}={v}" for k, v in rest.items()]
    return " ".join(parts)


def _suggest(word: str, choices: Collection[str]) -> str:
    return did_you_mean(word, choices)


def _text(data: dict[str, Any], key: str, at: str, required: bool) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise FigureError(f"{at}.{key}: must be a string, got {value!r:.80}")
    if required and not value.strip():
        raise FigureError(f"{at}.{key}: must name where the figure comes from (paper, table)")
    if len(value) > MAX_TEXT:
        raise FigureError(f"{at}.{key}: longer than {MAX_TEXT} characters")
    return value


def _conditions(
    data: dict[str, Any], key: str, at: str, spec_keys: Collection[str], required: bool
) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        if required:
            raise FigureError(
                f"{at}.{key}: a ratio needs it, a table of spec fields such as "
                '{ framework = "torch", api = "eager" }'
            )
        return {}
    if not isinstance(value, dict):
        raise FigureError(f"{at}.{key}: must be a table of spec fields, got {value!r:.80}")
    if required and not value:
        raise FigureError(f"{at}.{key}: must name at least one spec field")
    for name, item in value.items():
        if name not in spec_keys or name in NOT_DECIDING:  # never tells configurations apart
            allowed = [k for k in spec_keys if k not in NOT_DECIDING]
            raise FigureError(f"{at}.{key}: unknown spec field {name!r}{_suggest(name, allowed)}")
        if isinstance(item, (dict, list)) or item is None:
            raise FigureError(f"{at}.{key}.{name}: must be a single value, got {item!r:.80}")
    return dict(value)


def parse_figure(data: Any, at: str, spec_keys: Collection[str]) -> Figure:
    """One figure from its table, checked: ``FigureError`` (one line) when anything is off."""
    if not isinstance(data, dict):
        raise FigureError(
            f"{at}: must be a table (source, metric, kind, value...), got {data!r:.80}"
        )
    for key in data:
        if key not in FIELDS:
            raise FigureError(f"{at}: unknown key {key!r}{_suggest(key, FIELDS)}")
    for key in ("source", "metric", "kind", "value"):
        if key not in data:
            raise FigureError(f"{at}: '{key}' is missing")
    source = _text(data, "source", at, required=True)
    says = _text(data, "says", at, required=False)
    metric = data["metric"]
    if not isinstance(metric, str) or metric not in METRICS:
        raise FigureError(
            f"{at}.metric: unknown metric {metric!r:.80}"
            + (_suggest(metric, METRICS) if isinstance(metric, str) else "")
            + f" (metrics: {', '.join(METRICS)})"
        )
    kind = data["kind"]
    if kind not in KINDS:
        raise FigureError(f"{at}.kind: must be 'ratio' or 'absolute', got {kind!r:.80}")
    value = data["value"]
    if number(value) is None:
        raise FigureError(f"{at}.value: must be a number, got {value!r:.80}")
    if value <= 0:
        raise FigureError(f"{at}.value: must be above 0, got {value!r}")
    if metric == "accuracy" and kind == "absolute" and value > 1:
        raise FigureError(f"{at}.value: give an accuracy as a fraction (0.98), not {value!r}")
    if kind == "absolute" and METRICS[metric].timed:
        raise FigureError(
            f"{at}: an absolute {metric} depends on the machine the paper used; give it as a "
            'ratio between two configurations (kind = "ratio", numerator, denominator)'
        )
    where = _conditions(data, "where", at, spec_keys, required=False)
    if kind == "absolute":
        for key in ("numerator", "denominator"):
            if key in data:
                raise FigureError(f"{at}.{key}: only a ratio has one; this figure is absolute")
        if not where:
            raise FigureError(f"{at}.where: an absolute figure must say which configurations")
        return Figure(source, metric, kind, float(value), where, says=says)
    numerator = _conditions(data, "numerator", at, spec_keys, required=True)
    denominator = _conditions(data, "denominator", at, spec_keys, required=True)
    for side, conditions in (("numerator", numerator), ("denominator", denominator)):
        shared = set(conditions) & set(where)
        if shared:
            raise FigureError(
                f"{at}.{side}: '{sorted(shared)[0]}' is also in where; set it in one place"
            )
    if numerator == denominator:
        raise FigureError(f"{at}: numerator and denominator are the same configurations")
    return Figure(source, metric, kind, float(value), where, numerator, denominator, says)


def parse_figures(raw: Any, spec_keys: Collection[str], at: str = "published") -> list[Figure]:
    """The ``[[published]]`` list of a preset (or a sweep manifest), checked."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise FigureError(f"{at}: must be a list of tables ([[published]] in TOML)")
    if len(raw) > MAX_FIGURES:
        raise FigureError(f"{at}: {len(raw):,} figures, more than the limit of {MAX_FIGURES}")
    return [parse_figure(item, f"{at}[{i}]", spec_keys) for i, item in enumerate(raw)]


def matches(values: dict[str, Any], conditions: dict[str, Any]) -> bool:
    """Whether a configuration's fields (``values``) meet every condition."""
    return all(_same(values.get(key), want) for key, want in conditions.items())


def _same(have: Any, want: Any) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return have is want
    return have == want


def unmatched(
    figures: list[Figure], configurations: Callable[[], Any]
) -> tuple[int, str, dict[str, Any]] | None:
    """The first (figure index, side, conditions) no configuration meets, or None: a figure
    about configurations the preset never runs is a mistake in the preset.
    ``configurations()`` yields each configuration's fields, defaults included."""
    open_sides = {(i, side): cond for i, f in enumerate(figures) for side, cond in f.sides}
    if not open_sides:
        return None
    for values in configurations():
        for key in [k for k, cond in open_sides.items() if matches(values, cond)]:
            del open_sides[key]
        if not open_sides:
            return None
    (index, side), conditions = min(open_sides.items())
    return index, side, conditions


def run_value(run: Run, metric: str) -> float | None:
    """A finished run's figure for a published metric, or None when it lacks one."""
    total = 0.0
    for key in METRICS[metric].keys:
        value = run.metric(key)
        if value is None:
            return None
        total += value
    return total
