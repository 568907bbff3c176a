"""`tui-bench doctor` on fake /proc and /sys trees and a fake NVML: every check's ok, warn and
fail, the advice it gives, the exit code, and the snapshot each run stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO

from tui_bench.engine.machine import doctor


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return root


QUIET_BOX = {
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance",
    "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance",
    "sys/devices/system/cpu/intel_pstate/no_turbo": "1",
    "sys/devices/system/cpu/smt/active": "0",
    "sys/devices/system/cpu/isolated": "1",
    "sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count": "0",
    "proc/sys/kernel/randomize_va_space": "2",
    "proc/loadavg": "0.10 0.20 0.30 1/200 999",
    "proc/meminfo": "MemTotal: 16000000 kB\nMemAvailable: 12000000 kB\nSwapTotal: 1000000 kB\n"
    "SwapFree: 1000000 kB",
    "proc/pressure/memory": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00",
}

NOISY_BOX = {
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave",
    "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance",
    "sys/devices/system/cpu/cpufreq/boost": "1",
    "sys/devices/system/cpu/smt/active": "1",
    "sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count": "12",
    "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count": "3",
    "proc/sys/kernel/randomize_va_space": "0",
    "proc/loadavg": "2.50 1.00 0.50 3/200 999",
    "proc/meminfo": "MemTotal: 16000000 kB\nMemAvailable: 800000 kB\nSwapTotal: 1000000 kB\n"
    "SwapFree: 500000 kB",
    "proc/pressure/memory": "some avg10=25.00 avg60=3.00 avg300=1.00 total=5\nfull avg10=1.00",
}


def by_name(report: doctor.Report) -> dict[str, doctor.Check]:
    return {f"{c.area}.{c.name}": c for c in report.checks}


def test_a_quiet_well_set_box_passes_every_check(tmp_path):
    report = doctor.check(tree(tmp_path, QUIET_BOX), nvml=None, processes=[], cores=2)
    assert [c for c in report.checks if c.status != "ok"] == []
    assert report.exit_code == 0 and report.banner() == "machine: ok"
    checks = by_name(report)
    assert checks["cpu.isolated"].value.startswith("isolated CPUs 1")
    assert checks["memory.swap"].status == "ok" and checks["memory.pressure"].status == "ok"


def test_a_badly_set_busy_box_warns_and_fails_with_the_fix(tmp_path):
    others = [("make", 11, 90.0), ("chrome", 12, 40.0), ("x", 13, 5.0), ("y", 14, 1.0)]
    report = doctor.check(tree(tmp_path, NOISY_BOX), nvml=None, processes=others, cores=2)
    checks = by_name(report)
    assert checks["cpu.governor"].status == "warn" and "cpupower" in checks["cpu.governor"].advice
    assert checks["cpu.boost"].status == "warn" and "cpufreq/boost" in checks["cpu.boost"].advice
    assert checks["cpu.smt"].status == "warn" and checks["cpu.aslr"].status == "warn"
    assert checks["cpu.thermal throttle"].value == "15 throttle events since boot"
    assert checks["cpu.load"].status == "fail"  # 2.5 on 2 cores
    busy = checks["cpu.busy processes"]
    assert busy.status == "fail" and "make (11) 90 %" in busy.value and "y (14)" not in busy.value
    assert checks["memory.available"].status == "warn"
    assert checks["memory.swap"].status == "warn" and checks["memory.pressure"].status == "warn"
    assert report.exit_code == 1
    assert report.banner() == "machine: 2 failures, 8 warnings"
    snap = report.snapshot()
    assert snap["fail"] == ["cpu.load", "cpu.busy processes"] and "cpu.smt" in snap["warn"]


def test_an_empty_root_is_all_not_exposed_never_an_error(tmp_path):
    report = doctor.check(tmp_path, nvml=None, processes=None, cores=4)
    assert report.exit_code == 0 and all(c.status == "ok" for c in report.checks)
    assert by_name(report)["cpu.governor"].value.startswith("not exposed")


def test_damaged_files_read_as_not_exposed(tmp_path):
    bad = {
        "proc/loadavg": "garbage",
        "proc/meminfo": "\x00\x01 nonsense",
        "proc/pressure/memory": "x",
    }
    report = doctor.check(tree(tmp_path, bad), nvml=None, processes=None, cores=2)
    assert report.exit_code == 0 and by_name(report)["cpu.load"].value == "not exposed"


class FakeNvml:
    """pynvml's shape: one GPU whose answers the test sets; a missing call is NotSupported."""

    NVML_CLOCK_SM = 1
    NVML_FEATURE_ENABLED = 1

    def __init__(self, **answers):
        self.answers = answers

    def nvmlDeviceGetCount(self):  # noqa: N802 (NVML's names)
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return ("handle", index)

    def __getattr__(self, name):
        if name in self.answers:
            value = self.answers[name]
            return lambda *args: value
        raise AttributeError(name)


