"""How the history scales: 10, 1,000 and 10,000 runs side by side. Targets at 10,000 runs (issue
28): a whole ``tui-bench run`` process costs at most 100 ms more than at 10 runs, ``history list``
< 0.5 s, ``history export --csv`` < 2 s and < 300 MB, ``history export --jsonl`` < 5 s, the TUI
History screen painted < 1 s, and the first read of a schema-1 history migrated in < 3 s with a
progress line.

Every run is a copy of one real record (``history_record.json``: a 60-step torch CNN ``tui-bench
run`` recorded on this project's VM, as runs write them now: 55 steady step times, the stability
verdict, the limits figures (FLOPs, MFU, energy and memory), the machine check; about 7.9 kB as a
journal line), under its own id, with a small series file. The size is printed with the figures. The commands run as a user
runs them: a fresh ``tui-bench`` process each, wall time from launch to exit, best of
``--repeats``; memory is the peak RSS of that process (read inside it: VmHWM). The run cost is a
real 20-step torch CNN ``tui-bench run`` (supervisor, worker and all) in a 10-run and a
10,000-run history, alternated A B A B so drift on a shared machine falls on both; its figure is
the difference of the medians.

    python benchmarks/history_scale.py [--sizes 10 1000 10000] [--repeats 3] [--run-rounds 4]
                                       [--no-tui] [--no-run] [--no-migrate]
"""

from __future__ import annotations

import argparse
import compileall
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui_bench.engine.results import journal  # noqa: E402
from tui_bench.engine.results.history import History  # noqa: E402
from tui_bench.engine.results.migration import LEGACY_NAME  # noqa: E402


def full_template() -> dict:
    """The recorded run, as its journal line holds it."""
    return json.loads((Path(__file__).with_name("history_record.json")).read_text())


TEMPLATE = full_template()
CLI = [sys.executable, "-c", "import sys; from tui_bench.cli import main; sys.exit(main())"]
# The CLI with its peak memory written to the file named by $TUI_BENCH_SCALE_PEAK as it exits:
# VmHWM of its own address space, plus the peak of the largest process it forked and waited for
# (the CSV export's second half), which counts the pages the two share twice: an upper bound.
# The kernel's ru_maxrss of this CLI, read by the harness, is not its own peak: it keeps the
# peak of the image it was forked from (this harness, 200+ MiB at 10,000 runs).
MEASURED_CLI = [
    sys.executable,
    "-c",
    "import atexit, os, resource, sys\n"
    "def peak():\n"
    "    with open('/proc/self/status') as f:\n"
    "        kib = next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))\n"
    "    kib += resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "    with open(os.environ['TUI_BENCH_SCALE_PEAK'], 'w') as f:\n"
    "        f.write(str(kib))\n"
    "atexit.register(peak)\n"
    "from tui_bench.cli import main\n"
    "sys.exit(main())",
]

TUI_CHILD = r"""
import asyncio, sys, time
from textual.widgets import DataTable
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.history import ROW_LIMIT, HistoryScreen

async def main(rows):
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        rows = min(rows, ROW_LIMIT)  # the table shows the first ROW_LIMIT rows of the result
        t0 = time.perf_counter()
        app.switch_mode("history")
        while time.perf_counter() - t0 < 300:
            screen = app.screen
            if isinstance(screen, HistoryScreen) and screen.query(DataTable):
                table = screen.query_one(DataTable)
                if table.row_count == rows:
                    break
            await pilot.pause(0.01)
        else:
            print("nan nan")  # never filled: shown as nan, not as a time
            return
        opened = time.perf_counter() - t0
        t0 = time.perf_counter()
        screen.query_one("#history-filter").value = "no-such-run"
        while table.row_count:
            await pilot.pause(0.01)
        filtered = time.perf_counter() - t0
        print(f"{opened:.4f} {filtered:.4f}")

asyncio.run(main(int(sys.argv[1])))
"""


