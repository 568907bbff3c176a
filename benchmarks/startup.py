"""Time to first paint of the TUI (target < 1 s), measured the way a user feels it: from launching
a fresh interpreter to the first frame of the Setup screen (Textual headless driver, so it runs
without a terminal; rendering happens exactly as on a terminal, output goes nowhere).

    python benchmarks/startup.py [--runs 7]
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

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import os, sys, time
t0 = float(os.environ["TB_T0"])
from tui_bench.tui.app import TuiBenchApp
t_import = time.time() - t0

class FirstPaint(TuiBenchApp):
    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self.painted)  # runs once the first frame has been drawn

    def painted(self) -> None:
        print(f"{t_import:.4f} {time.time() - t0:.4f}")
        self.exit()

FirstPaint().run(headless=True, size=(80, 24))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    imports, paints = [], []
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "TUI_BENCH_HOME": home,
            "TUI_BENCH_CONFIG": str(Path(home) / "none.toml"),
        }
        for _ in range(args.runs):
            env["TB_T0"] = repr(time.time())
            out = subprocess.run(
                [sys.executable, "-c", CHILD],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            t_import, t_paint = map(float, out.stdout.split()[-2:])
            imports.append(t_import)
            paints.append(t_paint)
    print(f"runs: {args.runs} fresh interpreters, Setup screen at 80x24, headless driver")
    print(
        f"interpreter start + imports:  median {statistics.median(imports):.3f} s "
        f"(min {min(imports):.3f}, max {max(imports):.3f})"
    )
    print(
        f"time to first paint:          median {statistics.median(paints):.3f} s "
        f"(min {min(paints):.3f}, max {max(paints):.3f})   target < 1 s"
    )


if __name__ == "__main__":
    main()
