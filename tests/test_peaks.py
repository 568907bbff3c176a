"""The machine's peaks (engine/machine/peaks.py): the vendor's dense GPU table, the CPU's ISA
estimate, the measured-peak cache (damage included) and MFU that refuses to exceed 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui_bench.engine.machine import peaks
from tui_bench.engine.machine.limits import Limits


def test_gpu_names_pick_their_own_dense_figures_never_the_sparsity_ones():
    sxm = peaks.nominal("gpu:0", "NVIDIA H100 80GB HBM3", 1, "bf16")
    pcie = peaks.nominal("gpu:0", "NVIDIA H100 PCIe", 1, "bf16")
    assert sxm is not None and sxm.tflops == 989.4 and "H100 SXM" in sxm.what
    assert pcie is not None and pcie.tflops == 756.0 and "H100 PCIe" in pcie.what
    assert peaks.nominal("gpu:0", "NVIDIA H100 80GB HBM3", 1, "fp32").tflops == 67.0
    assert peaks.nominal("gpu:0", "NVIDIA H100 80GB HBM3", 1, "tf32").tflops == 494.7
    assert peaks.nominal("gpu:0", "NVIDIA H200", 1, "amp-fp16").tflops == 989.4
    assert peaks.nominal("gpu:0", "NVIDIA L40S", 1, "bf16").tflops == 366.0
    # The SXM figures name the clock they are computed at (not the 1,980 MHz maximum boost).
    h200 = peaks.nominal("gpu:0", "NVIDIA H200", 1, "bf16")
    assert h200.tflops == 989.4 and h200.what.endswith("at 1,830 MHz")
    assert sxm.what.endswith("at 1,830 MHz") and "MHz" not in pcie.what
    assert peaks.nominal("gpu:0", "NVIDIA L4", 1, "bf16").tflops == 121.0
    assert peaks.nominal("gpu:0", "Tesla T4", 1, "bf16") is None  # no bf16 on Turing
    assert peaks.nominal("gpu:0", "Some Unknown GPU", 1, "fp32") is None


def _cpu_root(tmp_path: Path, flags: str, mhz: str = "2445.4", max_khz: str | None = None) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        f"processor\t: 0\nmodel name\t: Test CPU\ncpu MHz\t\t: {mhz}\nflags\t\t: {flags}\n"
    )
    if max_khz is not None:
        freq = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq"
        freq.mkdir(parents=True)
        (freq / "cpuinfo_max_freq").write_text(max_khz + "\n")
    return tmp_path


def test_cpu_estimate_is_cores_times_clock_times_fma_width(tmp_path: Path):
    facts = peaks.read_cpu_facts(_cpu_root(tmp_path, "sse avx avx2 fma"))
    facts = peaks.CpuFacts(facts.model, facts.flags, facts.max_mhz, facts.reported_mhz, 2)
    one = peaks.cpu_nominal(facts, 1, "fp32")
    assert one is not None and one.estimate  # a VM: no cpufreq, the clock is unknown
    assert one.tflops == pytest.approx(2445.4e6 * 32 / 1e12)
    assert "AVX2 FMA" in one.what and "clock unknown" in one.what
    assert peaks.cpu_nominal(facts, 2, "fp32").tflops == pytest.approx(2 * one.tflops)
    # more threads than cores: the cores' peak, not more
    assert peaks.cpu_nominal(facts, 8, "fp32").tflops == pytest.approx(2 * one.tflops)
    assert peaks.cpu_nominal(facts, 1, "amp-fp16") is None


def test_cpu_amx_and_avx512_and_a_known_clock(tmp_path: Path):
    root = _cpu_root(tmp_path, "avx2 fma avx512f avx512_bf16 amx_bf16", max_khz="3800000")
    facts = peaks.read_cpu_facts(root)
    assert facts.max_mhz == 3800.0
    fp32 = peaks.cpu_nominal(facts, 1, "fp32")
    bf16 = peaks.cpu_nominal(facts, 1, "bf16")
    assert fp32.tflops == pytest.approx(3800e6 * 64 / 1e12)
    assert bf16.tflops == pytest.approx(3800e6 * 1024 / 1e12) and not bf16.estimate


def test_a_damaged_cpuinfo_gives_no_estimate_not_a_traceback(tmp_path: Path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_bytes(b"\x00\xff garbage\ncpu MHz : fast\n")
    facts = peaks.read_cpu_facts(tmp_path)
    assert facts.reported_mhz is None and peaks.cpu_nominal(facts, 1, "fp32") is None
    assert peaks.read_cpu_facts(tmp_path / "missing").model == ""


# Thirty calls of a steady matmul, as the probe reports them, and a quiet machine around it.
STEADY = [0.0430 + 0.0002 * (i % 3) for i in range(30)]
PROBE = {
    "framework": "torch 2.13",
    "threads": 2,
    "compute": [
        {
            "kernel": "matmul",
            "precision": "float32",
            "shape": "1024×1024",
            "tflops": 0.05,
            "times_s": STEADY,
        },
        {
            "kernel": "matmul",
            "precision": "bfloat16",
            "shape": "1024×1024",
            "tflops": 0.02,
            "times_s": STEADY,
        },
        {"kernel": "conv2d 3×3", "precision": "float32", "tflops": 0.04},
    ],
}
QUIET = peaks.ProbeLoad(other_cores=0.02, steal_cores=0.0, logical_cores=2, loadavg_1m=0.1,
                        seconds=3.0)  # fmt: skip


def test_measured_peaks_are_cached_per_threads_and_precision_with_their_date():
    peaks.store_probe(PROBE, "cpu", 2, QUIET)
    fp32 = peaks.cached("cpu", 2, "fp32")
    assert fp32 is not None and fp32.tflops == 0.05 and fp32.kind == "measured"
    assert "torch 2.13 matmul" in fp32.what and fp32.measured_at
    assert peaks.cached("cpu", 2, "bf16").tflops == 0.02
    assert peaks.cached("cpu", 1, "fp32") is None  # another thread count: not this peak
    assert peaks.cached("cpu", 2, "tf32") is None


@pytest.mark.parametrize(
    "damage", [b"", b"{", b"[1, 2]", b"\x00\x01\x02", b'{"k": 1}', json.dumps({"x": "y"}).encode()]
)
def test_a_damaged_peak_cache_is_a_cold_start(damage: bytes, monkeypatch):
    peaks.cache_path().parent.mkdir(parents=True, exist_ok=True)
    peaks.cache_path().write_bytes(damage)
    assert peaks.cached("cpu", 1, "fp32") is None
    peaks.store_probe(PROBE, "cpu", 2, QUIET)  # and it is rewritten whole
    assert peaks.cached("cpu", 2, "fp32").tflops == 0.05


def test_a_damaged_entry_is_no_peak(monkeypatch):
    key = peaks.cache_key("cpu", 1, "float32")
    for entry in ({"tflops": "fast", "what": "x", "measured_at": "y"}, {"tflops": -1.0}, [1]):
        peaks.cache_path().parent.mkdir(parents=True, exist_ok=True)
        peaks.cache_path().write_text(json.dumps({key: entry}))
        assert peaks.cached("cpu", 1, "fp32") is None


def test_a_missing_peak_is_measured_once_with_a_progress_line(monkeypatch):
    calls: list[tuple] = []

    def probe(device, threads, size=0, repeats=0, matmul_only=False, precisions=(), budget_s=None):
        calls.append((device, threads, matmul_only, precisions, repeats, budget_s))
        peaks.store_probe(PROBE, device, threads, QUIET)
        return PROBE

    monkeypatch.setattr(peaks, "run_probe", probe)
    lines: list[str] = []
    peak, why = peaks.measured("cpu", 2, "fp32", progress=lines.append)
    assert why is None and peak.tflops == 0.05
    assert len(lines) == 1 and "measuring" in lines[0] and "float32" in lines[0]
    again, _ = peaks.measured("cpu", 2, "fp32", progress=lines.append)
    assert again == peak and len(calls) == 1 and len(lines) == 1
    # only the row the run needs, enough calls to judge it by a run's rules, in a few seconds
    assert calls == [("cpu", 2, True, ("float32",), peaks.PEAK_CALLS, peaks.PEAK_BUDGET_S)]


def test_a_probe_that_cannot_run_says_why(monkeypatch):
    monkeypatch.setattr(peaks, "run_probe", lambda *a, **k: {"error": "no torch runtime"})
    peak, why = peaks.measured("cpu", 3, "fp32")
    assert peak is None and why == "no torch runtime"


def test_mfu_above_one_is_an_error_never_a_number():
    peak = peaks.Peak(1.0, "measured", "matmul")
    ok = peaks.utilization(5e10, 0.1, peak)  # 0.5 TFLOP/s of 1
    assert ok.achieved_tflops == pytest.approx(0.5) and ok.mfu == pytest.approx(0.5)
    assert ok.text() == "MFU 50.0% of measured peak"
    wrong = peaks.utilization(5e11, 0.1, peak)
    assert wrong.mfu is None and wrong.text() == "MFU > 1: count or peak is wrong"
    none = peaks.utilization(5e11, 0.1, None)
    assert none.mfu is None and none.problem == "no peak known"


def test_a_run_is_held_against_both_peaks_each_named():
    peaks.store_probe(PROBE, "cpu", 2, QUIET)
    count = 3 * 7_905_280 - 921_600  # cnn on 28×28×1, per sample (tests/test_flops.py)
    figures = peaks.run_figures("cnn", "synthetic-mnist", 64, 0.5, "cpu", "cpu", 2, "fp32")
    assert figures["flops_per_step"] == 64 * count
    assert figures["achieved_tflops"] == pytest.approx(64 * count / 0.5 / 1e12)
    assert figures["mfu"] == pytest.approx(figures["achieved_tflops"] / 0.05)
    assert figures["mfu_peak"].startswith("measured peak 0.05 TFLOP/s (torch 2.13 matmul")
    assert figures["peak_measured_tflops"] == 0.05
    line = Limits.from_metrics({**figures, "res_peak_rss_mib": 400.0, "allocator": "n/a"}).line()
    assert "GFLOP/s achieved" in line and "of measured peak" in line and "peak RSS 400 MiB" in line
    short = "steady windows of 0.05 s are too short for the NVML energy counter"
    line = Limits.from_metrics({**figures, "gpu_energy_problem": short}).line()
    assert f"GPU energy not read: {short}" in line and "CPU energy" not in line


def test_a_run_faster_than_the_measured_peak_raises_it_never_an_mfu_above_one():
    """Issue 48 item 7: TF graph/xla reached 107-114 GFLOP/s against a torch-probed 105, and the
    run was told 'MFU > 1: count or peak is wrong'. The measured peak is the best this machine
    reaches: a run that goes faster raises it, named as its own, for it and the runs after."""
    peaks.store_probe(PROBE, "cpu", 2, QUIET)  # 0.05 TFLOP/s
    count = 3 * 7_905_280 - 921_600  # cnn on 28×28×1, per sample
    step = 64 * count / 0.06e12  # 0.06 TFLOP/s: 20 % over the probes' peak
    times = [step] * 20
    run = {"steady_other_cores": 0.01, "steady_steal_cores": 0.0, "logical_cores": 2}
    figures = peaks.run_figures(
        "cnn", "synthetic-mnist", 64, step, "cpu", "cpu", 2, "fp32", step_times=times,
        resources=run,
    )  # fmt: skip
    assert figures["mfu"] == 1.0 and "mfu_error" not in figures
    assert figures["peak_raised_by_run"] is True and figures["peak_probe_tflops"] == 0.05
    assert figures["peak_measured_tflops"] == pytest.approx(0.06)
    assert "this run's own achieved FLOP/s (cnn train" in figures["mfu_peak"]
    assert "above the probes' 0.05 TFLOP/s (torch 2.13 matmul" in figures["mfu_peak"]
    raised = peaks.cached("cpu", 2, "fp32")  # kept for the runs after, judged like a probe
    assert raised is not None and raised.tflops == pytest.approx(0.06)
    assert raised.load.other_cores == 0.01 and len(raised.times) == 20
    slower = peaks.run_figures("cnn", "synthetic-mnist", 64, 2 * step, "cpu", "cpu", 2, "fp32")
    assert slower["mfu"] == pytest.approx(0.5) and "peak_raised_by_run" not in slower


@pytest.mark.parametrize("step", [1e-6, 1e-4, 0.01, 0.5, 3.0])
def test_no_step_time_gives_a_measured_mfu_above_one(step):
    peaks.store_probe(PROBE, "cpu", 2, QUIET)
    figures = peaks.run_figures("cnn", "synthetic-mnist", 64, step, "cpu", "cpu", 2, "fp32")
    assert figures["mfu"] is not None and 0 < figures["mfu"] <= 1.0
    assert figures.get("mfu_error") != peaks.MFU_ABOVE_ONE


def test_a_count_above_the_nominal_estimate_still_says_so():
    peaks.store_probe(PROBE, "cpu", 2, QUIET)  # a step far past any CPU's nominal peak
    figures = peaks.run_figures("cnn", "synthetic-mnist", 64, 1e-7, "cpu", "cpu", 2, "fp32")
    assert figures["mfu"] == 1.0  # the measured peak is raised to the run
    if figures.get("mfu_nominal_peak") is not None:  # the estimate is not: it is wrong
        assert figures["mfu_nominal"] is None
        assert figures["mfu_nominal_error"] == peaks.MFU_ABOVE_ONE


def test_no_cached_peak_no_model_count_and_workers():
    figures = peaks.run_figures("cnn", "synthetic-mnist", 64, 0.5, "cpu", "cpu", 3, "fp32")
    assert figures["mfu"] is None and "no measured peak" in figures["mfu_error"]
    unknown = peaks.run_figures("nope", "synthetic-mnist", 64, 0.5, "cpu", "cpu", 2, "fp32")
    assert unknown["flops_per_step"] is None and "no FLOP count" in unknown["mfu_error"]
    peaks.store_probe(PROBE, "cpu", 2, QUIET)
    one = peaks.run_figures("mlp", "synthetic-mnist", 64, 0.5, "cpu", "cpu", 2, "fp32")
    two = peaks.run_figures("mlp", "synthetic-mnist", 64, 0.5, "cpu", "cpu", 2, "fp32", workers=2)
    assert two["mfu"] == pytest.approx(one["mfu"] / 2) and "2 × " in two["mfu_peak"]


@pytest.mark.parametrize(
    "damaged",
    [
        {"achieved_tflops": "fast", "mfu": float("nan"), "mfu_peak": 3},
        {"achieved_tflops": True, "gpu_joules_per_step": [1], "res_peak_rss_mib": {}},
        {"mfu_nominal": float("inf"), "cpu_energy_problem": 7, "allocator_peak_mib": "x"},
    ],
)
def test_a_damaged_record_s_limits_read_as_absent_never_raise(damaged):
    limits = Limits.from_metrics({"flops_per_step": 1e9, **damaged})
    line, brief = limits.line(), limits.brief()
    assert "nan" not in line.lower() and "inf" not in line and "True" not in line
    assert line == "peak RSS not sampled, allocator peak not reported" and brief is None


def test_every_view_renders_the_limits_through_one_value():
    """Run.limits, the CLI's line and Live's brief line read the same typed value."""
    from tui_bench.engine.results.record import Run

    metrics = {
        "flops_per_step": 1e9,
        "achieved_tflops": 0.02,
        "mfu_nominal": 0.25,
        "mfu_nominal_peak": "nominal peak 0.08 TFLOP/s",
        "cpu_joules_per_step": 1.5,
        "cpu_samples_per_joule": 42.0,
        "res_peak_rss_mib": 500.0,
    }
    run = Run.from_record({"id": "r", "status": "finished", "metrics": metrics})
    assert run.limits == Limits.from_metrics(metrics)
    assert run.limits.line() == (
        "20 GFLOP/s achieved; MFU 25.0% of nominal peak 0.08 TFLOP/s; "
        "CPU 1.5 J/step, 42 samples/J (device-level); peak RSS 500 MiB, allocator peak not reported"
    )
    assert (
        run.limits.brief()
        == "20 GFLOP/s · MFU 25.0% of nominal peak · 1.5 J/step (CPU) · peak RSS 500 MiB"
    )
    assert Run.from_record({"id": "old", "metrics": {"step_median_s": 0.1}}).limits is None


# -- a peak that does not hold (issue 42) ---------------------------------------------------------
def _peak_entry(times, load, emulated=None):
    row = {"kernel": "matmul", "precision": "bfloat16" if emulated else "float32"}
    row.update(shape="1024×1024", tflops=0.05, times_s=times)
    if emulated:
        row["emulated"] = emulated
    peaks.store_probe({"framework": "torch 2.13", "compute": [row]}, "cpu", 2, load)


def _run_metrics(resources, precision="fp32"):
    """A finished 2-thread CNN run's figures as the record gets them (RunResult.metrics)."""
    from tui_bench.engine.runs.run_result import RunResult
    from tui_bench.engine.spec import RunSpec

    spec = RunSpec.from_dict(
        {"model": "cnn", "threads": 2, "batch_size": 64, "precision": precision}
    )
    summary = {"step_median_s": 0.5, "global_batch": 64, "samples_per_s": 128.0}
    return RunResult("r", spec, "finished", summary=summary, resources=resources).metrics()


