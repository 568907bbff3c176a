"""`--repeats auto`: a preset's configurations repeat until the median's 95 % CI is within the
target, or the maximum; why each stopped is kept in the sweep manifest. A fake executor stands
in for workers (the stopping rule is what is tested; real sweeps are in test_sweep.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

from tui_bench.engine.results.history import History
from tui_bench.engine.runs import presets, runner
from tui_bench.engine.runs import sweep as sweep_module

PRESET = """
name = "auto"
description = "two configurations"
study = "none: a test"
model = "mlp"
dataset = "synthetic-mnist"
threads = [1, 2]
"""

# threads=1 repeats agree to 0.5 %; threads=2 repeats scatter by 10 %
MEDIANS = {
    "threads=1": [0.0400, 0.0401, 0.0399, 0.0402, 0.0400, 0.0398, 0.0401, 0.0400],
    "threads=2": [0.030, 0.033, 0.029, 0.032, 0.030, 0.034, 0.028, 0.031],
}


def fake_executor(spec, history, group=None, repeat=None, extra=None, **_):
    key = extra["config"]
    record = {"status": "finished", "group": group, "repeat": repeat, **extra}
    record["metrics"] = {"step_median_s": MEDIANS[key][repeat]}
    run_id = history.add(record)
    return runner.RunResult(run_id=run_id, spec=spec, status="finished")


def test_auto_repeats_stop_each_configuration_when_its_median_is_known(tmp_path: Path):
    path = tmp_path / "auto.toml"
    path.write_text(PRESET)
    history = History()
    sweep = sweep_module.create(presets.load(path), auto_repeats={"max": 8, "target_ci": 0.02})
    assert sweep.repeats == 8
    sweep_module.run(sweep, history, executor=fake_executor)
    ran = {}
    for r in sweep_module.records(sweep, history):
        ran[r["config"]] = ran.get(r["config"], 0) + 1
    assert ran == {"threads=1": 6, "threads=2": 8}  # 6: the fewest for a 95 % CI of a median
    found = sweep_module.find(sweep.id)  # the reasons survive in the manifest
    assert "after 6 repeats (target ±2 %)" in found.stopped["threads=1"]
    assert found.stopped["threads=2"].startswith("stopped at the maximum of 8 repeats")
    assert sweep_module.pending(found, history) == []


def test_repeats_auto_without_a_preset_is_one_clear_line():
    out = subprocess.run(
        [sys.executable, "-m", "tui_bench", "run", "--repeats", "auto"],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "--repeats auto" in out.stderr and "--preset" in out.stderr
