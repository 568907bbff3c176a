"""A comparison of training and inference runs gives each configuration its own figure (issue
48 item 8): the summary once showed "—" and "no finished run" for every inference row, since it
read the training runs' step time from runs that time requests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from histories import fill, record

from tui_bench.engine.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]


def _mixed() -> list[dict]:
    train = record(1, 20.0)
    served = record(2, 20.0)
    spec = RunSpec(mode="inference", requests=50, seed=2)
    served.update(spec=spec.to_dict(), label=spec.label())
    served["metrics"] = {
        "latency_p50_s": 0.004,
        "latency_p99_s": 0.006,
        "inference_samples_per_s": 32000.0,
        "latency_requests": 50,
    }
    return [train, served]


def test_a_mixed_summary_shows_each_configuration_s_own_figure():
    runs = _mixed()
    fill(runs)
    out = subprocess.run(
        [sys.executable, "-m", "tui_bench", "compare", runs[0]["id"], runs[1]["id"], "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = next(t for t in json.loads(out.stdout) if t["name"] == "summary")
    rows = {row[0]: dict(zip(summary["columns"], row, strict=True)) for row in summary["rows"]}
    assert set(rows) == {"train", "inference"}, rows
    assert rows["train"]["median"] == 0.02 and rows["train"]["n"] == 1
    assert rows["inference"]["median"] == 0.004 and rows["inference"]["n"] == 1  # its p50
    assert "no finished run" not in rows["inference"]["notes"]
    # and the figures beside it: the inference run's served samples/s
    assert rows["inference"]["median samples/s"] == 32000.0
