"""Configurations and the marks their numbers carry: runs grouped by ``identity`` (a ``Group``
each), their short names among the compared ones, the families that differ in one field, and
the marks made once for every table family (whose runs are not stable, how wide the noise is,
the test in a few characters)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.results import identity, metrics, stability, stats
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.tables.model import Verdicts


# -- configurations -------------------------------------------------------------------------------
@dataclass
class Group:
    """The runs of one configuration (``identity.Configuration``: its key, and its short label
    among the configurations compared)."""

    config: identity.Configuration
    runs: list[Run] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.config.label or "all runs"

    @property
    def spec(self) -> dict[str, Any]:
        """The fields that decide its numbers: the spec's, the host and the device model."""
        return self.config.facts

    def finished(self) -> list[Run]:
        return [r for r in self.runs if r.finished]

    def values(self, metric: str) -> list[float]:
        # each run's own figure: an inference run's p50 where a training run's step is asked
        out = (r.figure(metric) for r in self.finished())
        return [v for v in out if v is not None]

    @property
    def oversubscribed(self) -> bool:
        return any(r.oversubscribed for r in self.runs)

    def verdicts(self) -> Verdicts:
        return Verdicts.of(self.runs)


def group(records: Sequence[Run]) -> tuple[list[Group], list[str]]:
    """Configurations, a Group of runs each, in first-seen order (``identity``'s grouping, the
    one compare, trends and regress share), and the fields that differ between them. Runs from
    several hosts: one configuration on two boxes is two measurements, ``host`` a varying field
    like any other."""
    grouped = identity.group_by_configuration(records)
    groups = [Group(config, runs) for config, runs in grouped.items()]
    return groups, identity.varying_fields(list(grouped))


# Fields that vary along with another and are compared as part of it: an API with its framework
# (a matrix), a device's model with the device or the host it is on.
ALONG = {"framework": ("api",), "device": ("device_model",), "host": ("device_model",)}


def short_names(groups: list[Group], keep: Callable[[str], bool]) -> dict[int, str]:
    """Each configuration's short name (by ``id``) as identity makes it, from the deciding
    fields ``keep`` accepts only: "" where those do not tell the configurations apart."""
    reduced = [
        identity.Configuration(tuple(p for p in c.config.key if keep(p[0])), c.label)
        for c in groups
    ]
    fields_ = identity.label_fields(reduced)
    return {
        id(c): " · ".join(identity.short_value(f, r.get(f)) for f in fields_)
        for c, r in zip(groups, reduced, strict=True)
    }


def context_names(groups: list[Group], field_name: str, *also: str) -> dict[int, str]:
    """What each configuration has beside the compared field (and ``also``, shown in columns of
    their own), named among the compared configurations ("—" for nothing)."""
    drop = {field_name, *ALONG.get(field_name, ()), *also}
    return {k: v or "—" for k, v in short_names(groups, lambda f: f not in drop).items()}


# -- marks: what a number's sides are made of -----------------------------------------------------
def side_verdicts(sides: Sequence[tuple[str, Group]]) -> tuple[tuple[str, Verdicts], ...]:
    return tuple((name, c.verdicts()) for name, c in sides)


def marks_text(verdicts: Sequence[tuple[str, Verdicts]]) -> str:
    """'this: not stable: 1 noisy of 3; baseline: …' for the sides whose runs are not stable."""
    return "; ".join(f"{side}: {v.note}" for side, v in verdicts if v.note)


def marks_short(verdicts: Sequence[tuple[str, Verdicts]]) -> str:
    """The marks in a table cell's few words: 'unstable: this 1 noisy of 3'."""
    parts = [
        f"{side} {v.note.removeprefix('not stable: ')}".strip() for side, v in verdicts if v.note
    ]
    return "unstable: " + ", ".join(parts) if parts else ""


def test_short(significance: stats.Significance) -> str:
    """A Mann-Whitney verdict in a few characters (the note says how to read it): 'sig
    p=0.0079', 'ns p=0.31', or 'n<5' where a side has too few repeats for the test."""
    if significance.p is None:
        if min(significance.n_a, significance.n_b) < stats.MIN_REPEATS_FOR_TEST:
            return f"n<{stats.MIN_REPEATS_FOR_TEST}"
        return "no test"
    return f"{'sig' if significance.significant else 'ns'} p={significance.p:.2g}"


TEST_NOTE = (
    "two-sided Mann-Whitney U, 'sig' below p=0.05, 'ns' above; "
    f"n<{stats.MIN_REPEATS_FOR_TEST}: a side has fewer than {stats.MIN_REPEATS_FOR_TEST} repeats, "
    "so no test; 'unstable' names a side whose runs are not all stable. CSV and JSON carry "
    "the verdict in words (significance)."
)


def joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def noise_of(*sides: tuple[Group, list[float]]) -> float | None:
    """How far apart the sides' numbers fall by chance: the widest of their relative noises."""
    spreads = [stability.relative_noise(c.finished(), values) for c, values in sides]
    return max((s for s in spreads if s is not None), default=None)


def count_of(value: Any) -> int | None:
    """A spec's count (threads, workers, batch size), or None where a damaged record has none."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def median_of(values: list[float]) -> float | None:
    return stats.median(values) if values else None


def partitions(configs: list[Group], varying: list[str], field_name: str) -> list[list[Group]]:
    """Configurations that differ only in ``field_name``, in first-seen order."""
    others = [f for f in varying if f != field_name]
    parts: dict[str, list[Group]] = {}
    for c in configs:
        parts.setdefault(repr([c.spec.get(f) for f in others]), []).append(c)
    return [p for p in parts.values() if len(p) > 1]


def inference_groups(configs: list[Group]) -> list[Group]:
    return [c for c in configs if c.spec.get("mode") == metrics.INFERENCE]