QUIET_RUN = {"steady_other_cores": 0.03, "steady_steal_cores": 0.0, "logical_cores": 2}


def test_a_peak_without_its_calls_or_load_is_measured_again():
    """Entries cached before a peak carried its verdict cannot be judged: not a peak."""
    key = peaks.cache_key("cpu", 2, "float32")
    old = {"tflops": 0.05, "what": "torch matmul", "measured_at": "2026-11-01T00:00:00+00:00"}
    peaks.cache_path().parent.mkdir(parents=True, exist_ok=True)
    for entry in (old, {**old, "times_s": STEADY}, {**old, "load": {"other_cores": "x"}}):
        peaks.cache_path().write_text(json.dumps({key: entry}))
        assert peaks.cached("cpu", 2, "fp32") is None
    peaks.store_probe(PROBE, "cpu", 2)  # a probe result without its load is not kept either
    assert peaks.cached("cpu", 2, "fp32") is None


def test_a_steady_quiet_peak_is_stable_and_the_run_s_mfu_stands_with_its_verdict():
    from tui_bench.engine.results import stability

    peaks.store_probe(PROBE, "cpu", 2, QUIET)
    peak = peaks.cached("cpu", 2, "fp32")
    assert peak.times == tuple(STEADY) and peak.load == QUIET and peak.emulated is None
    assert stability.assess_peak(peak, "cpu", 2).verdict == stability.STABLE
    m = _run_metrics(QUIET_RUN)
    assert m["mfu"] == pytest.approx(m["achieved_tflops"] / 0.05) and "mfu_error" not in m
    assert m["peak_measured_verdict"] == "stable" and m["mfu_peak"].endswith(", stable")
    assert m["peak_measured_other_cores"] == 0.02


