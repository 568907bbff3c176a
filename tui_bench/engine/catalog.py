"""What can be run: frameworks × APIs × models × datasets × devices, and which combinations make sense.

Adding a framework is one adapter file in ``adapters/`` plus one ``Framework`` entry here.
Nothing in this module imports a framework; availability is probed by ``runtimes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Framework:
    name: str
    label: str
    apis: tuple[str, ...]
    adapter: str  # module name in adapters/
    runtime: str  # default runtime name (runtimes.py)
    import_name: str  # what a runtime must be able to import
    # Environment variables that set the CPU thread count; they must be in place before import.
    thread_env: tuple[str, ...] = ()
    # Frameworks that only honour CPU affinity (JAX) get pinned to the first N CPUs.
    pin_affinity: bool = False
    # Per-API runtime overrides (e.g. the Estimator needs a legacy TensorFlow).
    api_runtimes: dict[str, str] = field(default_factory=dict)
    # (api, model) pairs the API cannot express, with the reason.
    unsupported: dict[tuple[str, str], str] = field(default_factory=dict)
    api_labels: dict[str, str] = field(default_factory=dict)


_BLAS_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

FRAMEWORKS: dict[str, Framework] = {
    "torch": Framework(
        name="torch",
        label="PyTorch",
        apis=("eager", "compile"),
        adapter="torch_adapter",
        runtime="torch",
        import_name="torch",
        thread_env=_BLAS_THREADS,
        api_labels={"eager": "eager nn.Module", "compile": "torch.compile (inductor)"},
    ),
}


@dataclass(frozen=True)
class Model:
    name: str
    label: str
    input_kind: str  # "image" or "sequence"
    description: str
    # Datasets this model cannot take, with the reason (checked on top of input_kind).
    refuses: dict[str, str] = field(default_factory=dict)


MODELS: dict[str, Model] = {
    "cnn": Model(
        "cnn",
        "Reference CNN",
        "image",
        "Conv32 5×5 → pool → Conv64 3×3 → pool → Dense1024 → Dropout → Dense10 "
        "(1,669,002 parameters on 28×28×1)",
    ),
    "mlp": Model("mlp", "FNN", "image", "Dense512 → Dropout → Dense512 → Dropout → Dense10"),
    "vgg16": Model(
        "vgg16",
        "VGG16",
        "image",
        "13 conv 3×3 layers (64…512) in 5 pooled blocks → Dense512 → Dropout → Dense10",
        refuses={
            "synthetic-mnist": "vgg16 pools 5 times and needs 32×32 input; 28×28 shrinks to nothing",
            "mnist": "vgg16 pools 5 times and needs 32×32 input; 28×28 shrinks to nothing",
            "fashion-mnist": "vgg16 pools 5 times and needs 32×32 input; 28×28 shrinks to nothing",
        },
    ),
    "lstm": Model("lstm", "LSTM", "sequence", "Embedding 5000×128 → LSTM128 → Dense1 (binary)"),
}


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    label: str
    kind: str
    synthetic: bool
    description: str


DATASETS: dict[str, DatasetInfo] = {
    "synthetic-mnist": DatasetInfo(
        "synthetic-mnist",
        "Synthetic MNIST-shaped",
        "image",
        True,
        "60,000/10,000 seeded 28×28×1 images, 10 learnable classes (offline default)",
    ),
    "synthetic-cifar10": DatasetInfo(
        "synthetic-cifar10",
        "Synthetic CIFAR-10-shaped",
        "image",
        True,
        "50,000/10,000 seeded 32×32×3 images, 10 learnable classes",
    ),
    "synthetic-imdb": DatasetInfo(
        "synthetic-imdb",
        "Synthetic IMDb-shaped",
        "sequence",
        True,
        "25,000/25,000 seeded word-id sequences (vocabulary 5,000, length 200), 2 classes",
    ),
    # Real datasets: files in the cache (tui-bench data download|import), see engine/datasets.py.
    "mnist": DatasetInfo(
        "mnist",
        "MNIST",
        "image",
        False,
        "60,000/10,000 handwritten digits, 28×28×1, 10 classes (11.6 MB download)",
    ),
    "fashion-mnist": DatasetInfo(
        "fashion-mnist",
        "Fashion-MNIST",
        "image",
        False,
        "60,000/10,000 clothing photos, 28×28×1, 10 classes (30.9 MB download)",
    ),
    "cifar10": DatasetInfo(
        "cifar10",
        "CIFAR-10",
        "image",
        False,
        "50,000/10,000 colour photos, 32×32×3, 10 classes (170.5 MB download)",
    ),
    "imdb": DatasetInfo(
        "imdb",
        "IMDb",
        "sequence",
        False,
        "25,000/25,000 movie reviews as word ids (top 5,000 words, length 200), 2 classes "
        "(17.5 MB download)",
    ),
}

OPTIMIZERS = ("adam", "sgd")


def framework(name: str) -> Framework:
    return FRAMEWORKS[name]


def runtime_for(framework_name: str, api: str) -> str:
    fw = FRAMEWORKS[framework_name]
    return fw.api_runtimes.get(api, fw.runtime)


def combination_problem(framework_name: str, api: str, model: str, dataset: str) -> str | None:
    """Why this combination cannot run, or None. Field-level checks happen in spec.py first."""
    fw = FRAMEWORKS[framework_name]
    reason = fw.unsupported.get((api, model))
    if reason:
        return f"{fw.name} {api} cannot run model '{model}': {reason}"
    m = MODELS[model]
    d = DATASETS[dataset]
    if m.input_kind != d.kind:
        need = "an image dataset" if m.input_kind == "image" else "a sequence dataset"
        return f"model '{model}' needs {need}; '{dataset}' is {d.kind} data"
    if dataset in m.refuses:
        return f"model '{model}' cannot take dataset '{dataset}': {m.refuses[dataset]}"
    return None
