"""Trends: each configuration's runs over time, and the points where its series stepped.

One value per run (its own median step time, or another metric): the run is the unit of
repetition, steps are never pooled across runs.

Change points: an exact penalised least-squares segmentation (``changepoints.pelt``: optimal
partitioning with PELT pruning, the same problem ``ruptures.Pelt(model="l2")`` solves, and the
family asv's step detection belongs to), with the cost, noise estimate, penalty and merge rule
``changepoints`` shares with the in-run step detection of ``stability``. Here:

- The fit is on log values, so a step is a ratio: +18 % weighs the same at 20 ms and at 200 ms.
- Penalty per change point: ``4 · ln(n) · σ²``, twice BIC's ``2 · ln(n) · σ²`` for a mean shift
  (a new level and its position): run medians on a shared machine have heavier tails than a
  Gaussian (a loaded hour gives a cluster of slow runs).
- One odd run is taken out first by a running median of 3; the segmentation runs on that.
- σ is estimated robustly from successive differences (MAD / 0.6745 / √2), so a step does not
  inflate its own noise estimate; it is floored at 1.5 %: with few runs the MAD can come out far
  below the real spread (5 differences), and run medians here repeat within a few per cent.
- A step smaller than 5 % between neighbouring levels is merged away: under the run-to-run spread
  this project measures (FIELD-NOTES: runs repeat within ±10 %), and not what a trend is for;
  ``regress --threshold`` judges small changes with a test.
- Minimum segment: 2 runs. One odd run is an outlier, not a new level; a change needs a second
  run to confirm it, so a step in the newest run shows up after the next run. ``regress`` is the
  tool for judging the newest runs at once.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.results import changepoints, metrics, stats
from tui_bench.engine.results.identity import (
    Configuration,
    changes,
    group_by_configuration,
    short_value,
    varying_fields,
    versions,
)
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.stability import UNRELIABLE

MIN_SEGMENT = 2
SIGMA_FLOOR = 0.015  # in log units: about 1.5 %
MIN_STEP = 0.05  # smaller steps between levels are merged away
# PELT is quadratic when a series has few change points: 0.2 s at 1,000 runs, 23 s at 10,000
# (benchmarks/trend_detection.py). Change points are sought among a configuration's newest runs.
MAX_SEGMENTED = 1000
DEFAULT_METRIC = "step_median_s"
# The deciding fields a configuration's name already states (the run label, ``RunSpec.label``,
# and its host, ``identity.name_of``): every other field that varies between the configurations
# shown is added to each one's label, so two batch sizes never read alike.
IN_THE_NAME = frozenset(
    {"framework", "api", "mode", "model", "size", "layers", "d_model", "heads", "seq_len",
     "vocab_size", "dataset", "device", "threads", "workers", "host"}
)  # fmt: skip


# -- segmentation -------------------------------------------------------------------------------
def robust_sigma(values: Sequence[float]) -> float:
    """Noise of a series of log values, floored at ``SIGMA_FLOOR`` (``changepoints``)."""
    return changepoints.noise_sigma(values, floor=SIGMA_FLOOR)


def change_points(
    values: Sequence[float],
    penalty: float | None = None,
    min_segment: int = MIN_SEGMENT,
) -> list[int]:
    """Indexes where a new level starts (0 < i < n), by penalised least squares on ``values``
    (``changepoints.pelt``). ``penalty`` defaults to ``changepoints.penalty`` with σ from
    ``robust_sigma``."""
    if penalty is None:
        penalty = changepoints.penalty(len(values), robust_sigma(values))
    return changepoints.pelt(values, penalty, min_segment)


def running_median3(values: Sequence[float]) -> list[float]:
    """Each value replaced by the median of it and its neighbours: one odd run disappears, a
    level of two or more runs keeps its edge where it was. The ends follow Tukey's end-point rule
    (the median of the end, its smoothed neighbour and the line through the next two), so an odd
    newest run is smoothed too."""
    if len(values) < 3:
        return list(values)
    middle = [sorted(values[i - 1 : i + 2])[1] for i in range(1, len(values) - 1)]

    def end(value: float, near: float, far: float) -> float:
        return sorted((value, near, 3 * near - 2 * far))[1]

    first = end(values[0], middle[0], middle[1] if len(middle) > 1 else middle[0])
    last = end(values[-1], middle[-1], middle[-2] if len(middle) > 1 else middle[-1])
    return [first, *middle, last]


def steps(log_values: Sequence[float], min_step: float = MIN_STEP) -> list[int]:
    """Change points of a series of log values: segmented after a running median of 3 (least
    squares alone would give one wild run a level of its own), with the penalty from the raw
    series' noise, and steps under ``min_step`` merged away (the smallest first)."""
    penalty = changepoints.penalty(len(log_values), robust_sigma(log_values))
    points = change_points(running_median3(log_values), penalty=penalty)
    return changepoints.merge_small_steps(log_values, points, min_step, changepoints.log_step)


