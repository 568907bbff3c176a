"""Preset expansion and validation: order, matrices, overrides, skips, one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tui_bench.engine.runs import presets
from tui_bench.engine.runs.presets import PresetError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in a directory with a presets/ folder so error messages name presets/x.toml."""
    (tmp_path / "presets").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(workdir: Path, text: str, name: str = "x.toml") -> Path:
    path = workdir / "presets" / name
    path.write_text(text, encoding="utf-8")
    return path


def load(workdir: Path, text: str) -> presets.Preset:
    return presets.load(write(workdir, text))


def error_of(workdir: Path, text: str) -> str:
    with pytest.raises(PresetError) as info:
        presets.expand(load(workdir, text), probe=None)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_lists_expand_to_the_cartesian_product_in_order(workdir):
    preset = load(
        workdir,
        'dataset = ["synthetic-mnist", "synthetic-cifar10"]\nthreads = [1, 2, 4]\nepochs = 1\n',
    )
    configs = presets.expand(preset, probe=None)
    assert [(c.spec.dataset, c.spec.threads) for c in configs] == [
        ("synthetic-mnist", 1),
        ("synthetic-mnist", 2),
        ("synthetic-mnist", 4),
        ("synthetic-cifar10", 1),
        ("synthetic-cifar10", 2),
        ("synthetic-cifar10", 4),
    ]
    assert configs[0].key == "dataset=synthetic-mnist threads=1"
    assert all(c.spec.epochs == 1 and c.skip_reason is None for c in configs)


def test_matrix_pairs_fields_and_named_matrices_multiply(workdir):
    preset = load(
        workdir,
        """
threads = [1, 2]
[matrix]
stack = [{framework = "torch", api = "eager"}, {framework = "torch", api = "compile"}]
work = [{model = "cnn", batch_size = 64}, {model = "mlp", batch_size = 80}]
""",
    )
    configs = presets.expand(preset, probe=None)
    assert len(configs) == 2 * 2 * 2
    pairs = {(c.spec.api, c.spec.model, c.spec.batch_size) for c in configs}
    assert pairs == {
        ("eager", "cnn", 64),
        ("eager", "mlp", 80),
        ("compile", "cnn", 64),
        ("compile", "mlp", 80),
    }  # batch size travels with its model, never crossed with the other one


def test_only_keeps_the_named_configurations_with_the_whole_presets_keys(workdir):
    """``run --only``: a framework, or a framework/API, picks configurations; their keys are
    the ones the whole preset gives them (history compares a configuration across sweeps), and
    the runtimes of the configurations left out are not probed."""
    text = """
name = "three"
[matrix]
stack = [{framework = "torch", api = "eager"}, {framework = "torch", api = "compile"},
         {framework = "jax", api = "flax"}, {framework = "jax", api = "jit"}]
"""
    preset = load(workdir, text)
    whole = {c.spec.api: c.key for c in presets.expand(preset, probe=None)}
    probed = []

    def probe(spec):
        probed.append(f"{spec.framework}/{spec.api}")
        return None

    picked = presets.expand(preset, probe=probe, only=("torch/compile", "jax"))
    assert [c.spec.api for c in picked] == ["compile", "flax", "jit"]  # the preset's order
    assert [c.key for c in picked] == [whole["compile"], whole["flax"], whole["jit"]]
    assert probed == ["torch/compile", "jax/flax", "jax/jit"]
    with pytest.raises(PresetError, match=r"^--only torch/eager: no configuration of three"):
        presets.expand(
            load(workdir, text.replace('api = "eager"', 'api = "compile"')),
            probe=None,
            only=("torch/eager",),
        )


def test_a_single_run_preset_is_one_configuration(workdir):
    preset = load(workdir, 'name = "one"\nthreads = 1\nrepeats = 3\n')
    (config,) = presets.expand(preset, probe=None)
    assert config.spec.threads == 1 and config.spec.repeats == 3 and preset.repeats == 3
    assert config.key == config.spec.label()


def test_overrides_replace_a_list_and_collapse_duplicates(workdir):
    preset = load(workdir, "threads = [1, 2, 4]\nepochs = 3\n")
    configs = presets.expand(preset, {"threads": 2, "epochs": 1}, probe=None)
    assert [(c.spec.threads, c.spec.epochs) for c in configs] == [(2, 1)]