GOOD_GPU = dict(
    nvmlDeviceGetPersistenceMode=1,
    nvmlDeviceGetApplicationsClock=1980,
    nvmlDeviceGetMaxClockInfo=1980,
    nvmlDeviceGetCurrentClocksEventReasons=0x1,  # idle only
    nvmlDeviceGetPowerManagementLimit=700_000,
    nvmlDeviceGetPowerManagementDefaultLimit=700_000,
    nvmlDeviceGetEccMode=(1, 1),
    nvmlDeviceGetMigMode=(0, 0),
    nvmlDeviceGetComputeRunningProcesses=[],
    nvmlDeviceGetCurrPcieLinkWidth=16,
    nvmlDeviceGetMaxPcieLinkWidth=16,
    nvmlDeviceGetCurrPcieLinkGeneration=1,
    nvmlDeviceGetMaxPcieLinkGeneration=5,
)


def test_a_well_set_gpu_is_ok():
    checks = doctor.gpu_checks(FakeNvml(**GOOD_GPU))
    assert {c.name for c in checks} == {
        "persistence", "app clocks", "clocks events", "power limit", "ecc", "mig",
        "other processes", "pcie link",
    }  # fmt: skip
    assert all(c.status == "ok" for c in checks), checks
    assert next(c for c in checks if c.name == "pcie link").value.startswith("x16 of x16, gen 1")


def test_a_badly_set_gpu_says_what_to_run():
    bad = dict(
        GOOD_GPU,
        nvmlDeviceGetPersistenceMode=0,
        nvmlDeviceGetApplicationsClock=1410,
        nvmlDeviceGetCurrentClocksEventReasons=0x8 | 0x40,
        nvmlDeviceGetPowerManagementLimit=450_000,
        nvmlDeviceGetMigMode=(1, 1),
        nvmlDeviceGetComputeRunningProcesses=[SimpleNamespace(pid=4242)],
        nvmlDeviceGetCurrPcieLinkWidth=8,
    )
    checks = {c.name: c for c in doctor.gpu_checks(FakeNvml(**bad))}
    assert checks["persistence"].status == "warn" and "-pm 1" in checks["persistence"].advice
    assert checks["app clocks"].status == "warn" and "-ac" in checks["app clocks"].advice
    events = checks["clocks events"]
    assert events.status == "fail"
    assert events.value == "hardware slowdown, hardware thermal slowdown"
    assert checks["power limit"].advice == "sudo nvidia-smi -i 0 -pl 700"
    assert checks["mig"].status == "warn" and checks["other processes"].value == "4242"
    assert checks["pcie link"].status == "warn"
    report = doctor.check(Path("/nonexistent-root"), nvml=FakeNvml(**bad), processes=None)
    assert report.exit_code == 1


def test_a_gpu_that_supports_nothing_gives_only_what_it_can():
    checks = doctor.gpu_checks(FakeNvml())
    assert [c.name for c in checks] == ["other processes"]


def test_doctor_cli_json_and_exit_code():
    out = subprocess.run(
        [sys.executable, "-m", "tui_bench", "doctor", "--json", "--no-processes"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    data = json.loads(out.stdout)
    assert out.returncode == data["exit_code"] in (0, 1)
    names = {c["name"] for c in data["checks"]}
    assert {"governor", "load", "aslr"} <= names
    assert data["banner"].startswith("machine: ")


@pytest.mark.gpu
def test_real_nvml_checks():
    nv = doctor._nvml()
    if nv is None or not nv.nvmlDeviceGetCount():
        pytest.skip("no NVIDIA GPU here")
    names = {c.name for c in doctor.gpu_checks(nv)}
    assert {"clocks events", "other processes"} <= names
