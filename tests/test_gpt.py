"""The gpt (issue 42): its size as a setting, its data, its shared initial draw, its FLOPs and its
numbers. Fast tests at ``tiny``; the real torch worker is in tests/test_frameworks.py (slow)."""

from __future__ import annotations

import math

import pytest

from tui_bench.engine import catalog, model_manifest
from tui_bench.engine.results.identity import configuration_of, labelled
from tui_bench.engine.results.record import Run
from tui_bench.engine.spec import RunSpec, SpecError


def _error(**fields) -> SpecError:
    with pytest.raises(SpecError) as info:
        RunSpec.from_dict(fields)
    return info.value


# -- shape and size -------------------------------------------------------------------------------
def test_named_sizes_have_the_published_shapes_and_parameter_counts():
    tiny = model_manifest.gpt_dims("tiny")
    assert (tiny.layers, tiny.d_model, tiny.heads, tiny.seq_len, tiny.vocab_size) == (
        2,
        128,
        4,
        128,
        8192,
    )
    small = model_manifest.gpt_dims("gpt2-small")
    assert (small.layers, small.d_model, small.heads, small.seq_len, small.vocab_size) == (
        12,
        768,
        12,
        1024,
        50257,
    )
    assert small.parameters == 124_439_808  # GPT-2 small, tied head
    assert small.non_embedding_parameters == 124_439_808 - 1024 * 768
    medium = model_manifest.gpt_dims("gpt2-medium")
    assert (medium.layers, medium.d_model, medium.heads) == (24, 1024, 16)
    assert medium.parameters == 354_823_168  # GPT-2 medium (HF's 354.8M with the tied head)


def test_a_gpt_spec_defaults_to_tiny_on_synthetic_tokens_without_dropout():
    spec = RunSpec(model="gpt").validate()
    assert (spec.size, spec.dataset, spec.dropout) == ("tiny", "synthetic-tokens", 0.0)
    assert spec.label().startswith("torch/eager gpt tiny synthetic-tokens")
    # the other models keep the studies' defaults
    assert (RunSpec().dataset, RunSpec().dropout, RunSpec().size) == ("synthetic-mnist", 0.25, None)
    # a dropout the user sets is the one that runs, and is recorded
    assert RunSpec.from_dict({"model": "gpt", "dropout": 0.1}).to_dict()["dropout"] == 0.1


def test_overrides_replace_the_sizes_dimensions_and_are_recorded():
    spec = RunSpec.from_dict({"model": "gpt", "size": "gpt2-small", "layers": 4, "seq_len": 256})
    dims = spec.gpt_dims()
    assert (dims.layers, dims.d_model, dims.heads, dims.seq_len, dims.vocab_size) == (
        4,
        768,
        12,
        256,
        50257,
    )
    assert spec.to_dict()["layers"] == 4 and spec.to_dict()["d_model"] is None
    assert RunSpec.from_json(spec.to_json()) == spec
    assert "gpt gpt2-small L4 S256 " in spec.label()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"model": "gpt", "d_model": 130},
            "d_model",
            "d_model 130 does not divide into 4 heads (each head is d_model / heads wide)",
        ),
        (
            {"model": "gpt", "heads": 3},
            "heads",
            "d_model 128 does not divide into 3 heads (each head is d_model / heads wide)",
        ),
        (
            {"layers": 4},
            "layers",
            "layers is a setting of model 'gpt'; model 'cnn' has a fixed shape",
        ),
        (
            {"model": "transformer", "dataset": "synthetic-imdb", "size": "tiny"},
            "size",
            "size is a setting of model 'gpt'; model 'transformer' has a fixed shape",
        ),
        ({"model": "gpt", "size": "huge"}, "size", "size 'huge' is not known (choose: tiny, "),
        ({"model": "gpt", "layers": 0}, "layers", "layers must be between 1 and 256, got 0"),
        (
            {"model": "gpt", "dataset": "synthetic-imdb"},
            "model",
            "model 'gpt' needs a token dataset; 'synthetic-imdb' is sequence data",
        ),
        (
            {"model": "transformer", "dataset": "synthetic-tokens"},
            "model",
            "model 'transformer' needs a sequence dataset; 'synthetic-tokens' is tokens data",
        ),
    ],
)
def test_impossible_sizes_are_refused_in_one_line(fields, field, message):
    error = _error(**fields)
    assert error.field == field
    assert str(error).startswith(message)
    assert "\n" not in str(error)


def test_every_framework_and_api_offers_the_gpt():
    for name, fw in catalog.FRAMEWORKS.items():
        for api in fw.apis:
            assert catalog.combination_problem(name, api, "gpt", "synthetic-tokens") is None, (
                name,
                api,
            )
    assert "124,439,808 parameters" in catalog.MODELS["gpt"].description


