"""What can be run: frameworks × APIs × models × datasets × devices, and which combinations make sense.

The frameworks are plugins: each one's manifest declares its APIs and what they offer
(``frameworks.py``); adding one touches nothing here. Nothing in this module imports a
framework; availability is probed by ``runtimes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_bench.engine import model_manifest
from tui_bench.engine.dataset_manifest import manifest, required_size

# The run settings and what a framework declares (its manifest) have their home in frameworks.py;
# they are named here too, where the checks of a combination read them.
from tui_bench.engine.frameworks import (  # noqa: F401
    AUTOTUNE,
    GENERATE,
    GENERATES,
    INPUTS,
    MODES,
    PRECISIONS,
    SCALINGS,
    SPEC_MODES,
    TIMINGS,
    Capabilities,
    Framework,
    registry,
)

# Every framework registered through the entry-point group ``tui_bench.frameworks`` (the in-tree
# ones too), from its manifest; frameworks.problems() says which plugins could not be used.
FRAMEWORKS: dict[str, Framework] = registry().frameworks


def generating_apis() -> tuple[tuple[str, str], ...]:
    """Every (framework, api) whose capabilities say it generates: the generation tests and the
    generate presets read this, so an API joins them by declaring the mode."""
    return tuple(
        (fw.name, api)
        for fw in FRAMEWORKS.values()
        for api in fw.apis
        if GENERATE in fw.capabilities_for(api).modes
    )


# The gpt (issue 42) is built by every framework × API: no API says "not offered" for it.


@dataclass(frozen=True)
class Model:
    name: str
    label: str
    input_kind: str  # "image", "sequence" (classified) or "tokens" (next-token prediction)
    description: str
    # Datasets this model cannot take, with the reason (checked on top of input_kind).
    refuses: dict[str, str] = field(default_factory=dict)
    # The dataset a spec that names none trains on; None: the spec's default (synthetic-mnist).
    default_dataset: str | None = None


def _described(model: str, dataset: str = "synthetic-mnist") -> str:
    """The model's description, generated from its declaration (adapters/models.json) on the
    shape of its reference dataset."""
    entry = manifest()[dataset]
    shape, classes = tuple(entry["input_shape"]), int(entry["num_classes"])
    return model_manifest.describe(model, shape, classes, int(entry.get("vocab_size", 0)))


MODELS: dict[str, Model] = {
    "cnn": Model("cnn", "Reference CNN", "image", _described("cnn")),
    "mlp": Model("mlp", "FNN", "image", _described("mlp")),
    "vgg16": Model(
        "vgg16",
        "VGG16",
        "image",
        _described("vgg16", "synthetic-cifar10"),
        refuses={
            "synthetic-mnist": "vgg16 pools 5 times and needs 32×32 input; 28×28 shrinks to nothing",
            "mnist": "vgg16 pools 5 times and needs 32×32 input; 28×28 shrinks to nothing",
            "fashion-mnist": "vgg16 pools 5 times and needs 32×32 input; 28×28 shrinks to nothing",
        },
    ),
    "lstm": Model("lstm", "LSTM", "sequence", _described("lstm", "synthetic-imdb")),
    # Every adapter builds exactly this (docs/frameworks.md, "The transformer"): no padding mask,
    # like the LSTM; Glorot-uniform kernels with each attention projection's fans those of a
    # width × width dense, zero biases, LayerNorm γ=1 β=0, embeddings uniform ±0.05, drawn once by
    # adapters/shared_init.py and loaded into every framework (the same initial weights).
    "transformer": Model(
        "transformer",
        "Transformer encoder",
        "sequence",
        _described("transformer", "synthetic-imdb"),
    ),
}


# Every adapter that builds it builds exactly this (docs/frameworks.md, "The GPT"): GPT-2's
# initialiser drawn once by adapters/shared_init.py, so every framework starts from one point.
MODELS["gpt"] = Model(
    "gpt",
    "GPT (decoder LM)",
    "tokens",
    _described("gpt", "synthetic-tokens"),
    default_dataset="synthetic-tokens",
)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    label: str
    kind: str
    synthetic: bool
    description: str


def _datasets() -> dict[str, DatasetInfo]:
    """The datasets of the shared manifest (adapters/datasets.json); a real dataset's description
    ends with its download size, computed from the manifest's file sizes."""
    out = {}
    for name, entry in manifest().items():
        description = entry["description"]
        if not entry["synthetic"]:
            description += f" ({required_size(entry) / 1e6:.1f} MB download)"
        out[name] = DatasetInfo(
            name, entry["label"], entry["kind"], entry["synthetic"], description
        )
    return out


# Real datasets are files in the cache (tui-bench data download|import), see engine/datasets/.
DATASETS: dict[str, DatasetInfo] = _datasets()

OPTIMIZERS = ("adam", "sgd")


def framework(name: str) -> Framework:
    return FRAMEWORKS[name]


def runtime_for(framework_name: str, api: str) -> str:
    fw = FRAMEWORKS[framework_name]
    return fw.api_runtimes.get(api, fw.runtime)


def setting_problem(
    framework_name: str,
    api: str,
    device: str,
    precision: str,
    input_path: str,
    timing: str,
    workers: int = 1,
    mode: str = "train",
) -> tuple[str, str] | None:
    """(field, why) when this framework/API cannot run these settings on this device, or None."""
    fw = FRAMEWORKS[framework_name]
    caps = fw.capabilities_for(api)
    if mode not in caps.modes:
        return "mode", "not offered: " + caps.why_not.get(
            "mode", f"{mode} not built yet for {fw.name} {api}"
        )
    where = "cpu" if device == "cpu" else "gpu"
    precisions = caps.precisions_cpu if where == "cpu" else caps.precisions_gpu
    checks = (
        ("precision", precision, precisions),
        ("input", input_path, caps.inputs),
        ("timing", timing, caps.timings),
    )
    for name, value, allowed in checks:
        if value not in allowed:
            why = caps.why_not.get(name)
            on = f" on {where}" if name == "precision" else ""
            return name, (
                f"{name} '{value}' is not available for {fw.name}/{api}{on} "
                f"(choose: {', '.join(allowed)})" + (f": {why}" if why else "")
            )
    if workers > 1 and not caps.data_parallel:
        why = caps.why_not.get("workers", "it has no data-parallel engine in tui-bench")
        return "workers", f"workers {workers} is not available for {fw.name}/{api}: {why}"
    return None


def combination_problem(framework_name: str, api: str, model: str, dataset: str) -> str | None:
    """Why this combination cannot run, or None. Field-level checks happen in spec.py first."""
    fw = FRAMEWORKS[framework_name]
    reason = fw.unsupported.get((api, model))
    if reason:
        return f"{fw.name} {api} cannot run model '{model}': {reason}"
    m = MODELS[model]
    d = DATASETS[dataset]
    if m.input_kind != d.kind:
        need = {"image": "an image dataset", "tokens": "a token dataset"}.get(
            m.input_kind, "a sequence dataset"
        )
        return f"model '{model}' needs {need}; '{dataset}' is {d.kind} data"
    if dataset in m.refuses:
        return f"model '{model}' cannot take dataset '{dataset}': {m.refuses[dataset]}"
    return None
