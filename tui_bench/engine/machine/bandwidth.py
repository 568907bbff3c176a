"""The machine's memory bandwidth, the number a decode step's bytes are held against (MBU): one
home, named like the FLOP peaks (``machine/peaks.py``).

Two bandwidths, always named:
- **measured**: a STREAM-like probe (McCalpin's copy and triad kernels) in numpy on the CPU:
  arrays of ``PROBE_MIB`` MiB each (far past any last-level cache), split over the run's threads
  (numpy releases the GIL in its array kernels), the best of ``PROBE_REPEATS`` calls of each.
  Bytes counted as STREAM counts them (copy 2 arrays, triad 3; no write-allocate traffic), so
  numpy's two-pass triad (a temporary) under-states it a little. The copy figure is the one
  held against: a decode step streams weights, as a copy streams its arrays. Cached per host,
  device and threads with its date and the load it ran under (``bandwidth.json`` beside
  ``peaks.json``). A GPU has no measured bandwidth here yet (its probe would run in a framework's
  runtime): it gets the nominal one.
- **nominal**: a GPU's HBM bandwidth from the vendor's datasheet (``GPU_BANDWIDTH``); none for a
  CPU (its memory channels and clock are not known in a VM).

MBU above 1 means the byte count or the bandwidth is wrong: it is never shown as a number.
"""

from __future__ import annotations

import json
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tui_bench.engine.paths import cache_home

PROBE_MIB = 64
PROBE_REPEATS = 5
MBU_ABOVE_ONE = (
    "MBU above 1: not shown (the step's bytes may sit in the processor's caches, as a small "
    "model's do on a CPU, or the byte count or the bandwidth is wrong)"
)

# Vendor HBM bandwidths, GB/s (10^9 bytes/s), matched on the device name in this order (the
# specific names first). Sources: the vendors' datasheets — NVIDIA H100 Tensor Core GPU datasheet
# (H100 SXM 3.35 TB/s, H100 PCIe 2.0 TB/s, H100 NVL 3.9 TB/s), NVIDIA H200 datasheet (H200 SXM and
# NVL 4.8 TB/s), NVIDIA A100 datasheet (A100 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB
# 1,555 GB/s), L40S datasheet (864 GB/s), L4 datasheet (300 GB/s), A10 datasheet (600 GB/s).
GPU_BANDWIDTH: tuple[tuple[str, str, float, str], ...] = (
    ("H100 PCIe", "H100 PCIe", 2000.0, "NVIDIA H100 datasheet"),
    ("H100 NVL", "H100 NVL", 3900.0, "NVIDIA H100 datasheet"),
    ("H100", "H100 SXM", 3350.0, "NVIDIA H100 datasheet"),
    ("H200", "H200", 4800.0, "NVIDIA H200 datasheet"),
    ("A100 80GB PCIe", "A100 80GB PCIe", 1935.0, "NVIDIA A100 datasheet"),
    ("A100-SXM4-80GB", "A100 80GB SXM", 2039.0, "NVIDIA A100 datasheet"),
    ("A100 80GB", "A100 80GB SXM", 2039.0, "NVIDIA A100 datasheet"),
    ("A100", "A100 40GB", 1555.0, "NVIDIA A100 datasheet"),
    ("L40S", "L40S", 864.0, "NVIDIA L40S datasheet"),
    ("L4", "L4", 300.0, "NVIDIA L4 datasheet"),
    ("A10", "A10", 600.0, "NVIDIA A10 datasheet"),
)


@dataclass(frozen=True)
class Bandwidth:
    """A memory bandwidth in GB/s and what it is: ``kind`` "measured" or "nominal"."""

    gbps: float
    kind: str
    what: str
    measured_at: str | None = None
    loadavg_1m: float | None = None

    @property
    def label(self) -> str:
        return f"{self.kind} bandwidth {self.gbps:.4g} GB/s ({self.what})"


def nominal(device: str, device_name: str | None) -> Bandwidth | None:
    """A GPU's datasheet bandwidth, or None (a CPU, or a GPU not in the table)."""
    if device == "cpu" or not device_name:
        return None
    for needle, model, gbps, source in GPU_BANDWIDTH:
        if needle in device_name:
            return Bandwidth(gbps, "nominal", f"{model} HBM, {source}")
    return None


# -- measured (CPU) -----------------------------------------------------------------------------
def cache_path() -> Path:
    return cache_home() / "bandwidth.json"


def _load() -> dict[str, Any]:
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: measured again, never a traceback
    return data if isinstance(data, dict) else {}


def cache_key(device: str, threads: int) -> str:
    return f"{socket.gethostname()}|{device}|threads={threads}"


def cached(device: str, threads: int) -> Bandwidth | None:
    entry = _load().get(cache_key(device, threads))
    if not isinstance(entry, dict):
        return None
    gbps, what = entry.get("gbps"), entry.get("what")
    if not isinstance(gbps, int | float) or isinstance(gbps, bool) or gbps <= 0:
        return None
    if not isinstance(what, str):
        return None
    at, load = entry.get("measured_at"), entry.get("loadavg_1m")
    return Bandwidth(
        float(gbps),
        "measured",
        what,
        at if isinstance(at, str) else None,
        float(load) if isinstance(load, int | float) and not isinstance(load, bool) else None,
    )