def test_the_size_decides_the_configuration_and_its_short_label():
    def run(**fields) -> Run:
        spec = RunSpec.from_dict({"model": "gpt", **fields})
        record = {"spec": spec.to_dict(), "label": spec.label(), "env": {"host": "h"}}
        return Run.from_record(record)

    tiny, small, custom = run(), run(size="gpt2-small"), run(layers=4, d_model=256)
    configs = [configuration_of(r) for r in (tiny, small, custom)]
    assert len(set(configs)) == 3
    assert dict(configs[2].key)["d_model"] == 256 and dict(configs[0].key)["size"] == "tiny"
    labels = [c.label for c in labelled(configs)]
    # the fewest fields that tell them apart: the size and the one override
    assert labels == ["tiny · L—", "gpt2-small · L—", "tiny · L4"]


def test_cli_flags_for_the_size_parse_and_keep_old_prefixes():
    from tui_bench.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["run", "--model", "gpt", "--size", "gpt2-small", "--d-model", "512"])
    assert (args.model, args.size, args.d_model) == ("gpt", "gpt2-small", 512)
    args = parser.parse_args(["run", "--vocab-size", "1000", "--seq-len", "64", "--heads", "2"])
    assert (args.vocab_size, args.seq_len, args.heads) == (1000, 64, 2)


def test_ln_v_is_the_first_loss_a_uniform_model_gives():
    # the reference value the first-loss checks compare with
    assert math.log(model_manifest.gpt_dims().vocab_size) == pytest.approx(9.0109, abs=1e-4)


# -- data -----------------------------------------------------------------------------------------
def test_synthetic_tokens_are_the_same_bytes_every_time_and_shaped_by_the_model():
    from adapters import data

    first = data.load("synthetic-tokens", tokens=(128, 8192))
    again = data.load("synthetic-tokens", tokens=(128, 8192))
    assert first.notes["fingerprint"] == again.notes["fingerprint"] == "b3ef0ca000c8525c"
    assert first.x_train.shape == first.y_train.shape == (6554, 128)  # 8,192 less 20 % validation
    assert first.x_test.shape == (512, 128) and first.x_train.dtype.name == "int32"
    # targets are the inputs shifted by one position: x[:, :S] and x[:, 1:] of S + 1 tokens
    assert (first.x_train[:, 1:] == first.y_train[:, :-1]).all()
    assert first.x_train.max() < 8192 and first.x_train.min() >= 0
    other = data.load("synthetic-tokens", train_samples=64, test_samples=8, tokens=(32, 500))
    assert other.x_train.shape[1] == 32 and other.x_train.max() < 500
    assert other.shape.vocab_size == other.shape.num_classes == 500


def test_synthetic_tokens_follow_a_chain_whose_entropy_rate_is_the_stated_floor():
    import numpy as np

    from adapters import data

    floor = data.entropy_rate()
    assert floor == pytest.approx(1.75 * math.log(2), rel=1e-12)
    assert "1.2130 nats" in catalog.DATASETS["synthetic-tokens"].description
    vocab = 8192
    table = data.token_chain(vocab)
    assert all(len(set(row)) == 4 for row in table.tolist())  # distinct successors: no merging
    ds = data.load("synthetic-tokens", tokens=(128, vocab))
    prev, nxt = ds.x_train.reshape(-1).astype(np.int64), ds.y_train.reshape(-1)
    column = (table[prev] == nxt[:, None]).argmax(axis=1)
    assert (table[prev, column] == nxt).all()  # every transition is one of the chain's
    frequencies = np.bincount(column, minlength=4) / len(column)
    assert frequencies == pytest.approx([0.5, 0.25, 0.125, 0.125], abs=0.003)
    # the empirical conditional entropy of the data (successor choice given the token) is the floor
    empirical = float(-(frequencies * np.log(frequencies)).sum())
    assert empirical == pytest.approx(floor, abs=0.005)
    assert floor < 0.2 * math.log(vocab)  # learnable: far below a uniform guess


# -- FLOPs ----------------------------------------------------------------------------------------
def test_gpt2_small_flops_per_token_are_the_published_figures_both_ways():
    from tui_bench.engine import flops

    dims = model_manifest.gpt_dims("gpt2-small")
    count = flops.gpt_count(dims)
    assert count.forward_per_sample == 284_812_800 * 1024
    assert count.train_per_sample == 854_438_400 * 1024  # every backward is 2 × forward
    assert flops.gpt_rule(dims) == 855_166_464  # 6N + 12·L·H·Q·T
    assert abs(flops.gpt_rule(dims) / 854_438_400 - 1) < 0.001
    # a run's step: its own size decides it, through the spec
    spec = RunSpec.from_dict({"model": "gpt", "size": "gpt2-small", "batch_size": 8})
    per_step = flops.train_step_flops("gpt", spec.dataset, 8, spec.model_dims())
    assert per_step == 8 * 1024 * 854_438_400
    tiny = flops.train_step_flops("gpt", "synthetic-tokens", 8)
    assert tiny == 8 * flops.gpt_count(model_manifest.gpt_dims("tiny")).train_per_sample


