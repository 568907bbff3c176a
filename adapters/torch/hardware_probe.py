"""Short measurements of one device, for the hardware card: run by the app as
``python -I adapters/torch/hardware_probe.py --device cpu|gpu:N --threads N`` in the torch runtime
(stdlib + numpy + torch; never in the UI process). Prints one line, ``TUI_BENCH_HARDWARE {json}``.

``--framework tensorflow|jax --matmul-only`` times the same square matmul in that framework's
runtime instead (TensorFlow: a tf.function graph and an XLA-compiled one; JAX: jax.jit), at
each of ``--sizes``: the machine's measured peak is the best of every installed framework's
rows (``tui_bench/engine/machine/peaks.py``), not torch's alone.

What it times, and says so in its output:
- computing performance: a square matmul (2·n³ flops) per precision, and a 3×3 convolution
  (2·N·C_out·H·W·C_in·9 flops) in float32; median of timed repeats after warm-up, device
  synchronised; TFLOP/s = flops / median seconds;
- latency: batch-1 inference of the reference CNN (the torch adapter's own ``build_model``, in
  eval mode, no gradients), median over repeats after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def _load_adapters_package() -> None:
    """Load ``adapters`` by path, as the worker does (never from site-packages)."""
    import importlib.util

    here = Path(__file__).resolve().parents[1]  # adapters/, above this package
    spec = importlib.util.spec_from_file_location(
        "adapters", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["adapters"] = module
    spec.loader.exec_module(module)


def _keep_adapters_off_path(root: Path) -> None:
    """Drop the adapters tree from sys.path. A plain ``python adapters/torch/hardware_probe.py`` (no ``-I``) puts
    the script's directory first on it, where ``adapters/torch/`` would stand in for the real
    ``torch`` (tests/test_framework_packages.py)."""

    def inside(entry: str) -> bool:
        where = Path(entry or ".").resolve()
        return where == root or root in where.parents

    sys.path[:] = [entry for entry in sys.path if not inside(entry)]


def timed(run, sync, warmup: int, repeats: int) -> float:
    """Median seconds of ``run`` over ``repeats`` after ``warmup`` untimed calls."""
    return statistics.median(timed_all(run, sync, warmup, repeats))


def timed_all(run, sync, warmup: int, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``run`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        run()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return times


MIN_CALLS = 5  # a peak's calls, however slow: enough for the spread to be judged at all


def timed_within(run, sync, warmup: int, repeats: int, budget_s: float | None) -> list[float]:
    """Seconds of each call after ``warmup`` untimed ones: ``repeats`` calls, or fewer (never
    under ``MIN_CALLS``) once ``budget_s`` is spent (an emulated bf16 matmul takes seconds)."""
    for _ in range(warmup):
        run()
    sync()
    times: list[float] = []
    while len(times) < repeats:
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
        if budget_s is not None and len(times) >= MIN_CALLS and sum(times) >= budget_s:
            break
    return times


def probe(
    device_name: str,
    threads: int,
    size: int,
    repeats: int,
    matmul_only: bool = False,
    precisions: tuple[str, ...] = (),
    budget_s: float | None = None,
) -> dict:
    import torch

    torch.set_num_threads(threads)
    device = torch.device("cpu" if device_name == "cpu" else device_name.replace("gpu", "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"torch {torch.__version__} sees no GPU for {device_name}")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    from adapters.precision import bf16_note

    capability = torch.backends.cpu.get_cpu_capability()  # the kernels torch dispatched to
    dtypes = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
    if device.type == "cuda":
        dtypes["float16"] = torch.float16
    results = []
    # Strict float32 (no TF32) unless the row is "tf32": the peak a run is held against is the
    # one its own precision setting allows (tensor cores only under tf32/bf16/fp16).
    rows = [(label, dtype, False) for label, dtype in dtypes.items()]
    if device.type == "cuda":
        rows.append(("tf32", torch.float32, True))
    if precisions:  # only the rows asked for (bfloat16 without CPU support takes seconds a call)
        rows = [row for row in rows if row[0] in precisions]
    for label, dtype, tf32 in rows:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        times = timed_within(lambda a=a, b=b: torch.mm(a, b), sync, 2, repeats, budget_s)
        seconds = statistics.median(times)
        # Where the CPU has no native bf16 the matmul converts around float32 arithmetic: a
        # peak of that is not a bf16 peak, and the record says so (adapters/precision.py).
        emulated = bf16_note("bf16", device_name) if label == "bfloat16" else None
        results.append(
            {
                "kernel": "matmul",
                "precision": label,
                "shape": f"{size}×{size} @ {size}×{size}",
                "flops": 2 * size**3,
                "median_s": seconds,
                "tflops": 2 * size**3 / seconds / 1e12,
                # the fastest call: what the machine can do (a peak), less exposed to other load
                "best_tflops": 2 * size**3 / min(times) / 1e12,
                # every call, so the peak is judged by the stability rules a run's steps are
                "times_s": [float(f"{t:.4g}") for t in times],
                **({"emulated": emulated} if emulated else {}),
                **({"cpu_capability": capability} if device.type == "cpu" else {}),
            }
        )
    torch.backends.cuda.matmul.allow_tf32 = False
    if matmul_only:  # the peak a run's MFU is held against (engine/machine/peaks.py)
        return {
            "device": device_name,
            "framework": f"torch {torch.__version__}",
            "threads": torch.get_num_threads() if device.type == "cpu" else None,
            "compute": results,
            "repeats": repeats,
            "method": f"{repeats} timed calls (at least {MIN_CALLS}, stopping once "
            f"{budget_s} s are spent) after 2 warm-up calls, device-synchronised",
        }
    n, c, hw = 8, 64, 56
    x = torch.randn(n, c, hw, hw, device=device)
    conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False).to(device)
    flops = 2 * n * c * hw * hw * c * 9
    with torch.inference_mode():
        seconds = timed(lambda: conv(x), sync, 2, repeats)
    results.append(
        {
            "kernel": "conv2d 3×3",
            "precision": "float32",
            "shape": f"N{n} C{c} {hw}×{hw} → C{c}",
            "flops": flops,
            "median_s": seconds,
            "tflops": flops / seconds / 1e12,
        }
    )

    from adapters.torch.adapter import build_model

    torch.manual_seed(0)
    model = build_model("cnn", (28, 28, 1), 10, 0.25, 0).to(device).eval()
    sample = torch.rand(1, 1, 28, 28, device=device)
    latency_repeats = max(repeats * 5, 20)
    with torch.inference_mode():
        latency = timed(lambda: model(sample), sync, 5, latency_repeats)
    return {
        "device": device_name,
        "framework": f"torch {torch.__version__}",
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "compute": results,
        "repeats": repeats,
        "latency": {
            "what": "batch-1 inference of the reference CNN (28×28×1 → 10), eval mode, no grad",
            "median_s": latency,
            "repeats": latency_repeats,
        },
        "method": f"median of {repeats} timed calls after 2 warm-up calls, device-synchronised",
    }


def _row(framework: str, variant: str, label: str, size: int, times: list[float]) -> dict:
    """One matmul row, as the torch probe's."""
    return {
        "kernel": "matmul",
        "framework": framework,
        "variant": variant,
        "precision": label,
        "size": size,
        "shape": f"{size}×{size} @ {size}×{size}",
        "flops": 2 * size**3,
        "median_s": statistics.median(times),
        "tflops": 2 * size**3 / statistics.median(times) / 1e12,
        "best_tflops": 2 * size**3 / min(times) / 1e12,
        "times_s": [float(f"{t:.4g}") for t in times],
    }


