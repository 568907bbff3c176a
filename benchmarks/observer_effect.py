"""Does watching a run slow it down? The same spec, alternated A B A B:

A  the live TUI attached (the real app, driven headless through App.run_test, default refresh),
B  the headless CLI path (runner.execute with no UI).

Prints the steady-state step time (median of each run's device-synchronised steady steps) per
mode, the ratio A/B (target <= 1.02), and the app process's own CPU use during a run (target
<= 5 % of one core at the default refresh). The runner's event-reader and sampler threads run in
the app process in both modes, so the UI's own share is A minus B.

    python benchmarks/observer_effect.py [--pairs 3] [--steps 60] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

# Run from a checkout: this checkout's tui_bench, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui_bench.engine.history import History
from tui_bench.engine.runner import execute
from tui_bench.engine.spec import RunSpec


def cpu_s() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


def run_headless(spec: RunSpec) -> tuple[float, float, float]:
    wall0, cpu0 = time.monotonic(), cpu_s()
    result = execute(spec, History())
    wall, cpu = time.monotonic() - wall0, cpu_s() - cpu0
    if not result.ok:
        raise SystemExit(f"headless run failed: {result.reason}\n{result.log_tail}")
    return result.summary["step_median_s"], cpu, wall


async def _run_tui(spec: RunSpec) -> tuple[float, float, float]:
    from tui_bench.tui.app import TuiBenchApp

    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        # Visit Live once first: its one-off import and compose (plotext, ~0.5 s of CPU) is
        # startup, not the cost of watching a run.
        await app.switch_mode("live")
        await app.switch_mode("setup")
        await pilot.pause(0.5)
        wall0, cpu0 = time.monotonic(), cpu_s()
        app.start_batch([spec])
        while not (app.live and app.live.done):
            await asyncio.sleep(0.2)
        wall, cpu = time.monotonic() - wall0, cpu_s() - cpu0
        await pilot.pause(0.6)
        live = app.live
        if live.status != "finished":
            raise SystemExit(f"TUI run failed: {live.reason}")
        return live.metrics["step_median_s"], cpu, wall


def run_tui(spec: RunSpec) -> tuple[float, float, float]:
    return asyncio.run(_run_tui(spec))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60, help="steps per run (1 epoch)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    spec = RunSpec(
        epochs=1,
        steps_per_epoch=args.steps,
        train_samples=20_000,
        test_samples=256,
        threads=args.threads,
    ).validate()
    rows: dict[str, list[tuple[float, float, float]]] = {"tui": [], "headless": []}
    with tempfile.TemporaryDirectory() as home:
        os.environ["TUI_BENCH_HOME"] = home
        os.environ.setdefault("TUI_BENCH_THEME", "textual-dark")
        print(
            f"spec: {spec.label()}, {args.steps} steps, warm-up {spec.warmup_steps}; "
            f"{args.pairs} pairs A B (A = live TUI, B = headless)"
        )
        for pair in range(args.pairs):
            for mode, fn in (("tui", run_tui), ("headless", run_headless)):
                step, cpu, wall = fn(spec)
                rows[mode].append((step, cpu, wall))
                print(
                    f"  pair {pair + 1} {mode:9s} step {step * 1000:7.2f} ms  "
                    f"app CPU {cpu:6.2f} s over {wall:6.1f} s = {100 * cpu / wall:5.1f} % of a core"
                )
    med = {m: statistics.median(r[0] for r in v) for m, v in rows.items()}
    cpu_pct = {m: statistics.median(100 * r[1] / r[2] for r in v) for m, v in rows.items()}
    print(
        f"steady-state step median: TUI {med['tui'] * 1000:.2f} ms, headless "
        f"{med['headless'] * 1000:.2f} ms, ratio TUI/headless {med['tui'] / med['headless']:.3f}"
        "   target <= 1.02"
    )
    print(
        f"app process CPU during a run: TUI {cpu_pct['tui']:.1f} % of one core, headless "
        f"{cpu_pct['headless']:.1f} %, UI's own share {cpu_pct['tui'] - cpu_pct['headless']:.1f} %"
        "   target <= 5 %"
    )
    print(
        f"machine: {psutil.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f} "
        "(other processes disturb both modes alike; alternation spreads drift)"
    )


if __name__ == "__main__":
    main()
