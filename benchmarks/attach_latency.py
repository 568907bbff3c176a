"""How long until a viewer that attaches late shows the whole run?

Builds a batch in progress whose run has recorded N steps (default 20,000, in the worker's real
event shapes and rate: ten ``steps`` events per second of training), owned by a live stand-in
supervisor process. Then, in a fresh process each time (imports included, as a user would see):

- ``tui-bench`` (the TUI): process start → the first painted Live frame holding the whole loss
  curve (all N points);
- ``tui-bench attach``: process start → it has replayed all N steps and is following.

Also profiles one Live redraw of that run (cProfile, top functions), since the redraw is what a
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
    """Runs in the measured process: report seconds from process start to the painted frame."""
    import asyncio

    from tui_bench.tui.app import TuiBenchApp
    from tui_bench.tui.screens.live import LiveScreen

    started = psutil.Process().create_time()

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
                self.painted = time.time() - started
                self.exit()

    async def main() -> float:
        app = Measured()
        async with app.run_test(size=(120, 40)) as pilot:
            while app.painted is None:
                await pilot.pause(0.01)
        return app.painted

    print(f"{asyncio.run(main()):.3f}")


def child_attach(steps: int) -> None:
    from tui_bench.engine.runs import follow, supervisor

    started = psutil.Process().create_time()
    state = supervisor.find(None)
    follower = follow.BatchFollower(state.id)
    seen = 0
    while seen < steps:
        seen += sum(len(e.get("losses") or []) for e in follower.poll() if e["type"] == "steps")
    print(f"{time.time() - started:.3f}")


def profile_redraw(steps: int) -> str:
    import asyncio

    from tui_bench.engine.runs.follow import BatchFollower
    from tui_bench.engine.runs.supervisor import find
    from tui_bench.tui.app import TuiBenchApp
    from tui_bench.tui.live import LiveRun
    from tui_bench.tui.screens.live import LiveScreen

    live = LiveRun.__new__(LiveRun)
    from tui_bench.engine.spec import RunSpec

    live = LiveRun(spec=RunSpec())
    for event in BatchFollower(find(None).id).poll():
        live.apply(event)
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
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", child, "--steps", str(args.steps)],
                        capture_output=True, text=True, env={**env, **extra}, cwd=REPO, timeout=120,
                    )  # fmt: skip
                    if out.returncode:
                        raise SystemExit(out.stderr)
                    times.append(float(out.stdout.strip().splitlines()[-1]))
                print(
                    f"{what}: median {statistics.median(times):.2f} s "
                    f"(runs: {', '.join(f'{t:.2f}' for t in times)}; from process start, "
                    "imports included)   target < 1 s"
                )
            if args.profile:
                print(profile_redraw(args.steps))
    finally:
        stand_in.kill()
    print(f"machine: {psutil.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
