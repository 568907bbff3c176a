"""results/changepoints: the shared cost, noise estimate, penalty and merge rule, and both solvers
checked against ruptures (a dev dependency) on generated series with known breakpoints."""

from __future__ import annotations

import math
import random

import pytest
from conftest import require_module

from tui_bench.engine.results import changepoints as cp


def generated(seed: int, noise: float) -> tuple[list[float], list[int]]:
    """A piecewise-constant series with 1 to 4 steps of 15-40 % and Gaussian noise, and the
    breakpoints it was made with (ruptures' convention: each segment's end, n last)."""
    rng = random.Random(1000 + seed)
    steps = rng.randint(1, 4)
    lengths = [rng.randint(8, 40) for _ in range(steps + 1)]
    levels = [1.0]
    for _ in range(steps):
        levels.append(levels[-1] * (1 + rng.choice((-1, 1)) * rng.uniform(0.15, 0.4)))
    values: list[float] = []
    ends = []
    for level, length in zip(levels, lengths, strict=True):
        values += [level + rng.gauss(0, noise) for _ in range(length)]
        ends.append(len(values))
    return values, ends


def _both(values: list[float], min_size: int = 3) -> tuple[list[int], list[int], float]:
    pen = cp.penalty(len(values), cp.noise_sigma(values))
    n = len(values)
    return (
        [*cp.pelt(values, pen, min_size), n],
        [*cp.binary_segmentation(values, pen, min_size), n],
        pen,
    )


@pytest.mark.parametrize("seed", range(30))
def test_both_solvers_find_known_breakpoints_as_ruptures_does(seed):
    rpt = require_module("ruptures")
    np = require_module("numpy")
    values, ends = generated(seed, noise=0.02)
    ours_pelt, ours_binseg, pen = _both(values)
    signal = np.array(values).reshape(-1, 1)
    theirs_pelt = rpt.Pelt(model="l2", min_size=3, jump=1).fit(signal).predict(pen=pen)
    theirs_binseg = rpt.Binseg(model="l2", min_size=3, jump=1).fit(signal).predict(pen=pen)
    assert ours_pelt == theirs_pelt == ends
    assert ours_binseg == theirs_binseg == ends


@pytest.mark.parametrize("seed", range(30))
def test_on_noisy_series_both_solvers_still_agree_with_ruptures(seed):
    rpt = require_module("ruptures")
    np = require_module("numpy")
    values, _ends = generated(seed, noise=0.09)  # steps near the noise: the answer is not given
    ours_pelt, ours_binseg, pen = _both(values)
    signal = np.array(values).reshape(-1, 1)
    assert ours_pelt == rpt.Pelt(model="l2", min_size=3, jump=1).fit(signal).predict(pen=pen)
    assert ours_binseg == rpt.Binseg(model="l2", min_size=3, jump=1).fit(signal).predict(pen=pen)


def test_the_cost_is_the_squared_error_about_the_mean():
    values = [1.0, 2.0, 4.0, 7.0]
    cost = cp.L2Cost(values)
    mean = sum(values[1:4]) / 3
    assert cost(1, 4) == pytest.approx(sum((v - mean) ** 2 for v in values[1:4]))
    assert cost(2, 3) == 0.0


def test_the_noise_estimate_ignores_a_step_and_keeps_its_floor():
    rng = random.Random(3)
    flat = [10 + rng.gauss(0, 0.1) for _ in range(200)]
    stepped = flat[:100] + [v + 5 for v in flat[100:]]  # a step 50 σ high
    assert cp.noise_sigma(flat) == pytest.approx(0.1, rel=0.25)
    assert cp.noise_sigma(stepped) == pytest.approx(cp.noise_sigma(flat), rel=0.1)
    assert cp.noise_sigma([5.0] * 20, floor=0.01) == 0.01
    assert cp.noise_sigma([1.0, 2.0], floor=0.3) == 0.3


def test_penalty_is_four_ln_n_sigma_squared():
    assert cp.penalty(100, 0.5) == pytest.approx(4 * math.log(100) * 0.25)


def test_small_steps_are_merged_smallest_first():
    values = [10.0] * 10 + [10.2] * 10 + [13.0] * 10  # a 2 % step, then a 27 % one
    assert cp.merge_small_steps(values, [10, 20], 0.05) == [20]
    assert cp.merge_small_steps(values, [10, 20], 0.01) == [10, 20]
    logs = [math.log(v) for v in values]
    assert cp.merge_small_steps(logs, [10, 20], 0.05, cp.log_step) == [20]
    assert cp.levels(values, [20]) == [10.1, 13.0]


def test_short_series_have_no_change_point():
    assert cp.pelt([1.0, 2.0, 3.0], 0.1, 2) == []
    assert cp.binary_segmentation([1.0, 2.0, 3.0], 0.1, 2) == []