def test_bad_value_names_file_key_and_problem(workdir):
    assert (
        error_of(workdir, "threads = 0\n")
        == "presets/x.toml: threads: must be between 1 and 64, got 0"
    )
    assert error_of(workdir, "threads = [1, 0]\n").startswith("presets/x.toml: threads: ")
    assert error_of(workdir, 'lr = "fast"\n') == "presets/x.toml: lr: must be a number, got 'fast'"
    assert "repeats: must be between 1 and 1000" in error_of(workdir, "repeats = 0\n")


def test_unknown_key_is_an_error_with_a_suggestion(workdir):
    assert (
        error_of(workdir, "thread = 4\n")
        == "presets/x.toml: unknown key 'thread' (did you mean 'threads'?)"
    )
    assert "matrix[1]: unknown key 'frame'" in error_of(
        workdir, 'matrix = [{framework = "torch"}, {frame = "torch"}]\n'
    )


def test_malformed_toml_reports_the_line(workdir):
    message = error_of(workdir, 'name = "x"\nthreads = [1, 2\nepochs = 1\n')
    assert message.startswith("presets/x.toml: not valid TOML: ")
    assert "line 3" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("threads = []\n", "threads: an empty list expands to no runs"),
        ("repeats = [1, 2]\n", "repeats: must be one number, not a list"),
        ("threads = [[1]]\n", "threads: must be a single value or a list of values"),
        ("matrix = [1, 2]\n", "matrix[0]: must be a table of spec fields"),
        (
            'framework = "torch"\nmatrix = [{framework = "torch"}]\n',
            "matrix[0]: 'framework' is also set at the top level",
        ),
        ("name = 3\n", "name: must be a string"),
    ],
)
def test_structural_mistakes(workdir, text, expected):
    assert expected in error_of(workdir, text)


def test_unknown_framework_or_dataset_is_skipped_with_a_reason(workdir):
    preset = load(
        workdir,
        'dataset = ["synthetic-mnist", "imagenet-22k"]\n'
        'matrix = [{framework = "torch", api = "eager"}, {framework = "caffe", api = "gpu"}]\n',
    )
    configs = presets.expand(preset, probe=None)
    by_key = {(c.spec.dataset, c.spec.framework): c.skip_reason for c in configs}
    assert by_key[("synthetic-mnist", "torch")] is None
    assert (
        "framework 'caffe' is not available in this installation"
        in by_key[("synthetic-mnist", "caffe")]
    )
    assert "dataset 'imagenet-22k' is not available" in by_key[("imagenet-22k", "torch")]
    assert [c.spec.framework for c, _ in presets.interleave(configs, 1)] == ["torch"]


def test_bad_values_are_errors_even_for_an_unknown_framework(workdir):
    # The skip for a framework this installation lacks must not hide a mistake in the file.
    message = error_of(workdir, 'framework = "caffe"\nthreads = 0\n')
    assert message == "presets/x.toml: threads: must be between 1 and 64, got 0"


def test_impossible_combination_is_skipped(workdir):
    preset = load(workdir, 'model = ["cnn", "vgg16"]\ndataset = "synthetic-mnist"\n')
    configs = presets.expand(preset, probe=None)
    assert configs[0].skip_reason is None
    assert "vgg16" in configs[1].skip_reason and "32×32" in configs[1].skip_reason


def test_oversubscribed_threads_run_but_are_flagged(workdir, monkeypatch):
    monkeypatch.setattr(presets.os, "cpu_count", lambda: 2)
    configs = presets.expand(load(workdir, "threads = [1, 2, 32]\n"), probe=None)
    assert [c.oversubscribed for c in configs] == [False, False, True]
    assert all(c.skip_reason is None for c in configs)


def test_probe_skips_what_this_machine_cannot_run(workdir):
    preset = load(workdir, 'device = ["cpu", "gpu"]\n')
    configs = presets.expand(preset, probe=lambda s: "no GPU here" if s.device == "gpu" else None)
    assert [c.skip_reason for c in configs] == [None, "no GPU here"]


