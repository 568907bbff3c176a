"""Resource samples of a worker's whole process tree and of the GPUs, taken in the app process.

psutil gives CPU % (summed over threads and child processes: 200 % is two busy cores), RSS and
thread counts. NVML (nvidia-ml-py, ``import pynvml``) gives GPU utilisation, memory, power,
temperature and the energy counter. No NVML or no GPU is normal: the GPU fields are then absent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psutil

from tui_bench.engine.machine.energy import Rapl, window_joules

# NVML clocks-event (formerly "throttle") reason bits that mean the GPU was slowed by hardware,
# heat or a power cap; idle, application-clock and sync-boost bits are not slowdowns.
CLOCK_EVENT_SLOWDOWNS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}


def clock_event_names(mask: int) -> list[str]:
    """The slowdown reasons set in an NVML clocks-event bitmask, by name."""
    return [name for bit, name in CLOCK_EVENT_SLOWDOWNS.items() if mask & bit]


def clocks_event_reasons(nv: Any, handle: Any) -> int | None:
    """The current clocks-event bitmask; NVML renamed the call from "throttle" in driver 535."""
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        call = getattr(nv, name, None)
        if call is not None:
            try:
                return int(call(handle))
            except Exception:
                continue
    return None


class Nvml:
    """Thin NVML wrapper; every query that the GPU does not support is left out, never raised."""

    def __init__(self) -> None:
        self.available = False
        self.error: str | None = None
        self._pynvml: Any = None
        self.handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            self.handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
            self.available = True
        except Exception as exc:  # NVMLError_LibraryNotFound on machines without a driver
            self.error = f"{type(exc).__name__}: {exc}"

    def _try(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:
            return None

    def devices(self) -> list[dict[str, Any]]:
        """Static facts per GPU: name, memory, driver, CUDA driver version, compute capability."""
        if not self.available:
            return []
        nv = self._pynvml
        driver = self._try(nv.nvmlSystemGetDriverVersion)
        cuda = self._try(nv.nvmlSystemGetCudaDriverVersion)
        out = []
        for index, handle in enumerate(self.handles):
            name = self._try(partial(nv.nvmlDeviceGetName, handle))
            memory = self._try(partial(nv.nvmlDeviceGetMemoryInfo, handle))
            capability = self._try(partial(nv.nvmlDeviceGetCudaComputeCapability, handle))
            out.append(
                {
                    "index": index,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "memory_total_mib": memory.total / 2**20 if memory else None,
                    "driver": driver.decode() if isinstance(driver, bytes) else driver,
                    "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
                    "compute_capability": ".".join(map(str, capability)) if capability else None,
                }
            )
        return out

    def energy_j(self, index: int) -> float | None:
        """The GPU's total-energy counter in joules (Volta and later), or None."""
        nv = self._pynvml
        energy = self._try(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(self.handles[index]))
        return energy / 1000.0 if energy is not None else None

    def sample(self, index: int) -> dict[str, float]:
        """Live figures for one GPU; keys missing where the GPU does not report them."""
        nv = self._pynvml
        handle = self.handles[index]
        out: dict[str, float] = {}
        util = self._try(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        if util is not None:
            out["gpu_util"] = float(util.gpu)
        memory = self._try(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        if memory is not None:
            out["gpu_mem_mib"] = memory.used / 2**20
            out["gpu_mem_pct"] = 100.0 * memory.used / memory.total
        power = self._try(lambda: nv.nvmlDeviceGetPowerUsage(handle))
        if power is not None:
            out["gpu_power_w"] = power / 1000.0
        temp = self._try(lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))
        if temp is not None:
            out["gpu_temp_c"] = float(temp)
        energy = self._try(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(handle))
        if energy is not None:
            out["gpu_energy_j"] = energy / 1000.0  # millijoules since driver load
        reasons = clocks_event_reasons(nv, handle)
        if reasons is not None:
            out["gpu_clocks_event_reasons"] = float(reasons)
        sm = self._try(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        if sm is not None:
            out["gpu_sm_clock_mhz"] = float(sm)
        default = self._try(
            lambda: nv.nvmlDeviceGetDefaultApplicationsClock(handle, nv.NVML_CLOCK_SM)
        )
        if default:
            out["gpu_default_sm_clock_mhz"] = float(default)
        return out


BUSY_THREAD_FRACTION = 0.5  # a thread that ran for half the interval or more counts as busy
# A steady window measured from CPU times at its bounds needs this long: the kernel counts CPU
# time in clock ticks (10 ms), so shorter windows give cores to no better than a few tens of %.
MIN_BOUNDS_WINDOW_S = 0.2


def cpu_snapshot(root: psutil.Process) -> dict[str, Any]:
    """CPU seconds at one instant: the process tree's, each of its threads', the whole
    machine's busy and steal time. Two of them bound a window exactly, however short it is
    compared with the sampling interval (a 0.5 s steady phase has no 1 s sample inside it)."""
    procs = [root]
    try:
        procs += root.children(recursive=True)
    except psutil.Error:
        pass
    tree = 0.0
    threads: dict[tuple[int, int], float] = {}
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                tree += times.user + times.system
                for t in proc.threads():
                    threads[(proc.pid, t.id)] = t.user_time + t.system_time
        except psutil.Error:
            continue
    system = psutil.cpu_times()
    steal = getattr(system, "steal", 0.0)
    idle = system.idle + getattr(system, "iowait", 0.0)
    # guest time is already inside user on Linux; steal is time the hypervisor gave elsewhere
    total = sum(system) - getattr(system, "guest", 0.0) - getattr(system, "guest_nice", 0.0)
    return {
        "t": time.monotonic(),
        "tree_s": tree,
        "threads": threads,
        "busy_s": total - idle - steal,
        "steal_s": steal,
    }


def window_figures(begin: dict[str, Any], end: dict[str, Any]) -> dict[str, float]:
    """A window's wall time, the run's CPU seconds, other processes' CPU seconds, steal seconds
    and busy threads (those that ran at least half the window), from two ``cpu_snapshot``s."""
    wall = max(end["t"] - begin["t"], 1e-9)
    run = max(0.0, end["tree_s"] - begin["tree_s"])
    busy = sum(
        1
        for key, spent in end["threads"].items()
        if key in begin["threads"] and spent - begin["threads"][key] >= BUSY_THREAD_FRACTION * wall
    )
    return {
        "win_s": wall,
        "win_cpu_s": run,
        "win_other_s": max(0.0, end["busy_s"] - begin["busy_s"] - run),
        "win_steal_s": max(0.0, end["steal_s"] - begin["steal_s"]),
        "win_busy_threads": float(busy),
    }


def process_tree_sample(
    root: psutil.Process,
    cache: dict[int, psutil.Process],
    thread_times: dict[tuple[int, int], float] | None = None,
    interval: float | None = None,
) -> dict[str, float]:
    """CPU %, RSS and threads summed over a process and its descendants; with ``thread_times``
    (kept between calls) and the seconds since the previous call, also ``busy_threads``: OS
    threads that ran at least half of that interval.

    ``cache`` keeps Process objects between calls: psutil's cpu_percent is measured since the
    previous call on the *same* object, and the first call on a new one returns 0.0."""
    procs = [root]
    try:
        procs += root.children(recursive=True)
    except psutil.Error:
        pass
    cpu = rss = threads = 0.0
    counted = busy = 0
    alive: dict[int, psutil.Process] = {}
    seen: dict[tuple[int, int], float] = {}
    for proc in procs:
        proc = cache.get(proc.pid, proc)
        try:
            with proc.oneshot():
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
                threads += proc.num_threads()
                if thread_times is not None:
                    for t in proc.threads():
                        seen[(proc.pid, t.id)] = t.user_time + t.system_time
            alive[proc.pid] = proc
            counted += 1
        except psutil.Error:
            continue  # exited between listing and reading
    cache.clear()
    cache.update(alive)
    out = {"cpu_pct": cpu, "rss_mib": rss / 2**20, "threads": threads, "processes": counted}
    if thread_times is not None:
        if interval:
            for key, spent in seen.items():
                if (
                    key in thread_times
                    and spent - thread_times[key] >= BUSY_THREAD_FRACTION * interval
                ):
                    busy += 1
            out["busy_threads"] = float(busy)
        thread_times.clear()
        thread_times.update(seen)
    return out


@dataclass
class SamplerSummary:
    samples: int = 0
    peak_rss_mib: float | None = None
    mean_cpu_pct: float | None = None
    mean_system_cpu_pct: float | None = None
    mean_gpu_util: float | None = None
    peak_gpu_util: float | None = None
    peak_gpu_mem_mib: float | None = None
    mean_gpu_power_w: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None
    mean_busy_threads: float | None = None
    # Processes in the sampled tree at its largest (a data-parallel run: launcher + every worker).
    peak_processes: int | None = None
    # Steady-state windows (the worker's ``steady`` marks): time, energy counter delta, and the
    # CPU use of the samples inside them.
    steady_windows: int = 0
    steady_s: float | None = None
    steady_energy_j: float | None = None
    # "nvml energy counter" (delta at the window bounds) or "integrated power" (sampled power
    # inside the windows, where the GPU has no energy counter).
    steady_energy_source: str | None = None
    # Why the GPU's steady energy is missing where the GPU has a counter (too coarse for the
    # windows), or None.
    steady_energy_problem: str | None = None
    # CPU package energy over the steady windows (RAPL through powercap, device-level: the whole
    # package), or the one line saying why it could not be read.
    steady_cpu_energy_j: float | None = None
    cpu_energy_source: str | None = None
    cpu_energy_problem: str | None = None
    steady_mean_cpu_pct: float | None = None
    steady_busy_threads: float | None = None
    # How the steady CPU figures were observed: "window bounds" (CPU times read at each steady
    # window's edges: exact), "samples" (sampler windows inside the steady phase) or None.
    steady_observed_source: str | None = None
    steady_samples: int = 0
    # Cores' worth of CPU that other processes and the hypervisor (steal) used meanwhile.
    steady_other_cores: float | None = None
    steady_steal_cores: float | None = None
    logical_cores: int | None = None
    # GPU: share of steady samples with a slowdown clocks-event reason / an SM clock under
    # 0.75x the default application clock, and the reasons seen.
    steady_gpu_throttle_fraction: float | None = None
    steady_gpu_throttle_reasons: list[str] | None = None
    steady_gpu_low_clock_fraction: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class ResourceSampler:
    """Samples a worker every ``interval`` seconds on a daemon thread until ``stop()``."""

    pid: int
    gpu_indices: list[int] = field(default_factory=list)
    interval: float = 1.0
    on_sample: Callable[[dict[str, Any]], None] | None = None
    nvml: Nvml | None = None
    rapl: Rapl | None = None

    def __post_init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.marks: list[dict[str, Any]] = []
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._window_open: dict[str, Any] | None = None
        if self.gpu_indices and self.nvml is None:
            self.nvml = Nvml()
        if self.nvml is not None and self.nvml.available:
            self.gpu_indices = [i for i in self.gpu_indices if i < len(self.nvml.handles)]
        else:
            self.gpu_indices = []
        if self.rapl is None:
            self.rapl = Rapl()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tui-bench-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> SamplerSummary:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return summarise(self.samples, self.marks, self.rapl)

    def mark(self, edge: str) -> None:
        """A steady-state window begins or ends now: read the GPU energy counter at once (NVML
        updates it about every 100 ms) so energy is taken over the window, not the process."""
        mark: dict[str, Any] = {"t": time.monotonic() - self._t0, "edge": edge}
        try:
            snapshot = cpu_snapshot(psutil.Process(self.pid))
        except psutil.Error:
            snapshot = None
        if edge == "begin":
            self._window_open = snapshot
        elif edge == "end" and snapshot is not None and self._window_open is not None:
            mark.update(window_figures(self._window_open, snapshot))
            self._window_open = None
        for index in self.gpu_indices:
            energy = self.nvml.energy_j(index) if self.nvml is not None else None
            if energy is not None:
                mark[f"gpu_energy_j_{index}"] = energy
        if self.rapl is not None and self.rapl.zones and self.rapl.problem is None:
            for zone, uj in (self.rapl.read() or {}).items():
                mark[f"{CPU_ENERGY_PREFIX}{zone}"] = uj
        self.marks.append(mark)

    def _run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        cache: dict[int, psutil.Process] = {}
        thread_times: dict[tuple[int, int], float] = {}
        # prime cpu_percent (its first reading is always 0.0) and the per-thread CPU times
        process_tree_sample(root, cache, thread_times)
        psutil.cpu_percent(None)
        psutil.cpu_times_percent(None)
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            if not root.is_running():
                return
            now = time.monotonic()
            sample: dict[str, Any] = {"t": now - self._t0}
            sample.update(process_tree_sample(root, cache, thread_times, now - last))
            last = now
            sample["system_cpu_pct"] = psutil.cpu_percent(None)
            system = psutil.cpu_times_percent(None)
            cores = psutil.cpu_count() or 1
            # other processes' CPU in the same units as cpu_pct (100 = one core)
            sample["other_cpu_pct"] = max(0.0, sample["system_cpu_pct"] * cores - sample["cpu_pct"])
            sample["steal_pct"] = getattr(system, "steal", 0.0) * cores
            sample["system_mem_pct"] = psutil.virtual_memory().percent
            if self.nvml is not None:
                for index in self.gpu_indices:
                    for key, value in self.nvml.sample(index).items():
                        sample[key if len(self.gpu_indices) == 1 else f"{key}_{index}"] = value
            self.samples.append(sample)
            if self.on_sample is not None:
                self.on_sample(sample)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def steady_windows(marks: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(begin, end) pairs of the worker's steady-state marks, in order; unpaired marks dropped."""
    pairs, opened = [], None
    for mark in marks:
        if mark.get("edge") == "begin":
            opened = mark
        elif mark.get("edge") == "end" and opened is not None:
            pairs.append((opened, mark))
            opened = None
    return pairs


CPU_ENERGY_PREFIX = "cpu_energy_uj_"
# The shortest steady window whose NVML energy-counter delta is reported: the counter advances in
# steps (measured on an H200, 26 Nov 2026: every 0.04-0.11 s, median 0.1 s, under load), so one
# window's delta is off by up to one step: under 10 % from 1 s on.
COUNTER_MIN_WINDOW_S = 1.0


def _steady_energy(
    summary: SamplerSummary,
    samples: list[dict[str, Any]],
    windows: list[tuple[dict[str, Any], dict[str, Any]]],
    rapl: Rapl | None,
) -> None:
    """GPU: the energy counter's delta over the windows, else sampled power integrated inside
    them. CPU: RAPL package counters' delta (wrap-around corrected), else why not."""
    if summary.steady_energy_j is not None:
        summary.steady_energy_source = "nvml energy counter"
    elif windows:
        joules, seen = 0.0, False
        for begin, end in windows:
            inside = [
                s
                for s in samples
                if begin["t"] <= s.get("t", -1) <= end["t"] and "gpu_power_w" in s
            ]
            for a, b in zip(inside, inside[1:], strict=False):
                joules += (b["t"] - a["t"]) * (a["gpu_power_w"] + b["gpu_power_w"]) / 2
                seen = True
        if seen:
            summary.steady_energy_j = joules
            summary.steady_energy_source = "integrated power"
            summary.steady_energy_problem = None
    if rapl is None:
        return
    if rapl.problem is not None:
        summary.cpu_energy_problem = rapl.problem
        return
    cpu_joules = window_joules(windows, rapl.ranges(), CPU_ENERGY_PREFIX)
    if cpu_joules is not None:
        summary.steady_cpu_energy_j = cpu_joules
        summary.cpu_energy_source = (
            f"RAPL package counter ({len(rapl.zones)} zone(s)), whole package, device-level"
        )
    elif windows:
        summary.cpu_energy_problem = "RAPL counters were not read at the steady windows' bounds"


def _steady(summary: SamplerSummary, samples: list[dict[str, Any]], marks: list[dict]) -> None:
    windows = steady_windows(marks)
    summary.logical_cores = psutil.cpu_count() or None
    inside = [s for s in samples if any(b["t"] <= s.get("t", -1) <= e["t"] for b, e in windows)]
    summary.steady_samples = len(inside)
    if windows:
        summary.steady_windows = len(windows)
        summary.steady_s = sum(end["t"] - begin["t"] for begin, end in windows)
        keys = sorted({k for b, e in windows for k in b if k.startswith("gpu_energy_j") and k in e})
        deltas = [e[k] - b[k] for b, e in windows for k in keys if k in b]
        shortest = min(e["t"] - b["t"] for b, e in windows)
        if deltas and shortest >= COUNTER_MIN_WINDOW_S and min(deltas) > 0:
            summary.steady_energy_j = sum(deltas)
        elif deltas:
            # The counter moves in steps (an H200's every ~0.1 s): over a 50 ms window it reads
            # 0 J or a whole step, so only windows of many steps give a figure within ~10 %.
            summary.steady_energy_problem = (
                f"steady windows of {shortest:.2f} s are too short for the NVML energy counter "
                f"(it advances about every 0.1 s; {COUNTER_MIN_WINDOW_S:.0f} s or more gives a "
                "figure): more steps per epoch"
                if shortest < COUNTER_MIN_WINDOW_S
                else "the NVML energy counter did not advance inside a steady window"
            )
    bounded = [e for _, e in windows if "win_s" in e]
    wall = sum(e["win_s"] for e in bounded)
    if bounded and wall >= MIN_BOUNDS_WINDOW_S:
        summary.steady_observed_source = "window bounds"
        summary.steady_mean_cpu_pct = 100.0 * sum(e["win_cpu_s"] for e in bounded) / wall
        summary.steady_busy_threads = (
            sum(e["win_busy_threads"] * e["win_s"] for e in bounded) / wall
        )
        summary.steady_other_cores = sum(e["win_other_s"] for e in bounded) / wall
        summary.steady_steal_cores = sum(e["win_steal_s"] for e in bounded) / wall
    elif inside:
        summary.steady_observed_source = "samples"
        summary.steady_mean_cpu_pct = _mean([s["cpu_pct"] for s in inside if "cpu_pct" in s])
        summary.steady_busy_threads = _mean(
            [s["busy_threads"] for s in inside if s.get("busy_threads") is not None]
        )
    # Contention falls back on every sample when the steady phase had none of its own: what
    # other processes did during the run is still what the run competed with.
    judged = inside or samples
    if summary.steady_other_cores is None:
        other = _mean([s["other_cpu_pct"] for s in judged if "other_cpu_pct" in s])
        steal = _mean([s["steal_pct"] for s in judged if "steal_pct" in s])
        summary.steady_other_cores = other / 100.0 if other is not None else None
        summary.steady_steal_cores = steal / 100.0 if steal is not None else None
    _gpu_clocks(summary, judged)


def _gpu_clocks(summary: SamplerSummary, samples: list[dict[str, Any]]) -> None:
    masks = [
        int(v) for s in samples for k, v in s.items() if k.startswith("gpu_clocks_event_reasons")
    ]
    if masks:
        slowed = [m for m in masks if any(m & bit for bit in CLOCK_EVENT_SLOWDOWNS)]
        summary.steady_gpu_throttle_fraction = len(slowed) / len(masks)
        seen = 0
        for m in slowed:
            seen |= m
        summary.steady_gpu_throttle_reasons = clock_event_names(seen)
    pairs = []
    for s in samples:
        for key, clock in s.items():
            if key.startswith("gpu_sm_clock_mhz"):
                default = s.get(key.replace("gpu_sm_clock_mhz", "gpu_default_sm_clock_mhz"))
                if default:
                    pairs.append(clock < 0.75 * default)
    if pairs:
        summary.steady_gpu_low_clock_fraction = sum(pairs) / len(pairs)


def summarise(
    samples: list[dict[str, Any]],
    marks: list[dict[str, Any]] | None = None,
    rapl: Rapl | None = None,
) -> SamplerSummary:
    """Per-run figures. Energy comes from the GPU's energy counter where it has one, else from
    integrating power over the sampling intervals (marked in ``energy_source``). With the
    worker's steady-state ``marks``, also the energy counter's delta over those windows only
    (``steady_energy_j``, what samples/J is computed from) and the CPU use inside them."""
    summary = SamplerSummary(samples=len(samples))
    _steady(summary, samples, marks or [])
    _steady_energy(summary, samples, steady_windows(marks or []), rapl)
    if not samples:
        return summary

    def col(key: str) -> list[float]:
        return [s[key] for s in samples if s.get(key) is not None]

    rss, cpu, util = col("rss_mib"), col("cpu_pct"), col("gpu_util")
    summary.peak_rss_mib = max(rss) if rss else None
    summary.mean_cpu_pct = _mean(cpu)
    summary.mean_busy_threads = _mean(col("busy_threads"))
    processes = col("processes")
    summary.peak_processes = int(max(processes)) if processes else None
    summary.mean_system_cpu_pct = _mean(col("system_cpu_pct"))
    summary.mean_gpu_util = _mean(util)
    summary.peak_gpu_util = max(util) if util else None
    mem = col("gpu_mem_mib")
    summary.peak_gpu_mem_mib = max(mem) if mem else None
    power = col("gpu_power_w")
    summary.mean_gpu_power_w = _mean(power)
    energy = col("gpu_energy_j")
    if len(energy) >= 2:
        summary.energy_j = energy[-1] - energy[0]
        summary.energy_source = "nvml energy counter"
    elif len(power) >= 2:
        times = [s["t"] for s in samples if s.get("gpu_power_w") is not None]
        summary.energy_j = sum(
            (times[i] - times[i - 1]) * (power[i] + power[i - 1]) / 2 for i in range(1, len(power))
        )
        summary.energy_source = "integrated power"
    return summary
