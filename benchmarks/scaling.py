"""Data-parallel scaling on this machine: 1 worker x 2 threads against 2 workers x 1 thread, for
PyTorch (DDP under torch.distributed.run, gloo) and TensorFlow (MultiWorkerMirroredStrategy, graph
API), through tui-bench's ordinary worker path (runner.execute, a throwaway history).

Per framework, rounds of three runs in alternating order (drift hits all alike), reference CNN on
synthetic-mnist, per-worker batch 32:
  1w x 1t  batch 32       the one-worker baseline (DLBS's throughput_1)
  1w x 2t  batch 64       the same global batch as 2 workers, both cores as threads
  2w x 1t  32 per worker  weak scaling, global batch 64, both cores as workers

Prints global samples/s (median over rounds), DLBS efficiency of 2 workers
(throughput_2 / (2 x throughput_1)), 2w x 1t against 1w x 2t, and the communication share of a
2-worker step, measured two ways:
  sync overhead   (step_2w - step_1w1t) / step_2w: both train 32 samples per worker per step on
                  one thread, so the extra time is the gradient all-reduce, the wait for the
                  slower rank and any contention between the two processes on shared cores;
  collective      one all-reduce of a gradient-sized buffer (every trainable float32 of the CNN)
                  between 2 ranks on loopback, timed alone (median of 20) and divided by step_2w;
                  an upper bound on what a step exposes when the framework overlaps the
                  all-reduce with the backward pass (DDP does, in buckets).

    python benchmarks/scaling.py                      # both frameworks, 3 rounds
    python benchmarks/scaling.py --only torch --rounds 2 --steps 20

Read the load line first: on a machine other work is using, scaling figures mean little.
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
CNN_PARAMS = 1_669_002  # trainable float32 values of the reference CNN (tests check all agree)

# -- collective alone: runs inside the framework's runtime (stdlib + one framework) -------------
TORCH_COLLECTIVE = r"""
import json, os, statistics, time
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
buffer = torch.ones(int(os.environ["PARAMS"]))
times = []
for i in range(25):
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(buffer)
    times.append(time.perf_counter() - t0)
if dist.get_rank() == 0:
    print("RESULT " + json.dumps({"allreduce_s": statistics.median(times[5:])}), flush=True)
dist.destroy_process_group()
"""

TF_COLLECTIVE = r"""
import json, os, statistics, time
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
strategy = tf.distribute.MultiWorkerMirroredStrategy(
    communication_options=tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING))
buffer = tf.ones([int(os.environ["PARAMS"])])

@tf.function
def reduce():
    return tf.distribute.get_replica_context().all_reduce("sum", buffer)

times = []
for i in range(25):
    t0 = time.perf_counter()
    out = strategy.run(reduce)
    strategy.experimental_local_results(out)[0].numpy()  # block until the reduction is back
    times.append(time.perf_counter() - t0)
if os.environ["RANK"] == "0":
    print("RESULT " + json.dumps({"allreduce_s": statistics.median(times[5:])}), flush=True)
