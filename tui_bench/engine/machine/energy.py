"""CPU package energy from RAPL through Linux powercap, and a run's energy figures.

RAPL (Intel since Sandy Bridge; AMD Zen through the same ``intel-rapl`` powercap zones since
kernel 5.8) counts each package's energy in microjoules in
``/sys/class/powercap/intel-rapl:N/energy_uj``. The counter wraps at ``max_energy_range_uj``;
a delta across a wrap is ``end + range - begin``. Since the fix for CVE-2020-8694 (PLATYPUS,
late 2020) ``energy_uj`` is readable by root only. A VM usually has no powercap zone at all.

Every figure is device-level: the whole CPU package (every process on it, not this run alone)
or the whole GPU board (NVML), never wall power. Where a counter cannot be read, one line says
why and what would enable it; the run goes on without the figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")

NO_ZONE = (
    "no RAPL zone in /sys/class/powercap (a VM, or a kernel without intel_rapl): CPU energy "
    "needs bare metal with the intel_rapl_common module (AMD: kernel 5.8 or later)"
)
ROOT_ONLY = (
    "RAPL energy_uj is root-only (kernels patched for CVE-2020-8694): run as root, or "
    "sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj"
)


@dataclass(frozen=True)
class Zone:
    """One package-level RAPL zone (``intel-rapl:N``; its sub-zones core/uncore/dram are parts
    of it and are not added again)."""

    path: Path
    name: str
    max_range_uj: int


class Rapl:
    """The package zones under ``root``; ``problem`` says why none can be read."""

    def __init__(self, root: Path = POWERCAP) -> None:
        self.zones: list[Zone] = []
        self.problem: str | None = None
        try:
            found = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
        except OSError:
            found = []
        if not found:
            self.problem = NO_ZONE
            return
        for path in found:
            try:
                name = (path / "name").read_text(encoding="utf-8").strip() or path.name
            except OSError:
                name = path.name
            try:
                max_range = int((path / "max_energy_range_uj").read_text().strip())
            except (OSError, ValueError):
                max_range = 0  # no wrap correction possible: a wrapped window is dropped
            self.zones.append(Zone(path, name, max_range))
        if self.read() is None and self.problem is None:
            self.problem = "RAPL energy_uj could not be read"

    def read(self) -> dict[str, int] | None:
        """Zone path → microjoules now, or None (``problem`` says why)."""
        out = {}
        for zone in self.zones:
            try:
                out[str(zone.path)] = int((zone.path / "energy_uj").read_text().strip())
            except PermissionError:
                self.problem = ROOT_ONLY
                return None
            except (OSError, ValueError) as exc:
                self.problem = f"RAPL {zone.path}/energy_uj unreadable: {exc}"
                return None
        return out or None

    def ranges(self) -> dict[str, int]:
        return {str(zone.path): zone.max_range_uj for zone in self.zones}


def delta_uj(begin: int, end: int, max_range_uj: int) -> int | None:
    """Energy between two readings of one counter, across at most one wrap; None when the
    counter went back and its range is unknown."""
    if end >= begin:
        return end - begin
    if max_range_uj <= 0:
        return None
    return end + max_range_uj - begin


def window_joules(
    windows: list[tuple[dict[str, Any], dict[str, Any]]], ranges: dict[str, int], prefix: str
) -> float | None:
    """Sum over (begin, end) marks of every ``prefix``+zone counter's delta, in joules."""
    total, seen = 0, False
    for begin, end in windows:
        for key, value in begin.items():
            if not key.startswith(prefix) or key not in end:
                continue
            delta = delta_uj(int(value), int(end[key]), ranges.get(key[len(prefix) :], 0))
            if delta is None:
                return None
            total, seen = total + delta, True
    return total / 1e6 if seen else None


def run_energy(resources: dict[str, Any], steady_steps: int, global_batch: int) -> dict[str, Any]:
    """Joules per step, samples per joule and average watts of the steady phase, per device
    (GPU from NVML, CPU package from RAPL), labelled; or the line saying why not."""
    out: dict[str, Any] = {}
    seconds = resources.get("steady_s") or 0.0
    devices = (
        ("gpu", resources.get("steady_energy_j"), resources.get("steady_energy_source")),
        ("cpu", resources.get("steady_cpu_energy_j"), resources.get("cpu_energy_source")),
    )
    for device, joules, source in devices:
        if not joules or not steady_steps:
            continue
        out[f"{device}_joules_per_step"] = joules / steady_steps
        out[f"{device}_samples_per_joule"] = steady_steps * global_batch / joules
        out[f"{device}_avg_watts"] = joules / seconds if seconds else None
        out[f"{device}_energy_source"] = source
    for device, problem in (("gpu", "steady_energy_problem"), ("cpu", "cpu_energy_problem")):
        if f"{device}_joules_per_step" not in out and resources.get(problem):
            out[f"{device}_energy_problem"] = resources[problem]
    return out
