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
from typing import Any

import psutil


class Nvml:
    """Thin NVML wrapper; every query that the GPU does not support is left out, never raised."""

    def __init__(self) -> None:
        self.available = False
        self.error: str | None = None
        self._pynvml = None
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
            name = self._try(lambda h=handle: nv.nvmlDeviceGetName(h))
            memory = self._try(lambda h=handle: nv.nvmlDeviceGetMemoryInfo(h))
            capability = self._try(lambda h=handle: nv.nvmlDeviceGetCudaComputeCapability(h))
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
        return out


def process_tree_sample(root: psutil.Process, cache: dict[int, psutil.Process]) -> dict[str, float]:
    """CPU %, RSS and threads summed over a process and its descendants.

    ``cache`` keeps Process objects between calls: psutil's cpu_percent is measured since the
    previous call on the *same* object, and the first call on a new one returns 0.0."""
    procs = [root]
    try:
        procs += root.children(recursive=True)
    except psutil.Error:
        pass
    cpu = rss = threads = 0.0
    counted = 0
    alive: dict[int, psutil.Process] = {}
    for proc in procs:
        proc = cache.get(proc.pid, proc)
        try:
            with proc.oneshot():
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
                threads += proc.num_threads()
            alive[proc.pid] = proc
            counted += 1
        except psutil.Error:
            continue  # exited between listing and reading
    cache.clear()
    cache.update(alive)
    return {"cpu_pct": cpu, "rss_mib": rss / 2**20, "threads": threads, "processes": counted}


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

    def __post_init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.gpu_indices and self.nvml is None:
            self.nvml = Nvml()
        if self.nvml is not None and self.nvml.available:
            self.gpu_indices = [i for i in self.gpu_indices if i < len(self.nvml.handles)]
        else:
            self.gpu_indices = []

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tui-bench-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> SamplerSummary:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return summarise(self.samples)

    def _run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        cache: dict[int, psutil.Process] = {}
        process_tree_sample(root, cache)  # prime cpu_percent: its first reading is always 0.0
        psutil.cpu_percent(None)
        t0 = time.monotonic()
        while not self._stop.wait(self.interval):
            if not root.is_running():
                return
            sample: dict[str, Any] = {"t": time.monotonic() - t0}
            sample.update(process_tree_sample(root, cache))
            sample["system_cpu_pct"] = psutil.cpu_percent(None)
            sample["system_mem_pct"] = psutil.virtual_memory().percent
            for index in self.gpu_indices:
                for key, value in self.nvml.sample(index).items():
                    sample[key if len(self.gpu_indices) == 1 else f"{key}_{index}"] = value
            self.samples.append(sample)
            if self.on_sample is not None:
                self.on_sample(sample)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(samples: list[dict[str, Any]]) -> SamplerSummary:
    """Per-run figures. Energy comes from the GPU's energy counter where it has one, else from
    integrating power over the sampling intervals (marked in ``energy_source``)."""
    summary = SamplerSummary(samples=len(samples))
    if not samples:
        return summary

    def col(key: str) -> list[float]:
        return [s[key] for s in samples if s.get(key) is not None]

    rss, cpu, util = col("rss_mib"), col("cpu_pct"), col("gpu_util")
    summary.peak_rss_mib = max(rss) if rss else None
    summary.mean_cpu_pct = _mean(cpu)
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