@pytest.mark.needs_runtime("torch")
def test_availability_reports_a_missing_gpu(monkeypatch):
    from tui_bench.engine.machine import sysinfo
    from tui_bench.engine.spec import RunSpec

    monkeypatch.setattr(sysinfo, "machine_fingerprint", lambda: {"gpus": []})
    assert "no GPU 0" in presets.availability_problem(RunSpec(device="gpu"))
    assert presets.availability_problem(RunSpec()) is None  # torch is installed in the test env


def test_repeats_interleave_across_configurations(workdir):
    configs = presets.expand(load(workdir, "threads = [1, 2, 3]\nrepeats = 3\n"), probe=None)
    order = [(c.spec.threads, r) for c, r in presets.interleave(configs, 3)]
    assert order == [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)]


def test_find_by_name_file_and_suggestion(workdir, isolated_home):
    assert presets.find("shatnawi-2018").name == "shatnawi-2018.toml"
    own = write(workdir, "threads = 1\n", "mine.toml")
    assert presets.find(str(own)) == own
    with pytest.raises(PresetError, match="did you mean 'shatnawi-2018'"):
        presets.find("shatnawi-2019")
    user = presets.user_dir()
    user.mkdir(parents=True)
    (user / "shatnawi-2018.toml").write_text("threads = 1\n")
    assert presets.find("shatnawi-2018") == user / "shatnawi-2018.toml"  # user shadows shipped


# -- the shipped presets ------------------------------------------------------------------------
SHIPPED = sorted(p.stem for p in (REPO / "presets").glob("*.toml"))


def test_every_study_has_a_full_and_a_quick_preset():
    for study in ("nayak-jain-2019", "shatnawi-2018", "kabakus-2020"):
        assert study in SHIPPED and f"{study}-quick" in SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_presets_load_and_say_what_they_replicate(name):
    preset = presets.load(REPO / "presets" / f"{name}.toml")
    assert preset.name == name
    assert preset.description and preset.study
    configs = presets.expand(preset, probe=None)
    assert len(configs) >= 2
    if name.endswith("-quick"):
        assert all(c.spec.dataset.startswith("synthetic-") for c in configs)
        # quick: a few training steps, or a few dozen timed requests for an inference preset
        assert all(
            c.spec.requests <= 100
            if c.spec.mode in ("inference", "generate")
            else c.spec.steps_per_epoch and c.spec.epochs == 1
            for c in configs
        )


def test_study_settings_are_the_studies():
    def specs(name):
        return [
            c.spec
            for c in presets.expand(presets.load(REPO / "presets" / f"{name}.toml"), probe=None)
        ]

    nayak = specs("nayak-jain-2019")
    assert {(s.model, s.dataset, s.optimizer, s.lr, s.batch_size, s.dropout) for s in nayak} == {
        ("cnn", "mnist", "adam", 1e-3, 128, 0.25)
    }
    assert {s.device for s in nayak} == {"cpu", "gpu"}
    assert {(s.framework, s.api) for s in nayak} >= {("torch", "eager"), ("mxnet", "gluon")}
    assert len({(s.framework, s.api) for s in nayak if s.framework == "tensorflow"}) == 4

    shatnawi = specs("shatnawi-2018")
    assert {s.threads for s in shatnawi if s.device == "cpu"} == {1, 2, 4, 8, 16, 32}
    assert {s.dataset for s in shatnawi} == {"mnist", "cifar10"}
    assert any(s.device == "gpu" for s in shatnawi)
    # The study's stacks: Keras on TF, Keras 2 on Theano and on CNTK; PyTorch as the reference.
    assert {(s.framework, s.api) for s in shatnawi} == {
        ("tensorflow", "keras"),
        ("theano", "keras2"),
        ("cntk", "keras2"),
        ("torch", "eager"),
    }

    kabakus = specs("kabakus-2020")
    workloads = {(s.model, s.dataset, s.lr, s.batch_size, s.epochs) for s in kabakus}
    assert workloads == {
        ("mlp", "mnist", 1e-3, 80, 20),
        ("vgg16", "cifar10", 1e-2, 80, 20),
        ("lstm", "imdb", 1e-2, 500, 10),
    }
    assert {s.repeats for s in kabakus} == {10}
    assert {s.framework for s in kabakus} == {"keras", "torch"}


