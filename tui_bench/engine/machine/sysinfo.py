"""The machine a run happened on: recorded with every run, shown by ``tui-bench sysinfo``."""

from __future__ import annotations

import functools
import getpass
import importlib.metadata
import os
import platform
import socket
from pathlib import Path
from typing import Any

import psutil

from tui_bench import __version__
from tui_bench.engine.machine.sampler import Nvml


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
def machine_fingerprint() -> dict[str, Any]:
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


# -- the logout trap ----------------------------------------------------------------------------
_LOGIND_CONF = (
    "usr/lib/systemd/logind.conf.d/*.conf",
    "usr/local/lib/systemd/logind.conf.d/*.conf",
    "etc/systemd/logind.conf",
    "etc/systemd/logind.conf.d/*.conf",
    "run/systemd/logind.conf.d/*.conf",
)


def _logind_settings(root: Path) -> dict[str, str]:
    """[Login] settings as logind reads them: the main file, then drop-ins; the last one wins."""
    settings: dict[str, str] = {}
    for pattern in _LOGIND_CONF:
        for path in sorted(root.glob(pattern)):
            section = ""
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1]
                elif section == "Login" and "=" in line and not line.startswith(("#", ";")):
                    key, value = line.split("=", 1)
                    settings[key.strip()] = value.strip()
    return settings


def logout_trap(
    root: Path = Path("/"), user: str | None = None, in_session: bool | None = None
) -> str | None:
    """A one-line warning if systemd-logind will kill this user's processes at logout (runs
    included, detached or not) because ``KillUserProcesses=yes`` and lingering is off; else None.

    ``root``, ``user`` and ``in_session`` exist for tests; by default they are this machine's."""
    user = user or getpass.getuser()
    if in_session is None:
        in_session = (root / "run/systemd/system").is_dir() and bool(
            os.environ.get("XDG_SESSION_ID")
        )
    if not in_session:
        return None
    settings = _logind_settings(root)
    if settings.get("KillUserProcesses", "no").lower() not in ("yes", "true", "1", "on"):
        return None
    if user in settings.get("KillExcludeUsers", "root").split():
        return None
    if (root / "var/lib/systemd/linger" / user).exists():
        return None
    return (
        "systemd kills your processes when you log out (KillUserProcesses=yes, lingering off): "
        f"runs left running will die; fix: loginctl enable-linger {user}"
    )
