"""The machine's peak FLOP/s, the number a run's FLOPs are held against (MFU): one home.

Two peaks, always named:
- **measured**: the hardware probe's square matmul (``adapters/hardware_probe.py``, in the torch
  runtime: the fastest dense kernel this machine runs) at the run's threads and precision. Cached
  per host, runtime, device, threads and precision with its date (``peaks.json`` in the cache
  directory); ``tui-bench hardware`` measures again; a missing entry is measured once, in a few
  seconds, before the first run that needs it.
- **nominal**: for a GPU, the vendor's dense figure (never the "with sparsity" headline, which is
  twice the dense one); for a CPU, cores × clock × FLOPs per cycle from the ISA flags (AVX-512 /
  AVX2 FMA, AMX), an *estimate* where the clock or the FMA unit count is not known (a VM reports
  no maximum clock).

MFU above 1 means the FLOP count or the peak is wrong: it is never shown as a number.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from tui_bench.engine.machine import runtimes
from tui_bench.engine.machine.limits import MFU_ABOVE_ONE
from tui_bench.engine.machine.sampler import cpu_snapshot
from tui_bench.engine.paths import adapters_dir, cache_home

PROBE_TIMEOUT_S = 120.0
PROBE_SIZE = 1024
PROBE_REPEATS = 7
# The peak a run is held against is judged like a run (results/stability.py): enough calls for
# its spread and steady state to be judged, within a few seconds however slow the kernel is.
PEAK_CALLS = 30
PEAK_BUDGET_S = 3.0

# A run's precision setting → the probe's matmul row (and the vendor table's column).
PROBE_ROW = {"fp32": "float32", "tf32": "tf32", "bf16": "bfloat16", "amp-fp16": "float16"}

# Vendor dense peaks, TFLOP/s, per precision ("float32" is the CUDA cores, no tensor cores;
# "tf32"/"bfloat16"/"float16" the tensor cores, dense). Sources, the vendors' datasheets:
# - H100 SXM / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet (the table's tensor figures are
#   "with sparsity"; dense = half): SXM 67 / 494.7 / 989.4, PCIe 51 / 378 / 756, NVL 60 / 417.5 /
#   835.5 (fp32 / tf32 / bf16); H200 SXM as H100 SXM, H200 NVL as H100 NVL (H200 datasheet).
#   The SXM figures are at 1,830 MHz, the clock NVIDIA's tensor figures use, not the 1,980 MHz
#   maximum boost: 132 SMs × 4 tensor cores × 1,024 dense bf16 FLOP per clock × 1.83 GHz =
#   989.4 TFLOP/s (torchtitan's and nanoGPT-style MFU use the same 989). A peak at another clock
#   changes MFU (llm.c's A10 went from 43 % to 22 %), so the clock is named with the figure.
# - A100 (SXM and PCIe alike): A100 datasheet, 19.5 / 156 / 312.
# - L4: L4 datasheet, 30.3 / 60 / 121 (120 / 242 "with sparsity").
# - L40S: L40S datasheet, 91.6 / 183 / 366 (366 / 733 "with sparsity").
# - A10: A10 datasheet, 31.2 / 62.5 / 125.
# - V100 SXM2 / PCIe: V100 datasheet, fp32 15.7 / 14, fp16 tensor 125 / 112 (no tf32, no bf16).
# - T4: T4 datasheet, fp32 8.1, fp16 tensor 65.
# The clock each table figure is computed at, where the datasheet's arithmetic pins it down.
GPU_CLOCKS = {"H100 SXM": "1,830 MHz", "H200 SXM": "1,830 MHz"}
# Matched on the device name in this order (the specific names first).
GPU_PEAKS: tuple[tuple[str, str, dict[str, float]], ...] = (
    (
        "H100 PCIe",
        "H100 PCIe",
        {"float32": 51.2, "tf32": 378.0, "bfloat16": 756.0, "float16": 756.0},
    ),
    ("H100 NVL", "H100 NVL", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5, "float16": 835.5}),
    ("H100", "H100 SXM", {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4}),
    ("H200 NVL", "H200 NVL", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5, "float16": 835.5}),
    ("H200", "H200 SXM", {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4}),
    ("A100", "A100", {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0}),
    ("L40S", "L40S", {"float32": 91.6, "tf32": 183.0, "bfloat16": 366.0, "float16": 366.0}),
    ("L4", "L4", {"float32": 30.3, "tf32": 60.0, "bfloat16": 121.0, "float16": 121.0}),
    ("A10", "A10", {"float32": 31.2, "tf32": 62.5, "bfloat16": 125.0, "float16": 125.0}),
    ("V100 PCIe", "V100 PCIe", {"float32": 14.0, "float16": 112.0}),
    ("V100", "V100 SXM2", {"float32": 15.7, "float16": 125.0}),
    ("T4", "T4", {"float32": 8.1, "float16": 65.0}),
)


@dataclass(frozen=True)
class ProbeLoad:
    """The machine's load while a peak was measured, as a run's steady windows record theirs:
    cores' worth of CPU that other processes (``other_cores``) and the hypervisor
    (``steal_cores``) took over the probe's wall time (its start-up included), and the 1-minute
    load average as it started."""

    other_cores: float
    steal_cores: float
    logical_cores: int
    loadavg_1m: float
    seconds: float


@dataclass(frozen=True)
class Peak:
    """A peak FLOP/s and what it is: ``kind`` "measured" or "nominal", ``what`` in words.

    A measured peak also carries what it is judged by: each timed call's seconds (``times``),
    the load it was measured under and, where its precision ran emulated, the probe's note."""

    tflops: float
    kind: str
    what: str
    estimate: bool = False
    measured_at: str | None = None
    times: tuple[float, ...] = ()
    load: ProbeLoad | None = None
    emulated: str | None = None

    @property
    def label(self) -> str:
        tag = ", estimate" if self.estimate else ""
        return f"{self.kind} peak {self.tflops:.4g} TFLOP/s ({self.what}{tag})"


