"""A model is one declaration: every framework × API builds every model from
``adapters/models.json``. A copy of the worker package with another declaration (the CNN's filters,
kernels and dense width, the MLP's widths, the VGG16's stages, the LSTM's sizes, the transformer's
shape) is the package the workers run from, and the model each distinct model-building code path
builds (every framework × API builds through one of them) holds exactly the parameters the formula
(``model_manifest.parameters``) gives for the changed declaration.

The workers are pointed at the copy the one way a worker finds its models: the package it runs
from (``worker_launch`` starts ``<package>/worker.py``, whose ``adapters.models`` reads the
``models.json`` beside it). No setting a user could pass moves it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import THEANO_GROUP
from test_frameworks import BUILD_PATHS, COMBOS, runtime_for

from tui_bench.engine import catalog, model_manifest
from tui_bench.engine.dataset_manifest import manifest as datasets
from tui_bench.engine.paths import adapters_dir
from tui_bench.engine.runs import dry_run, worker_launch
from tui_bench.engine.spec import RunSpec

# Every size moved off its declared value (and off each other's), so a builder that writes one
# out, or reads another model's, builds a different count.
CHANGED = {
    "cnn": {"conv": [[12, 3], [20, 5]], "pool": 2, "dense": 72},
    "mlp": {"hidden": [48, 40]},
    "vgg16": {
        "stages": [[8, 1], [12, 2], [16, 1], [20, 1], [24, 1]],
        "kernel": 3,
        "pool": 2,
        "dense": 36,
    },
    "lstm": {"embed": 24, "hidden": 44},
    "transformer": {"d_model": 40, "heads": 4, "d_ff": 56, "blocks": 3},
}
DATASET = {
    "cnn": "synthetic-mnist",
    "mlp": "synthetic-mnist",
    "vgg16": "synthetic-cifar10",
    "lstm": "synthetic-imdb",
    "transformer": "synthetic-imdb",
}
PROBE = {"train_samples": 40, "test_samples": 8, "batch_size": 8, "epochs": 1}
PROBE.update(steps_per_epoch=1, warmup_steps=0, threads=1)


def changed_package(root: Path) -> Path:
    """The worker package copied under ``root``, its model declaration replaced by ``CHANGED``."""
    copy = root / "adapters"
    shutil.copytree(adapters_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    declaration = json.loads((copy / "models.json").read_text(encoding="utf-8"))
    declaration["models"].update(CHANGED)
    (copy / "models.json").write_text(json.dumps(declaration), encoding="utf-8")
    return copy


def expected(model: str) -> int:
    """The formula's count for ``model`` on its dataset, as the current declaration says."""
    return model_manifest.parameters(model, *_data(DATASET[model]))


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return changed_package(tmp_path_factory.mktemp("declaration"))


@pytest.fixture
def declared_by(package: Path, monkeypatch: pytest.MonkeyPatch):
    """Workers start from the changed package, and the formula reads its declaration."""
    monkeypatch.setattr(worker_launch, "adapters_dir", lambda: package)
    monkeypatch.setattr(model_manifest, "adapters_dir", lambda: package)
    model_manifest.manifest.cache_clear()
    yield package
    model_manifest.manifest.cache_clear()


def test_the_formula_reads_the_changed_declaration(declared_by) -> None:
    """The figure the builds are held to moved with the declaration (else the test below could
    pass on builders that ignore it), and it is the hand count of the changed CNN and MLP."""
    cnn, mlp = expected("cnn"), expected("mlp")
    assert cnn == (3 * 3 * 1 * 12 + 12) + (5 * 5 * 12 * 20 + 20) + (20 * 4 * 4 * 72 + 72) + 730
    assert mlp == (784 * 48 + 48) + (48 * 40 + 40) + (40 * 10 + 10)


