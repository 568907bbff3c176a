"""Comparison figures for the Compare view. No Textual here.

Runs with identical specs are grouped (repeats) and summarised by the median of their recorded
figures. ``summarise_group`` and ``ratio`` are the seams where ``engine/stats.py`` (medians, IQR,
Mann-Whitney) plugs in once merged."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

METRICS = [  # (metric key, label, scale, digits, lower is better)
    ("train_wall_s", "train s (wall, all steps)", 1, 2, True),
    ("warmup_s", "warm-up s (apart)", 1, 2, True),
    ("step_median_s", "step ms (median, steady)", 1000, 1, True),
    ("samples_per_s", "samples/s (steady)", 1, 0, False),
    ("val_accuracy", "val accuracy", 1, 4, False),
    ("test_accuracy", "test accuracy", 1, 4, False),
    ("threads_effective", "threads (effective)", 1, 0, None),
    ("res_peak_rss_mib", "peak RSS MiB", 1, 0, True),
    ("res_mean_cpu_pct", "CPU % (mean)", 1, 0, None),
]


@dataclass
class Group:
    label: str
    spec: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, float | None] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.records)


def spec_key(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True, default=str)


def summarise_group(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Median over the group's finished runs of each recorded figure."""
    out: dict[str, float | None] = {}
    finished = [r for r in records if r.get("status") == "finished"] or records
    for key, *_ in METRICS:
        values = [(r.get("metrics") or {}).get(key) for r in finished]
        values = [v for v in values if isinstance(v, (int, float))]
        out[key] = statistics.median(values) if values else None
    return out


def group_runs(records: list[dict[str, Any]]) -> list[Group]:
    """Groups of identical specs, in the order their first run was picked."""
    groups: dict[str, Group] = {}
    for record in records:
        spec = record.get("spec") or {}
        key = spec_key(spec)
        if key not in groups:
            groups[key] = Group(label=record.get("label") or key, spec=spec)
        groups[key].records.append(record)
    for group in groups.values():
        group.figures = summarise_group(group.records)
    return list(groups.values())


def ratio(baseline: float | None, other: float | None) -> float | None:
    if baseline is None or other is None or baseline == 0:
        return None
    return other / baseline


def speedup(baseline_step_s: float | None, other_step_s: float | None) -> float | None:
    """How many times faster per step than the baseline (>1: faster)."""
    r = ratio(other_step_s, baseline_step_s)
    return r


def differing_fields(groups: list[Group]) -> set[str]:
    keys = set().union(*(g.spec.keys() for g in groups)) if groups else set()
    return {k for k in keys if len({json.dumps(g.spec.get(k), default=str) for g in groups}) > 1}


def thread_scaling(groups: list[Group]) -> tuple[list[int], list[float]] | None:
    """(threads, samples/s) when the groups differ only in threads; else None."""
    if len(groups) < 2 or differing_fields(groups) != {"threads"}:
        return None
    points = sorted(
        (int(g.spec["threads"]), g.figures["samples_per_s"])
        for g in groups
        if g.figures.get("samples_per_s") is not None
    )
    if len(points) < 2:
        return None
    return [p[0] for p in points], [float(p[1]) for p in points]


def describe_difference(groups: list[Group]) -> str:
    fields = sorted(differing_fields(groups))
    if not fields:
        return "same spec (repeats)"
    if fields == ["device"]:
        return "device differs: ratios are GPU vs CPU speedups"
    if fields == ["api"]:
        return "API differs: ratios are API vs API"
    return "differs in: " + ", ".join(fields)
