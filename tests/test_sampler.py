from __future__ import annotations

import subprocess
import sys

import pytest

from tui_bench.engine import sampler


def test_no_nvml_is_normal_not_an_error():
    nvml = sampler.Nvml()
    if nvml.available:
        pytest.skip("this machine has an NVIDIA driver")
    assert nvml.devices() == [] and nvml.error  # says why, raises nothing


def test_samples_a_real_process_tree_without_gpu_fields():
    # a parent that spins and a child that spins: both count
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time\\nt=time.time()\\nwhile time.time()-t<3: pass']); "
        "t=time.time()\nwhile time.time()-t<3: pass"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    s = sampler.ResourceSampler(proc.pid, gpu_indices=[0], interval=0.3)
    s.start()
    proc.wait()
    summary = s.stop()
    assert summary.samples >= 3
    assert summary.peak_rss_mib > 5
    assert max(x["processes"] for x in s.samples) == 2  # the child is part of the tree
    # Two spinning processes: clearly busy, even on a loaded machine (100 % = one core).
    assert summary.mean_cpu_pct > 20
    assert summary.mean_gpu_util is None and summary.energy_j is None
    assert not [k for x in s.samples for k in x if k.startswith("gpu_")]


def test_energy_from_counter_or_integrated_power():
    counter = [{"t": 0, "gpu_energy_j": 100.0}, {"t": 1, "gpu_energy_j": 350.0}]
    assert sampler.summarise(counter).energy_j == 250.0
    power = [
        {"t": 0.0, "gpu_power_w": 100.0},
        {"t": 2.0, "gpu_power_w": 200.0},
        {"t": 3.0, "gpu_power_w": 200.0},
    ]
    summary = sampler.summarise(power)
    assert summary.energy_j == pytest.approx(300.0 + 200.0)
    assert summary.energy_source == "integrated power"
