"""RunSpec: what to run. Validated before any process starts, with one-line, field-named errors."""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

import tomli_w

from tui_bench.engine import catalog, dataset_manifest, model_manifest
from tui_bench.engine.errors import SpecError, UsageError

MAX_THREADS = 64

# Bounds on what a spec, preset or config file may be. Real ones are a few KiB with tables three
# deep; past these a file is refused in one line before it can exhaust memory or the stack
# (tomllib and json recurse once per level: a few hundred levels raise RecursionError).
MAX_INPUT_BYTES = 1024 * 1024
MAX_NESTING = 16


def _default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_THREADS))


_APIS = "; ".join(f"{f.name}: {', '.join(f.apis)}" for f in catalog.FRAMEWORKS.values())

# The model whose size is a setting, and its settings: the named size and the per-dimension
# overrides (None: the size's). Set for any other model, they are refused.
SIZED_MODEL = "gpt"
GPT_FIELDS = ("size", *model_manifest.GPT_DIMENSIONS)
# Dropout when the spec names none: the studies' 0.25 for the 2018 models; 0 for the gpt, as
# language-model benchmarks train (and the fused attention kernels need no dropout). Resolved when
# the spec is made, so the recorded spec holds the number that ran.
DEFAULT_DROPOUT = 0.25
MODEL_DROPOUT = {SIZED_MODEL: 0.0}
# The batch when the spec names none: 128 samples for the fixed-shape models (the 2018 studies'
# batch); a few sequences for the gpt, as language-model training runs a handful of S-token
# sequences per step (nanoGPT's gpt2 config: 12), not 128 of them (gpt2-small's logits alone
# would be 26 GB at 128). Resolved when the spec is made, so the recorded spec holds it.
DEFAULT_BATCH = 128
MODEL_BATCH = {SIZED_MODEL: 8}


def model_default_text(name: str) -> str | None:
    """The default of a field that depends on the model, in words for a form ('128, gpt 8'),
    or None for a field with one default."""
    per_model: dict[str, tuple[float, dict[str, float]]] = {
        "batch_size": (DEFAULT_BATCH, dict(MODEL_BATCH)),
        "dropout": (DEFAULT_DROPOUT, dict(MODEL_DROPOUT)),
    }
    if name not in per_model:
        return None
    default, by_model = per_model[name]
    return ", ".join([f"{default:g}", *(f"{model} {value:g}" for model, value in by_model.items())])


# The dataset when the spec names none: the model's own (catalog.Model.default_dataset), else this.
DEFAULT_DATASET = "synthetic-mnist"
# The fields only training reads: an inference run serves the initial weights (docs/inference.md),
# so its epochs, learning rate and optimizer decide nothing it measures.
TRAINING = ("train",)
# The modes that serve timed requests from the initial weights: forward requests (inference) and
# token-by-token generation with a KV cache (generate, docs/generation.md).
SERVING = ("inference", "generate")
GENERATE = ("generate",)
# A generation run's lengths when the spec names none, from the gpt's context S: N new tokens =
# min(S / 2, 128), a prompt of P = min(S - N, 512) tokens (llama-bench's pp512 / tg128 where S
# allows; the tiny gpt's S 128 gives 64 + 64). Resolved when the spec is made, so it is recorded.
DEFAULT_NEW_TOKENS = 128
DEFAULT_PROMPT_TOKENS = 512


