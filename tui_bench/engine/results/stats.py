"""Statistics over repeats: summaries with spread, ratios of medians, Mann-Whitney U, thread scaling;
and over a run's step times: pyperf's block means, BenchmarkDotNet's modality, a median's CI, the
repeats' spread, the steps a CI needs (the estimators ``stability``'s rules judge by).

Pure stdlib (no numpy, no scipy): the app process stays light, and every formula is here to read.
Conventions match numpy/scipy defaults so figures can be checked against them:
- quantiles interpolate linearly between order statistics (numpy's default, "type 7");
- std is the sample standard deviation (ddof=1);
- Mann-Whitney U is two-sided; exact distribution when there are no ties, otherwise the normal
  approximation with tie correction and continuity correction (scipy's ``asymptotic``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from tui_bench.engine.results.record import number

MIN_REPEATS_FOR_TEST = 5  # per side; fewer and a rank test says nothing useful at any alpha
ALPHA = 0.05
EXACT_LIMIT = 50  # per side: the exact distribution is cheap up to here
SPREAD_STD_FRACTION = 0.10
SPREAD_RANGE_FRACTION = 0.50
Z95 = 1.96
# pyperf judges values that each took at least its min_time (100 ms: it calibrates the loops per
# value to reach it); shorter steps are judged as the means of consecutive blocks that long.
VALUE_MIN_S = 0.1
MIN_VALUES = 5  # but never fewer than this many values: short runs are judged per step


# -- one sample ---------------------------------------------------------------------------------
def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy.quantile's default method)."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    ordered = sorted(values)
    h = (len(ordered) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    mean: float
    std: float | None  # sample std; None with one value
    min: float
    max: float
    warning: str | None  # why the spread is too high to trust a single figure, or None

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {
            "n": self.n,
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "iqr": self.iqr,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "warning": self.warning,
        }


def summarize(values: Sequence[float]) -> Summary:
    """Median, IQR, mean ± sample std, min/max, n, and a warning when the spread is high."""
    data = [float(v) for v in values]
    if not data:
        raise ValueError("summary of no values")
    n = len(data)
    mean = math.fsum(data) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / (n - 1)) if n > 1 else None
    return Summary(
        n=n,
        median=median(data),
        q1=quantile(data, 0.25),
        q3=quantile(data, 0.75),
        mean=mean,
        std=std,
        min=min(data),
        max=max(data),
        warning=spread_warning(mean, std, min(data), max(data)),
    )


def spread_warning(mean: float, std: float | None, low: float, high: float) -> str | None:
    if mean == 0:
        return None
    problems = []
    if std is not None and std > SPREAD_STD_FRACTION * abs(mean):
        problems.append(f"std is {std / abs(mean):.0%} of the mean")
    if low < mean - SPREAD_RANGE_FRACTION * abs(mean) or high > mean + SPREAD_RANGE_FRACTION * abs(
        mean
    ):
        problems.append(
            f"min/max ({low:.4g}/{high:.4g}) beyond ±{SPREAD_RANGE_FRACTION:.0%} of the mean"
        )
    return "high spread: " + "; ".join(problems) if problems else None


# -- a run's step times ------------------------------------------------------------------------
def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample std (0 with one value), summed plainly (``summarize`` sums exactly)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def mvalue(values: Sequence[float], bin_width: float | None = None, offset: float = 0.0) -> float:
    """BenchmarkDotNet's modality value: the histogram's summed rises and falls (zero bins on
    both ends) divided by its tallest bin. One mode gives 2, two modes 4, and so on. The bin
    width defaults to Scott's rule (3.49 s n^-1/3), the rule BenchmarkDotNet starts from;
    ``offset`` (a fraction of a bin) moves the bins' origin."""
    n = len(values)
    if n < 2:
        return 2.0
    _, std = mean_std(values)
    width = bin_width if bin_width is not None else 3.49 * std * n ** (-1 / 3)
    low, high = min(values), max(values)
    if width <= 0 or high == low:
        return 2.0
    origin = low - offset * width
    bins = [0] * (int((high - origin) / width) + 1)
    for v in values:
        bins[min(int((v - origin) / width), len(bins) - 1)] += 1
    heights = [0, *bins, 0]
    rises = sum(abs(heights[i] - heights[i - 1]) for i in range(1, len(heights)))
    return rises / max(bins)


