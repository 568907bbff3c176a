"""Does watching a run slow it down, and what does watching cost?

Runs the same spec with 0, 1 and 2 live viewers attached, the order rotated each round (0 1 2,
1 2 0, 2 0 1) so drift spreads over the modes. A run belongs to its supervisor; a viewer is a
separate process running the real TUI (headless, 120×40, default refresh) that attaches to the
run as a second SSH session would. Prints, per mode, the steady-state step median (device-
synchronised steady steps of each run) and its ratio to no viewer (target <= 1.02), and each
viewer's own CPU while following (target <= 5 % of one core).

    python benchmarks/observer_effect.py [--rounds 3] [--steps 300] [--threads 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's tui_bench, not an installed one


def viewer() -> None:
    """A viewer process: the real app, attaching to the first batch that starts, until it ends.
    Prints its own CPU seconds and wall seconds from attaching to the end of the run."""
    from tui_bench.engine.runs import supervisor
    from tui_bench.tui.app import TuiBenchApp

    def cpu() -> float:
        t = psutil.Process().cpu_times()
        return t.user + t.system

    async def main() -> None:
        app = TuiBenchApp()
        async with app.run_test(size=(120, 40)) as pilot:
            await app.switch_mode(
                "live"
            )  # Live's one-off import and compose: start-up, not watching
            await app.switch_mode("setup")
            await pilot.pause(0.5)
            print("ready", flush=True)
            while not (running := supervisor.in_progress()):
                await asyncio.sleep(0.1)
            cpu0, wall0 = cpu(), time.monotonic()
            app.attach(running[-1].id)
            while not (app.live and app.live.done):
                await asyncio.sleep(0.2)
            print(f"{cpu() - cpu0:.4f} {time.monotonic() - wall0:.4f}", flush=True)

    asyncio.run(main())


def one_run(spec, viewers: int, env: dict[str, str]) -> tuple[float, list[float]]:
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs import supervisor
    from tui_bench.engine.runs.batch import BatchRequest

    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--viewer"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=REPO,
        )
        for _ in range(viewers)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    batch_id = supervisor.launch(BatchRequest(spec=spec.to_dict()))
    state = supervisor.wait_done(batch_id, 3600)
    cpu_pct = []
    for p in procs:
        cpu, wall = map(float, p.stdout.readline().split())
        cpu_pct.append(100 * cpu / wall)
        p.wait(30)
    record = History().get(state.run_ids[0])
    if record.status != "finished":
        raise SystemExit(f"run failed: {record.reason}")
    return record.metrics["step_median_s"], cpu_pct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="steps per run (1 epoch)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--viewer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.viewer:
        return viewer()
    from tui_bench.engine.spec import RunSpec

    spec = RunSpec(
        epochs=1,
        steps_per_epoch=args.steps,
        train_samples=60_000,
        test_samples=256,
        threads=args.threads,
    ).validate()
    steps: dict[int, list[float]] = {0: [], 1: [], 2: []}
    viewer_cpu: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as home:
        os.environ["TUI_BENCH_HOME"] = home
        env = {**os.environ, "TUI_BENCH_THEME": "textual-dark"}
        print(
            f"spec: {spec.label()}, {args.steps} steps, warm-up {spec.warmup_steps}; "
            f"{args.rounds} rounds of 0/1/2 viewers, order rotated"
        )
        for r in range(args.rounds):
            for mode in [(r + k) % 3 for k in range(3)]:
                step, cpu = one_run(spec, mode, env)
                steps[mode].append(step)
                if mode:
                    viewer_cpu[mode] += cpu
                shown = ", ".join(f"{c:.1f} %" for c in cpu) or "—"
                print(
                    f"  round {r + 1} viewers {mode}: step {step * 1000:7.2f} ms; viewer CPU {shown}"
                )
    med = {m: statistics.median(v) for m, v in steps.items()}
    for mode in (1, 2):
        print(
            f"steady step median with {mode} viewer(s): {med[mode] * 1000:.2f} ms vs none "
            f"{med[0] * 1000:.2f} ms, ratio {med[mode] / med[0]:.3f}   target <= 1.02"
        )
    every = viewer_cpu[1] + viewer_cpu[2]
    print(
        f"viewer CPU while following: median {statistics.median(every):.1f} % of one core, "
        f"max {max(every):.1f} % ({len(every)} viewers)   target <= 5 %"
    )
    print(
        f"machine: {psutil.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f} "
        "(other processes disturb every mode alike; rotation spreads drift)"
    )


if __name__ == "__main__":
    main()