def generation_lengths(seq_len: int) -> tuple[int, int]:
    """(P, N) for a context of ``seq_len`` tokens when the spec names neither."""
    new = min(seq_len // 2, DEFAULT_NEW_TOKENS)
    return min(seq_len - new, DEFAULT_PROMPT_TOKENS), new


def spec_field(
    default: Any = MISSING,
    *,
    help: str,
    default_factory: Callable[[], Any] | Any = MISSING,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: Iterable[str] | None = None,
    pattern: str | None = None,
    expected: str | None = None,
    modes: tuple[str, ...] | None = None,
    sweeps: bool = False,
    unset: bool = False,
) -> Any:
    """A RunSpec field and its rules, declared once: validation, the CLI flags and forms read them.

    ``low``/``high`` bound numbers (``*_open``: the bound itself is refused); ``choices`` lists the
    values a text field takes (the catalog's own collection, so it stays current); ``pattern`` is a
    regular expression a text field must match, ``expected`` says in words what it accepts.
    ``modes``: the spec modes whose runs use the field (None: every mode); in a run of another
    mode it decides no number (``results/identity``). ``sweeps``: a flag may give a comma list
    of values, one run each (``--batch-size 1,8,64``, ``sweep_values``). ``unset``: a field typed
    without None that a form may leave empty, its default resolved per model when the spec is
    made (``batch_size``): readers always see a value."""
    metadata = {
        "help": help,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
        "choices": choices,
        "pattern": re.compile(pattern) if pattern else None,
        "expected": expected,
        "modes": modes,
        "sweeps": sweeps,
        "unset": unset,
    }
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class RunSpec:
    framework: str = spec_field("torch", help="deep-learning framework", choices=catalog.FRAMEWORKS)
    # Which APIs a framework has depends on the framework: checked in validate().
    api: str = spec_field("eager", help=f"the framework's API ({_APIS})")
    model: str = spec_field("cnn", help="network to train", choices=catalog.MODELS)
    # train: timed training steps; inference: timed forward requests at batch_size from the
    # initial weights (docs/inference.md); generate: greedy token-by-token generation with a KV
    # cache, the gpt only (docs/generation.md).
    mode: str = spec_field(
        "train",
        help="train: timed training steps; inference: timed requests (latency p50/p90/p99); "
        "generate: the gpt generating tokens (TTFT, TPOT, decode tokens/s)",
        choices=catalog.SPEC_MODES,
    )
    # Left unset, the model's own dataset (resolved in __post_init__: never None after it, so
    # readers see a str; an explicit None is refused like any other non-name).
    dataset: str = spec_field(
        None,
        help=f"synthetic-* needs no files (default {DEFAULT_DATASET}; gpt: synthetic-tokens)",
        choices=catalog.DATASETS,
    )
    device: str = spec_field(
        "cpu",
        help="where the model trains",
        pattern=r"^(cpu|gpu(:\d+)?)$",
        expected="cpu, gpu or gpu:N",
    )
    threads: int = spec_field(
        help="CPU threads (default: all cores)",
        default_factory=_default_threads,
        low=1,
        high=MAX_THREADS,
    )
    batch_size: int = spec_field(
        None,
        help=f"samples per step (inference: per request; generate: sequences per request; "
        f"default {DEFAULT_BATCH}; gpt: {MODEL_BATCH[SIZED_MODEL]} sequences); a comma list "
        "sweeps it, one run each",
        low=1,
        high=65536,
        sweeps=True,
        unset=True,  # the model's default: resolved in __post_init__
    )
    epochs: int = spec_field(
        2, help="passes over the training split", low=1, high=10_000, modes=TRAINING
    )
    steps_per_epoch: int | None = spec_field(
        None, help="cap on steps per epoch (quick runs)", low=1, high=10_000_000, modes=TRAINING
    )
    lr: float = spec_field(
        1e-3, help="learning rate", low=0.0, high=10.0, low_open=True, modes=TRAINING
    )
    optimizer: str = spec_field(
        "adam", help="optimizer", choices=catalog.OPTIMIZERS, modes=TRAINING
    )
    dropout: float | None = spec_field(
        None,
        help=f"dropout probability (default {DEFAULT_DROPOUT:g}; gpt: 0)",
        low=0.0,
        high=1.0,
        high_open=True,
        modes=TRAINING,  # a model serves in evaluation mode: no dropout
    )
    seed: int = spec_field(0, help="initialisation and shuffling seed", low=0, high=2**32 - 1)
    warmup_steps: int = spec_field(
        5, help="steps kept out of steady-state figures", low=0, high=100_000
    )
    requests: int = spec_field(
        1000,
        help="inference, generate: timed requests after warmup_steps warm-up ones (p99 needs "
        "hundreds)",
        low=1,
        high=10_000_000,
        modes=SERVING,
    )
    repeats: int = spec_field(
        1, help="run the spec N times, each in its own worker", low=1, high=1000
    )
    train_samples: int | None = spec_field(
        None,
        help="use the first N training samples (20 % of them validate)",
        low=1,
        high=100_000_000,
    )
    test_samples: int | None = spec_field(
        None, help="use the first N test samples", low=1, high=100_000_000
    )
    target_accuracy: float | None = spec_field(
        None,
        help="stop once validation accuracy reaches it",
        low=0.0,
        high=1.0,
        low_open=True,
        modes=TRAINING,
    )
    data_dir: str | None = spec_field(None, help="directory with dataset files", expected="a path")
    # The rules that decide a GPU number (docs/gpu.md), applied in the worker and read back.
    precision: str = spec_field(
        "fp32", help="fp32 is strict: TF32 off everywhere", choices=catalog.PRECISIONS
    )
    autotune: str = spec_field(
        "on",
        help="cuDNN/XLA algorithm autotuning, one choice for every framework",
        choices=catalog.AUTOTUNE,
    )
    input: str = spec_field(
        "host",
        help="host: gather + copy each batch inside the timed step; device: the split is "
        "resident on the device",
        choices=catalog.INPUTS,
    )
    timing: str = spec_field(
        "synced",
        help="synced: sync around every step; pipelined: no per-step sync, one sync per "
        "timing window",
        choices=catalog.TIMINGS,
    )
    timing_window: int = spec_field(10, help="steps per pipelined window", low=1, high=100_000)
    # Data-parallel training (docs/scaling.md): N processes/devices under the framework's own
    # engine. weak: batch_size is per worker (global = N x batch_size); strong: batch_size is the
    # global batch, split evenly across the workers. threads is per worker.
    workers: int = spec_field(1, help="data-parallel workers", low=1, high=64)
    scaling: str = spec_field(
        "weak",
        help="weak: batch size per worker; strong: global batch split over the workers",
        choices=catalog.SCALINGS,
    )
    # The gpt's size (docs/frameworks.md, "The GPT"): a named size and per-dimension overrides.
    size: str | None = spec_field(
        None,
        help="gpt: named size (default tiny)",
        choices=model_manifest.gpt_sizes(),
    )
    layers: int | None = spec_field(
        None, help="gpt: blocks L (default: the size's)", low=1, high=256
    )
    d_model: int | None = spec_field(
        None, help="gpt: width d (default: the size's)", low=8, high=65536
    )
    heads: int | None = spec_field(
        None, help="gpt: attention heads, dividing d_model (default: the size's)", low=1, high=1024
    )
    seq_len: int | None = spec_field(
        None, help="gpt: context length S (default: the size's)", low=2, high=131072
    )
    vocab_size: int | None = spec_field(
        None, help="gpt: vocabulary V (default: the size's)", low=16, high=1_048_576
    )

    # A generation run (docs/generation.md): each sequence of a request is a P-token prompt from
    # the test split, then exactly N greedy tokens (no stop token); P + N fit the gpt's context.
    prompt_tokens: int | None = spec_field(
        None,
        help="generate: prompt tokens P per sequence (default: from the gpt's S, tiny 64)",
        low=1,
        high=131072,
        modes=GENERATE,
    )
    new_tokens: int | None = spec_field(
        None,
        help="generate: tokens generated per sequence N, greedy, always N (default: from the "
        "gpt's S, tiny 64)",
        low=1,
        high=131072,
        modes=GENERATE,
    )

    def __post_init__(self) -> None:
        # Model-specific defaults, resolved here so the spec records what runs.
        if self.dataset is None:
            model = catalog.MODELS.get(self.model)
            dataset = model.default_dataset if model is not None else None
            object.__setattr__(self, "dataset", dataset or DEFAULT_DATASET)
        if self.batch_size is None:
            object.__setattr__(self, "batch_size", MODEL_BATCH.get(self.model, DEFAULT_BATCH))
        if self.dropout is None:
            object.__setattr__(self, "dropout", MODEL_DROPOUT.get(self.model, DEFAULT_DROPOUT))
        if self.model == SIZED_MODEL and self.size is None:
            object.__setattr__(self, "size", model_manifest.default_gpt_size())
        if self.mode == "generate" and self.model == SIZED_MODEL:
            self._resolve_lengths()

    def _resolve_lengths(self) -> None:
        """A generation run's unset P and N from the gpt's context (``generation_lengths``);
        a size or a context that is not a valid one is left for validate() to refuse."""
        if self.prompt_tokens is not None and self.new_tokens is not None:
            return
        try:
            seq_len = self.gpt_dims().seq_len
        except (KeyError, TypeError, ValueError):
            return
        if not isinstance(seq_len, int) or seq_len < 2:
            return
        prompt, new = generation_lengths(seq_len)
        if self.prompt_tokens is None and self.new_tokens is not None:
            prompt = seq_len - self.new_tokens if isinstance(self.new_tokens, int) else prompt
            prompt = max(1, min(prompt, DEFAULT_PROMPT_TOKENS))
        if self.new_tokens is None and isinstance(self.prompt_tokens, int):
            new = max(1, min(seq_len - self.prompt_tokens, DEFAULT_NEW_TOKENS))
        if self.prompt_tokens is None:
            object.__setattr__(self, "prompt_tokens", prompt)
        if self.new_tokens is None:
            object.__setattr__(self, "new_tokens", new)

    # -- validation ---------------------------------------------------------------------------
    def validate(self) -> RunSpec:
        """Return self, or raise SpecError naming the first bad field.

        Each field is checked against its declaration; then the rules that tie fields together."""
        for declared, _ in _declarations(RunSpec):
            _check_declared(declared, getattr(self, declared.name))
        fw = catalog.FRAMEWORKS[self.framework]
        if self.api not in fw.apis:
            raise SpecError(
                "api",
                f"api {_quoted(self.api)} is not available for framework '{self.framework}' "
                f"(choose: {', '.join(fw.apis)})",
            )
        if self.train_samples is not None:
            usable = self.train_samples - round(self.train_samples * 0.2)
            if usable < self.batch_size:
                raise SpecError(
                    "train_samples",
                    f"train_samples {self.train_samples} leaves {usable} training samples after the "
                    f"20 % validation split, fewer than one batch of {self.batch_size}",
                )
        self._check_size()
        problem = catalog.combination_problem(self.framework, self.api, self.model, self.dataset)
        if problem:
            raise SpecError("model", problem)
        if self.scaling == "strong" and self.batch_size % self.workers:
            raise SpecError(
                "batch_size",
                f"batch_size {self.batch_size} does not split evenly over {self.workers} workers "
                "(strong scaling keeps the global batch fixed)",
            )
        self._check_generation()
        setting = catalog.setting_problem(
            self.framework,
            self.api,
            self.device,
            self.precision,
            self.input,
            self.timing,
            self.workers,
            self.mode,
        )
        if setting:
            raise SpecError(*setting)
        self._check_inference()
        return self

    def _check_inference(self) -> None:
        """An inference run is one process timing each request alone, inputs from the host:
        what it does not do yet is refused, never run as something else. A generation run is
        one too (``_check_generation``: the gpt, a prompt and new tokens that fit its context)."""
        if self.mode not in SERVING:
            return
        for name, plain, why in (
            ("workers", 1, "an inference run is one process"),
            ("timing", "synced", "each request is timed alone, synchronised on the device"),
            ("input", "host", "each request's batch comes from the host, as a served one does"),
        ):
            if getattr(self, name) != plain:
                raise SpecError(
                    name,
                    f"{name} {getattr(self, name)!r} is not available with mode "
                    f"'{self.mode}' (only {plain!r}: {why})",
                )

    def _check_generation(self) -> None:
        if self.mode != "generate":
            for name in ("prompt_tokens", "new_tokens"):
                if getattr(self, name) is not None:
                    raise SpecError(
                        name, f"{name} is a setting of mode 'generate' (mode is '{self.mode}')"
                    )
            return
        if self.model != SIZED_MODEL:
            raise SpecError(
                "mode",
                f"mode 'generate' runs the language model '{SIZED_MODEL}' only; model "
                f"{_quoted(self.model)} does not generate tokens",
            )
        seq_len = self.gpt_dims().seq_len
        if self.prompt_tokens is None or self.new_tokens is None:  # an unresolved spec
            raise SpecError("prompt_tokens", "prompt_tokens and new_tokens must both be set")
        if self.prompt_tokens + self.new_tokens > seq_len:
            raise SpecError(
                "new_tokens",
                f"prompt_tokens {self.prompt_tokens} + new_tokens {self.new_tokens} = "
                f"{self.prompt_tokens + self.new_tokens} exceeds the gpt's context of {seq_len} "
                "tokens (--seq-len, or fewer tokens)",
            )

    def _check_size(self) -> None:
        """The gpt's size settings: only for the gpt, and a width its heads divide."""
        if self.model != SIZED_MODEL:
            for name in GPT_FIELDS:
                if getattr(self, name) is not None:
                    raise SpecError(
                        name,
                        f"{name} is a setting of model '{SIZED_MODEL}'; model "
                        f"{_quoted(self.model)} has a fixed shape",
                    )
            return
        dims = self.gpt_dims()
        if dims.d_model % dims.heads:
            raise SpecError(
                "heads" if self.heads is not None else "d_model",
                f"d_model {dims.d_model} does not divide into {dims.heads} heads "
                "(each head is d_model / heads wide)",
            )
        # A real token dataset has its own ids (TinyShakespeare's 256 bytes): the vocabulary
        # must hold them (synthetic-tokens is drawn below the model's own V).
        entry = dataset_manifest.manifest().get(self.dataset, {})
        ids = entry.get("vocab_size") if entry.get("kind") == "tokens" else None
        if ids and not entry.get("synthetic") and dims.vocab_size < ids:
            raise SpecError(
                "vocab_size",
                f"dataset '{self.dataset}' has {ids} token ids; the gpt's vocabulary of "
                f"{dims.vocab_size} cannot hold them (--vocab-size {ids})",
            )

    def gpt_dims(self) -> model_manifest.GptDims:
        """The gpt this spec asks for: its size with the overrides applied."""
        return model_manifest.gpt_dims(
            self.size, **{name: getattr(self, name) for name in model_manifest.GPT_DIMENSIONS}
        )

    def model_dims(self) -> model_manifest.GptDims | None:
        """The size of a sized model (the gpt), None for the fixed-shape ones: what the FLOP
        count and the memory estimate read."""
        return self.gpt_dims() if self.model == SIZED_MODEL else None

    def model_label(self) -> str:
        """'cnn'; 'gpt tiny'; 'gpt tiny L4 d256' (the overrides, in the order of the flags)."""
        if self.model != SIZED_MODEL:
            return self.model
        parts = [self.model, str(self.size)]
        for name in model_manifest.GPT_DIMENSIONS:
            value = getattr(self, name)
            if value is not None:
                parts.append(GPT_SHORT[name].format(value))
        return " ".join(parts)

    # -- conversion ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], validate: bool = True) -> RunSpec:
        if not isinstance(data, dict):
            raise SpecError("spec", f"a spec is a table of fields, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known), key=str)
        if unknown:
            raise SpecError(
                str(unknown[0]),
                f"unknown field {_quoted(unknown[0])} (fields: {', '.join(known)})",
            )
        values = {k: _coerce(k, v, known[k].type) for k, v in data.items()}
        spec = cls(**values)
        return spec.validate() if validate else spec

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        try:
            data = load_json(text)
        except ValueError as exc:
            raise SpecError("json", str(exc)) from None
        return cls.from_dict(data)

    def to_toml(self) -> str:
        # TOML has no null: unset optional fields are simply left out.
        return tomli_w.dumps({k: v for k, v in self.to_dict().items() if v is not None})

    @classmethod
    def from_toml(cls, text: str) -> RunSpec:
        try:
            data = load_toml(text)
        except ValueError as exc:
            raise SpecError("toml", str(exc)) from None
        return cls.from_dict(data)

    def with_changes(self, **changes: Any) -> RunSpec:
        return replace(self, **changes)

    def label(self) -> str:
        """Short human name: 'torch/eager cnn synthetic-mnist cpu×2'."""
        where = f"{self.device}×{self.threads}" if self.device == "cpu" else self.device
        if self.workers > 1:  # threads are per worker: 'cpu×1 ×2 workers (weak)'
            where += f" ×{self.workers} workers ({self.scaling})"
        mode = f" {self.mode}" if self.mode in SERVING else ""
        return f"{self.framework}/{self.api}{mode} {self.model_label()} {self.dataset} {where}"


# How a gpt dimension reads in a short label: 'L4 d256 h8 S512 V1000'.
GPT_SHORT = {
    "layers": "L{}",
    "d_model": "d{}",
    "heads": "h{}",
    "seq_len": "S{}",
    "vocab_size": "V{}",
}


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker is watched, not what it runs: set per batch (CLI flags), never recorded as part
    of a spec. Declared like RunSpec's fields so that one check refuses nonsense everywhere: a
    zero or NaN interval busy-loops the sampler, a stall timeout below a second kills healthy
    workers as "hung"."""

    stall_timeout: float = spec_field(
        300.0,
        help="kill a worker silent for this many seconds",
        low=1.0,
        high=7 * 24 * 3600.0,
    )
    sample_interval: float = spec_field(
        1.0, help="resource sampling interval in seconds", low=0.05, high=3600.0
    )

    def validate(self) -> WorkerOptions:
        for declared, _ in _declarations(WorkerOptions):
            _check_declared(declared, getattr(self, declared.name))
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerOptions:
        """Known options from ``data`` (others, like ``cluster``, are not this class's), checked."""
        known = {f.name: f for f in fields(cls)}
        values = {
            k: _coerce(k, v, known[k].type) for k, v in data.items() if k in known and v is not None
        }
        return cls(**values).validate()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeclaredField:
    """One RunSpec field as declared: what the CLI flags, forms and validation read."""

    name: str
    type: type  # int, float or str; ``optional`` says whether None (unset) is allowed
    optional: bool
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    pattern: re.Pattern[str] | None = None
    expected: str | None = None
    modes: tuple[str, ...] | None = None  # the spec modes that use it; None: every mode
    sweeps: bool = False  # a flag may list values, one run each

    def used_in(self, mode: str) -> bool:
        """Whether a run of spec mode ``mode`` reads this field."""
        return self.modes is None or mode in self.modes


_BASE_TYPES = {"int": int, "float": float, "str": str}


def _declared(spec_field_: Any, default: Any) -> DeclaredField:
    annotation = str(spec_field_.type)
    base = annotation.split("|")[0].strip()
    meta = spec_field_.metadata
    return DeclaredField(
        name=spec_field_.name,
        type=_BASE_TYPES[base],
        optional="None" in annotation or bool(meta.get("unset")),
        default=default,
        help=meta["help"],
        low=meta["low"],
        high=meta["high"],
        low_open=meta["low_open"],
        high_open=meta["high_open"],
        choices=tuple(meta["choices"]) if meta["choices"] is not None else None,
        pattern=meta["pattern"],
        expected=meta["expected"],
        modes=meta.get("modes"),
        sweeps=bool(meta.get("sweeps")),
    )


@functools.cache
def _declarations(of: type) -> tuple[tuple[DeclaredField, Callable[[], Any] | None], ...]:
    """Each field's declaration, built once per class: validate() checks every field of every
    configuration a preset expands to (a 1,000-configuration sweep rebuilt 26,000 of them).
    A field with a default_factory comes with it, and its default is left None here: that
    default (threads: this machine's cores) is read when declared_fields() is called."""
    declarations: list[tuple[DeclaredField, Callable[[], Any] | None]] = []
    for spec_field_ in fields(of):
        factory = spec_field_.default_factory
        if factory is MISSING:
            declarations.append((_declared(spec_field_, spec_field_.default), None))
        else:
            declarations.append((_declared(spec_field_, None), factory))
    return tuple(declarations)


def declared_fields(of: type = RunSpec) -> tuple[DeclaredField, ...]:
    """Every field of RunSpec (or of another class declared with ``spec_field``, such as
    WorkerOptions) in declaration order, with its type, default, help and constraints."""
    return tuple(
        declared if factory is None else replace(declared, default=factory())
        for declared, factory in _declarations(of)
    )


def declared_option(name: str, of: type = WorkerOptions) -> DeclaredField:
    return next(d for d in declared_fields(of) if d.name == name)


def bounded_option(
    name: str,
    type: type,
    help: str,
    default: Any = None,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> DeclaredField:
    """A command-line-only number (``history list --limit``) declared with the same rules, so
    that it is checked, and refused, like a spec field."""
    return DeclaredField(
        name=name,
        type=type,
        optional=False,
        default=default,
        help=help,
        low=low,
        high=high,
        low_open=low_open,
        high_open=high_open,
    )


def parse_declared(declared: DeclaredField, text: str) -> Any:
    """Command-line text to the declared type, checked against the declaration: the same
    one-line SpecError as the field gets from a preset, a file or a form."""
    try:
        value = declared.type(text)
    except ValueError:
        kind = {int: "a whole number", float: "a number"}.get(declared.type, "text")
        raise SpecError(declared.name, f"{declared.name} must be {kind}, got {text!r}") from None
    check_declared(declared, value)
    return value


def flag_parser(declared: DeclaredField) -> Callable[[str], Any]:
    """An argparse ``type=`` for a declared number: ``--sample-interval nan`` is refused while
    the command line is read, with the line a preset or a form gets. It raises UsageError, which
    is not one of the errors argparse rewords ("argument --x: invalid float value"), so the
    message reaches ``main`` unchanged."""

    def parse(text: str) -> Any:
        try:
            return parse_declared(declared, text)
        except SpecError as exc:
            raise UsageError(str(exc)) from None

    parse.__name__ = declared.name
    return parse


def swept_fields() -> tuple[str, ...]:
    """The fields a flag may list values of (``--batch-size 1,8,64``): one run per value."""
    return tuple(d.name for d in declared_fields() if d.sweeps)


def list_flag_parser(declared: DeclaredField) -> Callable[[str], Any]:
    """An argparse ``type=`` for a declared number: one value as ``flag_parser`` reads it; a
    comma list (``1,8,64``) is a list of them, each checked, where the field sweeps; a field that
    does not is refused in one line naming the fields that do."""
    one = flag_parser(declared) if declared.type in (int, float) else declared.type

    def parse(text: str) -> Any:
        if "," not in text:
            return one(text)
        if not declared.sweeps:
            flag = "--" + declared.name.replace("_", "-")
            listed = ", ".join("--" + n.replace("_", "-") for n in swept_fields())
            raise UsageError(
                f"{flag} takes one value, got {text!r}: a comma list sweeps {listed} only "
                "(a preset's lists sweep any field: presets/README.md)"
            )
        values = [one(part.strip()) for part in text.split(",")]
        return list(dict.fromkeys(values))  # a value listed twice is one run

    parse.__name__ = declared.name
    return parse


def range_text(declared: DeclaredField) -> str:
    """'[0.05, 3600]', '(0, 10]': the declared range as --help shows it."""
    low = "(" if declared.low_open else "["
    high = ")" if declared.high_open else "]"
    return f"{low}{declared.low:g}, {declared.high:g}{high}"


def check_declared(declared: DeclaredField, value: Any) -> None:
    """Raise SpecError, one line naming the field, when ``value`` breaks the declaration."""
    _check_declared(declared, value)


def _check_declared(declared: DeclaredField, value: Any) -> None:
    name = declared.name
    if value is None and declared.optional:
        return
    if declared.type is int:
        _int_range(name, value, int(declared.low), int(declared.high))  # type: ignore[arg-type]
    elif declared.type is float:
        _float_range(
            name,
            value,
            declared.low,  # type: ignore[arg-type]
            declared.high,  # type: ignore[arg-type]
            low_open=declared.low_open,
            high_open=declared.high_open,
        )
    elif declared.choices is not None:
        _choice(name, value, declared.choices)
    elif declared.pattern is not None:
        if not isinstance(value, str) or not declared.pattern.match(value):
            raise SpecError(name, f"{name} must be {declared.expected}, got {value!r}")
    elif not isinstance(value, str):
        raise SpecError(name, f"{name} must be {declared.expected or 'text'}, got {value!r}")


def _quoted(value: Any) -> str:
    """'caffe' for a plain word; repr() for anything that could break the one-line message."""
    if isinstance(value, str) and value.isprintable() and "'" not in value:
        return f"'{value}'"
    return repr(value)


def _choice(name: str, value: Any, allowed: Iterable[str]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise SpecError(
            name, f"{name} {_quoted(value)} is not known (choose: {', '.join(allowed)})"
        )


def _int_range(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(name, f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise SpecError(name, f"{name} must be between {low} and {high}, got {value}")


def _float_range(
    name: str, value: Any, low: float, high: float, low_open: bool = False, high_open: bool = False
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(name, f"{name} must be a number, got {value!r}")
    # Written as "inside the range" so that NaN, which compares false to everything, is refused.
    above_low = value > low if low_open else value >= low
    below_high = value < high if high_open else value <= high
    if not (above_low and below_high):
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        raise SpecError(name, f"{name} must be in {lo}{low}, {high}{hi}, got {value}")


# -- bounded parsing ------------------------------------------------------------------------------
def read_input(path: os.PathLike[str] | str, limit: int = MAX_INPUT_BYTES) -> str:
    """A spec, preset or config file's text, refused (ValueError, one line) past ``limit`` bytes
    without reading more than that: a preset pointed at a huge file or a device must not hang.
    OSError and UnicodeDecodeError pass through for the caller to word."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit // 1024} KiB; refused (such files are a few KiB)")
    return data.decode("utf-8")


def _check_size(text: str) -> None:
    if len(text) > MAX_INPUT_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise ValueError(
            f"larger than {MAX_INPUT_BYTES // 1024} KiB; refused (such files are a few KiB)"
        )


def nesting_depth(value: Any) -> int:
    """How many tables/arrays deep ``value`` goes (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        if depth + 1 > MAX_NESTING:
            break  # enough to refuse; no need to walk the rest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _check_nesting(data: Any) -> None:
    if nesting_depth(data) > MAX_NESTING:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep; refused")


def load_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` within the size and nesting bounds; any problem is one-line ValueError."""
    _check_size(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None
    except RecursionError:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep; refused") from None
    _check_nesting(data)
    return data


def load_json(text: str) -> Any:
    """``json.loads`` within the same bounds."""
    _check_size(text)
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep; refused") from None
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    _check_nesting(data)
    return data


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """JSON/TOML give ints where floats are meant (lr = 1); accept that, nothing looser."""
    text = str(annotation)
    if text.startswith("float") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
