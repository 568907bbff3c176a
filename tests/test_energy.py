"""CPU package energy (engine/machine/energy.py) on a fake powercap tree — wrap-around, root-only
counters, no zone at all — through the sampler's steady marks, and GPU energy from a fake NVML
handle, down to the per-run figures (joules per step, samples per joule, average watts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui_bench.engine.machine import energy, sampler

RANGE = 262_143_328_850  # a real package's max_energy_range_uj


def _zone(root: Path, name: str, uj: int, label: str = "package-0") -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "max_energy_range_uj").write_text(f"{RANGE}\n")
    (zone / "energy_uj").write_text(f"{uj}\n")
    return zone


def _set(zone: Path, uj: int) -> None:
    (zone / "energy_uj").write_text(f"{uj}\n")


def test_package_zones_are_read_and_sub_zones_not_added_again(tmp_path: Path):
    _zone(tmp_path, "intel-rapl:0", 1_000)
    _zone(tmp_path, "intel-rapl:1", 2_000, "package-1")
    _zone(tmp_path, "intel-rapl:0:0", 500, "core")  # part of package 0
    rapl = energy.Rapl(tmp_path)
    assert rapl.problem is None and len(rapl.zones) == 2
    assert sorted(rapl.read().values()) == [1_000, 2_000]


def test_a_wrap_around_is_one_range_not_a_negative_energy(tmp_path: Path):
    assert energy.delta_uj(RANGE - 1_000_000, 2_000_000, RANGE) == 3_000_000
    assert energy.delta_uj(5, 2, 0) is None  # no range: the window is dropped, never negative
    zone = _zone(tmp_path, "intel-rapl:0", RANGE - 1_000_000)
    rapl = energy.Rapl(tmp_path)
    s = sampler.ResourceSampler(pid=os.getpid(), rapl=rapl)
    s.mark("begin")
    _set(zone, 2_000_000)  # wrapped during the steady phase: 3 J in all
    s.mark("end")
    summary = sampler.summarise([], s.marks, rapl)
    assert summary.steady_cpu_energy_j == pytest.approx(3.0)
    assert "RAPL package" in summary.cpu_energy_source and summary.cpu_energy_problem is None


def test_only_the_steady_windows_count(tmp_path: Path):
    zone = _zone(tmp_path, "intel-rapl:0", 0)
    rapl = energy.Rapl(tmp_path)
    s = sampler.ResourceSampler(pid=os.getpid(), rapl=rapl)
    s.mark("begin")
    _set(zone, 40_000_000)
    s.mark("end")
    _set(zone, 900_000_000)  # validation, the next epoch's warm-up: not steady
    s.mark("begin")
    _set(zone, 920_000_000)
    s.mark("end")
    summary = s.stop()
    assert summary.steady_cpu_energy_j == pytest.approx(60.0)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a 0o000 file")
def test_a_root_only_counter_says_why_and_what_would_enable_it(tmp_path: Path):
    zone = _zone(tmp_path, "intel-rapl:0", 1_000)
    (zone / "energy_uj").chmod(0o000)
    rapl = energy.Rapl(tmp_path)
    assert rapl.problem == energy.ROOT_ONLY and "chmod o+r" in rapl.problem
    s = sampler.ResourceSampler(pid=os.getpid(), rapl=rapl)
    s.mark("begin")
    s.mark("end")
    summary = s.stop()
    assert summary.steady_cpu_energy_j is None and summary.cpu_energy_problem == energy.ROOT_ONLY


def test_a_permission_error_is_the_root_only_line(tmp_path: Path, monkeypatch):
    _zone(tmp_path, "intel-rapl:0", 1_000)
    real = Path.read_text

    def denied(self: Path, *args, **kwargs):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    assert energy.Rapl(tmp_path).problem == energy.ROOT_ONLY


def test_no_powercap_says_so_and_the_run_goes_on(tmp_path: Path):
    rapl = energy.Rapl(tmp_path / "no-powercap")
    assert rapl.problem == energy.NO_ZONE and rapl.read() is None
    summary = sampler.summarise([], [{"t": 0, "edge": "begin"}, {"t": 1, "edge": "end"}], rapl)
    assert summary.cpu_energy_problem == energy.NO_ZONE
    figures = energy.run_energy(summary.as_dict(), 100, 64)
    assert figures == {"cpu_energy_problem": energy.NO_ZONE}


@pytest.mark.parametrize("damage", ["", "lots\n", "\x00\x01", "-"])
def test_a_damaged_counter_file_is_one_line(tmp_path: Path, damage: str):
    zone = _zone(tmp_path, "intel-rapl:0", 0)
    (zone / "energy_uj").write_text(damage)
    (zone / "max_energy_range_uj").write_text(damage)
    rapl = energy.Rapl(tmp_path)
    assert rapl.problem is not None and "energy_uj" in rapl.problem


class FakeNvml:
    """One GPU whose energy counter reads what the test sets."""

    available = True

    def __init__(self) -> None:
        self.handles = [object()]
        self.counter = 5_000.0

    def energy_j(self, index: int) -> float:
        return self.counter

    def sample(self, index: int) -> dict[str, float]:
        return {}


def test_gpu_and_cpu_energy_become_per_step_figures(tmp_path: Path):
    zone = _zone(tmp_path, "intel-rapl:0", 0)
    nvml, rapl = FakeNvml(), energy.Rapl(tmp_path)
    s = sampler.ResourceSampler(pid=os.getpid(), gpu_indices=[0], nvml=nvml, rapl=rapl)
    s.mark("begin")
    nvml.counter += 300.0
    _set(zone, 50_000_000)
    s.mark("end")
    s.marks[-1]["t"] = s.marks[0]["t"] + 2.0  # a 2-second steady window
    summary = s.stop()
    assert summary.steady_energy_source == "nvml energy counter"
    figures = energy.run_energy(summary.as_dict(), 100, 64)
    assert figures["gpu_joules_per_step"] == pytest.approx(3.0)
    assert figures["gpu_samples_per_joule"] == pytest.approx(6400 / 300)
    assert figures["gpu_avg_watts"] == pytest.approx(150.0)
    assert figures["cpu_joules_per_step"] == pytest.approx(0.5)
    assert figures["cpu_avg_watts"] == pytest.approx(25.0)
    assert "device-level" in figures["cpu_energy_source"]


def test_gpu_without_an_energy_counter_integrates_power_and_says_so():
    marks = [{"t": 1.0, "edge": "begin"}, {"t": 3.0, "edge": "end"}]
    samples = [
        {"t": 0.5, "gpu_power_w": 900.0},  # outside: not counted
        {"t": 1.0, "gpu_power_w": 100.0},
        {"t": 2.0, "gpu_power_w": 300.0},
        {"t": 3.0, "gpu_power_w": 300.0},
    ]
    summary = sampler.summarise(samples, marks, energy.Rapl(Path("/nonexistent")))
    assert summary.steady_energy_j == pytest.approx(200.0 + 300.0)
    assert summary.steady_energy_source == "integrated power"
