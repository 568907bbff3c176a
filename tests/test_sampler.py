from __future__ import annotations

import subprocess
import sys
import types

import pytest

from tui_bench.engine.machine import energy, sampler


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
    # Two spinning processes use CPU; how much depends on the machine's load (14 % seen at
    # load 12 on 2 cores), so only that it is counted.
    assert summary.mean_cpu_pct > 0
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


class FakeNvml:
    """An NVML with one GPU whose energy counter rises 10 J per read (time passes between)."""

    available = True

    def __init__(self, start: float = 1000.0) -> None:
        self.handles = [object()]
        self.counter = start

    def energy_j(self, index: int) -> float:
        self.counter += 10.0
        return self.counter

    def sample(self, index: int) -> dict[str, float]:
        return {"gpu_energy_j": self.energy_j(index), "gpu_util": 50.0}


def test_energy_counter_is_read_at_the_steady_window_bounds():
    nvml = FakeNvml()
    s = sampler.ResourceSampler(pid=1, gpu_indices=[0], nvml=nvml)
    s.mark("begin")  # 1010
    nvml.counter += 500.0  # steady training
    s.mark("end")  # 1520
    nvml.counter += 3000.0  # validation, a second epoch's warm-up...
    s.mark("begin")  # 4530
    nvml.counter += 200.0
    s.mark("end")  # 4740
    for mark, t in zip(s.marks, (1.0, 3.0, 5.0, 7.0), strict=True):
        mark["t"] = t  # windows of 2 s: long enough for the counter's steps
    whole = [{"t": 0.0, "gpu_energy_j": 0.0}, {"t": 9.0, "gpu_energy_j": 6000.0}]
    summary = sampler.summarise(whole, s.marks)
    assert summary.steady_windows == 2
    assert summary.steady_energy_j == pytest.approx(510.0 + 210.0)
    assert summary.energy_j == 6000.0  # the process-wide figure stays, labelled apart
    assert summary.steady_energy_problem is None


def _counter_marks(*windows: tuple[float, float, float, float]) -> list[dict]:
    """(begin t, begin J, end t, end J) per window, as the sampler marks them."""
    marks = []
    for t0, j0, t1, j1 in windows:
        marks += [{"t": t0, "edge": "begin", "gpu_energy_j_0": j0}]
        marks += [{"t": t1, "edge": "end", "gpu_energy_j_0": j1}]
    return marks


def test_windows_shorter_than_the_counters_steps_give_no_energy_and_say_why():
    # Seen on an H200: 21 steady steps of 2 ms (45 ms) read the same counter value at both ends,
    # and 0 J became 0 J/sample in the report; a neighbouring window read a whole 0.1 s step.
    marks = _counter_marks((1.0, 500.0, 1.045, 500.0), (2.0, 600.0, 2.045, 640.0))
    summary = sampler.summarise([], marks)
    assert summary.steady_energy_j is None
    assert "0.04 s are too short for the NVML energy counter" in summary.steady_energy_problem
    figures = energy.run_energy(summary.as_dict(), 42, 128)
    assert "gpu_joules_per_step" not in figures
    assert figures["gpu_energy_problem"] == summary.steady_energy_problem


def test_a_long_window_the_counter_did_not_advance_in_gives_no_energy():
    marks = _counter_marks((1.0, 500.0, 3.0, 900.0), (4.0, 900.0, 6.0, 900.0))
    summary = sampler.summarise([], marks)
    assert summary.steady_energy_j is None
    assert summary.steady_energy_problem == (
        "the NVML energy counter did not advance inside a steady window"
    )


def test_the_counter_is_trusted_from_one_second_windows():
    marks = _counter_marks((1.0, 500.0, 2.0, 700.0), (4.0, 900.0, 5.5, 1200.0))
    summary = sampler.summarise([], marks)
    assert summary.steady_energy_j == pytest.approx(200.0 + 300.0)
    assert summary.steady_energy_source == "nvml energy counter"


def test_unpaired_marks_and_no_gpu_give_no_steady_energy():
    marks = [{"t": 1.0, "edge": "begin"}, {"t": 2.0, "edge": "end"}, {"t": 3.0, "edge": "begin"}]
    samples = [
        {"t": 0.5, "cpu_pct": 10.0, "busy_threads": 0.0},
        {"t": 1.5, "cpu_pct": 190.0, "busy_threads": 2.0},
        {"t": 3.5, "cpu_pct": 50.0},
    ]
    summary = sampler.summarise(samples, marks)
    assert summary.steady_windows == 1 and summary.steady_s == pytest.approx(1.0)
    assert summary.steady_energy_j is None
    assert summary.steady_mean_cpu_pct == 190.0 and summary.steady_busy_threads == 2.0
    assert summary.mean_cpu_pct == pytest.approx(250.0 / 3)


class _FakeProcess:
    """Just what process_tree_sample reads from a psutil.Process, with thread CPU times the
    test sets: the busy-thread decision is checked without depending on the machine's load."""

    def __init__(self, pid: int, thread_seconds: dict[int, float]) -> None:
        self.pid = pid
        self.thread_seconds = thread_seconds

    def children(self, recursive: bool = False) -> list:
        return []

    def oneshot(self):
        import contextlib

        return contextlib.nullcontext()

    def cpu_percent(self, interval=None) -> float:
        return 0.0

    def memory_info(self):
        return types.SimpleNamespace(rss=2**20)

    def num_threads(self) -> int:
        return len(self.thread_seconds)

    def threads(self) -> list:
        return [
            types.SimpleNamespace(id=tid, user_time=spent, system_time=0.0)
            for tid, spent in self.thread_seconds.items()
        ]


def test_busy_threads_counts_threads_that_ran_most_of_the_interval():
    proc = _FakeProcess(42, {1: 0.0, 2: 0.0, 3: 0.0})
    cache: dict = {}
    thread_times: dict = {}
    first = sampler.process_tree_sample(proc, cache, thread_times, interval=None)
    assert "busy_threads" not in first  # no previous reading: no interval to judge
    # In a 0.5 s interval: thread 1 ran 0.5 s, thread 2 exactly half (0.25 s), thread 3 0.1 s.
    proc.thread_seconds = {1: 0.5, 2: 0.25, 3: 0.1, 4: 9.0}  # 4 is new: no previous time
    second = sampler.process_tree_sample(proc, cache, thread_times, interval=0.5)
    assert second["busy_threads"] == 2.0
    proc.thread_seconds = {1: 0.6, 2: 0.25, 3: 0.1, 4: 9.5}
    third = sampler.process_tree_sample(proc, cache, thread_times, interval=0.5)
    assert third["busy_threads"] == 1.0  # only thread 4 kept running


def test_busy_threads_of_a_real_spinning_process_are_counted_in_bounds():
    # A loaded machine may not give the spinner half of each interval: bounds only, the
    # decision itself is checked above.
    code = "import time\nt=time.time()\nwhile time.time()-t<2: pass"
    proc = subprocess.Popen([sys.executable, "-c", code])
    s = sampler.ResourceSampler(proc.pid, interval=0.5)
    s.start()
    proc.wait()
    s.stop()
    busy = [x["busy_threads"] for x in s.samples if "busy_threads" in x]
    assert busy and all(0 <= b <= 2 for b in busy)