# -- the shared initial draw ----------------------------------------------------------------------
def test_the_gpt_draw_is_gpt2s_initialiser_in_the_canonical_layout():
    import numpy as np

    from adapters import shared_init
    from adapters.models import gpt_dims

    dims = gpt_dims({"layers": 8})  # tiny with 8 blocks: residual std 0.02/√16 = 0.005
    weights = shared_init.gpt_weights(3, dims)
    again = shared_init.gpt_weights(3, dims)
    assert all(np.array_equal(weights[k], again[k]) for k in weights)  # one draw per seed
    assert weights["tokens"].shape == (8192, 128) and weights["positions"].shape == (128, 128)
    assert weights["block0.qkv.kernel"].shape == (128, 384)
    assert weights["block7.back.kernel"].shape == (512, 128)
    assert weights["tokens"].std() == pytest.approx(0.02, rel=0.01)
    assert weights["block0.hidden.kernel"].std() == pytest.approx(0.02, rel=0.02)
    assert weights["block3.out.kernel"].std() == pytest.approx(0.005, rel=0.03)
    assert weights["block3.back.kernel"].std() == pytest.approx(0.005, rel=0.03)
    assert not weights["block0.qkv.bias"].any() and (weights["final.gamma"] == 1).all()
    assert "head.kernel" not in weights  # tied: the head is the token table
    assert sum(v.size for v in weights.values()) == model_manifest.gpt_dims(layers=8).parameters


def test_torch_gpt_from_the_shared_draw_gives_the_reference_loss_near_ln_v(adapters_on_path):
    from conftest import require_module

    require_module("torch")
    from adapters import backend as contract
    from adapters import data, shared_init
    from adapters.models import gpt_dims
    from adapters.torch.adapter import TorchBackend
    from tests.gpt_reference import gpt_loss

    dims = gpt_dims({})
    ds = data.load("synthetic-tokens", 64, 8, tokens=(dims.seq_len, dims.vocab_size))
    backend = TorchBackend("eager", "cpu", 1)
    backend.apply_settings(contract.Settings())
    backend.build(contract.Hyper("gpt", 4, 1e-3, "adam", 0.0, 0, dims=dims), ds)
    assert backend.param_count() == model_manifest.gpt_dims().parameters == 1_461_760
    assert "is_causal=True" in backend.settings_applied["attention"]
    x, y = ds.x_train[:4], ds.y_train[:4]
    loss, accuracy = backend.evaluate(x, y, 4)
    reference = gpt_loss(shared_init.gpt_weights(0, dims), dims.heads, x, y)
    assert abs(loss - reference) / reference < 1e-6
    assert loss == pytest.approx(math.log(dims.vocab_size), abs=0.05)
    assert 0.0 <= accuracy <= 1.0
    first = backend.loss_value(backend.train_step(x, y))
    for _ in range(5):
        last = backend.loss_value(backend.train_step(x, y))
    assert last < first - 0.1  # it learns


# -- the numbers ----------------------------------------------------------------------------------
def test_a_gpt_run_states_tokens_per_s_and_its_flops_through_the_registry():
    import io
    import json

    from rich.console import Console

    from tests.histories import record
    from tui_bench.cli import common
    from tui_bench.engine.results import metrics, render, tables
    from tui_bench.engine.runs.run_result import RunResult

    spec = RunSpec.from_dict({"model": "gpt", "batch_size": 8, "threads": 1})
    result = RunResult(
        "r1",
        spec,
        "finished",
        started={"param_count": 1_461_760, "device_name": "cpu"},
        summary={"samples_per_s": 10.0, "step_median_s": 0.8, "global_batch": 8},
    )
    figures = result.metrics()
    assert figures["tokens_per_s"] == 10.0 * 128
    per_token = 2 * (24 * 128**2 + 4 * 128 * 128) + 2 * 128 * 8192  # L(24d² + 4Sd) + 2dV
    assert figures["flops_per_step"] == 8 * 128 * 3 * per_token == 9_261_023_232
    assert metrics.BY_KEY["tokens_per_s"].unit == "tokens/s"
    # other models have no tokens
    assert (
        "tokens_per_s"
        not in RunResult("r2", RunSpec(), "finished", summary={"samples_per_s": 1.0}).metrics()
    )

    runs = []
    for i, threads in enumerate((1, 1, 2, 2)):
        r = record(i, 40.0 / threads, threads=threads)
        r["metrics"]["tokens_per_s"] = 1000.0 * threads
        runs.append(Run.from_record(r))  # as the history hands them out
    console = Console(file=io.StringIO(), width=200)
    console.print(common.summary_table(runs[:1]))
    assert "tokens/s" in console.file.getvalue()
    # compare on it (not a median column of every comparison: the models without tokens would
    # carry an empty one)
    comparison = tables.compute(runs, metric="tokens_per_s")
    assert comparison.metric.key == "tokens_per_s"
    exported = json.loads(render.json_text(comparison.tables()))[0]
    assert any("tokens/s" in unit for unit in exported["units"] if unit), exported["units"]
    assert 2000.0 in [cell for row in exported["rows"] for cell in row]
    assert metrics.CHOICE in metrics.BY_KEY["tokens_per_s"].places