# -- trends -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    run: Run
    value: float

    @property
    def run_id(self) -> str:
        return self.run.id

    @property
    def when(self) -> dt.datetime | None:
        return self.run.started

    @property
    def iqr(self) -> float | None:
        return self.run.metric("step_iqr_s")

    @property
    def verdict(self) -> str | None:
        return self.run.verdict


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point of the new level
    before: float  # median of the level before
    after: float  # median of the new level
    when: dt.datetime | None
    what_changed: list[str]

    @property
    def change(self) -> float:
        return self.after / self.before - 1 if self.before else math.inf

    def describe(self, metric: str = DEFAULT_METRIC) -> str:
        """'step +18 % on 2026-11-20: torch 2.12.1 → 2.13.0'."""
        name = "step" if metric == DEFAULT_METRIC else metric
        day = self.when.date().isoformat() if self.when else "an unknown date"
        why = ", ".join(self.what_changed) if self.what_changed else "no recorded version changed"
        return f"{name} {self.change * 100:+.0f} % on {day}: {why}"


@dataclass
class Trend:
    configuration: Configuration
    metric: str
    points: list[Point]
    change_points: list[ChangePoint] = field(default_factory=list)
    failed: int = 0
    # What tells it apart from the other trends shown: its name and every field that varies
    # between them and the name does not state ('… cpu×2 @vm · batch 32'); set by ``trends``.
    label: str = ""

    @property
    def title(self) -> str:
        return self.label or self.configuration.name

    @property
    def last(self) -> Point | None:
        return self.points[-1] if self.points else None

    @property
    def last_change(self) -> ChangePoint | None:
        return self.change_points[-1] if self.change_points else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "configuration": self.configuration.id,
            "label": self.title,
            "metric": self.metric,
            "failed_runs": self.failed,
            "runs": [
                {
                    "id": p.run_id,
                    "started_at": p.run.started_text or None,
                    "value": p.value,
                    "step_iqr_s": p.iqr,
                    "verdict": p.verdict,
                    "versions": versions(p.run),
                }
                for p in self.points
            ],
            "change_points": [
                {
                    "index": c.index,
                    "run": self.points[c.index].run_id,
                    "started_at": self.points[c.index].run.started_text or None,
                    "before": c.before,
                    "after": c.after,
                    "change": c.change,
                    "what_changed": c.what_changed,
                    "text": c.describe(self.metric),
                }
                for c in self.change_points
            ],
        }


def _value(run: Run, metric: str) -> float | None:
    value = run.metric(metric)
    # log needs a positive value; zero or negative figures (a loss can be 0) are left out
    return value if value is not None and value > 0 else None


def what_changed(before: Run, after: Run) -> list[str]:
    """Versions that differ between two runs, the machine's load when it did, and the runs'
    stability verdicts when they differ (with the rules the later run broke: a step that came
    with 'cpu_stolen' is other work on the machine, not the framework)."""
    out = changes(versions(before), versions(after))
    if before.busy != after.busy:
        load = after.load.get("loadavg_1m")
        out.append(f"machine {'busy' if after.busy else 'quiet'} (load {load})")
    verdict_before, verdict_after = before.verdict, after.verdict
    if verdict_before and verdict_after and verdict_before != verdict_after:
        broken = [r.rule for r in after.reasons if r.level == UNRELIABLE]
        out.append(
            f"verdict {verdict_before} → {verdict_after}"
            + (f" ({', '.join(dict.fromkeys(broken))})" if broken else "")
        )
    return out


def trend(configuration: Configuration, runs: Sequence[Run], metric: str) -> Trend:
    """One configuration's series (runs in time order) and its change points. An inference
    configuration's series is of its own figure for ``metric`` (``metrics.in_mode``: its
    median request where a training one's is its steady step)."""
    metric = metrics.in_mode(metric, configuration.get("mode"))
    points = []
    failed = 0
    for run in runs:
        if run.failed:
            failed += 1
        if not run.finished:
            continue
        value = _value(run, metric)
        if value is not None:
            points.append(Point(run, value))
    out = Trend(configuration, metric, points, failed=failed)
    skip = max(0, len(points) - MAX_SEGMENTED)
    logs = [math.log(p.value) for p in points[skip:]]
    bounds = [0, *(skip + i for i in steps(logs)), len(points)]
    if skip:
        bounds[0] = skip
    for k in range(1, len(bounds) - 1):
        before = [p.value for p in points[bounds[k - 1] : bounds[k]]]
        after = [p.value for p in points[bounds[k] : bounds[k + 1]]]
        i = bounds[k]
        out.change_points.append(
            ChangePoint(
                index=i,
                before=stats.median(before),
                after=stats.median(after),
                when=points[i].when,
                what_changed=what_changed(points[i - 1].run, points[i].run),
            )
        )
    return out


def matches(configuration: Configuration, words: Sequence[str]) -> bool:
    """Every word of the filter appears in the configuration's name or starts its id."""
    text = configuration.name.lower()
    return all(w.lower() in text or configuration.id.startswith(w.lower()) for w in words)


def trends(
    records: Iterable[Run],
    words: Sequence[str] = (),
    metric: str = DEFAULT_METRIC,
) -> list[Trend]:
    """A trend per configuration matching the filter, those with the newest run first."""
    ordered = sorted(records, key=lambda r: (r.started_text, r.id))
    out = [
        trend(config, runs, metric)
        for config, runs in group_by_configuration(ordered).items()
        if matches(config, words)
    ]
    out = [t for t in out if t.points or t.failed]
    varying = [f for f in varying_fields([t.configuration for t in out]) if f not in IN_THE_NAME]
    for t in out:
        extra = [short_value(f, t.configuration.get(f)) for f in varying]
        t.label = " · ".join([t.configuration.name, *extra])
    return sorted(out, key=lambda t: t.last.run.started_text if t.last else "", reverse=True)
