"""``--repeats auto``: when a configuration has been repeated enough, by the 95 % CI of the
median of its repeats' medians (``stats.median_ci``). The batch asks after every run
(``runs/sweep.py``); Setup and ``tui-bench run`` show the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui_bench.engine.results.record import number
from tui_bench.engine.results.stats import median_ci, quantile

DEFAULT_TARGET_CI = 0.02  # `--repeats auto`: stop when the median's 95 % CI is within +-2 %
DEFAULT_MAX_REPEATS = 20  # `--repeats auto`: or when this many repeats have run
MIN_REPEATS_FOR_CI = 6  # the order-statistic 95 % CI of a median needs 6 values (then min..max)


def enough_repeats(
    medians: Sequence[float],
    target: float = DEFAULT_TARGET_CI,
    max_repeats: int = DEFAULT_MAX_REPEATS,
) -> tuple[bool, str]:
    """Should a configuration's repeats stop? True with why (the CI reached the target, or the
    maximum was reached), or False with where it stands. The interval is the distribution-free
    95 % CI of the median of the repeats' medians, as a share of that median."""
    known = [m for m in map(number, medians) if m is not None and m > 0]
    n = len(known)
    ci = median_ci(known)
    width = None
    if ci is not None:
        mid = quantile(known, 0.5)
        width = max(mid - ci[0], ci[1] - mid) / mid if mid else None
    if width is not None and width <= target:
        return (
            True,
            f"95 % CI of the median ±{100 * width:.1f} % after {n} repeats (target ±{100 * target:g} %)",
        )
    if n >= max_repeats:
        where = f"±{100 * width:.1f} %" if width is not None else "not computable"
        return (
            True,
            f"stopped at the maximum of {max_repeats} repeats; 95 % CI of the median {where} (target ±{100 * target:g} %)",
        )
    if width is None:
        return False, f"{n} repeat(s): a 95 % CI of the median needs {MIN_REPEATS_FOR_CI}"
    return False, f"95 % CI of the median ±{100 * width:.1f} % after {n} repeats"
