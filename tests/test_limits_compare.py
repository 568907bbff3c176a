"""compare's machine-use table (results/tables.py ``limits_table``): per configuration achieved
FLOP/s and MFU against the named peaks, the framework that uses the machine best, and an MFU
above 1 said as an error, never a number."""

from __future__ import annotations

from histories import as_runs

from tui_bench.engine.machine.peaks import MFU_ABOVE_ONE
from tui_bench.engine.results import render, tables
from tui_bench.engine.spec import RunSpec

SHORT_WINDOWS = "steady windows of 0.05 s are too short for the NVML energy counter (...)"


def record(run_id: str, framework: str, api: str, mfu: float | None, **extra) -> dict:
    spec = RunSpec(framework=framework, api=api)
    metrics = {
        "step_median_s": 0.1,
        "flops_per_step": 2e9,
        "achieved_tflops": 0.02,
        "mfu": mfu,
        "mfu_peak": "measured peak 0.05 TFLOP/s (torch matmul float32, 2 threads)",
        "mfu_nominal": mfu / 4 if mfu is not None else None,
        "res_peak_rss_mib": 400.0,
        "cpu_energy_problem": "no RAPL zone in /sys/class/powercap",
        **extra,
    }
    return {
        "id": run_id,
        "status": "finished",
        "started_at": "2026-11-25T19:00:00",
        "spec": spec.to_dict(),
        "label": spec.label(),
        "env": {"logical_cores": 2},
        "metrics": metrics,
    }


def test_compare_names_the_framework_that_uses_the_machine_best():
    runs = [
        record("a1", "torch", "eager", 0.30),
        record("a2", "torch", "eager", 0.34),
        record("b1", "tensorflow", "graph", 0.20),
        record("b2", "tensorflow", "graph", 0.22, gpu_energy_problem=SHORT_WINDOWS),
    ]
    table = tables.compute(as_runs(runs)).table("limits")
    assert table is not None and len(table.rows) == 2
    rows = {row.cells[0]: dict(zip(table.names, row.cells, strict=True)) for row in table.rows}
    torch_row = next(v for k, v in rows.items() if "torch" in k)
    assert torch_row["MFU"] == 0.32 and torch_row["GFLOP/s"] == 20.0
    assert torch_row["MFU nominal"] == 0.08 and torch_row["n"] == 2
    assert "measured peak 0.05" in torch_row["measured peak"]
    assert table.note.startswith("uses the machine best: torch")
    assert "32.0% of the measured peak" in table.note
    assert "CPU energy not read: no RAPL zone" in table.note
    assert f"GPU energy not read: {SHORT_WINDOWS}" in table.note
    page = render.markdown([table])
    assert "machine use" in page and "32.0%" in page and "uses the machine best" in page


def test_an_mfu_above_one_is_an_error_in_the_row_not_a_number():
    runs = [
        record("a1", "torch", "eager", None, mfu_error=MFU_ABOVE_ONE),
        record("b1", "tensorflow", "graph", 0.2),
    ]
    table = tables.compute(as_runs(runs)).table("limits")
    rows = {row.cells[0]: dict(zip(table.names, row.cells, strict=True)) for row in table.rows}
    torch_row = next(v for k, v in rows.items() if "torch" in k)
    assert torch_row["MFU"] is None and f"1 run(s): {MFU_ABOVE_ONE}" in torch_row["notes"]
    assert table.note.startswith("uses the machine best: tensorflow")


def test_runs_without_a_flop_count_have_no_limits_table():
    bare = record("a1", "torch", "eager", 0.3)
    bare["metrics"] = {"step_median_s": 0.1}
    assert tables.compute(as_runs([bare])).table("limits") is None
