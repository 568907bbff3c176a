"""How much does tui-bench's harness cost? Steady-state step time as tui-bench reports it vs a bare
hand-written loop of the same model, same data pipeline, same interpreter and thread settings.

The two are measured alternately (A B A B ...) in one run so machine drift hits both alike; each
measurement is a fresh process. Prints per-round medians and the ratio of medians (target ≤ 1.02).

    python benchmarks/harness_overhead.py                       # torch eager, 2 threads
    python benchmarks/harness_overhead.py --api compile --rounds 3 --steps 80

The bare loop does what a user's own script would: slice the batch from numpy, convert, forward,
backward, step, read the loss; ``perf_counter`` around each step. No events, no sampler, no clock
object, no history.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BARE_TORCH = r"""
import json, sys, time
import numpy as np
import torch
from torch import nn

args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
torch.manual_seed(0)
rng = np.random.default_rng(0)
n = args["batch_size"] * 32
x = rng.random((n, 28, 28, 1), dtype=np.float32)
y = rng.integers(0, 10, n)
model = nn.Sequential(
    nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(1600, 1024), nn.ReLU(), nn.Dropout(0.25), nn.Linear(1024, 10),
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
loss_fn = nn.CrossEntropyLoss()
forward = torch.compile(model) if args["api"] == "compile" else model
model.train()
times = []
for step in range(args["warmup"] + args["steps"]):
    idx = rng.permutation(n)[: args["batch_size"]]
    t0 = time.perf_counter()
    xb = torch.from_numpy(x[idx]).permute(0, 3, 1, 2).contiguous()
    yb = torch.from_numpy(y[idx])
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(forward(xb), yb)
    loss.backward()
    opt.step()
    loss.item()
    times.append(time.perf_counter() - t0)
print(json.dumps({"step_median_s": float(np.median(times[args["warmup"]:]))}))
"""


def bare(python: str, args: argparse.Namespace) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    payload = json.dumps(
        {
            "threads": args.threads,
            "batch_size": args.batch_size,
            "api": args.api,
            "warmup": args.warmup,
            "steps": args.steps,
        }
    )
    out = subprocess.run(
        [python, "-I", "-c", BARE_TORCH, payload],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["step_median_s"]


def harness(args: argparse.Namespace, home: Path) -> float:
    os.environ["TUI_BENCH_HOME"] = str(home)
    from tui_bench.engine.history import History
    from tui_bench.engine.runner import execute
    from tui_bench.engine.spec import RunSpec

    spec = RunSpec(
        framework="torch",
        api=args.api,
        threads=args.threads,
        batch_size=args.batch_size,
        epochs=1,
        steps_per_epoch=args.steps + args.warmup,
        warmup_steps=args.warmup,
        train_samples=max(args.batch_size * (args.steps + args.warmup) * 5 // 4 + 1, 2000),
        test_samples=args.batch_size,
    ).validate()
    result = execute(spec, History(home))
    if not result.ok:
        raise SystemExit(f"tui-bench run failed: {result.reason}")
    return result.summary["step_median_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", default="eager", choices=["eager", "compile"])
    parser.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 2))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100, help="steady-state steps per measurement")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="A/B pairs")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tui_bench.engine import runtimes

    python = runtimes.resolve("torch", args.api).python
    harness_medians, bare_medians = [], []
    with tempfile.TemporaryDirectory() as home:
        print(
            f"torch/{args.api}, reference CNN, batch {args.batch_size}, {args.threads} thread(s), "
            f"{args.steps} steady steps after {args.warmup} warm-up, {args.rounds} rounds A/B"
        )
        print(f"{'round':>5}  {'tui-bench ms':>12}  {'bare ms':>8}")
        for round_no in range(1, args.rounds + 1):
            # alternate which goes first, so neither always runs on a warmer machine
            order = ("harness", "bare") if round_no % 2 else ("bare", "harness")
            got = {}
            for which in order:
                got[which] = harness(args, Path(home)) if which == "harness" else bare(python, args)
            harness_medians.append(got["harness"])
            bare_medians.append(got["bare"])
            print(f"{round_no:>5}  {got['harness'] * 1000:>12.2f}  {got['bare'] * 1000:>8.2f}")
    h, b = statistics.median(harness_medians), statistics.median(bare_medians)
    print(f"median of medians: tui-bench {h * 1000:.2f} ms, bare {b * 1000:.2f} ms")
    print(f"ratio tui-bench / bare = {h / b:.3f}  (target <= 1.02)")


if __name__ == "__main__":
    main()