def test_presets_ship_with_the_package():
    """An installed app finds them as the data package tui_bench_presets (see shipped_dir)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    assert setuptools["package-dir"]["tui_bench_presets"] == "presets"
    assert "tui_bench_presets" in setuptools["packages"]
    assert "*.toml" in setuptools["package-data"]["tui_bench_presets"]
    assert (REPO / "presets" / "__init__.py").is_file()


@pytest.mark.needs_runtime("torch")
def test_a_real_dataset_missing_from_the_cache_is_skipped_with_the_download_command(workdir):
    preset = load(workdir, 'dataset = ["synthetic-mnist", "mnist"]\n')
    configs = presets.expand(preset, probe=presets.availability_problem)
    by_dataset = {c.spec.dataset: c.skip_reason for c in configs}
    assert by_dataset["synthetic-mnist"] is None
    assert "run `tui-bench data download mnist`" in by_dataset["mnist"]


def test_shatnawi_cntk_configurations_are_skipped_with_the_reason():
    from tui_bench.engine import catalog

    preset = presets.load(REPO / "presets" / "shatnawi-2018-quick.toml")
    configs = presets.expand(preset)
    cntk = [c for c in configs if c.spec.framework == "cntk"]
    assert cntk and all(c.skip_reason for c in cntk)
    on_cpu = [c for c in cntk if c.spec.device == "cpu"]
    assert on_cpu and all(catalog.framework("cntk").unavailable in c.skip_reason for c in on_cpu)


def test_workers_sweep_counts_every_workers_threads_against_the_cores(workdir, monkeypatch):
    monkeypatch.setattr(presets.os, "cpu_count", lambda: 2)
    configs = presets.expand(load(workdir, "workers = [1, 2]\nthreads = [1, 2]\n"), probe=None)
    flagged = {(c.spec.workers, c.spec.threads): c.oversubscribed for c in configs}
    assert flagged == {(1, 1): False, (1, 2): False, (2, 1): False, (2, 2): True}


def test_a_multi_worker_gpu_run_needs_a_gpu_per_worker(monkeypatch):
    from tui_bench.engine.machine import sysinfo
    from tui_bench.engine.spec import RunSpec

    monkeypatch.setattr(sysinfo, "machine_fingerprint", lambda: {"gpus": [{"name": "one"}]})
    problem = presets.availability_problem(RunSpec(device="gpu", workers=2))
    assert problem == "2 workers need 2 GPUs (NVML found 1)"


def test_scaling_preset_sweeps_workers_for_torch_and_tensorflow():
    configs = presets.expand(presets.load(REPO / "presets" / "scaling-quick.toml"), probe=None)
    assert all(c.skip_reason is None for c in configs)
    swept = {(c.spec.framework, c.spec.api, c.spec.scaling, c.spec.workers) for c in configs}
    assert swept == {
        (fw, api, scaling, workers)
        for fw, api in (("torch", "eager"), ("tensorflow", "graph"))
        for scaling in ("weak", "strong")
        for workers in (1, 2)
    }
    assert all(c.spec.threads * c.spec.workers <= 2 for c in configs)


def _every_framework_api() -> set[tuple[str, str]]:
    from tui_bench.engine import catalog

    return {
        (fw.name, api)
        for fw in catalog.FRAMEWORKS.values()
        if not fw.unavailable  # CNTK: no Python here can run it
        for api in fw.apis
    }


def test_inference_quick_serves_both_models_at_batch_1_and_64_in_every_framework_api():
    """Every framework × API (17: JAX's flax and jit among them), the CNN and the transformer, batch 1 and 64, fp32 on the
    CPU, inference mode; each configuration valid. Those whose API does not serve inference yet
    are skipped with the catalog's one-line reason, never refused as a whole."""
    from tui_bench.engine import catalog

    configs = presets.expand(presets.load(REPO / "presets" / "inference-quick.toml"), probe=None)
    specs = [c.spec for c in configs]
    assert len(_every_framework_api()) == 17
    assert {(s.framework, s.api) for s in specs} == _every_framework_api()
    assert {(s.model, s.dataset) for s in specs} == {
        ("cnn", "synthetic-mnist"),
        ("transformer", "synthetic-imdb"),
    }
    assert {s.batch_size for s in specs} == {1, 64}
    assert len(configs) == 17 * 2 * 2
    assert all(s.mode == "inference" and s.device == "cpu" and s.precision == "fp32" for s in specs)
    # p50 and p90 bounded by the worker's tail rule, p99 not: the description says which
    from adapters.serve import tail_bounded

    assert all(s.requests <= 100 and s.warmup_steps >= 1 for s in specs)
    for s in specs:  # batch 1 bounds p90 (not p99); batch 64's few requests bound p50 alone
        bounded = [q for q in (0.5, 0.9, 0.99) if tail_bounded(s.requests, q)]
        assert bounded == ([0.5, 0.9] if s.batch_size == 1 else [0.5]), (s.batch_size, bounded)
    for c in configs:
        offered = (
            "inference" in catalog.framework(c.spec.framework).capabilities_for(c.spec.api).modes
        )
        assert (c.skip_reason is None) == offered, (c.key, c.skip_reason)
        if not offered:
            assert c.skip_reason and "inference" in c.skip_reason
    assert any(c.skip_reason is None for c in configs)  # torch serves it today


def test_inference_preset_sweeps_batch_1_to_1024_with_requests_for_p99():
    """Batch 1 … 1024, CPU and GPU, fp32 and bf16, both models on real data, every
    framework × API; every batch size serves enough requests to bound p99 (563); without a GPU
    the GPU configurations are skipped with the reason."""
    configs = presets.expand(presets.load(REPO / "presets" / "inference.toml"), probe=None)
    specs = [c.spec for c in configs]
    assert {(s.framework, s.api) for s in specs} == _every_framework_api()
    assert {s.batch_size for s in specs} == {1, 8, 64, 256, 1024}
    assert {s.device for s in specs} == {"cpu", "gpu"}
    assert {s.precision for s in specs} == {"fp32", "bf16"}
    assert {(s.model, s.dataset) for s in specs} == {("cnn", "mnist"), ("transformer", "imdb")}
    from adapters.serve import tail_bounded

    assert all(s.mode == "inference" and tail_bounded(s.requests, 0.99) for s in specs)
    assert all(s.requests >= 1000 for s in specs if s.batch_size == 1)


def test_gpt2_small_preset_fills_an_h100_by_the_estimate_and_says_so(monkeypatch):
    """Every framework × API × precision it lists is one the catalog offers on a GPU; its batch
    sizes come from the training-memory estimate (the largest near 70 % of an 80 GB H100) and
    its description quotes those estimates; without a GPU each configuration is skipped with the
    one-line reason, as the other GPU presets are."""
    from tui_bench.engine import catalog, model_memory
    from tui_bench.engine.machine import sysinfo

    preset = presets.load(REPO / "presets" / "gpt2-small.toml")
    configs = presets.expand(preset, probe=None)
    specs = [c.spec for c in configs]
    apis = {("torch", "eager"), ("torch", "compile"), ("tensorflow", "xla")}
    apis |= {("keras", b) for b in ("jax", "torch", "tensorflow")}
    assert {(s.framework, s.api) for s in specs} == apis
    assert {s.precision for s in specs} == {"fp32", "tf32", "bf16"}
    assert all(s.device == "gpu" and s.model == "gpt" and s.size == "gpt2-small" for s in specs)
    for s in specs:
        assert (
            catalog.setting_problem(s.framework, s.api, "gpu", s.precision, "host", "synced")
            is None
        )
    gigabytes = {s.batch_size: model_memory.estimate(s).total_bytes / 1e9 for s in specs}
    assert 0.6 < max(gigabytes.values()) / 80 <= 0.7
    description = " ".join(preset.description.split())
    assert "Batch sizes {} and {} sequences".format(*sorted(gigabytes)) in description
    assert all(f"{gb:.0f} GB" in description for gb in gigabytes.values())
    monkeypatch.setattr(sysinfo, "machine_fingerprint", lambda: {"gpus": []})
    skipped = presets.expand(preset, probe=presets.availability_problem)
    assert all(c.skip_reason and "no GPU 0" in c.skip_reason for c in skipped)


# -- published figures ---------------------------------------------------------------------------
STACKS = """
repeats = 2
model = ["mlp", "cnn"]
matrix = [{ framework = "torch", api = "eager" }, { framework = "torch", api = "compile" }]
"""
RATIO = """
[[published]]
source = "A paper (2020), Table 3"
says = "compile trains 2x faster"
metric = "train_time"
kind = "ratio"
value = 2.0
where = { model = "mlp" }
numerator = { framework = "torch", api = "eager" }
denominator = { framework = "torch", api = "compile" }
"""
ABSOLUTE = """
[[published]]
source = "A paper (2020), Figure 2"
metric = "lines_of_code"
kind = "absolute"
value = 11
where = { framework = "torch", api = "eager", model = "cnn" }
"""


def test_published_figures_are_declared_and_checked(workdir):
    preset = load(workdir, STACKS + RATIO + ABSOLUTE)
    ratio, absolute = preset.published
    assert (ratio.source, ratio.metric, ratio.kind, ratio.value) == (
        "A paper (2020), Table 3",
        "train_time",
        "ratio",
        2.0,
    )
    assert ratio.where == {"model": "mlp"} and ratio.numerator == {
        "framework": "torch",
        "api": "eager",
    }
    assert ratio.title() == "training time, model=mlp: torch/eager ÷ torch/compile"
    assert absolute.kind == "absolute" and absolute.numerator == {} and absolute.value == 11
    assert absolute.title() == "lines of code: torch/eager model=cnn"
    assert load(workdir, STACKS).published == ()  # optional


@pytest.mark.parametrize(
    ("figure", "expected"),
    [
        ('published = "Table 3"\n', "published: must be a list of tables ([[published]] in TOML)"),
        ("published = [1]\n", "published[0]: must be a table (source, metric, kind, value...)"),
        (RATIO.replace("source =", "sourse ="), "published[0]: unknown key 'sourse' (did you mean"),
        (RATIO.replace('source = "A paper (2020), Table 3"\n', ""), "published[0]: 'source' is"),
        (RATIO.replace('"A paper (2020), Table 3"', '" "'), "published[0].source: must name"),
        (RATIO.replace('"A paper (2020), Table 3"', "3"), "published[0].source: must be a string"),
        (
            RATIO.replace('"train_time"', '"train_tim"'),
            "published[0].metric: unknown metric 'train_tim' (did you mean 'train_time'?)",
        ),
        (RATIO.replace('"ratio"', '"relative"'), "published[0].kind: must be 'ratio' or"),
        (RATIO.replace("value = 2.0", 'value = "2x"'), "published[0].value: must be a number"),
        (RATIO.replace("value = 2.0", "value = true"), "published[0].value: must be a number"),
        (RATIO.replace("value = 2.0", "value = nan"), "published[0].value: must be a number"),
        (RATIO.replace("value = 2.0", "value = -1"), "published[0].value: must be above 0"),
        (RATIO.replace("value = 2.0", "value = 0"), "published[0].value: must be above 0"),
        (
            RATIO.replace("numerator = ", "numerator_ = "),
            "published[0]: unknown key 'numerator_' (did you mean 'numerator'?)",
        ),
        (
            RATIO.replace('numerator = { framework = "torch", api = "eager" }\n', ""),
            "published[0].numerator: a ratio needs it",
        ),
        (
            RATIO.replace('numerator = { framework = "torch", api = "eager" }', "numerator = {}"),
            "published[0].numerator: must name at least one spec field",
        ),
        (
            RATIO.replace('where = { model = "mlp" }', 'where = "mlp"'),
            "published[0].where: must be a table",
        ),
        (
            RATIO.replace('where = { model = "mlp" }', 'where = { modle = "mlp" }'),
            "published[0].where: unknown spec field 'modle' (did you mean 'model'?)",
        ),
        (
            RATIO.replace('where = { model = "mlp" }', "where = { seed = 1 }"),
            "published[0].where: unknown spec field 'seed'",
        ),
        (
            RATIO.replace('where = { model = "mlp" }', "where = { model = [1] }"),
            "published[0].where.model: must be a single value",
        ),
        (
            RATIO.replace('where = { model = "mlp" }', 'where = { framework = "torch" }'),
            "published[0].numerator: 'framework' is also in where; set it in one place",
        ),
        (
            RATIO.replace('api = "compile" }', 'api = "eager" }'),
            "published[0]: numerator and denominator are the same configurations",
        ),
        (
            ABSOLUTE.replace('"lines_of_code"', '"train_time"'),
            "published[0]: an absolute train_time depends on the machine the paper used; give it",
        ),
        (
            ABSOLUTE.replace('"lines_of_code"', '"accuracy"'),
            "published[0].value: give an accuracy as a fraction (0.98), not 11",
        ),
        (
            ABSOLUTE + 'numerator = { api = "eager" }\n',
            "published[0].numerator: only a ratio has one; this figure is absolute",
        ),
        (
            ABSOLUTE.replace('where = { framework = "torch", api = "eager", model = "cnn" }\n', ""),
            "published[0].where: an absolute figure must say which configurations",
        ),
        # About configurations the preset never runs: a misspelt API would never match a run.
        (
            RATIO.replace('api = "compile" }', 'api = "compil" }'),
            "published[0].denominator: no configuration of this preset has model='mlp', "
            "framework='torch', api='compil'",
        ),
        (
            ABSOLUTE.replace('model = "cnn"', 'model = "vgg16"'),
            "published[0].where: no configuration of this preset has framework='torch', "
            "api='eager', model='vgg16'",
        ),
        ("[[published]]\n" * 201, "published: 201 figures, more than the limit of 200"),
    ],
)
def test_bad_published_figures_are_one_line_errors(workdir, figure, expected):
    message = error_of(workdir, STACKS + figure)
    assert message.startswith("presets/x.toml: published")
    assert expected in message


def test_a_figure_may_name_a_default_the_preset_leaves_unset(workdir):
    """device is not in the preset: its configurations run on the default, the cpu."""
    preset = load(workdir, STACKS + ABSOLUTE.replace('model = "cnn"', 'device = "cpu"'))
    assert preset.published[0].where["device"] == "cpu"
    assert "published[0].where" in error_of(
        workdir, STACKS + ABSOLUTE.replace('model = "cnn"', 'device = "gpu"')
    )


STUDY_FIGURES = {"kabakus-2020": 6, "nayak-jain-2019": 4, "shatnawi-2018": 0}


@pytest.mark.parametrize(("study", "count"), STUDY_FIGURES.items())
def test_study_presets_carry_their_published_figures(study, count):
    full = presets.load(REPO / "presets" / f"{study}.toml")
    quick = presets.load(REPO / "presets" / f"{study}-quick.toml")
    assert len(full.published) == count
    assert quick.published == full.published  # the quick look shows the same table's shape
    for figure in full.published:
        assert figure.source.startswith(full.study.split(":")[0].split(" (")[0])
        assert "issue 20" in figure.source  # where each number was taken from


def test_study_figures_are_the_quoted_ones():
    kabakus = presets.load(REPO / "presets" / "kabakus-2020.toml").published
    # PyTorch's time / Keras' time, except the LSTM's training, where PyTorch was faster.
    quoted = {(f.metric, f.where["model"], f.numerator["framework"], f.value) for f in kabakus}
    assert quoted == {
        ("train_time", "mlp", "torch", 3.8),
        ("test_time", "mlp", "torch", 2.4),
        ("train_time", "vgg16", "torch", 1.9),
        ("test_time", "vgg16", "torch", 1.4),
        ("train_time", "lstm", "keras", 1.3),
        ("test_time", "lstm", "torch", 1.6),
    }
    nayak = presets.load(REPO / "presets" / "nayak-jain-2019.toml").published
    assert {(f.where["framework"], f.where["api"]): f.value for f in nayak} == {
        ("tensorflow", "keras"): 11,
        ("tensorflow", "estimator"): 32,
        ("mxnet", "gluon"): 26,
        ("keras", "tensorflow"): 11,
    }
    assert {(f.metric, f.kind, f.where["model"]) for f in nayak} == {
        ("lines_of_code", "absolute", "cnn")
    }


def test_generate_quick_covers_every_generating_api():
    """generate-quick is "every API that generates": each (framework, api) whose capabilities list
    generate is in its stack (the rest are listed too, and skipped with their reason)."""
    from tui_bench.engine import catalog

    preset = presets.load(REPO / "presets" / "generate-quick.toml")
    stack = {(c.spec.framework, c.spec.api) for c in presets.expand(preset, probe=None)}
    assert set(catalog.generating_apis()) <= stack
    assert {("tensorflow", api) for api in ("keras", "eager", "graph", "xla")} <= stack