def probe(threads: int, mib: int = PROBE_MIB, repeats: int = PROBE_REPEATS) -> dict[str, float]:
    """{"copy_gbps", "triad_gbps"}: the best of ``repeats`` calls of each kernel over arrays of
    ``mib`` MiB, split in ``threads`` contiguous chunks run at once."""
    import numpy as np

    n = mib * 2**20 // 8
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    chunks = [slice(i * n // threads, (i + 1) * n // threads) for i in range(threads)]

    def copy(part: slice) -> None:
        np.copyto(a[part], b[part])

    def triad(part: slice) -> None:
        np.multiply(c[part], 3.0, out=a[part])
        np.add(a[part], b[part], out=a[part])

    best = {"copy": float("inf"), "triad": float("inf")}
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for kernel in (copy, triad):
            list(pool.map(kernel, chunks))  # touch the pages first
            for _ in range(repeats):
                t0 = time.perf_counter()
                list(pool.map(kernel, chunks))
                best[kernel.__name__] = min(best[kernel.__name__], time.perf_counter() - t0)
    return {
        "copy_gbps": 2 * 8 * n / best["copy"] / 1e9,
        "triad_gbps": 3 * 8 * n / best["triad"] / 1e9,
    }


def measured(device: str, threads: int) -> Bandwidth | None:
    """The cached measured bandwidth, measured once (well under a second) if the cache has none;
    None for a GPU (no probe of its memory here yet)."""
    if device != "cpu":
        return None
    found = cached(device, threads)
    if found is not None:
        return found
    load = os.getloadavg()[0]
    result = probe(threads)
    what = (
        f"STREAM-like numpy copy, {threads} thread(s), {PROBE_MIB} MiB arrays, best of "
        f"{PROBE_REPEATS}; triad {result['triad_gbps']:.3g} GB/s"
    )
    at = datetime.now(UTC).isoformat(timespec="seconds")
    entry: dict[str, Any] = {
        "gbps": result["copy_gbps"],
        "triad_gbps": result["triad_gbps"],
        "what": what,
        "measured_at": at,
        "loadavg_1m": load,
    }
    cache = _load()
    cache[cache_key(device, threads)] = entry
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache: measured again next time, the figure still stands
    return cached(device, threads) or Bandwidth(result["copy_gbps"], "measured", what, at, load)


def utilization(
    bytes_per_step: float, step_s: float, bandwidth: Bandwidth | None
) -> tuple[float | None, str | None]:
    """(MBU, None) or (None, why): achieved bytes/s of a step over the bandwidth."""
    if bandwidth is None:
        return None, "no bandwidth known"
    mbu = bytes_per_step / step_s / 1e9 / bandwidth.gbps
    if mbu > 1.0:
        return None, MBU_ABOVE_ONE
    return mbu, None


def generation_figures(
    dims: Any,
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
    precision: str,
    summary: dict[str, Any],
    device: str,
    device_name: str | None,
    threads: int,
    measured_problem: str | None = None,
) -> dict[str, Any]:
    """A generation run against the machine's limits (docs/generation.md): the prefill's FLOPs
    per token, achieved TFLOP/s and MFU at the p50 TTFT against the named FLOP peaks; a decode
    step's bytes, achieved GB/s and MBU at the p50 TPOT against the measured and the nominal
    bandwidth. Never measures the FLOP peak (its cache); measures the CPU bandwidth once.
    ``measured_problem``: why the run cannot be held against the measured FLOP peak."""
    from tui_bench.engine import decode_cost
    from tui_bench.engine.machine import peaks

    out: dict[str, Any] = {}
    prefill = decode_cost.prefill_flops(dims, batch, prompt_tokens)
    out["prefill_flops_per_token"] = prefill / (batch * prompt_tokens)
    ttft = summary.get("ttft_p50_s")
    if isinstance(ttft, int | float) and ttft > 0:
        out["prefill_tflops"] = prefill / ttft / 1e12
        for suffix, peak in (
            ("", peaks.cached(device, threads, precision)),
            ("_nominal", peaks.nominal(device, device_name, threads, precision)),
        ):
            used = peaks.utilization(prefill, ttft, peak)
            out[f"prefill_mfu{suffix}"] = used.mfu
            out[f"prefill_mfu{suffix}_peak"] = peak.label if peak is not None else None
            if used.problem:
                out[f"prefill_mfu{suffix}_error"] = used.problem
        if measured_problem and out.get("prefill_mfu") is not None:
            out["prefill_mfu"], out["prefill_mfu_error"] = None, measured_problem
    step_bytes = decode_cost.decode_step_bytes(dims, batch, prompt_tokens, new_tokens, precision)
    out["decode_bytes_per_step"] = step_bytes
    out["decode_weight_bytes"] = decode_cost.weight_bytes(dims, precision)
    tpot = summary.get("tpot_p50_s")
    if not (isinstance(tpot, int | float) and tpot > 0):
        return out
    out["decode_gbps"] = step_bytes / tpot / 1e9
    for suffix, found in (
        ("", measured(device, threads)),
        ("_nominal", nominal(device, device_name)),
    ):
        mbu, problem = utilization(step_bytes, tpot, found)
        out[f"mbu{suffix}"] = mbu
        out[f"mbu{suffix}_bandwidth"] = found.label if found is not None else None
        out[f"bandwidth{suffix or '_measured'}_gbps"] = found.gbps if found is not None else None
        if problem:
            out[f"mbu{suffix}_error"] = (
                problem
                if found is not None
                else (
                    "no measured bandwidth for a GPU yet (the nominal one stands)"
                    if suffix == "" and device != "cpu"
                    else f"no nominal bandwidth known for {device_name or device}"
                )
            )
    return out