def build(home: Path, runs: int) -> None:
    """A history of ``runs`` finished runs written as the runner writes them would (one put and
    one patch each), then compacted, plus a series file per run."""
    history = History(home)
    records = []
    for i in range(runs):
        record = copy.deepcopy(TEMPLATE)
        record["id"] = f"20261101-{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}-{i:08x}"
        record["started_at"] = (
            f"2026-11-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
        )
        records.append(record)
        header = {**record, "status": "running"}
        with open(history.series_path(record["id"]), "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"type": "record", "record": header}) + "\n")
            steps = {"type": "steps", "epoch": 1, "first_step": 0, "losses": [2.3, 2.2]}
            handle.write(json.dumps(steps) + "\n")
            handle.write(json.dumps({"type": "result", "record": record}) + "\n")
    journal.rewrite(history.journal_path, records)


def timed(args: list[str], env: dict[str, str], repeats: int) -> tuple[float, float, float]:
    """Best wall time (s) of ``tui-bench ARGS``, its best CPU time (user + system, s: what a
    loaded machine inflates least) and its own peak RSS (MiB, read inside it as it exits)."""
    times, cpus, peak = [], [], 0.0
    with tempfile.NamedTemporaryFile(prefix="tui-bench-peak-") as peak_file:
        env = {**env, "TUI_BENCH_SCALE_PEAK": peak_file.name}
        for _ in range(repeats):
            t0 = time.perf_counter()
            child = subprocess.Popen([*MEASURED_CLI, *args], env=env, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)  # this child's own usage, not all children's
            times.append(time.perf_counter() - t0)
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                raise SystemExit(f"{' '.join(args)} failed with exit status {child.returncode}")
            cpus.append(usage.ru_utime + usage.ru_stime)
            peak = max(peak, int(Path(peak_file.name).read_text()) / 1024)
    return min(times), min(cpus), peak


def run_writes(home: Path, runs: int = 5) -> tuple[float, float]:
    """One run's history writes as the runner makes them (reserve an id, add the record, update
    it with the result), ``runs`` times: median and worst total, ms."""
    history = History(home)
    totals = []
    for _ in range(runs):
        record = copy.deepcopy(TEMPLATE)
        final = {k: v for k, v in record.items() if k != "id"}
        t0 = time.perf_counter()
        run_id = history.reserve_run_id()
        history.add({**record, "id": run_id, "status": "running"})
        history.update(run_id, **final)
        totals.append((time.perf_counter() - t0) * 1000)
    return statistics.median(totals), max(totals)


def build_legacy(home: Path, runs: int) -> None:
    """A schema-1 history (``history.json``, tinydb's one JSON document) of ``runs`` runs."""
    table = {}
    for i in range(runs):
        record = copy.deepcopy(TEMPLATE)
        record["id"] = f"20261101-{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}-{i:08x}"
        table[str(i + 1)] = record
    home.joinpath(LEGACY_NAME).write_text(json.dumps({"_default": table}))


def migration(tmp: Path, runs: int) -> tuple[float, float, str]:
    """The first ``history list`` of a schema-1 history: wall s, CPU s, and what it said on
    stderr (a progress line is expected: the wait is long enough to wonder)."""
    home = tmp / "legacy"
    home.mkdir()
    build_legacy(home, runs)
    env = {**os.environ, "TUI_BENCH_HOME": str(home), "TUI_BENCH_CONFIG": str(tmp / "none.toml")}
    t0 = time.perf_counter()
    child = subprocess.Popen(
        [*CLI, "history", "list"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    said = child.stderr.read().decode("utf-8", "replace").strip() if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"migrating a schema-1 history failed: {said[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime, said.splitlines()[0] if said else ""


RUN = ["run", "--framework", "torch", "--epochs", "1", "--steps-per-epoch", "20", "--quiet"]


def run_cost(tmp: Path, small: int, large: int, rounds: int) -> tuple[list[float], list[float]]:
    """Whole ``tui-bench run`` processes (front end, supervisor, worker: 20 steps of the
    default torch CNN) in a ``small`` and a ``large`` history, alternated A B A B: wall s each."""
    homes = {}
    for size in (small, large):
        home = tmp / f"run-{size}"
        home.mkdir()
        build(home, size)
        # Its summary cache, as any first read writes it: a history at 10,000 runs has one, and
        # building it (once, about 2 s) is not what a run costs.
        History(home).summaries()
        homes[size] = home
    times: dict[int, list[float]] = {small: [], large: []}
    for _ in range(rounds):
        for size in (small, large):
            env = {
                **os.environ,
                "TUI_BENCH_HOME": str(homes[size]),
                "TUI_BENCH_CONFIG": str(tmp / "none.toml"),
            }
            t0 = time.perf_counter()
            subprocess.run(
                [*CLI, *RUN],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            times[size].append(time.perf_counter() - t0)
    return times[small], times[large]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--run-rounds", type=int, default=4, help="A B pairs of whole runs (10 vs largest size)"
    )
    parser.add_argument("--no-tui", action="store_true", help="skip the TUI History screen")
    parser.add_argument("--no-run", action="store_true", help="skip the whole-run cost")
    parser.add_argument("--no-migrate", action="store_true", help="skip the schema-1 migration")
    args = parser.parse_args()
    # An installed tui-bench starts from its bytecode: compile it once here, or every child
    # compiles the sources anew where PYTHONDONTWRITEBYTECODE is set (a tenth of a second each).
    compileall.compile_dir(ROOT / "tui_bench", quiet=1)
    rows: dict[str, list[str]] = {}

    def put(name: str, value: str) -> None:
        rows.setdefault(name, []).append(value)

    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="tui-bench-scale-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            env = {
                **os.environ,
                "TUI_BENCH_HOME": str(home),
                "TUI_BENCH_CONFIG": str(Path(tmp) / "none.toml"),
            }
            build(home, size)
            put("record kB (journal line)", f"{len(journal.put_line(TEMPLATE)) / 1e3:.1f}")
            put("journal MB", f"{home.joinpath(journal.JOURNAL_NAME).stat().st_size / 1e6:.1f}")
            cold, cold_cpu, cold_rss = timed(["history", "list"], env, 1)  # builds the cache
            put("list, cold cache s (cpu)", f"{cold:.2f} ({cold_cpu:.2f})")
            warm, warm_cpu, warm_rss = timed(["history", "list"], env, args.repeats)
            put("list s (cpu)", f"{warm:.2f} ({warm_cpu:.2f})")
            put("list peak MiB", f"{max(cold_rss, warm_rss):.0f}")
            out = Path(tmp) / "runs.csv"
            export, export_cpu, export_rss = timed(
                ["history", "export", "--csv", str(out)], env, args.repeats
            )
            put("export --csv s (cpu)", f"{export:.2f} ({export_cpu:.2f})")
            put("export peak MiB (+ its fork)", f"{export_rss:.0f}")
            jsonl, jsonl_cpu, jsonl_rss = timed(
                ["history", "export", "--jsonl", str(Path(tmp) / "runs.jsonl")],
                env,
                args.repeats,
            )
            put("export --jsonl s (cpu)", f"{jsonl:.2f} ({jsonl_cpu:.2f})")
            put("export --jsonl peak MiB", f"{jsonl_rss:.0f}")
            startup, startup_cpu, _ = timed(["--version"], env, args.repeats)
            put("(tui-bench --version s (cpu))", f"{startup:.2f} ({startup_cpu:.2f})")
            os.environ["TUI_BENCH_HOME"] = str(home)
            median, worst = run_writes(home)
            put("one run's writes ms (median)", f"{median:.1f}")
            put("one run's writes ms (worst)", f"{worst:.1f}")
            if not args.no_tui:
                result = subprocess.run(
                    [sys.executable, "-c", TUI_CHILD, str(size + 5)],
                    env={**env, "TUI_BENCH_THEME": "textual-dark"},
                    check=True,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                opened, filtered = result.stdout.split()[-2:]
                put("TUI History open s", f"{float(opened):.2f}")
                put("TUI filter s", f"{float(filtered):.2f}")
    width = max(len(k) for k in rows) + 2
    print(f"{'runs':<{width}}" + "".join(f"{s:>14,}" for s in args.sizes))
    for name, values in rows.items():
        print(f"{name:<{width}}" + "".join(f"{v:>14}" for v in values))
    largest = max(args.sizes)
    if not args.no_migrate:
        with tempfile.TemporaryDirectory(prefix="tui-bench-scale-") as tmp:
            wall, cpu, said = migration(Path(tmp), largest)
        print(f"\nschema-1 history of {largest:,} runs, first read: {wall:.2f} s (cpu {cpu:.2f})")
        print(f"  it said: {said or '(nothing: no progress line)'}")
    if not args.no_run:
        with tempfile.TemporaryDirectory(prefix="tui-bench-scale-") as tmp:
            small, large = run_cost(Path(tmp), 10, largest, args.run_rounds)
        diff = statistics.median(large) - statistics.median(small)
        print(
            f"\nwhole `tui-bench {' '.join(RUN)}`, alternated A B x{args.run_rounds} (wall s):\n"
            f"  at 10 runs:      {' '.join(f'{t:.2f}' for t in small)}"
            f"  median {statistics.median(small):.2f}\n"
            f"  at {largest:,} runs: {' '.join(f'{t:.2f}' for t in large)}"
            f"  median {statistics.median(large):.2f}\n"
            f"  difference of the medians: {diff * 1000:+.0f} ms (target: at most +100 ms)"
        )
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} logical cores")


if __name__ == "__main__":
    main()