def test_an_unreliable_peak_gives_no_measured_mfu_and_says_why():
    """The same rules as a run's: a call ten times the median is a pause, and calls that drift
    apart are no steady state; the nominal MFU is untouched."""
    from tui_bench.engine.results import stability

    paused = [*STEADY[:20], 0.6, *STEADY[:9]]
    _peak_entry(paused, QUIET)
    verdict = stability.assess_peak(peaks.cached("cpu", 2, "fp32"), "cpu", 2)
    assert verdict.verdict == stability.UNRELIABLE
    m = _run_metrics(QUIET_RUN)
    assert m["mfu"] is None and m["peak_measured_verdict"] == "unreliable"
    assert m["mfu_error"].startswith("no MFU of the measured peak: the peak is unreliable (")
    assert "a pause" in m["mfu_error"] and m["achieved_tflops"] > 0


@pytest.mark.parametrize(
    ("peak_other", "run_other", "why"),
    [
        (0.02, 0.03, None),  # both quiet
        (0.15, 0.17, None),  # both a little loaded alike (7.5 % and 8.5 % of 2 cores)
        (0.02, 0.21, None),  # 9.5 % of 2 cores apart: inside the stated 10 %
        (0.02, 0.5, "another load"),  # measured quiet, run under load: MFU too low
        (0.15, 0.5, "another load"),
        # measured under load: the peak is too low (MFU too high) and by a run's own rules
        # (cpu_stolen) unreliable, whatever the run's load
        (1.0, 0.03, "unreliable"),
        (1.0, 1.05, "unreliable"),
    ],
)
def test_a_peak_measured_under_another_load_than_the_run_gives_no_mfu(peak_other, run_other, why):
    _peak_entry(STEADY, peaks.ProbeLoad(peak_other, 0.0, 2, 0.1, 3.0))
    m = _run_metrics({**QUIET_RUN, "steady_other_cores": run_other})
    if why is None:
        assert m["mfu"] is not None and "mfu_error" not in m
    else:
        assert m["mfu"] is None and m["mfu_nominal"] is not None
        assert m["mfu_error"].startswith("no MFU of the measured peak") and why in m["mfu_error"]


