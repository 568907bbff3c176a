"""How often does `history trends` call a change point that is not there, and miss one that is?

Simulated series of per-run medians (log-normal noise around a level, seeded): flat series of
6 to 100 runs at 2 % and 3 % run-to-run noise (every change point found is a false alarm), and
series with one real step (found at the right run, or missed). Also times the segmentation of
long series, since the Trends screen segments every configuration it lists.

    python benchmarks/trend_detection.py [--trials 200]
"""

from __future__ import annotations

import argparse
import math
import random
import time

from tui_bench.engine.results import trends


def series(n: int, level: float, noise: float, rng: random.Random) -> list[float]:
    return [math.log(level) + rng.gauss(0, noise) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(20261125)
    print(
        f"penalty {trends.PENALTY_PER_LN_N:g}·ln(n)·σ², min segment {trends.MIN_SEGMENT}, "
        f"steps < {trends.MIN_STEP:.0%} merged, σ floor {trends.SIGMA_FLOOR:g}"
    )
    print("\nfalse alarms on flat series (share of series with any change point)")
    print(f"{'runs':>6} {'2 % noise':>10} {'3 % noise':>10}")
    for n in (6, 10, 20, 40, 100):
        cells = []
        for noise in (0.02, 0.03):
            alarms = sum(bool(trends.steps(series(n, 40, noise, rng))) for _ in range(args.trials))
            cells.append(f"{alarms / args.trials:>10.1%}")
        print(f"{n:>6} {' '.join(cells)}")
    print("\none step after 10 runs at 2 % noise: found at the right run")
    print(f"{'step':>6} {'runs after':>10} {'found':>8}")
    for step in (0.05, 0.10, 0.20):
        for after in (2, 3, 5, 10):
            hits = 0
            for _ in range(args.trials):
                values = series(10, 40, 0.02, rng) + series(after, 40 * (1 + step), 0.02, rng)
                hits += trends.steps(values) == [10]
            print(f"{step:>6.0%} {after:>10} {hits / args.trials:>8.1%}")
    print("\nsegmentation time")
    for n in (100, 1000, 2000):  # trends segments at most MAX_SEGMENTED runs
        values = series(n // 2, 40, 0.02, rng) + series(n - n // 2, 48, 0.02, rng)
        start = time.perf_counter()
        found = trends.steps(values)
        print(f"{n:>6} runs: {(time.perf_counter() - start) * 1000:8.1f} ms, change points {found}")


if __name__ == "__main__":
    main()
