"""The dry run answers from the shape where a build would not fit or would take long (issue 48,
item 1): gpt2-small at batch 128 once ran a forward pass whose logits alone were 26 GB and died
after minutes. And each model's default batch is its own (the gpt: a few sequences)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui_bench.engine import flops, model_memory
from tui_bench.engine.runs import dry_run
from tui_bench.engine.spec import DEFAULT_BATCH, MODEL_BATCH, RunSpec

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30


def _cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tui_bench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_each_model_has_its_own_default_batch_recorded_in_the_spec():
    gpt = RunSpec(model="gpt").validate()
    assert gpt.batch_size == MODEL_BATCH["gpt"] == 8  # a few sequences, not a CNN's 128
    assert gpt.to_dict()["batch_size"] == 8  # recorded: the spec holds the number that ran
    assert RunSpec().batch_size == DEFAULT_BATCH == 128
    assert RunSpec(model="gpt", batch_size=2).batch_size == 2  # a given batch is kept
    assert RunSpec.from_dict(RunSpec(model="gpt").to_dict()).batch_size == 8


def test_the_batch_defaults_are_in_the_run_help():
    out = _cli("run", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "default 128; gpt: 8 sequences" in text


def test_gpt2_small_at_batch_128_is_answered_from_the_shape_not_a_forward_pass():
    spec = RunSpec(model="gpt", size="gpt2-small", batch_size=128).validate()
    found = dry_run.dry_run(spec, available=16 * GIB)  # no worker: a build would not fit
    assert not found.built and "forward pass" in (found.not_built or "")
    assert found.param_count == 124_439_808  # GPT-2 small's, from its dimensions
    assert found.flops_per_step == flops.train_step_flops(
        "gpt", spec.dataset, 128, spec.model_dims()
    )
    assert found.fit.fits is False
    largest = found.fit.largest_batch
    assert largest is not None and 0 < largest < 128
    # the largest batch that fits is the largest: one more does not
    assert model_memory.estimate(spec, largest).total_bytes <= 16 * GIB
    assert model_memory.estimate(spec, largest + 1).total_bytes > 16 * GIB
    verdict = found.verdict
    assert verdict.startswith("does NOT fit") and f"largest batch that fits here is {largest}"
    assert f"at least {found.fit.needs / GIB:.2f} GiB" in verdict  # the device it would need
    assert found.wall_s < 1.0


def test_no_batch_fits_when_the_weights_alone_do_not():
    spec = RunSpec(model="gpt", size="gpt2-medium", batch_size=1).validate()
    found = dry_run.fit(spec, available=1 * GIB)
    assert found.fits is False and found.largest_batch == 0
    assert "no batch fits" in dry_run.DryRun(spec, {}, None, 0.0, found, "x").verdict


def test_strong_scaling_counts_the_largest_batch_globally():
    spec = RunSpec(
        model="gpt", size="gpt2-small", batch_size=8, workers=2, scaling="strong"
    ).validate()
    free = 8 * GIB
    largest = model_memory.largest_batch(spec, free)
    assert largest is not None and largest % 2 == 0
    per_worker = model_memory.estimate(spec, largest // 2).total_bytes
    assert 2 * per_worker <= free < 2 * model_memory.estimate(spec, largest // 2 + 1).total_bytes


def test_inference_needs_no_optimizer_state_or_backward_activations():
    train = RunSpec(model="gpt", size="gpt2-small", batch_size=4).validate()
    serve = train.with_changes(mode="inference").validate()
    assert model_memory.estimate(serve).total_bytes < model_memory.estimate(train).total_bytes
    assert model_memory.estimate(serve).state_bytes == 4 * 124_439_808
    assert "forward" in model_memory.formula(serve)


def test_a_small_gpt_and_the_fixed_shape_models_are_really_built():
    assert (
        dry_run.build_problem(
            RunSpec(model="gpt").validate(), dry_run.Fit(None, 64 * GIB, None, None, None)
        )
        is None
    )
    assert (
        dry_run.build_problem(
            RunSpec(model="mlp").validate(), dry_run.fit(RunSpec(model="mlp").validate())
        )
        is None
    )
    # gpt2-small's forward at one sequence is over the budget: the shape answers
    small = RunSpec(model="gpt", size="gpt2-small", batch_size=1).validate()
    assert dry_run.build_problem(small, dry_run.fit(small, 64 * GIB)) is not None


def test_a_gpu_dry_run_states_what_the_device_needs():
    spec = RunSpec(model="gpt", size="gpt2-small", batch_size=64, device="gpu").validate()
    found = dry_run.dry_run(spec)
    assert not found.built and found.fit.available is None and found.fit.fits is None
    assert found.verdict.startswith("needs about") and "gpu memory" in found.verdict


def test_the_cli_dry_run_of_gpt2_small_answers_in_seconds_with_exit_0():
    """The command of issue 48: it once worked 4 min 44 s and died allocating 26 GB."""
    started = time.monotonic()
    out = _cli(
        "run",
        "--model",
        "gpt",
        "--size",
        "gpt2-small",
        "--batch-size",
        "128",
        "--dry-run",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["built"] is False and figures["param_count"] == 124_439_808
    assert figures["param_count_from"] == "shape"
    assert figures["fits"] in (True, False) and figures["verdict"]
    assert figures["flops_per_step"] > 0 and figures["memory_needed_bytes"] > 20 * GIB
    text = _cli("run", "--model", "gpt", "--size", "gpt2-small", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert "parameters              124,439,808 (from the shape)" in text.stdout
    assert "fits this machine" in text.stdout and "not built" in text.stdout
    assert "global batch 8," in text.stdout  # the gpt's own default batch
    assert time.monotonic() - started < 60  # two CLI starts; no framework imported


@pytest.mark.parametrize("field", ["batch_size"])
def test_the_setup_form_reads_the_default_from_the_declaration(field):
    from tui_bench.engine.spec import declared_fields

    declared = {f.name: f for f in declared_fields()}[field]
    assert "default 128; gpt: 8 sequences" in declared.help


def test_setup_shows_the_per_model_batch_default():
    from tui_bench.engine.spec import model_default_text

    assert model_default_text("batch_size") == "128, gpt 8"
    assert model_default_text("lr") is None