def test_the_load_rule_alone_names_both_loads():
    from tui_bench.engine.results import stability

    _peak_entry(STEADY, QUIET)
    peak = peaks.cached("cpu", 2, "fp32")
    verdict = stability.assess_peak(peak, "cpu", 2)
    loaded = {**QUIET_RUN, "steady_other_cores": 0.5}
    why = stability.peak_problem(peak, verdict, "cpu", 2, loaded)
    assert why == (
        "no MFU of the measured peak: it was measured under another load (other work took 1.0 % "
        "of the 2 core(s) then, 25 % during the run; 10 % or more apart do not compare); "
        "tui-bench hardware measures it again"
    )
    assert stability.peak_problem(peak, verdict, "gpu:0", 2, loaded) is None  # host load: n/a
    assert stability.peak_problem(peak, verdict, "cpu", 2, {}) is None  # run's load unknown


def test_an_emulated_bf16_peak_gives_no_measured_mfu():
    from tui_bench.engine.results import stability

    note = "bf16 emulated: CPU lacks avx512_bf16/amx_bf16"
    _peak_entry(STEADY, QUIET, emulated=note)
    peak = peaks.cached("cpu", 2, "bf16")
    assert peak.emulated == note
    why = stability.peak_problem(peak, stability.assess_peak(peak, "cpu", 2), "cpu", 2, QUIET_RUN)
    assert why.startswith("no MFU of the measured peak: it ran emulated (bf16 emulated")
    m = _run_metrics(QUIET_RUN, precision="bf16")
    assert m["mfu"] is None and m["mfu_error"] == why


