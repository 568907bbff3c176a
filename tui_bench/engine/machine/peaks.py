"""The machine's peak FLOP/s, the number a run's FLOPs are held against (MFU): one home.

Two peaks, always named:
- **measured**: the best square matmul this machine runs (the script the prober's manifest names as its ``hardware_probe``) at the
  run's threads and precision, over every installed framework whose manifest declares a ``peak_probe`` (today torch
  eager, TensorFlow graph and XLA, JAX jit; each in its own runtime, at ``PEAK_SIZES``), the winner
  named (framework, size, dtype, threads). Cached per host, runtimes, device, threads and
  precision with its date (``peaks.json`` in the cache directory); ``tui-bench hardware``
  measures again; a missing entry is measured once, in seconds, before the first run that
  needs it. A run that goes faster than it (a measured MFU above 1) raises it: the run's own
  achieved FLOP/s becomes the measured peak, named as such, for it and for later runs
  (``raise_peak``), so no run reports a measured MFU above 1.
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

from tui_bench.engine import catalog
from tui_bench.engine.machine import runtimes
from tui_bench.engine.machine.limits import MFU_ABOVE_ONE
from tui_bench.engine.machine.sampler import cpu_snapshot
from tui_bench.engine.paths import cache_home

PROBE_TIMEOUT_S = 120.0
PROBE_SIZE = 1024
# The matmul sizes the peak is the best of: the 1024² that fits every cache level's blocking,
# and a 2048² whose larger tiles some libraries (Eigen, XLA) run faster.
PEAK_SIZES = (PROBE_SIZE, 2 * PROBE_SIZE)
# The frameworks whose matmul the measured peak is the best of: (probe name, catalog framework,
# API whose runtime runs it). A framework without a runtime here is skipped, and said so.
PROBE_REPEATS = 7
# The peak a run is held against is judged like a run (results/stability.py): enough calls for
# its spread and steady state to be judged, within a few seconds however slow the kernel is.
PEAK_CALLS = 30
# Per matmul row: eight rows (three frameworks, two sizes) are measured before a first run.
PEAK_BUDGET_S = 1.0

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


def prober() -> catalog.Framework | None:
    """The framework whose package holds the hardware probe (its manifest's ``hardware_probe``):
    the script that measures the card's compute rows and every ``peak_probe`` kernel."""
    return next((fw for fw in catalog.FRAMEWORKS.values() if fw.hardware_probe), None)


def peak_frameworks() -> list[tuple[str, str, str]]:
    """(kernel, framework, api) of every framework whose manifest declares a ``peak_probe``: the
    measured peak is the best of their matmuls, the prober's own first."""
    first = prober()
    found = [
        (fw.peak_probe[1], fw.name, fw.peak_probe[0])
        for fw in catalog.FRAMEWORKS.values()
        if fw.peak_probe is not None
    ]
    return sorted(found, key=lambda row: first is None or row[1] != first.name)


def _probe_pythons() -> dict[str, str]:
    """The interpreter of each peak framework's runtime installed here, by kernel name."""
    found: dict[str, str] = {}
    for name, framework, api in peak_frameworks():
        try:
            found[name] = runtimes.resolve(framework, api).python
        except runtimes.RuntimeUnavailable:
            continue
    return found


def _runtime_key() -> str | None:
    """Every probed runtime's key (an install in any of them measures the peak again)."""
    keys = []
    for name, python in sorted(_probe_pythons().items()):
        try:
            keys.append(f"{name}={runtimes._probe_key(python)}")
        except OSError:
            keys.append(f"{name}={python}")
    return "+".join(keys) or None


def cache_key(device: str, threads: int, row: str, runtime: str | None = None) -> str:
    threads_part = f"threads={threads}" if device == "cpu" else "threads=-"
    runtime = runtime if runtime is not None else (_runtime_key() or "no probe runtime")
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


def best_rows(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The fastest matmul row per precision over every framework and size a probe ran (by its
    fastest call, ``best_tflops``), each row naming its framework."""
    best: dict[str, dict[str, Any]] = {}
    for row in result.get("compute") or []:
        if row.get("kernel") != "matmul" or not row.get("tflops"):
            continue
        row = {"framework": result.get("framework", "?"), **row}
        speed = row.get("best_tflops") or row["tflops"]
        held = best.get(row["precision"])
        if held is None or speed > (held.get("best_tflops") or held["tflops"]):
            best[row["precision"]] = row
    return best


def _rows_text(result: dict[str, Any], precision: str) -> str:
    """Every candidate of one precision, best first: 'tensorflow 2.21.0 xla 2048² 0.11'."""
    rows = [
        row
        for row in result.get("compute") or []
        if row.get("kernel") == "matmul" and row.get("precision") == precision and row.get("tflops")
    ]
    rows.sort(key=lambda r: -(r.get("best_tflops") or r["tflops"]))
    return "; ".join(
        f"{row.get('framework', result.get('framework', '?'))}"
        f"{' ' + row['variant'] if row.get('variant') else ''} "
        f"{row.get('size', '?')}² {(row.get('best_tflops') or row['tflops']):.4g}"
        for row in rows
    )


def store_probe(
    result: dict[str, Any], device: str, threads: int, load: ProbeLoad | None = None
) -> None:
    """Keep the best matmul row of each precision of a probe result (``tui-bench hardware`` and
    ``measure``: every framework's rows together) with its calls' times and the ``load`` it was
    measured under (a row without them is not kept: it could not be judged). The winner is
    named, and the candidates it beat are kept beside it (``candidates``)."""
    if "error" in result or load is None:
        return
    when = datetime.now(UTC).isoformat(timespec="seconds")
    runtime = _runtime_key()
    cache = _load()
    for precision, row in best_rows(result).items():
        threads_text = f", {result.get('threads') or threads} threads" if device == "cpu" else ""
        best = row.get("best_tflops") or row["tflops"]
        times = row.get("times_s") or []
        variant = f" {row['variant']}" if row.get("variant") else ""
        cache[cache_key(device, threads, precision, runtime)] = {
            "tflops": best,
            "what": f"{row['framework']}{variant} matmul {row.get('shape', '')} "
            f"{precision}{threads_text}, fastest of {len(times)} calls",
            "measured_at": when,
            "times_s": times,
            "load": asdict(load),
            "winner": {
                "framework": row["framework"],
                "variant": row.get("variant"),
                "size": row.get("size"),
                "dtype": precision,
                "threads": result.get("threads") or threads,
            },
            "candidates": _rows_text(result, precision),
            **({"emulated": row["emulated"]} if row.get("emulated") else {}),
        }
    _save(cache)


def raise_peak(
    device: str,
    threads: int,
    precision: str,
    tflops: float,
    what: str,
    times: list[float],
    load: ProbeLoad,
    below: Peak,
) -> Peak:
    """A run went faster than the measured peak (``below``): its own achieved FLOP/s becomes
    the measured peak, named as such, with the run's steady step times and load to be judged
    by, cached for the runs after it. Returns it."""
    when = datetime.now(UTC).isoformat(timespec="seconds")
    text = f"{what}, above the probes' {below.tflops:.4g} TFLOP/s ({below.what})"
    cache = _load()
    key = cache_key(device, threads, PROBE_ROW.get(precision, precision))
    cache[key] = {
        "tflops": tflops,
        "what": text,
        "measured_at": when,
        "times_s": [float(f"{t:.4g}") for t in times],
        "load": asdict(load),
        "raised_by_run": True,
    }
    try:
        _save(cache)
    except OSError:
        pass  # an unwritable cache: this run still says what its peak was
    return Peak(
        tflops, "measured", f"{text}, {when[:10]}", measured_at=when, times=tuple(times), load=load
    )


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


def _probe_command(
    python: str,
    name: str,
    device: str,
    threads: int,
    sizes: tuple[int, ...],
    repeats: int,
    matmul_only: bool,
    precisions: tuple[str, ...],
    budget_s: float | None,
) -> list[str]:
    """The probe script (the prober's ``hardware_probe``) timing kernel ``name``'s matmul; the
    card's conv and latency rows only for the prober's own kernel."""
    fw = prober()
    assert fw is not None and fw.hardware_probe is not None
    command = [python, "-I", str(fw.hardware_probe), "--device", device]
    command += ["--threads", str(threads), "--size", str(sizes[0]), "--repeats", str(repeats)]
    command += ["--framework", name, "--sizes", ",".join(map(str, sizes))]
    if matmul_only or name != _card_kernel():
        command.append("--matmul-only")
    if precisions:
        command += ["--precisions", ",".join(precisions)]
    if budget_s is not None:
        command += ["--budget-s", str(budget_s)]
    pins = any(
        kernel == name and catalog.FRAMEWORKS[framework].pins_affinity(api)
        for kernel, framework, api in peak_frameworks()
    )
    if pins and device == "cpu":  # a framework that honours no thread variable: CPUs pinned
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        command += ["--affinity", ",".join(map(str, cpus))]
    return command


def _card_kernel() -> str | None:
    """The kernel whose probe also measures the card's conv and latency rows: the prober's."""
    fw = prober()
    return fw.peak_probe[1] if fw is not None and fw.peak_probe is not None else None


def _probe_env(threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    for _kernel, framework, _api in peak_frameworks():
        for name in catalog.FRAMEWORKS[framework].thread_env:
            env[name] = str(threads)
    return env


def _run_one(
    name: str, command: list[str], env: dict[str, str]
) -> tuple[dict[str, Any] | None, str | None]:
    """One framework's probe in its runtime: (payload, None) or (None, why). Tests replace it."""
    return runtimes.run_tagged(command, env, "TUI_BENCH_HARDWARE ", PROBE_TIMEOUT_S)


def run_probe(
    device: str,
    threads: int,
    size: int = PROBE_SIZE,
    repeats: int = PROBE_REPEATS,
    matmul_only: bool = False,
    precisions: tuple[str, ...] = (),
    budget_s: float | None = None,
    sizes: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """The hardware probe: the prober's kernel (the card's conv and latency too, unless
    ``matmul_only``), then the matmul of every other framework of ``peak_frameworks()``, each in its own
    runtime (a subprocess), at ``sizes`` (default ``size`` and twice it); ``{"error": ...}``
    when none can run. The payload is the prober's, with every framework's matmul rows in
    ``compute`` (each naming its framework) and ``probes`` saying how each went. The best
    matmul row of each precision is cached as this machine's measured peak, with the load the
    probes ran under (``payload["load"]``)."""
    sizes = sizes or (size, 2 * size)
    pythons = _probe_pythons()
    env = _probe_env(threads)
    window = _Window()
    payload: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = []
    said: dict[str, str] = {}
    card = _card_kernel()
    for name, _framework, _api in peak_frameworks():
        python = pythons.get(name)
        if python is None:
            said[name] = "no runtime installed"
            continue
        command = _probe_command(
            python, name, device, threads, sizes, repeats, matmul_only, precisions, budget_s
        )
        found, problem = _run_one(name, command, env)
        if found is None:
            said[name] = f"failed: {problem}"
            continue
        said[name] = "ok"
        for row in found.get("compute") or []:
            if row.get("kernel") == "matmul":
                row.setdefault("framework", found.get("framework", name))
                row.setdefault("size", size)
            rows.append(row)
        if payload is None or name == card:
            payload = {k: v for k, v in found.items() if k != "compute"}
    if payload is None or (not matmul_only and said.get(card or "") != "ok"):
        # the card's conv and latency rows are the prober's: without it there is no card
        why = "; ".join(f"{name}: {text}" for name, text in said.items())
        return {"error": f"hardware probe failed ({why})"}
    load = window.end()
    payload["compute"] = rows
    payload["probes"] = said
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
        where = f"{device}, {threads} thread(s)" if device == "cpu" else device
        progress(f"measuring this machine's {row} matmul peak on {where} (once) …")
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
    if 1.0 < mfu <= 1.0 + 1e-9:  # a peak raised to this very figure (raise_peak): rounding
        mfu = 1.0
    if mfu > 1.0:
        return Utilization(achieved, peak, None, MFU_ABOVE_ONE)
    return Utilization(achieved, peak, mfu)


def _run_load(resources: dict[str, Any], times: list[float]) -> ProbeLoad:
    """A run's steady-state load (its sampler's cores taken by other work and the hypervisor)
    as a peak's, for a peak the run raised."""

    def number(key: str) -> float:
        value = resources.get(key)
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0

    return ProbeLoad(
        other_cores=round(max(0.0, number("steady_other_cores")), 3),
        steal_cores=round(max(0.0, number("steady_steal_cores")), 3),
        logical_cores=int(number("logical_cores")) or os.cpu_count() or 1,
        loadavg_1m=round(os.getloadavg()[0], 2),
        seconds=round(sum(times), 2),
    )


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
    step_times: Any = (),
    resources: dict[str, Any] | None = None,
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
    that sentence as ``mfu_error``: a wrong peak must not give a number that looks right.

    A run faster than the measured peak raises it (``raise_peak``): its achieved FLOP/s, named
    as this run's own, becomes the measured peak (MFU 1), judged by the run's steady
    ``step_times`` and the load of its ``resources``; ``peak_raised_by_run`` says so and
    ``peak_probe_tflops`` keeps the probes' figure it replaced."""
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
    out["achieved_tflops"] = achieved = per_step / step_s / 1e12
    if measured_peak is not None and achieved > measured_peak.tflops:
        probe_peak = cached(device, threads, precision)
        assert probe_peak is not None
        times = [float(t) for t in step_times or () if isinstance(t, int | float) and t > 0]
        what = (
            f"this run's own achieved FLOP/s ({model} {mode}, median of its steady "
            f"{'requests' if mode == 'inference' else 'steps'})"
        )
        raised = raise_peak(
            device,
            threads,
            precision,
            achieved / scale,
            what,
            times or [step_s],
            _run_load(resources or {}, times or [step_s]),
            probe_peak,
        )
        out["peak_raised_by_run"] = True
        out["peak_probe_tflops"] = measured_peak.tflops
        measured_peak = scaled(raised)
        measured_verdict = measured_problem = None  # judged against the old peak: not this one
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