# -- before a long run ----------------------------------------------------------------------------
def test_a_gpt_that_cannot_fit_is_refused_in_one_line_with_the_estimate_stated():
    from tui_bench.engine import model_memory

    spec = RunSpec.from_dict({"model": "gpt", "size": "gpt2-small", "batch_size": 8})
    found = model_memory.estimate(spec)
    dims = spec.gpt_dims()
    assert found.state_bytes == 4 * 4 * 124_439_808  # weights, gradients, Adam's two moments
    per_token = 12 * (16 * 768 + 12 * 1024) + 2 * 50257 + 2 * 768
    assert found.activation_bytes == 4 * 8 * dims.seq_len * per_token
    assert model_memory.memory_problem(spec, available=found.total_bytes) is None
    problem = model_memory.memory_problem(spec, available=found.total_bytes - 1)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("gpt gpt2-small at batch 8 needs about 13.97 GiB")
    assert "activations 12.11 GiB" in problem and "16d + heads·S" in problem
    # a GPU's memory is the worker's to report; the fixed-shape models have no estimate
    assert model_memory.memory_problem(spec.with_changes(device="gpu"), available=1) is None
    assert model_memory.memory_problem(RunSpec(), available=1) is None


def test_tui_bench_run_refuses_an_oversized_gpt_before_any_process_starts(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "TUI_BENCH_HOME": str(tmp_path)}
    args = ["run", "--model", "gpt", "--size", "gpt2-medium", "--batch-size", "4096"]
    out = subprocess.run(
        [sys.executable, "-m", "tui_bench", *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2
    line = out.stderr.strip()
    assert line.startswith("tui-bench: error: gpt gpt2-medium at batch 4096 needs about ")
    assert "\n" not in line and "available" in line


def test_the_setup_form_offers_the_size_and_its_dimensions_from_the_declaration():
    from textual.widgets import Select

    from tui_bench.tui.screens.setup import CHOICE_FIELDS, NUMBER_FIELDS, parse_form

    assert {"layers", "d_model", "heads", "seq_len", "vocab_size"} <= set(NUMBER_FIELDS)
    assert CHOICE_FIELDS["size"].choices == ("tiny", "gpt2-small", "gpt2-medium")
    form = {
        "framework": "torch",
        "api": "eager",
        "model": "gpt",
        "dataset": "synthetic-tokens",
        "device": "cpu",
        "threads": "1",
        "scaling": "weak",
        **{
            name: str(d.default) if d.default is not None else ""
            for name, d in NUMBER_FIELDS.items()
        },
    }
    spec, _ = parse_form({**form, "size": "gpt2-small", "layers": "4"}, [1])
    assert (spec.size, spec.layers, spec.dropout) == ("gpt2-small", 4, 0.0)
    spec, _ = parse_form({**form, "size": Select.NULL}, [1])  # unset: the gpt's default size
    assert spec.size == "tiny"
    with pytest.raises(SpecError, match="size is a setting of model 'gpt'"):
        parse_form({**form, "model": "cnn", "dataset": "synthetic-mnist", "size": "tiny"}, [1])


def test_the_exact_count_is_torchs_flop_counter_to_the_flop_at_tiny(adapters_on_path):
    from conftest import require_module

    torch = require_module("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from adapters.models import gpt_dims
    from adapters.torch import adapter as torch_adapter
    from tui_bench.engine import flops

    dims = gpt_dims({})
    net = torch_adapter._Gpt(dims, 0.0).train()
    x = torch.randint(0, dims.vocab_size, (2, dims.seq_len))
    # the math kernel: torch counts its two batched products over the full S×S (its CPU flash
    # kernel has no formula and counts 0)
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as counter:
            net(x)
        forward = counter.get_total_flops() // 2
        with FlopCounterMode(display=False) as counter:
            net(x).sum().backward()
        train = counter.get_total_flops() // 2
    ours = flops.gpt_count(model_manifest.gpt_dims())
    assert (
        (ours.forward_per_sample, ours.train_per_sample)
        == (forward, train)
        == (
            385_875_968,
            1_157_627_904,
        )
    )
