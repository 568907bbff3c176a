"""Live: achieved FLOP/s and MFU form from the steady steps as they arrive (runs/reducer.py),
then the result's own figures replace them; an MFU above 1 is said, never shown."""

from __future__ import annotations

import pytest

from tui_bench.engine import flops
from tui_bench.engine.kinds import SeriesEvent, WorkerEvent
from tui_bench.engine.machine import peaks
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.widgets.run_view import figures_text

SPEC = RunSpec(model="mlp", dataset="synthetic-mnist", batch_size=64, threads=2, device="cpu")
PER_STEP = flops.for_dataset("mlp", "synthetic-mnist").train_step(64)


def _view(times: list[float]) -> BatchView:
    view = BatchView(spec=SPEC)
    view.fold([{"type": SeriesEvent.RECORD, "record": {"id": "r1", "spec": SPEC.to_dict()}}])
    view.apply({"type": WorkerEvent.RUN_STARTED})
    if times:
        view.fold([{"type": WorkerEvent.STEPS, "losses": [1.0] * len(times), "step_times": times}])
    return view


def test_nothing_before_the_first_steady_step():
    assert _view([]).limits_text() is None


def test_achieved_flops_form_from_the_median_step_without_a_peak():
    text = _view([0.01, 0.02, 0.01]).limits_text()
    assert text == f"{PER_STEP / 0.01 / 1e9:.3g} GFLOP/s so far"
    assert text in figures_text(_view([0.01, 0.02, 0.01]))


def test_mfu_forms_against_the_cached_measured_peak():
    row = {"kernel": "matmul", "precision": "float32", "tflops": 1.0, "times_s": [0.01] * 30}
    peaks.store_probe({"compute": [row]}, "cpu", 2, peaks.ProbeLoad(0.0, 0.0, 2, 0.1, 1.0))
    text = _view([0.01]).limits_text()
    assert text.endswith(f"MFU {PER_STEP / 0.01 / 1e12:.1%} of measured peak")


def test_an_impossible_mfu_is_an_error_line():
    row = {"kernel": "matmul", "precision": "float32", "tflops": 1e-6, "times_s": [0.01] * 30}
    peaks.store_probe({"compute": [row]}, "cpu", 2, peaks.ProbeLoad(0.0, 0.0, 2, 0.1, 1.0))
    text = _view([0.01]).limits_text()
    assert peaks.MFU_ABOVE_ONE in text and "MFU 1" not in text


@pytest.mark.parametrize("error", [None, peaks.MFU_ABOVE_ONE])
def test_the_result_figures_replace_the_forming_ones(error):
    view = _view([0.01])
    metrics = {"flops_per_step": PER_STEP, "achieved_tflops": 0.02, "mfu_nominal": 0.25}
    if error:
        metrics.update(mfu=None, mfu_error=error)
    else:
        metrics["mfu"] = 0.5
    view.apply({"type": SeriesEvent.RESULT, "record": {"status": "finished", "metrics": metrics}})
    text = view.limits_text()
    assert text.startswith("20 GFLOP/s") and "MFU 25.0% of nominal peak" in text
    assert ("MFU 50.0% of measured peak" in text) == (error is None)
    assert (peaks.MFU_ABOVE_ONE in text) == (error is not None)


def test_the_forming_figure_is_worked_out_again_at_most_once_a_second():
    view = _view([0.01])
    clock = iter([100.0, 100.5, 101.5])
    first = view.limits_text(now=lambda: next(clock))
    view.fold([{"type": WorkerEvent.STEPS, "losses": [1.0, 1.0], "step_times": [0.02, 0.02]}])
    assert view.limits_text(now=lambda: next(clock)) == first  # half a second later: kept
    assert view.limits_text(now=lambda: next(clock)) != first  # a second later: the new median


def test_a_finished_run_says_its_energy_or_why_not_and_its_memory_peaks():
    view = _view([0.01])
    unread = {
        "flops_per_step": PER_STEP,
        "achieved_tflops": 0.02,
        "cpu_energy_problem": "no RAPL zone in /sys/class/powercap (a VM, or a kernel ...)",
        "res_peak_rss_mib": 606.9,
    }
    view.apply({"type": SeriesEvent.RESULT, "record": {"status": "finished", "metrics": unread}})
    text = view.limits_text()
    assert "energy not read: no RAPL zone in /sys/class/powercap" in text
    assert text.endswith("peak RSS 607 MiB")

    view = _view([0.01])
    read = {**unread, "cpu_joules_per_step": 1.25, "allocator_peak_mib": 120.0}
    view.apply({"type": SeriesEvent.RESULT, "record": {"status": "finished", "metrics": read}})
    text = view.limits_text()
    assert "1.25 J/step (CPU)" in text and "energy not read" not in text
    assert text.endswith("peak RSS 607 MiB, allocator 120 MiB")

    view = _view([0.01])
    short = {**unread, "gpu_energy_problem": "steady windows of 0.05 s are too short (...)"}
    view.apply({"type": SeriesEvent.RESULT, "record": {"status": "finished", "metrics": short}})
    assert "energy not read: steady windows of 0.05 s are too short" in view.limits_text()


def test_the_settings_that_decide_the_step_time_stand_beside_it():
    """Live and a stored run's view say the precision (an emulated bf16 included), the
    compilation and the attention kernel next to the step time."""
    view = _view([0.01, 0.02, 0.01])
    assert "precision" not in figures_text(view)  # the worker has not said them yet
    settings = {
        "precision": "bf16",
        "bf16_note": "bf16 emulated: CPU lacks avx512_bf16/amx_bf16",
        "compile": "no (eager)",
        "attention": "SDPA math (training, dropout 0.25)",
    }
    view.started = {**(view.started or {}), "settings": settings}
    text = figures_text(view)
    assert (
        "precision bf16, bf16 emulated: CPU lacks avx512_bf16/amx_bf16, compilation no (eager), "
        "attention SDPA math (training, dropout 0.25)"
    ) in text


def test_a_peak_that_does_not_hold_forms_no_mfu():
    """An unreliable measured peak (a call ten times the median: a pause) gives no MFU live,
    as it gives none in the record."""
    times = [0.01] * 20 + [0.2] + [0.01] * 9
    row = {"kernel": "matmul", "precision": "float32", "tflops": 1.0, "times_s": times}
    peaks.store_probe({"compute": [row]}, "cpu", 2, peaks.ProbeLoad(0.0, 0.0, 2, 0.1, 1.0))
    text = _view([0.01]).limits_text()
    assert text == f"{PER_STEP / 0.01 / 1e9:.3g} GFLOP/s so far"
