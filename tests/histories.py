"""Constructed history records for the trends/regress/export tests: the shape runner.execute
writes (spec, env, worker facts, metrics), with the figures chosen by the test."""

from __future__ import annotations

import datetime as dt
import zlib
from typing import Any

from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run
from tui_bench.engine.spec import RunSpec

START = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)


def record(
    index: int,
    step_ms: float,
    *,
    framework: str = "torch",
    api: str = "eager",
    threads: int = 2,
    version: str = "2.12.1",
    host: str = "box-a",
    status: str = "finished",
    accuracy: float = 0.9,
    day: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Run number ``index`` (one a day unless ``day`` says otherwise) taking ``step_ms``."""
    spec = RunSpec(framework=framework, api=api, threads=threads, seed=index)
    when = START + dt.timedelta(days=index if day is None else day)
    return {
        # unique per configuration too: runs of two configurations on one day are two runs
        "id": f"{when:%Y%m%d-%H%M%S}-{index:04x}{zlib.crc32(f'{spec.label()}{host}'.encode()) & 0xFFFF:04x}",
        "status": status,
        "started_at": when.isoformat(),
        "finished_at": (when + dt.timedelta(minutes=1)).isoformat(),
        "spec": spec.to_dict(),
        "label": spec.label(),
        "env": {
            "host": host,
            "cpu_model": "Test CPU",
            "logical_cores": 2,
            "ram_gib": 8.0,
            "os": "Linux 6",
            "python": "3.11.7",
            "tui_bench": "0.1.0",
            "gpu_driver": None,
            "cuda_driver": None,
        },
        "worker": {"framework": framework, "framework_version": version, "python": "3.11.7"},
        "metrics": {}
        if status != "finished"
        else {
            "step_median_s": step_ms / 1000,
            "step_iqr_s": step_ms / 1000 * 0.02,
            "samples_per_s": 128 / (step_ms / 1000),
            "test_accuracy": accuracy,
        },
        "load_at_start": {"loadavg_1m": 0.2, "logical_cores": 2, "busy": False},
        **extra,
    }


def fill(records: list[dict[str, Any]]) -> History:
    history = History()
    for item in records:
        history.add(item)
    return history


def as_runs(records: list[Any]) -> list[Run]:
    """Constructed records as the history hands them out: ``Run`` values."""
    return [Run.from_record(r) for r in records]
