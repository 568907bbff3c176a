"""How long until a viewer that attaches late shows the whole run?

Builds a batch in progress whose run has recorded N steps (default 20,000, in the worker's real
event shapes and rate: ten ``steps`` events per second of training), owned by a live stand-in
supervisor process. Then, in a fresh process each time (imports included, as a user would see):

- ``tui-bench`` (the TUI): process start → the first painted Live frame holding the whole loss
  curve (all N points);
- ``tui-bench attach``: process start → it has replayed all N steps and is following.

Times run from just before the parent spawns the process (interpreter start and imports
included) to the moment the child reports. Also profiles one Live redraw of that run (cProfile, top functions), since the redraw is what a
viewer pays every refresh.

    python benchmarks/attach_latency.py [--steps 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the seeded fake event source, shaped like a worker's


def build_batch(home: Path, steps: int, supervisor_pid: int) -> tuple[str, str]:
    os.environ["TUI_BENCH_HOME"] = str(home)
    from tui.fakes import write_batch_in_progress

    return write_batch_in_progress(home, steps, supervisor_pid)


def child_tui(steps: int) -> None:
    """Runs in the measured process: print the wall clock at the painted frame. The parent reads
    its own clock just before the spawn: psutil's process create_time is computed from the boot
    time, which /proc/stat rounds to a whole second, and read up to a second late here."""
    import asyncio

    from tui_bench.tui.app import TuiBenchApp
    from tui_bench.tui.screens.live import LiveScreen

    started = time.time()  # only for BENCH_TRACE; the parent times from before the spawn

    class Measured(TuiBenchApp):
        painted: float | None = None

        def on_mount(self) -> None:  # Textual also runs TuiBenchApp.on_mount: no super()
            if os.environ.get("BENCH_NO_RUN"):  # reference: the first frame with nothing to attach
                self.call_after_refresh(self._painted)

        def redraw_live(self, force: bool = False) -> None:
            if os.environ.get("BENCH_TRACE"):
                n = len(self.live.losses) if self.live else 0
                print(
                    f"redraw {time.time() - started:.2f} losses {n} screen {self.screen}",
                    file=sys.stderr,
                )
            super().redraw_live(force)
            live = self.live
            if (
                self.painted is None
                and live is not None
                and len(live.losses) >= steps
                and isinstance(self.screen, LiveScreen)
            ):
                self.call_after_refresh(self._painted)

        def _painted(self) -> None:
            if self.painted is None:
                self.painted = time.time()
                self.exit()

    async def main() -> float:
        app = Measured()
        async with app.run_test(size=(120, 40)) as pilot:
            while app.painted is None:
                await pilot.pause(0.01)
        return app.painted

    print(f"{asyncio.run(main()):.6f}")  # the wall clock when painted; the parent subtracts


def child_attach(steps: int) -> None:
    from tui_bench.engine.runs import follow, supervisor

    state = supervisor.find(None)
    follower = follow.BatchFollower(state.id)
    view = follower.catch_up()
    while len(view.losses) < steps:
        follower.poll()
        view.drain()
    print(f"{time.time():.6f}")  # the wall clock when replayed; the parent subtracts


def backlog_fold(batch_id: str, repeats: int) -> str:
    """The backlog alone: reading and parsing the files, then the reducer's one-pass fold, and
    (for reference) the same events one at a time through the live path."""
    from tui_bench.engine.runs.follow import BatchTail
    from tui_bench.engine.runs.reducer import BatchView

    reads, folds, one_by_one = [], [], []
    events: list = []
    for _ in range(max(repeats, 5)):
        t0 = time.perf_counter()
        events = BatchTail(batch_id).read()
        t1 = time.perf_counter()
        BatchView().fold(events)
        t2 = time.perf_counter()
        view = BatchView()
        for event in events:
            view.apply(event)
        t3 = time.perf_counter()
        reads.append(t1 - t0)
        folds.append(t2 - t1)
        one_by_one.append(t3 - t2)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f} ms"

    return (
        f"backlog of {len(events)} events: read and parse {ms(reads)}, reducer fold "
        f"{ms(folds)} (one pass; per-event apply {ms(one_by_one)}), median of "
        f"{len(folds)}   target fold < 100 ms"
    )


def profile_redraw(steps: int) -> str:
    import asyncio

    from tui_bench.engine.runs.follow import BatchFollower
    from tui_bench.engine.runs.supervisor import find
    from tui_bench.tui.app import TuiBenchApp
    from tui_bench.tui.screens.live import LiveScreen

    live = BatchFollower(find(None).id).catch_up()
    out = io.StringIO()

    async def main() -> None:
        app = TuiBenchApp(start_mode="live")
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            screen = app.screen
            assert isinstance(screen, LiveScreen)
            view = screen.query_one("RunView")
            times = []
            profiler = cProfile.Profile()
            for i in range(10):
                view._drawn.clear()  # force a full redraw, as when a new step arrives
                live.losses.append(0.5)
                t0 = time.perf_counter()
                if i == 9:
                    profiler.enable()
                screen.show(live)
                await pilot.pause(0)
                if i == 9:
                    profiler.disable()
                times.append(time.perf_counter() - t0)
            out.write(
                f"one full Live redraw with {len(live.losses)} losses: median "
                f"{statistics.median(times) * 1000:.1f} ms over 10\n"
            )
            stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
            stats.print_stats(12)

    asyncio.run(main())
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=("tui", "attach"))
    parser.add_argument("--profile", action="store_true", help="also profile one Live redraw")
    args = parser.parse_args()
    if args.child == "tui":
        return child_tui(args.steps)
    if args.child == "attach":
        return child_attach(args.steps)
    stand_in = subprocess.Popen(["sleep", "3600"])  # a live "supervisor" that never finishes
    try:
        with tempfile.TemporaryDirectory() as home:
            os.environ.setdefault("TUI_BENCH_THEME", "textual-dark")
            batch_id, run_id = build_batch(Path(home), args.steps, stand_in.pid)
            size = (Path(home) / "runs" / f"{run_id}.jsonl").stat().st_size
            print(f"batch {batch_id}: {args.steps} steps recorded, series file {size / 1e6:.1f} MB")
            print(backlog_fold(batch_id, args.repeats))
            env = {**os.environ, "TUI_BENCH_HOME": home}
            empty = tempfile.mkdtemp()
            cases = (
                ("tui", "TUI first painted Live frame with the whole curve", {}),
                (
                    "tui",
                    "reference: TUI first frame, nothing to attach",
                    {"BENCH_NO_RUN": "1", "TUI_BENCH_HOME": empty},
                ),
                ("attach", "CLI attach replayed", {}),
            )
            for child, what, extra in cases:
                times = []
                for _ in range(args.repeats):
                    spawned = time.time()
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", child, "--steps", str(args.steps)],
                        capture_output=True, text=True, env={**env, **extra}, cwd=REPO, timeout=120,
                    )  # fmt: skip
                    if out.returncode:
                        raise SystemExit(out.stderr)
                    times.append(float(out.stdout.strip().splitlines()[-1]) - spawned)
                print(
                    f"{what}: median {statistics.median(times):.2f} s "
                    f"(runs: {', '.join(f'{t:.2f}' for t in times)}; from process start, "
                    "imports included)   target < 0.8 s"
                )
            if args.profile:
                print(profile_redraw(args.steps))
    finally:
        stand_in.kill()
    print(f"machine: {psutil.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