def modality(values: Sequence[float]) -> float:
    """mValue at Scott's bin width, where BenchmarkDotNet starts, the larger of two bin origins
    half a bin apart: two modes a bin apart can straddle one grid's edges and look like one."""
    return max(mvalue(values), mvalue(values, offset=0.5))


def steps_needed(rel_std: float, target: float) -> int:
    """Steps to resolve +-target at 95 % for this relative spread: n = ceil(4 z^2 s^2 / target^2)."""
    return math.ceil(4 * Z95**2 * rel_std**2 / target**2)


def median_ci(values: Sequence[float]) -> tuple[float, float] | None:
    """Distribution-free 95 % confidence interval of the median from order statistics (the
    binomial normal approximation, as pyperf and Le Boudec's "Performance Evaluation" give it);
    None when there are too few values (under 6)."""
    n = len(values)
    if n < 6:
        return None
    z = Z95
    ordered = sorted(values)
    lo = max(0, math.floor((n - z * math.sqrt(n)) / 2) - 1)
    hi = min(n - 1, math.ceil(1 + (n + z * math.sqrt(n)) / 2) - 1)
    return ordered[lo], ordered[hi]


def repeat_spread(medians: Sequence[float]) -> float | None:
    """TorchBench's stableness figure: (max - min) / min over repeats' medians."""
    known = [m for m in map(number, medians) if m is not None and m > 0]
    if len(known) < 2:
        return None
    return (max(known) - min(known)) / min(known)


