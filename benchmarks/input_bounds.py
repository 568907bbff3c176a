"""How quickly is hostile input refused, and how long does the largest accepted preset take?

In a fresh process each time (imports included, as a user would see), with a temporary home:

- ``presets show`` of the issue's preset (ten values in each of seven fields: 10^7
  configurations, under 400 bytes): process start → the one-line refusal;
- ``presets show`` of a TOML value nested 5,000 levels deep: → the one-line refusal;
- ``presets show`` of a 2 MiB preset: → refusal;
- ``presets show --json`` of a preset at the limit (10,000 configurations, each validated and
  probed for what this installation can run): → the full listing.

Medians of ``--repeats`` runs, and the machine's load average when measured.

    python benchmarks/input_bounds.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEN = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
FIELDS = ("threads", "batch_size", "epochs", "seed", "warmup_steps", "timing_window")
CASES = {
    "10^7 configurations (refused)": "\n".join(f"{f} = {TEN}" for f in FIELDS)
    + "\nlr = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]\n",
    "nested 5,000 deep (refused)": "threads = " + "[" * 5000 + "]" * 5000 + "\n",
    "2 MiB file (refused)": "# " + "x" * (2 * 1024 * 1024) + "\n",
    "10,000 configurations (at the limit, shown)": "\n".join(
        f"{f} = {TEN}" for f in ("threads", "batch_size", "epochs", "seed")
    )
    + "\n",
}


def time_show(path: Path, env: dict[str, str]) -> tuple[float, int, str]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "tui_bench", "presets", "show", str(path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return time.perf_counter() - started, out.returncode, out.stderr.strip()[:120]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TUI_BENCH_HOME": str(Path(tmp) / "home")}
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        for name, text in CASES.items():
            path = Path(tmp) / "case.toml"
            path.write_text(text, encoding="utf-8")
            times, code, err = [], 0, ""
            for _ in range(args.repeats):
                seconds, code, err = time_show(path, env)
                times.append(seconds)
            size = len(text.encode())
            print(
                f"{name:45s} {size:>9,} B  median {statistics.median(times):6.2f} s "
                f"(min {min(times):.2f}, max {max(times):.2f})  exit {code}"
                + (f"  {err}" if err else "")
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
