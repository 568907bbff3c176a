"""The transformer workload (issue 27) without a framework: its catalog entry, the lines of code
every adapter marks for it, its presets, the bf16 emulation note and the precision refusals.
Training it in every framework × API is tests/test_frameworks.py (slow)."""

from __future__ import annotations

import pytest
from conftest import REPO

from tui_bench.engine import catalog
from tui_bench.engine.errors import SpecError
from tui_bench.engine.results import loc
from tui_bench.engine.runs import presets
from tui_bench.engine.spec import RunSpec

COMBOS = [
    (fw.name, api) for fw in catalog.FRAMEWORKS.values() if not fw.unavailable for api in fw.apis
]


def test_the_transformer_is_a_sequence_model_of_the_catalog():
    model = catalog.MODELS["transformer"]
    assert model.input_kind == "sequence" and "1,062,273" in model.description
    assert catalog.combination_problem("torch", "eager", "transformer", "synthetic-imdb") is None
    assert catalog.combination_problem("torch", "eager", "transformer", "imdb") is None
    assert "needs a sequence dataset" in catalog.combination_problem(
        "torch", "eager", "transformer", "synthetic-mnist"
    )


@pytest.mark.parametrize(("framework", "api"), COMBOS)
def test_every_api_marks_the_transformer_it_builds(framework, api):
    """Each API's model lines for the transformer exist and exceed the LSTM's: the markers
    cover the attention code, not only the dispatch (wherever it sits: the adapter or a shared
    module it uses, as the Keras builders in adapters/keras_models.py)."""
    count = lambda model: loc.lines_of_code(framework, api, model)["loc_model"]  # noqa: E731
    assert count("transformer") > count("lstm") + 5


def test_bf16_on_a_cpu_without_bf16_units_is_noted_as_emulated(adapters_on_path):
    from adapters import precision

    lacking = {"avx2", "fma", "avx512f"}
    note = "bf16 emulated: CPU lacks avx512_bf16/amx_bf16"
    if precision.platform.machine().lower() in ("x86_64", "amd64"):
        assert precision.bf16_note("bf16", "cpu", lacking) == note
        assert precision.bf16_note("bf16", "cpu", lacking | {"amx_bf16"}) is None
        assert precision.bf16_note("bf16", "cpu", lacking | {"avx512_bf16"}) is None
    assert precision.bf16_note("fp32", "cpu", lacking) is None
    assert precision.bf16_note("bf16", "cuda", lacking) is None  # a GPU is not judged by the CPU
    assert precision.bf16_settings("fp32", "cpu") == {}


def test_cpu_flags_are_read_from_a_cpuinfo_file_and_damage_is_none(adapters_on_path, tmp_path):
    from adapters import precision

    good = tmp_path / "cpuinfo"
    good.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\n")
    assert precision.cpu_flags(str(good)) == {"fpu", "avx2", "amx_bf16"}
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00flags")
    assert precision.cpu_flags(str(binary)) is None
    assert precision.cpu_flags(str(tmp_path / "missing")) is None
    (tmp_path / "empty").write_text("")
    assert precision.cpu_flags(str(tmp_path / "empty")) is None


@pytest.mark.parametrize("framework", ["mxnet", "theano"])
def test_frameworks_without_bf16_refuse_it_up_front_with_the_reason(framework):
    api = catalog.framework(framework).apis[0]
    spec = RunSpec(framework=framework, api=api, model="transformer", dataset="synthetic-imdb")
    with pytest.raises(SpecError) as refused:
        spec.with_changes(precision="bf16").validate()
    assert refused.value.field == "precision"
    assert "bfloat16" in str(refused.value)  # says why, not only what is allowed


def test_attention_quick_covers_every_framework_api_in_fp32_on_synthetic_data():
    preset = presets.load(REPO / "presets" / "attention-quick.toml")
    specs = [c.spec for c in presets.expand(preset, probe=None)]
    assert {(s.framework, s.api) for s in specs} == set(COMBOS)
    assert {(s.model, s.dataset, s.precision, s.device) for s in specs} == {
        ("transformer", "synthetic-imdb", "fp32", "cpu")
    }


def test_attention_sweeps_real_imdb_in_fp32_and_bf16_on_cpu_and_gpu():
    preset = presets.load(REPO / "presets" / "attention.toml")
    configs = presets.expand(preset, probe=None)
    specs = [c.spec for c in configs]
    assert {(s.framework, s.api) for s in specs} == set(COMBOS)
    assert {s.dataset for s in specs} == {"imdb"} and {s.repeats for s in specs} == {5}
    assert {s.precision for s in specs} == {"fp32", "bf16"}
    assert {s.device for s in specs} == {"cpu", "gpu"}
    refused = {(c.spec.framework, c.spec.precision): c.skip_reason for c in configs}
    assert "bfloat16" in refused[("mxnet", "bf16")]
    assert refused[("torch", "bf16")] is None
