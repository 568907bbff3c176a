"""How often a GPU's NVML total-energy counter advances while the GPU is busy.

    python benchmarks/nvml_counter_steps.py [--seconds 4] [--index 0]

Reads the counter every few milliseconds while torch keeps the GPU busy with matmuls and prints
the gaps between its changes. tui-bench reads the counter at the steady windows' bounds and
trusts a window's delta only from ``sampler.COUNTER_MIN_WINDOW_S`` on: this is the figure that
bound rests on (H200, 26 Nov 2026: 39 changes in 4 s, gaps 0.04-0.11 s, median 0.10 s).
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--index", type=int, default=0)
    args = parser.parse_args()
    try:
        import pynvml as nv
        import torch
    except ImportError as exc:
        print(f"nvml_counter_steps: needs torch and nvidia-ml-py ({exc})")
        return 2
    if not torch.cuda.is_available():
        print("nvml_counter_steps: torch sees no CUDA device")
        return 2
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(args.index)
    work = torch.randn(4096, 4096, device=f"cuda:{args.index}")
    changes: list[tuple[float, int]] = []
    last = nv.nvmlDeviceGetTotalEnergyConsumption(handle)
    watts: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for _ in range(4):
            work = (work @ work).tanh_()
        torch.cuda.synchronize()
        now, energy = time.perf_counter() - start, nv.nvmlDeviceGetTotalEnergyConsumption(handle)
        if energy != last:
            changes.append((now, energy - last))
            last = energy
        watts.append(nv.nvmlDeviceGetPowerUsage(handle) / 1000)
    gaps = [b[0] - a[0] for a, b in zip(changes, changes[1:], strict=False)]
    print(f"{nv.nvmlDeviceGetName(handle)}: {len(changes)} counter changes in {args.seconds:g} s")
    if gaps:
        print(
            f"gaps between changes: min {min(gaps):.3f} s, median {statistics.median(gaps):.3f} s,"
            f" max {max(gaps):.3f} s; steps of {statistics.median(d for _, d in changes):.0f} mJ"
        )
    print(f"power while busy: {min(watts):.0f}-{max(watts):.0f} W")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
