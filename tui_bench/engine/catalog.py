"""What can be run: frameworks × APIs × models × datasets × devices, and which combinations make sense.

Adding a framework is one package in ``adapters/`` plus one ``Framework`` entry here.
Nothing in this module imports a framework; availability is probed by ``runtimes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_bench.engine import model_manifest
from tui_bench.engine.dataset_manifest import manifest, required_size

# -- run settings that decide a number: what each one means is in docs/gpu.md ---------------------
PRECISIONS = ("fp32", "tf32", "amp-fp16", "bf16")
INPUTS = ("host", "device")
TIMINGS = ("synced", "pipelined")
AUTOTUNE = ("on", "off")
SCALINGS = ("weak", "strong")
# What a run measures: training steps, or timed inference requests (docs/inference.md); every API
# offers these two. An API that generates tokens (the gpt, docs/generation.md) also lists
# GENERATE in its capabilities' modes (``GENERATES``); SPEC_MODES are what a spec may ask.
MODES = ("train", "inference")
GENERATE = "generate"
GENERATES = (*MODES, GENERATE)
SPEC_MODES = (*MODES, GENERATE)


def generating_apis() -> tuple[tuple[str, str], ...]:
    """Every (framework, api) whose capabilities say it generates: the generation tests and the
    generate presets read this, so an API joins them by declaring the mode."""
    return tuple(
        (fw.name, api)
        for fw in FRAMEWORKS.values()
        for api in fw.apis
        if GENERATE in fw.capabilities_for(api).modes
    )


@dataclass(frozen=True)
class Capabilities:
    """What one framework/API can run. A combination outside these is refused before any
    process starts, with the reason (``setting_problem``). The defaults are what an adapter
    without the optional settings hooks runs (fp32, host input): a new framework starts there."""

    precisions_cpu: tuple[str, ...] = ("fp32",)
    precisions_gpu: tuple[str, ...] = ("fp32",)
    inputs: tuple[str, ...] = ("host",)
    timings: tuple[str, ...] = TIMINGS
    # How the API compiles, stated, never "auto": the worker records the value it resolved.
    compiles: str = "not stated"
    # The framework's own data-parallel engine for workers > 1 (e.g. "torch.distributed DDP"),
    # or None: such an API refuses workers > 1 before anything starts.
    data_parallel: str | None = None
    # What the API can measure: an adapter offers inference once it has ``predict`` (docs/inference.md).
    modes: tuple[str, ...] = ("train",)
    # Why a setting is missing, for the one-line refusal: {"precision": "...", "input": "..."}.
    why_not: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Framework:
    name: str
    label: str
    apis: tuple[str, ...]
    adapter: str  # its package in adapters/ (the worker imports adapters.<adapter>.adapter)
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
    # Per-API environment for the worker, set before the framework is imported
    # (Keras 3 picks its backend from KERAS_BACKEND at import time).
    api_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # APIs that only honour CPU affinity (Keras on JAX), on top of ``pin_affinity``.
    api_pin_affinity: tuple[str, ...] = ()
    # Per-API modules a runtime must import, when they differ from ``import_name``.
    api_imports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Why no runtime for it can exist here (listed for the studies that used it, never run).
    unavailable: str | None = None
    # Per-API capabilities (precision, input path, timing, compilation); missing: the defaults.
    capabilities: dict[str, Capabilities] = field(default_factory=dict)

    def capabilities_for(self, api: str) -> Capabilities:
        return self.capabilities.get(api, Capabilities())

    def pins_affinity(self, api: str) -> bool:
        return self.pin_affinity or api in self.api_pin_affinity

    def imports_for(self, api: str) -> tuple[str, ...]:
        return self.api_imports.get(api, (self.import_name,))


_TF_DATA_ON_HOST = "Keras fit on TensorFlow reads its batches through tf.data, on the host"
_TORCH_DDP = "DistributedDataParallel under torch.distributed.run (gloo on CPU, NCCL on GPU)"
_TF_MULTI_WORKER = "tf.distribute.MultiWorkerMirroredStrategy, one process per worker"
_KERAS_DISTRIBUTION_JAX_ONLY = (
    "Keras 3's distribution API (keras.distribution) exists for the JAX backend only"
)
_THEANO_FP32 = (
    "Theano 1.0 has no bfloat16 at all and float16 only on its GPU backend (pygpu), which no "
    "runtime here installs; the adapter runs float32"
)
_BLAS_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_TF_THREADS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

FRAMEWORKS: dict[str, Framework] = {
    "torch": Framework(
        name="torch",
        label="PyTorch",
        apis=("eager", "compile"),
        adapter="torch",
        runtime="torch",
        import_name="torch",
        thread_env=_BLAS_THREADS,
        api_labels={"eager": "eager nn.Module", "compile": "torch.compile (inductor)"},
        capabilities={
            "eager": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="no (eager)",
                data_parallel=_TORCH_DDP,
                modes=GENERATES,
            ),
            "compile": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="yes (torch.compile, inductor)",
                data_parallel=_TORCH_DDP,
                modes=GENERATES,
            ),
        },
    ),
    # -- TensorFlow, Keras 3, MXNet ------------------------------------------------------------
    "tensorflow": Framework(
        name="tensorflow",
        label="TensorFlow",
        apis=("keras", "eager", "graph", "xla", "estimator"),
        adapter="tensorflow",
        runtime="tensorflow",
        import_name="tensorflow",
        # OMP_NUM_THREADS does nothing for TF; its own variables must be set before import.
        thread_env=_TF_THREADS,
        api_runtimes={"estimator": "tf-legacy"},
        # tf.keras is Keras 3 since TF 2.16 and honours KERAS_BACKEND: a user's "jax" must not leak in.
        api_env={
            api: {"KERAS_BACKEND": "tensorflow"}
            for api in ("keras", "eager", "graph", "xla", "estimator")
        },
        api_imports={"estimator": ("tensorflow", "tensorflow_estimator")},
        api_labels={
            "keras": "Keras fit on TF",
            "eager": "GradientTape loop, eager",
            "graph": "GradientTape step in tf.function",
            "xla": "tf.function(jit_compile=True)",
            "estimator": "tf.estimator, custom model_fn (TF 2.15)",
        },
        capabilities={
            "keras": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                compiles="graph (tf.function), XLA off (jit_compile=False)",
                modes=MODES,
                why_not={
                    "input": _TF_DATA_ON_HOST,
                    "workers": "Keras fit shards its own tf.data input under a strategy; tui-bench "
                    "does not yet feed fit each rank's slice of the global batch (use eager or graph)",
                },
            ),
            "eager": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="no (eager)",
                data_parallel=_TF_MULTI_WORKER,
                modes=MODES,
            ),
            "graph": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="graph (tf.function), XLA off",
                data_parallel=_TF_MULTI_WORKER,
                modes=MODES,
            ),
            "xla": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="XLA (tf.function(jit_compile=True))",
                modes=MODES,
                why_not={
                    "workers": "tui-bench has no multi-worker path for the XLA-compiled step yet "
                    "(use eager or graph)"
                },
            ),
            "estimator": Capabilities(
                precisions_cpu=("fp32",),
                precisions_gpu=("fp32", "tf32"),
                inputs=("host",),
                timings=("synced",),
                compiles="graph (TF1 session), XLA off",
                modes=MODES,
                why_not={
                    "precision": "the Estimator's TF1 graph has no mixed-precision policy here",
                    "input": "the Estimator reads batches through its input_fn, on the host",
                    "timing": "every Estimator step is a session.run that returns its loss",
                    "workers": "the Estimator distributes only through TF1's RunConfig "
                    "train_distribute, which tui-bench does not drive",
                },
            ),
        },
    ),
    "keras": Framework(
        name="keras",
        label="Keras 3",
        apis=("tensorflow", "torch", "jax"),
        adapter="keras",
        runtime="tensorflow",
        import_name="keras",
        thread_env=_BLAS_THREADS + _TF_THREADS,
        api_pin_affinity=("jax",),  # JAX ignores every thread variable; only affinity works
        api_runtimes={"torch": "keras-torch", "jax": "keras-jax"},
        api_env={api: {"KERAS_BACKEND": api} for api in ("tensorflow", "torch", "jax")},
        api_imports={
            "tensorflow": ("keras", "tensorflow"),
            "torch": ("keras", "torch"),
            "jax": ("keras", "jax"),
        },
        api_labels={
            "tensorflow": "Keras fit, TensorFlow backend",
            "torch": "Keras fit, PyTorch backend",
            "jax": "Keras fit, JAX backend",
        },
        capabilities={
            "tensorflow": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                compiles="graph (tf.function), XLA off (jit_compile=False)",
                why_not={"input": _TF_DATA_ON_HOST, "workers": _KERAS_DISTRIBUTION_JAX_ONLY},
                modes=MODES,
            ),
            "torch": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="no (eager torch, jit_compile=False)",
                why_not={"workers": _KERAS_DISTRIBUTION_JAX_ONLY},
                modes=MODES,
            ),
            "jax": Capabilities(
                precisions_cpu=("fp32", "bf16"),
                precisions_gpu=PRECISIONS,
                inputs=INPUTS,
                compiles="XLA (jax.jit, jit_compile=True)",
                data_parallel="keras.distribution.DataParallel, one process over N JAX devices",
                modes=MODES,
            ),
        },
    ),
    "mxnet": Framework(
        name="mxnet",
        label="MXNet",
        apis=("gluon", "hybrid", "module"),
        adapter="mxnet",
        runtime="mxnet",
        import_name="mxnet",
        # MXNet runs one OpenMP thread here unless OMP_NUM_THREADS is set before import.
        thread_env=_BLAS_THREADS,
        api_labels={
            "gluon": "Gluon, imperative",
            "hybrid": "Gluon, hybridized",
            "module": "symbolic Module API",
        },
        capabilities={
            api: Capabilities(
                precisions_cpu=("fp32",),
                precisions_gpu=("fp32", "tf32")
                if api == "module"
                else ("fp32", "tf32", "amp-fp16"),
                compiles=compiles,
                modes=MODES,
                why_not={
                    "precision": "MXNet 1.9 has AMP float16 for Gluon on a GPU only, no bfloat16"
                    + ("; the Module API has no AMP here" if api == "module" else ""),
                    "workers": "the Module API's multi-context path is not wired into tui-bench",
                },
                data_parallel=None
                if api == "module"
                else "Gluon Trainer with kvstore ('local' on CPU, 'device' on GPUs) over N "
                "contexts in one process",
            )
            for api, compiles in (
                ("gluon", "no (imperative)"),
                ("hybrid", "graph (hybridize static_alloc/static_shape)"),
                ("module", "graph (symbolic Module)"),
            )
        },
    ),
    # -- the stacks of Shatnawi et al. (2018) ----------------------------------------------------
    "theano": Framework(
        name="theano",
        label="Theano",
        apis=("theano", "keras2"),
        adapter="theano",
        runtime="theano",
        import_name="theano",
        # OpenBLAS and Theano's OpenMP loops size their pools from these at load time.
        thread_env=_BLAS_THREADS,
        # Keras 2 picks its backend at import; the plain Theano API does not import Keras at all.
        api_env={"theano": {"KERAS_BACKEND": ""}, "keras2": {"KERAS_BACKEND": "theano"}},
        api_imports={"keras2": ("theano", "keras")},
        api_labels={
            "theano": "Theano symbolic graph, theano.grad",
            "keras2": "Keras 2.3.1 fit, Theano backend",
        },
        # fp32 and host input only: the adapter implements no precision or device-input path.
        capabilities={
            "theano": Capabilities(
                compiles="graph (theano.function, C code compiled at build)",
                modes=MODES,
                why_not={
                    "precision": _THEANO_FP32,
                    "workers": "Theano has no data-parallel engine (one process, one device)",
                },
            ),
            "keras2": Capabilities(
                compiles="graph (Keras 2 builds a theano.function, C code compiled at build)",
                modes=MODES,
                why_not={
                    "precision": _THEANO_FP32,
                    "workers": "Keras 2's multi_gpu_model is TensorFlow-only; on Theano it has "
                    "no data-parallel engine",
                },
            ),
        },
    ),
    "cntk": Framework(
        name="cntk",
        label="CNTK",
        apis=("keras2",),
        adapter="",
        runtime="cntk",
        import_name="cntk",
        api_labels={"keras2": "Keras 2 fit, CNTK backend"},
        unavailable="CNTK's last release (2.7.post2) ships wheels for Python 2.7, 3.5 and 3.6 only "
        "(3.7 builds were on Microsoft's retired site); no such interpreter is reachable from the "
        "package registries",
    ),
}


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
