"""`tui-bench doctor`: is this machine fit to benchmark on? Like `pyperf system show`, for CPU and
NVIDIA GPU boxes. Each check is ok / warn / fail with the command that would fix it; the check
never runs a fix and never needs root. ``fail`` means numbers taken now would be unreliable.

Everything is read from /proc and /sys under a ``root`` (tests pass a fake tree) and from NVML
through an object shaped like ``pynvml`` (tests pass a fake module).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine.machine.sampler import CLOCK_EVENT_SLOWDOWNS, clocks_event_reasons

OK, WARN, FAIL = "ok", "warn", "fail"
LOAD_WARN_FRACTION = 0.5  # load above half the cores: busy (the runner's `machine_load` rule)
OTHER_CPU_WARN_CORES = 0.25  # other processes' CPU, in cores: a quarter core shows in 1 % rules
OTHER_CPU_FAIL_CORES = 1.0  # a whole core taken by others: a multi-thread run cannot be fair
MEM_AVAILABLE_WARN = 0.10  # under 10 % of memory available: the page cache is being squeezed
PSI_MEMORY_WARN = 10.0  # /proc/pressure/memory "some" avg10 in %: tasks stalled on memory


@dataclass(frozen=True)
class Check:
    area: str  # cpu, memory, gpu0, ...
    name: str
    status: str
    value: str
    advice: str = ""  # what to do, with the command; empty when ok

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Report:
    checks: list[Check]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == WARN]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def banner(self) -> str:
        """One line for the Setup screen: "machine: ok" or "machine: 1 failure, 2 warnings"."""
        parts = []
        if self.failures:
            parts.append(f"{len(self.failures)} failure{'s' * (len(self.failures) > 1)}")
        if self.warnings:
            parts.append(f"{len(self.warnings)} warning{'s' * (len(self.warnings) > 1)}")
        return "machine: " + (", ".join(parts) if parts else "ok")

    def snapshot(self) -> dict[str, Any]:
        """What every run record keeps: the banner and the names of the checks not ok."""
        return {
            "banner": self.banner(),
            "fail": [f"{c.area}.{c.name}" for c in self.failures],
            "warn": [f"{c.area}.{c.name}" for c in self.warnings],
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "banner": self.banner(),
            "checks": [c.as_dict() for c in self.checks],
        }


class _Fs:
    """Reads /proc and /sys under a root; a file that is missing or unreadable reads as None."""

    def __init__(self, root: str | Path = "/") -> None:
        self.root = Path(root)

    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        try:
            return self.path(path).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(str(self.path(pattern))))

    def read_abs(self, path: str) -> str | None:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None


# -- CPU and memory --------------------------------------------------------------------------------
def _governor(fs: _Fs) -> Check:
    found = {
        fs.read_abs(p) for p in fs.glob("sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")
    }
    found.discard(None)
    if not found:
        return Check("cpu", "governor", OK, "not exposed (no cpufreq: a VM or a fixed clock)")
    value = ", ".join(sorted(str(g) for g in found))
    if found == {"performance"}:
        return Check("cpu", "governor", OK, value)
    return Check(
        "cpu",
        "governor",
        WARN,
        value,
        "clock speed follows load: sudo cpupower frequency-set -g performance",
    )


def _boost(fs: _Fs) -> Check:
    no_turbo = fs.read("sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo is not None:
        on = no_turbo == "0"
        fix = "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
    else:
        boost = fs.read("sys/devices/system/cpu/cpufreq/boost")
        if boost is None:
            return Check("cpu", "boost", OK, "not exposed")
        on = boost == "1"
        fix = "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost"
    if on:
        return Check("cpu", "boost", WARN, "on (clock varies with heat and load)", fix)
    return Check("cpu", "boost", OK, "off")


def _smt(fs: _Fs) -> Check:
    active = fs.read("sys/devices/system/cpu/smt/active")
    if active is None:
        return Check("cpu", "smt", OK, "not exposed")
    if active == "1":
        return Check(
            "cpu",
            "smt",
            WARN,
            "on (sibling threads share a core's units)",
            "pin runs to one thread per core, or: echo off | sudo tee /sys/devices/system/cpu/smt/control",
        )
    return Check("cpu", "smt", OK, "off")


def _aslr(fs: _Fs) -> Check:
    value = fs.read("proc/sys/kernel/randomize_va_space")
    if value is None:
        return Check("cpu", "aslr", OK, "not exposed")
    # pyperf keeps ASLR on: repeats then sample many memory layouts instead of one lucky one
    if value == "2":
        return Check("cpu", "aslr", OK, "full randomization")
    return Check(
        "cpu",
        "aslr",
        WARN,
        f"randomize_va_space={value}: one memory layout for every repeat",
        "echo 2 | sudo tee /proc/sys/kernel/randomize_va_space",
    )


def _isolated(fs: _Fs) -> Check:
    value = fs.read("sys/devices/system/cpu/isolated")
    if value:
        return Check("cpu", "isolated", OK, f"isolated CPUs {value} (pin runs to them)")
    return Check(
        "cpu",
        "isolated",
        OK,
        "none (optional: isolcpus= keeps other work off the run's cores)",
    )


def _load(fs: _Fs, cores: int) -> Check:
    text = fs.read("proc/loadavg")
    try:
        load1 = float(text.split()[0]) if text else None
    except ValueError:
        load1 = None
    if load1 is None:
        return Check("cpu", "load", OK, "not exposed")
    value = f"{load1:.2f} on {cores} cores (1 min)"
    if load1 >= cores:
        return Check("cpu", "load", FAIL, value, "other work fills every core: wait or stop it")
    if load1 > LOAD_WARN_FRACTION * cores:
        return Check("cpu", "load", WARN, value, "other work is running: see busy processes")
    return Check("cpu", "load", OK, value)


def _busy(processes: Sequence[tuple[str, int, float]] | None) -> Check:
    if processes is None:
        return Check("cpu", "busy processes", OK, "not checked")
    top = sorted(processes, key=lambda p: -p[2])[:3]
    total = sum(p[2] for p in processes) / 100.0
    value = f"others use {total:.2f} cores" + (
        ": " + ", ".join(f"{name} ({pid}) {pct:.0f} %" for name, pid, pct in top) if top else ""
    )
    if total >= OTHER_CPU_FAIL_CORES:
        return Check(
            "cpu", "busy processes", FAIL, value, f"stop or pause them: kill -STOP {top[0][1]}"
        )
    if total >= OTHER_CPU_WARN_CORES:
        return Check(
            "cpu", "busy processes", WARN, value, "close what you do not need while benchmarking"
        )
    return Check("cpu", "busy processes", OK, value)


def _meminfo(fs: _Fs) -> dict[str, int]:
    out = {}
    for line in (fs.read("proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        try:
            out[key.strip()] = int(rest.split()[0])  # kB
        except (IndexError, ValueError):
            continue
    return out


def _memory(fs: _Fs) -> list[Check]:
    info = _meminfo(fs)
    checks = []
    total, available = info.get("MemTotal"), info.get("MemAvailable")
    if total and available is not None:
        share = available / total
        value = f"{available / 2**20:.1f} of {total / 2**20:.1f} GiB available"
        status = WARN if share < MEM_AVAILABLE_WARN else OK
        checks.append(
            Check(
                "memory",
                "available",
                status,
                value,
                "close memory-hungry programs" if status != OK else "",
            )
        )
    swap_total, swap_free = info.get("SwapTotal"), info.get("SwapFree")
    if swap_total:
        used = swap_total - (swap_free or 0)
        value = f"{used / 2**10:.0f} MiB of {swap_total / 2**10:.0f} MiB swap used"
        status = WARN if used > 0.1 * swap_total else OK
        checks.append(
            Check(
                "memory",
                "swap",
                status,
                value,
                "free memory, then: sudo swapoff -a && sudo swapon -a" if status != OK else "",
            )
        )
    pressure = fs.read("proc/pressure/memory")
    if pressure:
        avg10 = None
        for part in pressure.splitlines()[0].split():
            if part.startswith("avg10="):
                try:
                    avg10 = float(part[6:])
                except ValueError:
                    pass
        if avg10 is not None:
            status = WARN if avg10 >= PSI_MEMORY_WARN else OK
            checks.append(
                Check(
                    "memory",
                    "pressure",
                    status,
                    f"tasks stalled on memory {avg10:.1f} % of the last 10 s",
                    "memory is short: close programs or use a smaller batch"
                    if status != OK
                    else "",
                )
            )
    return checks


def _thermal(fs: _Fs) -> Check:
    counts = []
    for path in fs.glob("sys/devices/system/cpu/cpu[0-9]*/thermal_throttle/core_throttle_count"):
        text = fs.read_abs(path)
        if text and text.isdigit():
            counts.append(int(text))
    if not counts:
        return Check("cpu", "thermal throttle", OK, "no counters exposed")
    total = sum(counts)
    if total:
        return Check(
            "cpu",
            "thermal throttle",
            WARN,
            f"{total} throttle events since boot",
            "check cooling; watch: grep . /sys/devices/system/cpu/cpu*/thermal_throttle/*count",
        )
    return Check("cpu", "thermal throttle", OK, "0 events since boot")


def other_processes(
    interval: float = 0.5, exclude: Sequence[int] = ()
) -> list[tuple[str, int, float]]:
    """(name, pid, CPU % of one core) of every process but ours, measured over ``interval``."""
    import time

    import psutil

    skip = {os.getpid(), *exclude}
    procs = []
    for proc in psutil.process_iter(["name"]):
        if proc.pid in skip:
            continue
        try:
            proc.cpu_percent(None)
            procs.append(proc)
        except psutil.Error:
            continue
    time.sleep(interval)
    out = []
    for proc in procs:
        try:
            pct = proc.cpu_percent(None)
        except psutil.Error:
            continue
        if pct > 0:
            out.append((proc.info.get("name") or "?", proc.pid, pct))
    return out


# -- GPU (NVML) --------------------------------------------------------------------------------
def _call(fn: Callable[..., Any] | None, *args: Any) -> Any:
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported and friends: the check says "not supported"
        return None


def gpu_checks(nv: Any, own_pids: Sequence[int] = ()) -> list[Check]:
    """NVML checks per GPU. ``nv`` is ``pynvml`` after ``nvmlInit`` (or a fake of its shape)."""
    checks: list[Check] = []
    count = _call(getattr(nv, "nvmlDeviceGetCount", None)) or 0
    for index in range(count):
        h = _call(nv.nvmlDeviceGetHandleByIndex, index)
        area = f"gpu{index}"

        def get(name: str, *args: Any, _h: Any = h) -> Any:
            return _call(getattr(nv, name, None), _h, *args)

        sm = getattr(nv, "NVML_CLOCK_SM", 1)
        persistence = get("nvmlDeviceGetPersistenceMode")
        if persistence is not None:
            on = persistence == getattr(nv, "NVML_FEATURE_ENABLED", 1)
            checks.append(
                Check(
                    area,
                    "persistence",
                    OK if on else WARN,
                    "on" if on else "off",
                    ""
                    if on
                    else f"the driver unloads between runs: sudo nvidia-smi -i {index} -pm 1",
                )
            )
        app, top = get("nvmlDeviceGetApplicationsClock", sm), get("nvmlDeviceGetMaxClockInfo", sm)
        if app and top:
            low = app < top
            checks.append(
                Check(
                    area,
                    "app clocks",
                    WARN if low else OK,
                    f"SM {app} of {top} MHz max",
                    f"sudo nvidia-smi -i {index} -ac <mem>,{top}" if low else "",
                )
            )
        mask = clocks_event_reasons(nv, h)
        if mask is not None:
            names = [name for bit, name in CLOCK_EVENT_SLOWDOWNS.items() if mask & bit]
            checks.append(
                Check(
                    area,
                    "clocks events",
                    FAIL if names else OK,
                    ", ".join(names) if names else f"no slowdown (0x{mask:x})",
                    "the GPU is slowed now: check cooling and power (nvidia-smi -q -d PERFORMANCE)"
                    if names
                    else "",
                )
            )
        limit, default = (
            get("nvmlDeviceGetPowerManagementLimit"),
            get("nvmlDeviceGetPowerManagementDefaultLimit"),
        )
        if limit and default:
            low = limit < default
            checks.append(
                Check(
                    area,
                    "power limit",
                    WARN if low else OK,
                    f"{limit / 1000:.0f} W of {default / 1000:.0f} W default",
                    f"sudo nvidia-smi -i {index} -pl {default / 1000:.0f}" if low else "",
                )
            )
        ecc = get("nvmlDeviceGetEccMode")
        if ecc is not None:
            current = ecc[0] if isinstance(ecc, (list, tuple)) else ecc
            checks.append(
                Check(area, "ecc", OK, "on" if current else "off (compare only with ECC-off runs)")
            )
        mig = get("nvmlDeviceGetMigMode")
        if mig is not None:
            current = mig[0] if isinstance(mig, (list, tuple)) else mig
            checks.append(
                Check(
                    area,
                    "mig",
                    WARN if current else OK,
                    "on: runs see a slice" if current else "off",
                    f"figures are for a MIG slice; to use the whole GPU: sudo nvidia-smi -i {index} -mig 0"
                    if current
                    else "",
                )
            )
        running = get("nvmlDeviceGetComputeRunningProcesses") or []
        others = [p for p in running if getattr(p, "pid", None) not in set(own_pids)]
        checks.append(
            Check(
                area,
                "other processes",
                WARN if others else OK,
                ", ".join(str(getattr(p, "pid", "?")) for p in others) or "none",
                "other work shares this GPU: nvidia-smi to see it" if others else "",
            )
        )
        width, max_width = (
            get("nvmlDeviceGetCurrPcieLinkWidth"),
            get("nvmlDeviceGetMaxPcieLinkWidth"),
        )
        gen, max_gen = (
            get("nvmlDeviceGetCurrPcieLinkGeneration"),
            get("nvmlDeviceGetMaxPcieLinkGeneration"),
        )
        if width and max_width:
            # the generation drops at idle to save power; a narrower link stays narrow
            narrow = width < max_width
            checks.append(
                Check(
                    area,
                    "pcie link",
                    WARN if narrow else OK,
                    f"x{width} of x{max_width}, gen {gen} of {max_gen} (gen drops at idle)",
                    "reseat the card or use a full-width slot" if narrow else "",
                )
            )
    return checks


def _nvml() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # no driver, no library: a CPU box
        return None


# -- all of it ---------------------------------------------------------------------------------
def check(
    root: str | Path = "/",
    nvml: Any = "auto",
    processes: Sequence[tuple[str, int, float]] | None | str = "auto",
    cores: int | None = None,
) -> Report:
    """Every check. ``nvml``: a pynvml-shaped module, None for none, "auto" to load pynvml.
    ``processes``: (name, pid, CPU %) of other processes, None to skip, "auto" to measure them
    (half a second)."""
    fs = _Fs(root)
    cores = cores or os.cpu_count() or 1
    if processes == "auto":
        processes = other_processes()
    checks = [
        _governor(fs),
        _boost(fs),
        _smt(fs),
        _aslr(fs),
        _isolated(fs),
        _load(fs, cores),
        _busy(processes),  # type: ignore[arg-type]
        _thermal(fs),
        *_memory(fs),
    ]
    nv = _nvml() if nvml == "auto" else nvml
    if nv is not None:
        checks += gpu_checks(nv)
    return Report(checks)


def snapshot() -> dict[str, Any]:
    """The compact check every run stores at its start (no process scan: the sampler measures
    other processes' CPU during the run itself)."""
    return check(processes=None).snapshot()


def text(report: Report) -> str:
    """The check as plain lines (the System screen): status, check, value, then the fix."""
    lines = [f"{report.banner()} (tui-bench doctor)"]
    for c in report.checks:
        lines.append(f"  {c.status:<4}  {c.area + ' ' + c.name:<22} {c.value}")
        if c.advice:
            lines.append(f"        {'':<22} → {c.advice}")
    return "\n".join(lines)