def tensorflow_matmul(
    device_name: str, threads: int, sizes: tuple[int, ...], repeats: int, precisions, budget_s
) -> dict:
    """The square matmul in TensorFlow: a tf.function graph (Eigen) and an XLA-compiled one,
    each size, each precision asked (float32 default). Synchronised by reading one element
    back (TF's eager calls are synchronous on the CPU; the read makes it so on a GPU too)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    where = "/CPU:0" if device_name == "cpu" else "/GPU:" + (device_name.partition(":")[2] or "0")
    if device_name != "cpu" and not tf.config.list_physical_devices("GPU"):
        raise SystemExit(f"tensorflow {tf.__version__} sees no GPU for {device_name}")
    tf.config.experimental.enable_tensor_float_32_execution(False)  # strict float32
    dtypes = {"float32": tf.float32, "bfloat16": tf.bfloat16}
    framework = f"tensorflow {tf.__version__}"
    rows = []
    for label in precisions or ("float32",):
        if label not in dtypes:
            continue
        for size in sizes:
            with tf.device(where):
                a = tf.cast(tf.random.normal((size, size), seed=1), dtypes[label])
                b = tf.cast(tf.random.normal((size, size), seed=2), dtypes[label])
                for variant, jit in (("graph", False), ("xla", True)):
                    step = tf.function(lambda a=a, b=b: tf.linalg.matmul(a, b), jit_compile=jit)
                    times = timed_within(
                        lambda step=step: step()[0, 0].numpy(), lambda: None, 2, repeats, budget_s
                    )
                    rows.append(_row(framework, variant, label, size, times))
    return {"framework": framework, "threads": threads, "compute": rows}


def jax_matmul(
    device_name: str, threads: int, sizes: tuple[int, ...], repeats: int, precisions, budget_s
) -> dict:
    """The square matmul under jax.jit, each size and precision; ``block_until_ready`` syncs.
    JAX reads no thread variable: the caller pins this process to ``threads`` CPUs."""
    import jax
    import jax.numpy as jnp

    platform = "cpu" if device_name == "cpu" else "gpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        raise SystemExit(f"jax {jax.__version__} sees no {platform} for {device_name}") from None
    device = devices[int(device_name.partition(":")[2] or 0)] if platform == "gpu" else devices[0]
    dtypes = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
    framework = f"jax {jax.__version__}"
    step = jax.jit(lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
    rows = []
    for label in precisions or ("float32",):
        if label not in dtypes:
            continue
        for size in sizes:
            keys = jax.random.split(jax.random.PRNGKey(0))
            a = jax.device_put(jax.random.normal(keys[0], (size, size), dtypes[label]), device)
            b = jax.device_put(jax.random.normal(keys[1], (size, size), dtypes[label]), device)
            times = timed_within(
                lambda a=a, b=b: step(a, b).block_until_ready(), lambda: None, 2, repeats, budget_s
            )
            rows.append(_row(framework, "jit", label, size, times))
    return {"framework": framework, "threads": threads, "compute": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tui-bench-hardware-probe")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--matmul-only", action="store_true", help="the matmul rows only")
    parser.add_argument("--precisions", default="", help="comma-separated matmul rows to time")
    parser.add_argument("--budget-s", type=float, default=None, help="seconds of calls per row")
    parser.add_argument("--framework", default="torch", choices=("torch", "tensorflow", "jax"))
    parser.add_argument("--sizes", default="", help="comma-separated matmul sizes (default --size)")
    parser.add_argument("--affinity", default="", help="comma-separated CPU ids to pin to")
    args = parser.parse_args(argv)
    if args.affinity:  # before any framework starts its threads (JAX honours only this)
        os.sched_setaffinity(0, {int(c) for c in args.affinity.split(",")})
    precisions = tuple(p for p in args.precisions.split(",") if p)
    sizes = tuple(int(n) for n in args.sizes.split(",") if n) or (args.size,)
    if args.framework != "torch":
        probe_other = tensorflow_matmul if args.framework == "tensorflow" else jax_matmul
        result = probe_other(
            args.device, args.threads, sizes, args.repeats, precisions, args.budget_s
        )
        result.update(device=args.device, repeats=args.repeats, method=_method(args))
        print("TUI_BENCH_HARDWARE " + json.dumps(result), flush=True)
        return 0
    if len(sizes) > 1 and args.matmul_only:  # torch at each size, rows together
        rows: list[dict] = []
        for size in sizes:
            result = probe(
                args.device, args.threads, size, args.repeats, True, precisions, args.budget_s
            )
            for row in result["compute"]:
                row.update(size=size, framework=result["framework"], variant="eager")
            rows += result["compute"]
        result["compute"] = rows
        print("TUI_BENCH_HARDWARE " + json.dumps(result), flush=True)
        return 0
    result = probe(
        args.device,
        args.threads,
        args.size,
        args.repeats,
        args.matmul_only,
        precisions,
        args.budget_s,
    )
    print("TUI_BENCH_HARDWARE " + json.dumps(result), flush=True)
    return 0


def _method(args: argparse.Namespace) -> str:
    return (
        f"{args.repeats} timed calls (at least {MIN_CALLS}, stopping once {args.budget_s} s are "
        "spent) after 2 warm-up calls, device-synchronised"
    )


if __name__ == "__main__":
    _keep_adapters_off_path(Path(__file__).resolve().parents[1])
    if "adapters" not in sys.modules:
        _load_adapters_package()
    from adapters.process_end import leave

    leave(main())
