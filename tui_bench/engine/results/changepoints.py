"""Change points: where the mean level of a series moves. One cost, one noise estimate, one
penalty and one merge rule, and two solvers for the two kinds of series this project has.

- **Cost**: squared error of a segment about its mean (ruptures' ``model="l2"``), from prefix sums
  so any segment's cost is O(1).
- **Noise** (``noise_sigma``): from successive differences, MAD / 0.6745 / √2, so a level shift
  does not inflate its own noise estimate (a difference straddles a step once; the MAD ignores
  it). A floor keeps a perfectly flat series from making every split free.
- **Penalty** per change point (``penalty``): ``4 · ln(n) · σ²``, twice BIC's ``2 · ln(n) · σ²``
  for a mean shift (a new level and its position): timings on a shared machine have heavier tails
  than a Gaussian.
- **Merge** (``merge_small_steps``): neighbouring levels (segment medians) closer than a
  relative step are one level: the smallest such step is merged away first, and the levels
  recomputed, until every step left is at least that large.

Solvers (both for the same penalised least-squares problem):

- ``binary_segmentation``: greedy, splits a segment at its best point while the gain beats the
  penalty (ruptures' ``Binseg``). O(n log n)-ish; used for a run's own step times
  (``stability``), which are long (thousands of steps).
- ``pelt``: exact optimal partitioning with PELT pruning (Killick et al. 2012; ruptures'
  ``Pelt``). Used for per-run series (``trends``), which are short (one point per run) and where
  an exact answer matters more.

Pure Python like ``stats``: the app stays free of numpy/scipy. ``tests/test_changepoints.py``
checks both solvers against ruptures on generated series with known breakpoints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tui_bench.engine.results import stats

PENALTY_PER_LN_N = 4.0
_MAD_TO_SIGMA = 0.6745 * math.sqrt(2)  # MAD of N(0, 2σ²) differences → σ


class L2Cost:
    """Squared error of ``values[a:b]`` about its mean, in O(1) per segment."""

    def __init__(self, values: Sequence[float]) -> None:
        self.n = len(values)
        self._sum = [0.0]
        self._sq = [0.0]
        for v in values:
            self._sum.append(self._sum[-1] + v)
            self._sq.append(self._sq[-1] + v * v)

    def __call__(self, a: int, b: int) -> float:
        total = self._sum[b] - self._sum[a]
        return self._sq[b] - self._sq[a] - total * total / (b - a)


def noise_sigma(values: Sequence[float], floor: float = 0.0) -> float:
    """Noise of a series from its successive differences (MAD / 0.6745 / √2), at least
    ``floor``; ``floor`` itself for fewer than 3 values."""
    if len(values) < 3:
        return floor
    diffs = [b - a for a, b in zip(values, values[1:], strict=False)]
    mid = stats.median(diffs)
    mad = stats.median([abs(d - mid) for d in diffs])
    return max(mad / _MAD_TO_SIGMA, floor)


def penalty(n: int, sigma: float) -> float:
    """The cost of one more change point in a series of ``n`` values with noise ``sigma``."""
    return PENALTY_PER_LN_N * math.log(max(n, 2)) * sigma**2


def binary_segmentation(values: Sequence[float], pen: float, min_size: int) -> list[int]:
    """Indexes where a new level starts (0 < i < n): each segment is split at the point that
    lowers the cost most, while that gain is above ``pen``; segments are at least ``min_size``."""
    n = len(values)
    cost = L2Cost(values)
    found: list[int] = []
    pending = [(0, n)]
    while pending:
        a, b = pending.pop()
        if b - a < 2 * min_size:
            continue
        whole = cost(a, b)
        best, best_gain = None, pen
        for k in range(a + min_size, b - min_size + 1):
            gain = whole - cost(a, k) - cost(k, b)
            if gain > best_gain:
                best, best_gain = k, gain
        if best is not None:
            found.append(best)
            pending += [(a, best), (best, b)]
    return sorted(found)


def pelt(values: Sequence[float], pen: float, min_size: int) -> list[int]:
    """Indexes where a new level starts (0 < i < n): the exact minimum of the total segment cost
    plus ``pen`` per change point, segments at least ``min_size`` long."""
    n = len(values)
    if n < 2 * min_size:
        return []
    cost = L2Cost(values)
    best = [0.0] * (n + 1)  # best[t]: optimal penalised cost of values[:t]
    best[0] = -pen
    last_start = [0] * (n + 1)
    candidates = [0]
    for t in range(1, n + 1):
        scored = [(best[s] + cost(s, t) + pen, s) for s in candidates if t - s >= min_size]
        if not scored:
            best[t] = math.inf
        else:
            best[t], last_start[t] = min(scored)
        # PELT: a start that cannot beat the best now never will (the cost is additive).
        candidates = [s for s in candidates if t - s < min_size or best[s] + cost(s, t) <= best[t]]
        candidates.append(t)
    points = []
    t = n
    while t > 0:
        t = last_start[t]
        if t > 0:
            points.append(t)
    return sorted(points)


def relative_step(before: float, after: float) -> float:
    """How far a level moved, as a share of the level before (linear values)."""
    return abs(after - before) / abs(before) if before else math.inf


def log_step(before: float, after: float) -> float:
    """The same for levels of log values: |after / before - 1|."""
    return abs(math.expm1(after - before))


def merge_small_steps(
    values: Sequence[float],
    points: Sequence[int],
    min_step: float,
    step: Callable[[float, float], float] = relative_step,
) -> list[int]:
    """``points`` without the change points whose step between neighbouring levels (segment
    medians) is under ``min_step``: the smallest goes first, then the levels are recomputed."""
    points = sorted(points)
    while points:
        found = levels(values, points)
        sizes = [step(a, b) for a, b in zip(found, found[1:], strict=False)]
        smallest = min(range(len(sizes)), key=sizes.__getitem__)
        if sizes[smallest] >= min_step:
            break
        del points[smallest]
    return points


def levels(values: Sequence[float], points: Sequence[int]) -> list[float]:
    """The median of each segment between change points."""
    bounds = [0, *points, len(values)]
    return [stats.median(values[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
