"""The machine a run happened on: recorded with every run, shown by ``tui-bench sysinfo``."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import socket
from typing import Any

import psutil

from tui_bench import __version__
from tui_bench.engine.sampler import Nvml


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def fingerprint() -> dict[str, Any]:
    """Host facts. Framework versions come from the worker itself (its runtime may differ)."""
    memory = psutil.virtual_memory()
    nvml = Nvml()
    gpus = nvml.devices()
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu_model": cpu_model(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "ram_gib": round(memory.total / 2**30, 1),
        "gpus": gpus,
        "gpu_model": gpus[0]["name"] if gpus else None,
        "gpu_driver": gpus[0]["driver"] if gpus else None,
        "cuda_driver": gpus[0]["cuda_driver"] if gpus else None,
        "nvml": "ok" if nvml.available else nvml.error,
        "python": platform.python_version(),
        "tui_bench": __version__,
        "textual": _version("textual"),
    }


def disk_usage(path: str) -> dict[str, float]:
    usage = psutil.disk_usage(path)
    return {"total_gib": usage.total / 2**30, "free_gib": usage.free / 2**30}