def test_run_probe_records_the_load_it_measured_under(monkeypatch):
    """The window around the probe's process: the wall time and other work's cores, kept with
    each matmul row (a fake probe that sleeps; the real one is in the slow tier)."""
    import time as _time

    from tui_bench.engine.machine import runtimes

    class Torch:
        python = "python"

    def fake(command, env, tag, timeout):
        _time.sleep(0.3)
        return {"framework": "torch 2.13", "threads": 2, "compute": PROBE["compute"]}, None

    monkeypatch.setattr(runtimes, "resolve", lambda *a: Torch())
    monkeypatch.setattr(runtimes, "run_tagged", fake)
    result = peaks.run_probe("cpu", 2, matmul_only=True)
    load = result["load"]
    assert load["seconds"] >= 0.3 and load["other_cores"] >= 0 and load["logical_cores"] >= 1
    assert peaks.cached("cpu", 2, "fp32").load == peaks.ProbeLoad(**load)


def test_the_probe_stops_a_slow_kernel_at_its_budget_but_never_under_five_calls():
    import importlib.util

    path = Path(__file__).parent.parent / "adapters" / "torch" / "hardware_probe.py"
    spec = importlib.util.spec_from_file_location("hardware_probe_under_test", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    clock = iter(range(1000))
    monkey = pytest.MonkeyPatch()
    monkey.setattr(probe.time, "perf_counter", lambda: float(next(clock)))  # 1 s a call
    try:
        times = probe.timed_within(lambda: None, lambda: None, 2, 30, budget_s=3.0)
        assert len(times) == probe.MIN_CALLS and all(t == 1.0 for t in times)
        assert len(probe.timed_within(lambda: None, lambda: None, 0, 30, budget_s=None)) == 30
        assert len(probe.timed_within(lambda: None, lambda: None, 0, 30, budget_s=40.0)) == 30
    finally:
        monkey.undo()


def _row(framework: str, variant: str, size: int, tflops: float) -> dict:
    return {
        "kernel": "matmul",
        "framework": framework,
        "variant": variant,
        "precision": "float32",
        "size": size,
        "shape": f"{size}×{size} @ {size}×{size}",
        "tflops": tflops * 0.95,
        "best_tflops": tflops,
        "times_s": STEADY,
    }


FAKE_PROBES = {
    "torch": {"framework": "torch 2.13", "threads": 2,
              "compute": [_row("torch 2.13", "eager", 1024, 0.105),
                          _row("torch 2.13", "eager", 2048, 0.101)]},
    "tensorflow": {"framework": "tensorflow 2.21.0", "threads": 2,
                   "compute": [_row("tensorflow 2.21.0", "graph", 1024, 0.098),
                               _row("tensorflow 2.21.0", "xla", 2048, 0.114)]},
    "jax": {"framework": "jax 0.10.2", "threads": 2,
            "compute": [_row("jax 0.10.2", "jit", 1024, 0.090)]},
}  # fmt: skip


def _fake_frameworks(monkeypatch, probes, pythons=("torch", "tensorflow", "jax")):
    commands: dict[str, list[str]] = {}

    def run_one(name, command, env):
        commands[name] = command
        found = probes.get(name)
        return (json.loads(json.dumps(found)), None) if found else (None, f"{name} crashed")

    monkeypatch.setattr(peaks, "_probe_pythons", lambda: {n: f"/py/{n}" for n in pythons})
    monkeypatch.setattr(peaks, "_run_one", run_one)
    return commands


def test_the_measured_peak_is_the_best_of_every_installed_framework_with_the_winner_named(
    monkeypatch,
):
    """Fake probe outputs (the real multi-runtime probe is in the slow tier): TensorFlow's XLA
    2048² matmul beats torch's 1024², so it is the peak, and the record says which it was."""
    commands = _fake_frameworks(monkeypatch, FAKE_PROBES)
    result = peaks.run_probe("cpu", 2, matmul_only=True, precisions=("float32",))
    assert result["probes"] == {"torch": "ok", "tensorflow": "ok", "jax": "ok"}
    peak = peaks.cached("cpu", 2, "fp32")
    assert peak is not None and peak.tflops == 0.114
    assert peak.what.startswith("tensorflow 2.21.0 xla matmul 2048×2048 @ 2048×2048 float32, 2")
    entry = next(iter(json.loads(peaks.cache_path().read_text()).values()))
    assert entry["winner"] == {"framework": "tensorflow 2.21.0", "variant": "xla",
                               "size": 2048, "dtype": "float32", "threads": 2}  # fmt: skip
    assert entry["candidates"].startswith("tensorflow 2.21.0 xla 2048² 0.114; torch 2.13 eager")
    # each in its own runtime, at both sizes; JAX pinned to the run's CPUs (it reads no
    # thread variable)
    assert commands["tensorflow"][0] == "/py/tensorflow" and "--framework" in commands["jax"]
    assert commands["torch"][commands["torch"].index("--sizes") + 1] == "1024,2048"
    assert "--affinity" in commands["jax"] and "--affinity" not in commands["torch"]


def test_a_framework_that_cannot_probe_is_skipped_and_said(monkeypatch):
    _fake_frameworks(monkeypatch, {"torch": FAKE_PROBES["torch"]}, ("torch", "tensorflow"))
    result = peaks.run_probe("cpu", 2, matmul_only=True)
    assert result["probes"] == {
        "torch": "ok",
        "tensorflow": "failed: tensorflow crashed",
        "jax": "no runtime installed",
    }
    assert peaks.cached("cpu", 2, "fp32").tflops == 0.105
    _fake_frameworks(monkeypatch, {})
    failed = peaks.run_probe("cpu", 2, matmul_only=True)
    assert failed["error"].startswith("hardware probe failed (torch: failed: torch crashed")


@pytest.mark.slow
@pytest.mark.fresh_caches
def test_a_real_peak_is_measured_once_by_every_installed_framework_and_one_is_named(monkeypatch):
    """The run's peak, measured the way a run measures it (``measured``: one progress line, the
    row the run needs and no other): every installed framework's probe ran, and the cached peak
    is the best row, its framework named. (Two tests of 20 s each, one probe run apiece, before.)"""
    from conftest import require_runtime

    require_runtime("torch", "eager")
    results = []
    real_run_probe = peaks.run_probe
    monkeypatch.setattr(
        peaks, "run_probe", lambda *a, **k: results.append(real_run_probe(*a, **k)) or results[-1]
    )
    lines: list[str] = []
    peak, why = peaks.measured("cpu", 1, "fp32", progress=lines.append)
    assert why is None and peak is not None and peak.tflops > 0 and len(lines) == 1
    assert peaks.cached("cpu", 1, "fp32") == peak
    assert peaks.cached("cpu", 1, "bf16") is None  # only the row the run needs was timed
    (result,) = results
    assert "error" not in result, result
    assert result["probes"]["torch"] == "ok"
    ran = {row["framework"].split()[0] for row in result["compute"]}
    assert ran == {name for name, said in result["probes"].items() if said == "ok"}
    assert {row["size"] for row in result["compute"]} == set(peaks.PEAK_SIZES)
    best = max(result["compute"], key=lambda row: row["best_tflops"])
    assert peak.tflops == best["best_tflops"]
    assert peak.what.startswith(best["framework"])


def test_a_ctrl_c_while_the_peak_is_measured_is_one_line_and_exit_130(monkeypatch, capsys):
    from tui_bench.cli import common
    from tui_bench.cli.run import _measure_peak

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(peaks, "measured", interrupted)
    with pytest.raises(SystemExit) as ended:
        _measure_peak("cpu", 1, "fp32", common.console(stderr=True), False)
    assert ended.value.code == 130
    assert capsys.readouterr().err.strip() == "cancelled while measuring the peak: no run started"