"""


def _result(output: str) -> dict:
    for line in output.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"no result from the collective run:\n{output[-2000:]}")


def collective_alone(framework: str, python: str) -> float:
    """Seconds for one all-reduce of CNN_PARAMS float32 between 2 ranks on 127.0.0.1."""
    from tui_bench.engine.runs.worker_launch import loopback_ports

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LD_LIBRARY_PATH")}
    env.update(PARAMS=str(CNN_PARAMS), CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "collective.py"
        if framework == "torch":
            script.write_text(TORCH_COLLECTIVE)
            (port,) = loopback_ports(1)
            launch = [
                python,
                "-I",  # as the engine starts it: the adapters tree never on sys.path
                str(REPO / "adapters" / "torch" / "launch.py"),
                "--rdzv-backend=loopback-static",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                "--nnodes=1",
                "--nproc-per-node=2",
                str(script),
            ]
            done = subprocess.run(launch, env=env, capture_output=True, text=True, timeout=300)
            return _result(done.stdout + done.stderr)["allreduce_s"]
        script.write_text(TF_COLLECTIVE)
        hosts = [f"127.0.0.1:{p}" for p in loopback_ports(2)]
        procs = []
        for rank in range(2):
            config = {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": rank}}
            procs.append(
                subprocess.Popen(
                    [python, str(script)],
                    env={**env, "RANK": str(rank), "TF_CONFIG": json.dumps(config)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        outputs = [p.communicate(timeout=300)[0] for p in procs]
        return _result(outputs[0])["allreduce_s"]


# -- the three runs through tui-bench ------------------------------------------------------------
SHAPES = {  # name -> (workers, threads, batch_size); weak scaling throughout
    "1w x 1t": (1, 1, 32),
    "1w x 2t": (1, 2, 64),
    "2w x 1t": (2, 1, 32),
}
APIS = {"torch": "eager", "tensorflow": "graph"}


def measure(framework: str, rounds: int, steps: int) -> dict:
    from tui_bench.engine.machine import runtimes
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs.runner import execute
    from tui_bench.engine.spec import RunSpec

    api = APIS[framework]
    runtime = runtimes.resolve(framework, api)
    figures: dict[str, dict[str, list[float]]] = {
        name: {"rate": [], "step": [], "setup": [], "straggler": []} for name in SHAPES
    }
    with tempfile.TemporaryDirectory() as home:
        history = History(Path(home))
        for round_ in range(rounds):
            order = list(SHAPES) if round_ % 2 == 0 else list(reversed(SHAPES))
            for name in order:
                workers, threads, batch = SHAPES[name]
                spec = RunSpec(
                    framework=framework,
                    api=api,
                    dataset="synthetic-mnist",
                    threads=threads,
                    workers=workers,
                    batch_size=batch,
                    epochs=1,
                    steps_per_epoch=steps,
                    warmup_steps=3,
                    train_samples=64 * (steps + 1),
                    test_samples=64,
                ).validate()
                result = execute(spec, history, runtime=runtime, stall_timeout=300)
                if not result.ok:
                    raise SystemExit(f"{framework} {name}: {result.reason}\n{result.log_tail}")
                m = result.metrics()
                figures[name]["rate"].append(m["samples_per_s"])
                figures[name]["step"].append(m["step_median_s"])
                if m.get("comm_setup_s") is not None:
                    figures[name]["setup"].append(m["comm_setup_s"])
                if m.get("rank_straggler_ratio") is not None:
                    figures[name]["straggler"].append(m["rank_straggler_ratio"])
    med = {
        name: {k: statistics.median(v) if v else None for k, v in values.items()}
        for name, values in figures.items()
    }
    two, one, threads2 = med["2w x 1t"], med["1w x 1t"], med["1w x 2t"]
    allreduce = collective_alone(framework, runtime.python)
    return {
        "framework": f"{framework}/{api}",
        "medians": med,
        "efficiency_2w": two["rate"] / (2 * one["rate"]),
        "workers_vs_threads": two["rate"] / threads2["rate"],
        "sync_overhead_share": (two["step"] - one["step"]) / two["step"],
        "allreduce_s": allreduce,
        "allreduce_share": allreduce / two["step"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=list(APIS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run (+3 warm-up)")
    args = parser.parse_args()
    load1, _, _ = os.getloadavg()
    cores = os.cpu_count()
    print(f"machine: {cores} logical cores, load average (1 min) {load1:.2f} at start")
    for framework in [args.only] if args.only else list(APIS):
        r = measure(framework, args.rounds, args.steps)
        print(f"\n{r['framework']}  (medians of {args.rounds} rounds, {args.steps} steps each)")
        print(
            f"  {'shape':<9} {'global batch':>12} {'samples/s':>10} {'step ms':>8} "
            f"{'comm set-up s':>13} {'slowest/fastest rank':>20}"
        )
        for name, (workers, _, batch) in SHAPES.items():
            m = r["medians"][name]
            setup = f"{m['setup']:.3f}" if m["setup"] is not None else "—"
            straggler = f"{m['straggler']:.2f}" if m["straggler"] is not None else "—"
            print(
                f"  {name:<9} {batch * workers:>12} {m['rate']:>10.1f} "
                f"{m['step'] * 1000:>8.1f} {setup:>13} {straggler:>20}"
            )
        print(f"  efficiency of 2 workers (DLBS: thr_2 / (2 x thr_1)): {r['efficiency_2w']:.0%}")
        print(
            f"  2 workers x 1 thread / 1 worker x 2 threads (samples/s): "
            f"{r['workers_vs_threads']:.2f}"
        )
        print(
            f"  communication share of a 2-worker step: sync overhead "
            f"{r['sync_overhead_share']:.0%}; one all-reduce of {CNN_PARAMS} float32 alone "
            f"{r['allreduce_s'] * 1000:.1f} ms = {r['allreduce_share']:.0%} of the step"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
