"""Statistics against values derived by hand and reference values from numpy 2.4 / scipy 1.17."""

from __future__ import annotations

import itertools
import math

import pytest

from tui_bench.engine.results import stats

SAMPLE = [3, 1, 4, 1, 5, 9, 2, 6]


def test_quantiles_follow_numpys_linear_interpolation():
    # numpy.quantile(SAMPLE, [.25, .5, .75]) == [1.75, 3.5, 5.25]
    assert stats.quantile(SAMPLE, 0.25) == pytest.approx(1.75)
    assert stats.median(SAMPLE) == pytest.approx(3.5)
    assert stats.quantile(SAMPLE, 0.75) == pytest.approx(5.25)
    assert stats.quantile([7.0], 0.9) == 7.0
    assert stats.median([1, 2, 3]) == 2


def test_summary_figures():
    s = stats.summarize(SAMPLE)
    assert (s.n, s.min, s.max) == (8, 1, 9)
    assert s.mean == pytest.approx(3.875)
    assert s.std == pytest.approx(2.748376143938713)  # numpy.std(ddof=1)
    assert s.iqr == pytest.approx(3.5)
    assert stats.summarize([4.2]).std is None


def test_spread_warning_thresholds():
    tight = stats.summarize([10.0, 10.1, 9.9, 10.05, 9.95])
    assert tight.warning is None
    # std 1.58 = 15.8 % of the mean 10: above the 10 % line, while min/max stay within ±50 %
    wide = stats.summarize([8.0, 9.0, 10.0, 11.0, 12.0])
    assert "std is 16% of the mean" in wide.warning
    assert "min/max" not in wide.warning
    # one outlier at 2.1× the others: the max is beyond +50 % of the mean
    outlier = stats.summarize([10.0] * 9 + [30.0])
    assert "min/max" in outlier.warning


def _brute_force_two_sided_p(a, b):
    """Enumerate every split of the pooled ranks: the textbook definition of the exact test."""
    pooled = sorted([*a, *b])
    u_obs = sum(1 for x in a for y in b if x > y)
    big = max(u_obs, len(a) * len(b) - u_obs)
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(a)):
        first = [pooled[i] for i in chosen]
        second = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        u = sum(1 for x in first for y in second if x > y)
        hits += max(u, len(a) * len(b) - u) >= big
        total += 1
    return min(1.0, hits / total)


def test_exact_test_on_fully_separated_samples():
    # U = 0 happens for 1 of C(10, 5) = 252 equally likely splits; two-sided doubles it.
    result = stats.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert result.method == "exact"
    assert result.u == 0
    assert result.p == pytest.approx(2 / 252)
    assert result.significant
    assert "significant (p=0.00794" in result.text


@pytest.mark.parametrize(
    ("a", "b", "u", "scipy_p"),
    [
        ([1, 3, 5, 7, 9], [2, 4, 6, 8, 10], 10, 0.6904761904761905),
        ([1.1, 2.2, 3.3, 4.4, 5.5, 12], [3.0, 6.1, 7.2, 8.3, 9.4], 8, 0.24675324675324672),
    ],
)
def test_exact_test_matches_scipy_and_enumeration(a, b, u, scipy_p):
    result = stats.mann_whitney_u(a, b)
    assert result.method == "exact"
    assert result.u == u
    assert result.p == pytest.approx(scipy_p)
    assert result.p == pytest.approx(_brute_force_two_sided_p(a, b))
    assert not result.significant


def test_ties_use_the_normal_approximation_with_tie_correction():
    # scipy.stats.mannwhitneyu(a, b, method="asymptotic") -> U=2, p=0.034453637039471276
    result = stats.mann_whitney_u([1, 2, 2, 3, 4], [3, 4, 5, 5, 6])
    assert result.method == "normal"
    assert result.u == 2
    assert result.p == pytest.approx(0.034453637039471276)


def test_large_samples_match_scipy_exact():
    a = [10.2, 11.5, 9.8, 10.9, 12.1, 10.0, 11.1, 9.7, 10.5, 11.8, 10.3, 9.9]
    b = [11.0, 12.4, 11.9, 13.1, 12.2, 11.6, 12.8, 13.5, 12.0, 11.4, 12.6, 13.0]
    result = stats.mann_whitney_u(a, b)
    assert result.u == 11
    assert result.p == pytest.approx(0.00014422244870488242)


def test_identical_samples_are_not_different():
    result = stats.mann_whitney_u([5.0] * 6, [5.0] * 6)
    assert result.p == 1.0
    assert not result.significant


def test_fewer_than_five_repeats_gives_a_reason_not_a_verdict():
    result = stats.mann_whitney_u([1, 2, 3, 4], [6, 7, 8, 9, 10])
    assert result.p is None and result.significant is None
    assert result.text.startswith("not enough repeats (n=4/5")


def test_compare_pair_reports_ratio_of_medians_against_the_baseline():
    row = stats.compare_pair("gpu", [1.0, 1.1, 0.9, 0.95, 1.05], "cpu", [4.0, 4.2, 3.9, 4.1, 4.05])
    assert (row.a, row.b) == ("gpu", "cpu")
    assert row.ratio == pytest.approx(1.0 / 4.05)
    assert row.significance.p == pytest.approx(2 / 252)
    assert row.as_dict()["significance"].startswith("significant")


def test_thread_scaling_speedup_and_efficiency():
    rows = stats.thread_scaling({4: [30.0] * 5, 1: [100.0] * 5, 2: [55.0] * 5})
    assert [r.threads for r in rows] == [1, 2, 4]
    assert rows[0].speedup == 1.0 and rows[0].efficiency == 1.0
    assert rows[1].speedup == pytest.approx(100 / 55)
    assert rows[1].efficiency == pytest.approx(100 / 55 / 2)
    assert rows[2].efficiency == pytest.approx(100 / 30 / 4)
    assert rows[0].significance.p == 1.0  # the baseline against itself
    assert rows[2].significance.significant


def test_exact_distribution_is_complete_and_symmetric_at_the_size_limit():
    counts = stats._u_counts(50, 50)
    assert sum(counts) == math.comb(100, 50)
    assert counts == counts[::-1]
    separated = stats.mann_whitney_u(list(range(50)), list(range(50, 100)))
    assert separated.method == "exact"
    assert separated.p == pytest.approx(2 / math.comb(100, 50))