def gpu_table_entry(device_name: str) -> tuple[str, dict[str, float]] | None:
    """(model as the table names it, its dense peaks) for a GPU name from NVML or the runtime."""
    for needle, model, peaks in GPU_PEAKS:
        if needle in device_name:
            return model, peaks
    return None


# -- CPU nominal peak ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CpuFacts:
    model: str
    flags: frozenset[str]
    max_mhz: float | None  # cpufreq's cpuinfo_max_freq (the turbo maximum), when there is one
    reported_mhz: float | None  # /proc/cpuinfo "cpu MHz" (a VM passes the host's current clock)
    physical_cores: int


def read_cpu_facts(root: Path = Path("/")) -> CpuFacts:
    model, mhz = "", None
    flags: frozenset[str] = frozenset()
    try:
        text = (root / "proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
        elif key == "cpu MHz" and mhz is None:
            try:
                mhz = float(value)
            except ValueError:
                mhz = None
    max_mhz = None
    try:
        khz = (root / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        max_mhz = int(khz.strip()) / 1000.0
    except (OSError, ValueError):
        pass
    try:
        import psutil

        cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except Exception:  # noqa: BLE001 - psutil is a dependency; a strange /proc must not stop a run
        cores = os.cpu_count() or 1
    return CpuFacts(model, flags, max_mhz, mhz, cores)


def cpu_flops_per_cycle(flags: frozenset[str], precision: str) -> tuple[int, str, bool]:
    """(FLOPs per cycle per core, how it was reasoned, estimate?) for float32 or bfloat16.

    Two FMA units are assumed (every AVX2 core since Haswell / Zen; the larger Xeon SKUs for
    AVX-512, whose smaller ones have one): an estimate wherever the unit count is assumed."""
    if precision == "bfloat16" and "amx_bf16" in flags:
        # AMX: 1024 bf16 FLOPs per cycle per core (Intel's Sapphire Rapids figures).
        return 1024, "AMX-BF16 tiles, 1024 FLOPs/cycle/core", False
    if precision == "bfloat16" and "avx512_bf16" in flags:
        return 128, "AVX512-BF16 dot products, 2 units × 32 MACs assumed", True
    if "avx512f" in flags:
        return 64, "AVX-512 FMA, 2 units × 16 lanes × 2 assumed", True
    if "fma" in flags and "avx2" in flags:
        return 32, "AVX2 FMA, 2 units × 8 lanes × 2", True
    if "avx" in flags:
        return 16, "AVX add + multiply, 8 lanes each", True
    return 8, "SSE add + multiply, 4 lanes each", True


def cpu_nominal(facts: CpuFacts, threads: int, precision: str) -> Peak | None:
    """cores (min(threads, physical cores)) × clock × FLOPs per cycle; None for fp16 on a CPU."""
    row = PROBE_ROW.get(precision, precision)
    if row not in ("float32", "bfloat16"):
        return None
    per_cycle, how, estimate = cpu_flops_per_cycle(facts.flags, row)
    cores = max(1, min(threads, facts.physical_cores))
    if facts.max_mhz:
        mhz, clock = facts.max_mhz, f"{facts.max_mhz:.0f} MHz cpufreq maximum"
    elif facts.reported_mhz:
        mhz, estimate = facts.reported_mhz, True
        clock = (
            f"{facts.reported_mhz:.0f} MHz as /proc/cpuinfo reports it (no cpufreq: clock unknown)"
        )
    else:
        return None
    tflops = cores * mhz * 1e6 * per_cycle / 1e12
    what = f"{cores} core(s) × {clock} × {per_cycle} ({how}), {facts.model or 'cpu'}"
    return Peak(tflops, "nominal", what, estimate=estimate)


def nominal(device: str, device_name: str | None, threads: int, precision: str) -> Peak | None:
    """The vendor's dense figure (GPU) or the ISA estimate (CPU); None where none is known."""
    row = PROBE_ROW.get(precision, precision)
    if device == "cpu":
        return cpu_nominal(read_cpu_facts(), threads, precision)
    entry = gpu_table_entry(device_name or "")
    if entry is None or row not in entry[1]:
        return None
    model, peaks = entry
    clock = f" at {GPU_CLOCKS[model]}" if model in GPU_CLOCKS else ""
    return Peak(peaks[row], "nominal", f"{model} dense {row}, vendor datasheet{clock}")


# -- measured peak ------------------------------------------------------------------------------
def cache_path() -> Path:
    return cache_home() / "peaks.json"


def _load() -> dict[str, Any]:
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: measured again, never a traceback
    return data if isinstance(data, dict) else {}


def _save(cache: dict[str, Any]) -> None:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _runtime_key() -> str | None:
    try:
        python = runtimes.resolve("torch", "eager").python
    except runtimes.RuntimeUnavailable:
        return None
    try:
        return runtimes._probe_key(python)
    except OSError:
        return python


def cache_key(device: str, threads: int, row: str, runtime: str | None = None) -> str:
    threads_part = f"threads={threads}" if device == "cpu" else "threads=-"
    runtime = runtime if runtime is not None else (_runtime_key() or "no torch runtime")
    return f"{socket.gethostname()}|{runtime}|{device}|{threads_part}|{row}"


def _load_from_entry(entry: Any) -> ProbeLoad | None:
    if not isinstance(entry, dict):
        return None
    try:
        load = ProbeLoad(
            float(entry["other_cores"]),
            float(entry["steal_cores"]),
            int(entry["logical_cores"]),
            float(entry["loadavg_1m"]),
            float(entry["seconds"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    numbers = (load.other_cores, load.steal_cores, load.loadavg_1m, load.seconds)
    if not all(math.isfinite(x) and x >= 0 for x in numbers) or load.logical_cores < 1:
        return None
    return load


def _peak_from_entry(entry: Any) -> Peak | None:
    """The cached peak, or None (measured again) where the entry is damaged or predates the
    peak's own verdict: without its calls' times and load it cannot be judged like a run."""
    if not isinstance(entry, dict):
        return None
    try:
        tflops = float(entry["tflops"])
        what, when = str(entry["what"]), str(entry["measured_at"])
        times = tuple(float(t) for t in entry["times_s"])
    except (KeyError, TypeError, ValueError):
        return None
    load = _load_from_entry(entry.get("load"))
    if not tflops > 0 or not times or not all(t > 0 for t in times) or load is None:
        return None
    emulated = entry.get("emulated")
    return Peak(
        tflops,
        "measured",
        f"{what}, {when[:10]}",
        measured_at=when,
        times=times,
        load=load,
        emulated=str(emulated) if emulated else None,
    )


def cached(device: str, threads: int, precision: str) -> Peak | None:
    """The measured peak from the cache, or None (never measures: safe inside a run)."""
    row = PROBE_ROW.get(precision, precision)
    return _peak_from_entry(_load().get(cache_key(device, threads, row)))


def store_probe(
    result: dict[str, Any], device: str, threads: int, load: ProbeLoad | None = None
) -> None:
    """Keep every matmul row of a probe result (``tui-bench hardware`` and ``measure``) with
    its calls' times and the ``load`` it was measured under (a row without them is not kept:
    it could not be judged)."""
    if "error" in result or load is None:
        return
    when = datetime.now(UTC).isoformat(timespec="seconds")
    runtime = _runtime_key()
    cache = _load()
    for row in result.get("compute") or []:
        if row.get("kernel") != "matmul" or not row.get("tflops"):
            continue
        threads_text = f", {result.get('threads')} threads" if device == "cpu" else ""
        best = row.get("best_tflops") or row["tflops"]
        times = row.get("times_s") or []
        cache[cache_key(device, threads, row["precision"], runtime)] = {
            "tflops": best,
            "what": f"{result.get('framework', 'torch')} matmul {row.get('shape', '')} "
            f"{row['precision']}{threads_text}, fastest of {len(times)} calls",
            "measured_at": when,
            "times_s": times,
            "load": asdict(load),
            **({"emulated": row["emulated"]} if row.get("emulated") else {}),
        }
    _save(cache)


class _Window:
    """Other processes' and the hypervisor's CPU over a probe run in a child process: the
    machine's busy and steal seconds (the sampler's ``cpu_snapshot``) less this process's and
    its reaped children's own."""

    def __init__(self) -> None:
        self.loadavg_1m = os.getloadavg()[0]
        self.begin = cpu_snapshot(psutil.Process())
        self.children = _children_s()

    def end(self) -> ProbeLoad:
        end = cpu_snapshot(psutil.Process())
        wall = max(end["t"] - self.begin["t"], 1e-9)
        own = max(0.0, end["tree_s"] - self.begin["tree_s"]) + _children_s() - self.children
        busy = end["busy_s"] - self.begin["busy_s"]
        steal = max(0.0, end["steal_s"] - self.begin["steal_s"])
        return ProbeLoad(
            other_cores=round(max(0.0, busy - own) / wall, 3),
            steal_cores=round(steal / wall, 3),
            logical_cores=os.cpu_count() or 1,
            loadavg_1m=round(self.loadavg_1m, 2),
            seconds=round(wall, 2),
        )


def _children_s() -> float:
    times = os.times()
    return times.children_user + times.children_system


def run_probe(
    device: str,
    threads: int,
    size: int = PROBE_SIZE,
    repeats: int = PROBE_REPEATS,
    matmul_only: bool = False,
    precisions: tuple[str, ...] = (),
    budget_s: float | None = None,
) -> dict[str, Any]:
    """The hardware probe in the torch runtime (a subprocess); ``{"error": ...}`` when it cannot
    run. Its matmul rows are cached as this machine's measured peaks, with the load they were
    measured under (``payload["load"]``)."""
    try:
        python = runtimes.resolve("torch", "eager").python
    except runtimes.RuntimeUnavailable as exc:
        return {"error": f"the probe runs on torch: {exc}"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    command = [python, "-I", str(adapters_dir() / "hardware_probe.py"), "--device", device]
    command += ["--threads", str(threads), "--size", str(size), "--repeats", str(repeats)]
    if matmul_only:
        command.append("--matmul-only")
    if precisions:
        command += ["--precisions", ",".join(precisions)]
    if budget_s is not None:
        command += ["--budget-s", str(budget_s)]
    window = _Window()
    payload, problem = runtimes.run_tagged(command, env, "TUI_BENCH_HARDWARE ", PROBE_TIMEOUT_S)
    if payload is None:
        return {"error": f"hardware probe failed: {problem}"}
    load = window.end()
    payload["load"] = asdict(load)
    try:
        store_probe(payload, device, threads, load)
    except OSError:
        pass  # an unwritable cache costs a later re-measure, never the figures
    return payload


def measured(
    device: str,
    threads: int,
    precision: str,
    progress: Callable[[str], None] | None = None,
) -> tuple[Peak | None, str | None]:
    """The cached measured peak, measuring it once (a few seconds) if the cache has none:
    (peak, None) or (None, why)."""
    peak = cached(device, threads, precision)
    if peak is not None:
        return peak, None
    row = PROBE_ROW.get(precision, precision)
    if progress is not None:
        where = f"{threads} thread(s)" if device == "cpu" else device
        progress(f"measuring this machine's {row} matmul peak on {device}, {where} (once) …")
    result = run_probe(
        device,
        threads,
        repeats=PEAK_CALLS,
        matmul_only=True,
        precisions=(row,),
        budget_s=PEAK_BUDGET_S,
    )
    if "error" in result:
        return None, result["error"]
    peak = cached(device, threads, precision)
    if peak is None:
        return None, f"the probe has no {row} matmul on {device}"
    return peak, None


# -- utilization --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Utilization:
    """Achieved FLOP/s of the steady state and its fraction of one peak (or why none)."""

    achieved_tflops: float
    peak: Peak | None
    mfu: float | None
    problem: str | None = None

    def text(self) -> str:
        if self.problem:
            return self.problem
        assert self.peak is not None and self.mfu is not None
        return f"MFU {self.mfu:.1%} of {self.peak.kind} peak"


def utilization(flops_per_step: float, step_s: float, peak: Peak | None) -> Utilization:
    achieved = flops_per_step / step_s / 1e12
    if peak is None:
        return Utilization(achieved, None, None, "no peak known")
    mfu = achieved / peak.tflops
    if mfu > 1.0:
        return Utilization(achieved, peak, None, MFU_ABOVE_ONE)
    return Utilization(achieved, peak, mfu)


def as_dict(peak: Peak | None) -> dict[str, Any] | None:
    return asdict(peak) if peak is not None else None


def run_figures(
    model: str,
    dataset: str,
    global_batch: int,
    step_s: float | None,
    device: str,
    device_name: str | None,
    threads: int,
    precision: str,
    workers: int = 1,
    dims: Any = None,
    mode: str = "train",
    measured_verdict: str | None = None,
    measured_problem: str | None = None,
) -> dict[str, Any]:
    """A finished run's place against the machine's limits, for its record: FLOPs per step,
    achieved TFLOP/s (steady-state median step), MFU of the measured and of the nominal peak,
    each with the peak named; an MFU above 1 is left out and ``mfu_error`` says so.

    Never measures (safe inside a run): the measured peak comes from the cache that
    ``tui-bench run`` and ``tui-bench hardware`` fill. With ``workers`` > 1 every peak is
    ``workers`` × one worker's (each worker has its own threads or GPU). ``dims``: the size of
    a sized model (the gpt's ``GptDims``), which decides its count. ``mode`` "inference": the
    FLOPs of one request (forward only, ``flops_per_request``) over ``step_s``, its p50 latency.

    ``measured_verdict``: the measured peak's own stability verdict, recorded beside it;
    ``measured_problem``: why this run cannot be held against it (``stability.peak_problem``: the
    peak unreliable, measured under another load, or emulated), which leaves its MFU out with
    that sentence as ``mfu_error``: a wrong peak must not give a number that looks right."""
    from tui_bench.engine import flops

    if mode == "generate":  # its figures: machine/bandwidth.generation_figures
        return {}
    if mode == "inference":
        per_step = flops.inference_request_flops(model, dataset, global_batch, dims)
        out: dict[str, Any] = {"flops_per_request": per_step}
    else:
        per_step = flops.train_step_flops(model, dataset, global_batch, dims)
        out = {"flops_per_step": per_step}
    if per_step is None:
        out["mfu_error"] = f"no FLOP count for model '{model}' (engine/flops.py)"
        return out
    if not step_s or step_s <= 0:
        return out
    scale = max(1, workers)

    def scaled(peak: Peak | None) -> Peak | None:
        if peak is None or scale == 1:
            return peak
        return replace(peak, tflops=peak.tflops * scale, what=f"{scale} × {peak.what}")

    measured_peak = scaled(cached(device, threads, precision))
    nominal_peak = scaled(nominal(device, device_name, threads, precision))
    out["achieved_tflops"] = per_step / step_s / 1e12
    for suffix, peak, missing in (
        (
            "",
            measured_peak,
            f"no measured peak for {device}, {threads} thread(s), {precision} yet "
            "(tui-bench run or tui-bench hardware measures it)",
        ),
        ("_nominal", nominal_peak, f"no nominal peak known for {device_name or device}"),
    ):
        used = utilization(per_step, step_s, peak)
        out[f"mfu{suffix}"] = used.mfu
        out[f"mfu{suffix}_peak"] = peak.label if peak is not None else None
        out[f"peak{suffix or '_measured'}_tflops"] = peak.tflops if peak is not None else None
        if used.problem:
            out[f"mfu{suffix}_error"] = missing if peak is None else used.problem
    if measured_peak is not None:
        if measured_verdict:
            out["peak_measured_verdict"] = measured_verdict
            out["mfu_peak"] = f"{measured_peak.label}, {measured_verdict}"
        if measured_peak.load is not None:  # other work's cores while it was measured
            load = measured_peak.load
            out["peak_measured_other_cores"] = round(load.other_cores + load.steal_cores, 3)
        if measured_problem and out.get("mfu") is not None:
            out["mfu"], out["mfu_error"] = None, measured_problem
    return out