def block_means(times: Sequence[float]) -> tuple[list[float], int]:
    """pyperf's values from steps: the means of consecutive blocks of k steps, k chosen so that
    a block lasts ``VALUE_MIN_S`` (1 for steps that long), with at least ``MIN_VALUES`` blocks;
    a last partial block is left out. Returns (values, k)."""
    med = quantile(times, 0.5)
    k = math.ceil(VALUE_MIN_S / med) if med > 0 else 1
    k = max(1, min(k, len(times) // MIN_VALUES))
    if k == 1:
        return list(times), 1
    return [sum(times[i : i + k]) / k for i in range(0, len(times) - k + 1, k)], k


def window_means(times: Sequence[float]) -> list[float]:
    """One value per pipelined window: without device timers the worker gives every step of a
    window the window's mean, and judging those copies as separate steps would invent modes and
    shrink the spread."""
    out: list[float] = []
    for t in times:
        if not out or t != out[-1]:
            out.append(t)
    return out


# -- two samples --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Significance:
    """Outcome of a two-sided Mann-Whitney U test, or why none was done. Never a bare verdict:
    ``text`` always carries the p-value or the reason there is none."""

    n_a: int
    n_b: int
    u: float | None = None  # U of the first sample (pairs where a > b, ties count one half)
    p: float | None = None
    method: str | None = None  # "exact" or "normal"
    reason: str | None = None  # set when no test was done

    @property
    def tested(self) -> bool:
        return self.p is not None

    @property
    def significant(self) -> bool | None:
        return None if self.p is None else self.p < ALPHA

    @property
    def text(self) -> str:
        if self.p is None:
            return self.reason or "no test"
        verdict = "significant" if self.p < ALPHA else "not significant"
        return f"{verdict} (p={self.p:.3g}, Mann-Whitney U, n={self.n_a}/{self.n_b})"


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> Significance:
    """Two-sided Mann-Whitney U test; "not enough repeats" when either side has fewer than 5."""
    n_a, n_b = len(a), len(b)
    if min(n_a, n_b) < MIN_REPEATS_FOR_TEST:
        return Significance(
            n_a,
            n_b,
            reason=f"not enough repeats (n={n_a}/{n_b}; the test needs ≥{MIN_REPEATS_FOR_TEST} each)",
        )
    ranks, tie_sizes = _ranks([*a, *b])
    rank_sum_a = math.fsum(ranks[:n_a])
    u_a = rank_sum_a - n_a * (n_a + 1) / 2
    u_b = n_a * n_b - u_a
    big = max(u_a, u_b)
    has_ties = any(t > 1 for t in tie_sizes)
    if not has_ties and max(n_a, n_b) <= EXACT_LIMIT:
        # P(U >= big) under H0, doubled: the distribution of U is symmetric about n_a*n_b/2.
        counts = _u_counts(n_a, n_b)
        total = math.comb(n_a + n_b, n_a)
        upper = sum(counts[int(round(big)) :])
        return Significance(n_a, n_b, u_a, min(1.0, 2 * upper / total), "exact")
    n = n_a + n_b
    mu = n_a * n_b / 2
    tie_term = sum(t**3 - t for t in tie_sizes) / (n * (n - 1))
    sigma = math.sqrt(n_a * n_b / 12 * ((n + 1) - tie_term))
    if sigma == 0:  # every value identical: no evidence of any difference
        return Significance(n_a, n_b, u_a, 1.0, "normal")
    z = (big - mu - 0.5) / sigma  # continuity correction, as scipy does by default
    p = min(1.0, 2 * _normal_sf(z))
    return Significance(n_a, n_b, u_a, p, "normal")


def _ranks(values: list[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) and the sizes of tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        average = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = average
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@lru_cache(maxsize=64)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """Number of arrangements giving U = 0..m*n, for samples of m and n without ties.

    These are the coefficients of the Gaussian binomial [m+n choose m]_q
    = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); each partial product is itself a polynomial, so
    multiplying then dividing one factor at a time stays exact in integers."""
    size = m * n + 1
    poly = [1] + [0] * (size - 1)
    for i in range(1, m + 1):
        shift = n + i
        for u in range(size - 1, shift - 1, -1):  # multiply by (1 - q^shift)
            poly[u] -= poly[u - shift]
        for u in range(i, size):  # divide by (1 - q^i)
            poly[u] += poly[u - i]
    return tuple(poly)


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


# -- comparisons --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """One configuration against a baseline: ``ratio`` = median(a) / median(b)."""

    a: str
    b: str
    median_a: float
    median_b: float
    ratio: float | None
    significance: Significance

    def as_dict(self) -> dict[str, object]:
        s = self.significance
        return {
            "a": self.a,
            "b": self.b,
            "median_a": self.median_a,
            "median_b": self.median_b,
            "ratio": self.ratio,
            "p": s.p,
            "test": s.method,
            "significance": s.text,
        }


def ratio_of_medians(a: Sequence[float], b: Sequence[float]) -> float | None:
    mb = median(b)
    return None if mb == 0 else median(a) / mb


def compare_pair(label_a: str, a: Sequence[float], label_b: str, b: Sequence[float]) -> Comparison:
    return Comparison(
        label_a, label_b, median(a), median(b), ratio_of_medians(a, b), mann_whitney_u(a, b)
    )


@dataclass(frozen=True)
class ScalingRow:
    threads: int
    median: float
    speedup: float | None  # time at the fewest threads / time here
    efficiency: float | None  # speedup / (threads / fewest threads)
    significance: Significance


def thread_scaling(times_by_threads: dict[int, Sequence[float]]) -> list[ScalingRow]:
    """Speed-up and parallel efficiency relative to the smallest thread count (times: lower is
    better)."""
    present = {t: v for t, v in sorted(times_by_threads.items()) if len(v)}
    if not present:
        return []
    base_threads = next(iter(present))
    base = present[base_threads]
    base_median = median(base)
    rows = []
    for threads, values in present.items():
        m = median(values)
        speedup = base_median / m if m else None
        efficiency = speedup / (threads / base_threads) if speedup is not None else None
        rows.append(ScalingRow(threads, m, speedup, efficiency, mann_whitney_u(values, base)))
    return rows
