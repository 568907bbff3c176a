"""The verdict where a user meets it: `run` ends with it, `--require-stable` exits 3 on an
unreliable run, CSV has `stability` columns, `history recheck` judges stored runs again."""

from __future__ import annotations

import csv
import functools
import json
import random

import pytest
from test_cli import cli as cli_process

from tui_bench.engine.results import stability
from tui_bench.engine.results.history import History

# test_cli's runner of the real command line, with room for a real run on a loaded machine.
cli = functools.partial(cli_process, timeout=180)


# One steady step: too few to judge a spread by, so the verdict is unreliable whatever the load.
# The verdict does not depend on the framework: the example numpy plugin's MLP (conftest's
# numpy_framework; its worker starts in ~0.3 s, torch's in ~4 s).
FEW_STEPS = [
    "--framework", "numpy-mlp", "--api", "numpy", "--model", "mlp", "--threads", "1", "--epochs", "1", "--steps-per-epoch", "5", "--warmup-steps", "4",
    "--train-samples", "600", "--test-samples", "100", "--batch-size", "32",
]  # fmt: skip


@pytest.mark.slow
def test_run_ends_with_the_verdict_and_require_stable_exits_3(tmp_path, numpy_framework):
    plain = cli("run", *FEW_STEPS)
    assert plain.returncode == 0, plain.stderr
    assert "stability " in plain.stdout and ": unreliable: 1 steady step(s)" in plain.stdout
    strict = cli("run", *FEW_STEPS, "--require-stable", "--json")
    assert strict.returncode == stability.EXIT_UNRELIABLE == 3, strict.stderr
    record = json.loads(strict.stdout)[0]
    assert record["stability"]["verdict"] == "unreliable"
    assert len(record["metrics"]["steady_step_times"]) == 1
    out = tmp_path / "runs.csv"
    assert cli("history", "export", "--csv", str(out)).returncode == 0
    rows = list(csv.DictReader(out.open()))
    assert {r["stability"] for r in rows} == {"unreliable"}
    assert "steady step(s)" in rows[0]["stability_reasons"]
    assert "metrics.steady_step_times" not in rows[0]


def _stored(history: History, times: list[float], verdict: str | None = None, **extra) -> str:
    record = {
        "status": "finished",
        "spec": {"threads": 1, "workers": 1},
        "load_at_start": {"logical_cores": 2},
        "metrics": {"steady_step_times": times, "step_median_s": sorted(times)[len(times) // 2]},
        "stability": {"verdict": verdict, "reasons": []} if verdict else None,
        **extra,
    }
    return history.add(record)


def test_history_recheck_judges_stored_step_times_again():
    history = History()
    paused = [0.04] * 200 + [0.9] + [0.04] * 99
    run_id = _stored(history, paused, verdict="stable")  # judged by older, laxer rules
    old = history.add({"status": "finished", "metrics": {"step_median_s": 0.04}})
    out = cli("history", "recheck", "--json")
    assert out.returncode == 0, out.stderr
    rechecked = json.loads(out.stdout)
    assert [r["id"] for r in rechecked] == [run_id]  # the old record has no times to judge
    assert rechecked[0]["before"] == "stable"
    assert history.get(run_id).stability["verdict"] == "unreliable"
    assert "1 recorded without step times" in out.stderr and old


def test_history_recheck_takes_repeats_into_account():
    history = History()
    rng = random.Random(3)
    flat = [rng.gauss(0.04, 0.0002) for _ in range(300)]
    ids = [
        _stored(history, [t * scale for t in flat], group="g1", config="torch-1t", repeat=r)
        for r, scale in enumerate((1.0, 1.02, 1.1))
    ]
    out = cli("history", "recheck", ids[0][:-1])
    assert out.returncode == 0, out.stderr
    assert "noisy: repeats differ by 10 %" in out.stdout
    assert cli("history", "recheck", "no-such-run").returncode == 2