def test_the_formula_holds_the_declared_models() -> None:
    """Today's declaration: the counts the equity tests pin (tests/test_frameworks.py)."""
    model_manifest.manifest.cache_clear()
    assert expected("cnn") == 1_669_002  # REFERENCE_CNN_PARAMS
    assert expected("transformer") == 1_062_273  # test_shared_init.TRANSFORMER_PARAMS
    # torch's counts of the models no test trains on every API (VGG16 on CIFAR-10, the LSTM on
    # IMDb) and of the FNN: every build path is held to the formula below, so to these.
    assert expected("vgg16") == 14_982_474
    assert expected("lstm") == 771_713
    assert expected("mlp") == 669_706


def test_the_descriptions_follow_the_declaration(declared_by) -> None:
    """The catalog's descriptions are written from the declaration, not beside it."""
    described = {
        m: model_manifest.describe(m, *_data(DATASET[m]))
        for m in ("cnn", "mlp", "vgg16", "lstm", "transformer")
    }
    assert described["cnn"].startswith("Conv12 3×3 → pool → Conv20 5×5 → pool → Dense72 → ")
    assert f"({expected('cnn'):,} parameters on 28×28×1)" in described["cnn"]
    assert described["mlp"] == "Dense48 → Dropout → Dense40 → Dropout → Dense10"
    assert described["vgg16"].startswith("6 conv 3×3 layers (8…24) in 5 pooled blocks → Dense36")
    assert described["lstm"] == "Embedding 5000×24 → LSTM44 → Dense1 (binary)"
    assert described["transformer"].startswith("Embedding 5000×40 + learned positions 200×40")
    assert "3 × [4-head self-attention (4×10)" in described["transformer"]
    assert f"binary; {expected('transformer'):,} parameters)" in described["transformer"]


def _data(dataset: str) -> tuple[tuple[int, ...], int, int]:
    entry = datasets()[dataset]
    return tuple(entry["input_shape"]), entry["num_classes"], entry.get("vocab_size", 0)


# The APIs that build with another's code: the same builder, so the same declaration read. Keras'
# builders (adapters/keras_models.py) are one for TF's tf.keras APIs and Keras 3's three backends;
# torch.compile compiles eager's nn.Module; MXNet's hybrid API hybridizes Gluon's blocks.
BUILT_AS = {
    ("torch", "compile"): ("torch", "eager"),
    **{("tensorflow", a): ("tensorflow", "graph") for a in ("keras", "eager", "xla")},
    **{("keras", b): ("keras", "tensorflow") for b in ("torch", "jax")},
    ("mxnet", "hybrid"): ("mxnet", "gluon"),
}


def test_every_api_builds_through_a_build_path_held_below() -> None:
    """One build per distinct model-building code path (tests/test_frameworks.py's BUILD_PATHS):
    building the same declaration again through a backend that runs the same builder checks
    nothing more (Keras 3 on JAX compiled VGG16's initialisers for 77 s of it)."""
    for combo in COMBOS:
        assert BUILT_AS.get(combo, combo) in BUILD_PATHS, combo
    assert set(BUILT_AS.values()) <= set(BUILD_PATHS)


def _build_paths() -> list:
    return [
        pytest.param(
            framework,
            api,
            marks=pytest.mark.xdist_group(
                THEANO_GROUP if framework == "theano" else f"declaration-{framework}"
            ),
        )
        for framework, api in BUILD_PATHS
        if (framework, api) in COMBOS  # a framework this installation does not have is left out
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "api"), _build_paths())
def test_every_build_path_builds_the_declared_models(declared_by, framework: str, api: str) -> None:
    fw = catalog.framework(framework)
    models = [m for m in CHANGED if (api, m) not in fw.unsupported]
    runtime = runtime_for(framework, api)
    specs = [
        RunSpec(framework=framework, api=api, model=m, dataset=DATASET[m], **PROBE).validate()
        for m in models
    ]
    reports = dry_run.probe(specs, runtime=runtime, timeout=300).reports
    built = {m: report["param_count"] for m, report in zip(models, reports, strict=True)}
    assert built == {m: expected(m) for m in models}
