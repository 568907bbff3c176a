"""Sweeps with real workers (a few tiny steps each): interleaving, records, failures that do not
stop the sweep, and resume after an interruption runs only what is missing. A sweep does not
depend on its framework: the workers are the example numpy plugin's (conftest's
``numpy_framework``: ~0.3 s to start, against ~4 s for torch's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui_bench.engine.results.history import History
from tui_bench.engine.runs import presets, supervisor
from tui_bench.engine.runs import sweep as sweep_module

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("numpy_framework")]

TINY = """
name = "tiny"
description = "two thread counts, two repeats, a few steps"
study = "none: a test"
repeats = 2
framework = "numpy-mlp"
api = "numpy"
model = "mlp"
dataset = "synthetic-mnist"
batch_size = 32
epochs = 1
steps_per_epoch = 3
warmup_steps = 1
train_samples = 200
test_samples = 64
threads = [1, 2]
"""


@pytest.fixture
def tiny(tmp_path: Path) -> presets.Preset:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return presets.load(path)


def pairs(records):
    return [(r.config, r.repeat) for r in records]


def test_a_failing_configuration_is_recorded_and_the_sweep_goes_on(tiny):
    history = History()
    sweep = sweep_module.create(tiny)
    outcome = sweep_module.run(
        sweep,
        history,
        options_for=lambda c: {"fault": "crash@epoch:1"} if c.spec.threads == 1 else {},
        sample_interval=0.2,
    )
    records = sweep_module.records(sweep, history)
    assert [(r.config, r.status) for r in records] == [
        ("threads=1", "failed"),
        ("threads=2", "finished"),
        ("threads=2", "finished"),
    ]
    assert "injected crash" in records[0].reason
    assert "threads=1" in outcome.not_run
    # Resuming retries what never finished; nothing finished is run again.
    left = sweep_module.pending(sweep, history)
    assert [(c.key, r) for c, r in left] == [("threads=1", 0), ("threads=1", 1)]
    again = sweep_module.run(sweep, history, sample_interval=0.2)
    assert [(c.key, r, res.status) for c, r, res in again.ran] == [
        ("threads=1", 0, "finished"),
        ("threads=1", 1, "finished"),
    ]
    assert sweep_module.pending(sweep, history) == []


def test_a_sweep_interleaves_repeats_and_resumes_without_redoing_finished_runs(tiny):
    """Ctrl-C between runs, then a resume from the manifest: the records are the whole sweep's,
    interleaved (each repeat runs every configuration before the next repeat starts), each
    finished pair once. One sweep of four runs checks both (a torch worker's start was ~5 s loaded)."""
    history = History()
    sweep = sweep_module.create(tiny)

    def stop_after_two(config, repeat, index, total):
        if index == 2:
            raise KeyboardInterrupt  # what Ctrl-C does between runs

    with pytest.raises(KeyboardInterrupt):
        sweep_module.run(sweep, history, before_run=stop_after_two, sample_interval=0.2)
    assert pairs(sweep_module.records(sweep, history)) == [("threads=1", 0), ("threads=2", 0)]
    resumed = sweep_module.find(sweep.id)  # as a new process would: from the manifest
    outcome = sweep_module.run(resumed, history, sample_interval=0.2)
    assert [(c.key, r, res.status) for c, r, res in outcome.ran] == [
        ("threads=1", 1, "finished"),
        ("threads=2", 1, "finished"),
    ]
    records = sweep_module.records(sweep, history)
    assert pairs(records) == [
        ("threads=1", 0),
        ("threads=2", 0),
        ("threads=1", 1),
        ("threads=2", 1),
    ]
    assert {r.status for r in records} == {"finished"}
    assert {r.group for r in records} == {sweep.id}
    assert {r.preset for r in records} == {"tiny"}
    assert all(r.raw["oversubscribed"] is False for r in records)  # as the sweep wrote it
    assert [r.worker["threads_effective"] for r in records] == [1, 2, 1, 2]
    assert sweep_module.pending(sweep, history) == []
    # The manifest alone is enough to find the sweep again, by a prefix of its id too.
    assert sweep_module.find(sweep.id[:-2]).configs == sweep.configs


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tui_bench", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_killed_cli_sweep_resumes_from_history(tmp_path):
    """The recording process (the sweep's supervisor) dies mid-sweep (kill -9), and so does the
    CLI: the next `run --resume` marks the cut run interrupted and runs only the pairs without a
    finished record."""
    preset_file = tmp_path / "tiny.toml"
    preset_file.write_text(TINY)
    env = dict(os.environ)
    first = _cli("run", "--preset", str(preset_file), "-q", env=env)
    history = History()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = [r for r in history.all() if r.finished]
        if done:
            break
        time.sleep(0.2)
    assert done, "no run finished within two minutes"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    (owner,) = supervisor.in_progress()
    os.kill(owner.supervisor["pid"], signal.SIGKILL)
    time.sleep(3.0)  # the orphaned worker notices its parent is gone (heartbeat: 2 s)
    finished_before = {(r.config, r.repeat) for r in history.all() if r.finished}
    second = _cli("run", "--preset", str(preset_file), "--resume", "-q", env=env)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    records = history.all()
    finished = [(r.config, r.repeat) for r in records if r.finished]
    assert sorted(finished) == [
        ("threads=1", 0),
        ("threads=1", 1),
        ("threads=2", 0),
        ("threads=2", 1),
    ]
    assert len(finished) == len(set(finished))  # nothing finished was run twice
    assert finished_before <= set(finished)
    assert {r.group for r in records} == {records[0].group}
