"""How close each framework × API gets to this machine's limits: the measured and nominal fp32
peaks at 1 and 2 threads, then every available framework × API's achieved FLOP/s and MFU on the
reference CNN, the MLP and the LSTM at 1 and 2 threads, and the 2-thread / 1-thread ratio.

Every run goes through tui-bench's ordinary worker path (runner.execute, a throwaway history); its
FLOPs are engine/flops.py's count, its peak engine/machine/peaks.py's (docs/limits.md). Short
runs: one epoch of --steps steps after 3 warm-up steps, batch 64, synthetic data.

    python benchmarks/limits.py                          # everything available here
    python benchmarks/limits.py --only torch,mxnet --models cnn --markdown

Read the load lines: on a machine other work is using, every figure (the peaks too) is lower.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tui_bench.engine import catalog  # noqa: E402
from tui_bench.engine.machine import peaks, runtimes  # noqa: E402
from tui_bench.engine.results.history import History  # noqa: E402
from tui_bench.engine.runs.runner import execute  # noqa: E402
from tui_bench.engine.spec import RunSpec  # noqa: E402

DATASET = {"cnn": "synthetic-mnist", "mlp": "synthetic-mnist", "lstm": "synthetic-imdb"}
BATCH = 64


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} logical cores"


def pct(value: float | None, error: str | None = None) -> str:
    if error == peaks.MFU_ABOVE_ONE:
        return "MFU > 1 (error)"
    return "—" if value is None else f"{value:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated frameworks")
    parser.add_argument(
        "--apis", default="", help="comma-separated framework/API pairs, run in this order"
    )
    parser.add_argument("--models", default="cnn,mlp,lstm")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    only = {f for f in args.only.split(",") if f}
    models = [m for m in args.models.split(",") if m]
    threads = [int(t) for t in args.threads.split(",") if t]
    print(f"# limits · {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {load()}")
    print("\n## peaks (fp32)")
    for t in threads:
        measured, why = peaks.measured("cpu", t, "fp32", progress=print)
        nominal = peaks.nominal("cpu", "cpu", t, "fp32")
        print(f"- {t} thread(s): " + (measured.label if measured else f"measured: {why}"))
        print(f"- {t} thread(s): " + (nominal.label if nominal else "nominal: unknown"))
    rows: list[tuple[str, str, dict[int, dict]]] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as home:
        history = History(Path(home))
        pairs = [
            (fw, api)
            for fw in catalog.FRAMEWORKS.values()
            if not fw.unavailable and (not only or fw.name in only)
            for api in fw.apis
        ]
        if args.apis:
            wanted = [tuple(item.split("/", 1)) for item in args.apis.split(",") if "/" in item]
            known = {(fw.name, api): fw for fw, api in pairs}
            pairs = [(known[pair], pair[1]) for pair in wanted if pair in known]
        for fw, api in pairs:
            found = runtimes.availability(fw.name, api)
            if found.problem:
                skipped.append(f"{fw.name}/{api}: {found.problem}")
                continue
            for model in models:
                problem = catalog.combination_problem(fw.name, api, model, DATASET[model])
                if problem:
                    skipped.append(f"{fw.name}/{api} {model}: {problem}")
                    continue
                per_threads: dict[int, dict] = {}
                for t in threads:
                    spec = RunSpec(
                        framework=fw.name,
                        api=api,
                        model=model,
                        dataset=DATASET[model],
                        threads=t,
                        batch_size=BATCH,
                        epochs=1,
                        steps_per_epoch=args.steps,
                        warmup_steps=3,
                        train_samples=BATCH * (args.steps + 4),
                        test_samples=BATCH,
                    ).validate()
                    result = execute(spec, history, stall_timeout=600)
                    if not result.ok:
                        per_threads[t] = {"error": result.reason}
                        print(f"  {fw.name}/{api} {model} {t}t: {result.reason}", flush=True)
                        continue
                    per_threads[t] = result.metrics()
                    m = per_threads[t]
                    print(
                        f"  {fw.name}/{api} {model} {t}t: step "
                        f"{m['step_median_s'] * 1000:.1f} ms, "
                        f"{(m.get('achieved_tflops') or 0) * 1000:.2f} GFLOP/s, "
                        f"MFU {pct(m.get('mfu'), m.get('mfu_error'))} ({load()})",
                        flush=True,
                    )
                rows.append((f"{fw.name}/{api}", model, per_threads))
    print(f"\n## MFU per framework × API (fp32, batch {BATCH}) · {load()}\n")
    head = ["framework/API", "model"]
    for t in threads:
        head += [f"GFLOP/s {t}t", f"MFU {t}t", f"MFU nominal {t}t"]
    if len(threads) == 2:
        head.append(f"{threads[1]}t/{threads[0]}t")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, model, per in rows:
        cells = [name, model]
        for t in threads:
            m = per.get(t) or {}
            if "error" in m:
                cells += ["failed", "—", "—"]
                continue
            achieved = m.get("achieved_tflops")
            cells.append("—" if achieved is None else f"{achieved * 1000:.2f}")
            cells.append(pct(m.get("mfu"), m.get("mfu_error")))
            cells.append(pct(m.get("mfu_nominal"), m.get("mfu_nominal_error")))
        if len(threads) == 2:
            a, b = (per.get(t) or {} for t in threads)
            ratio = (
                b["achieved_tflops"] / a["achieved_tflops"]
                if a.get("achieved_tflops") and b.get("achieved_tflops")
                else None
            )
            cells.append("—" if ratio is None else f"{ratio:.2f}×")
        print("| " + " | ".join(cells) + " |")
    if skipped:
        print("\nnot run here:")
        for line in skipped:
            print(f"- {line}")
    print(f"\nended · {load()}")


if __name__ == "__main__":
    main()
