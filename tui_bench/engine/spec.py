"""RunSpec: what to run. Validated before any process starts, with one-line, field-named errors."""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import tomli_w

from tui_bench.engine import catalog
from tui_bench.engine.errors import SpecError

MAX_THREADS = 64
_DEVICE = re.compile(r"^(cpu|gpu(:\d+)?)$")


def _default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_THREADS))


@dataclass(frozen=True)
class RunSpec:
    framework: str = "torch"
    api: str = "eager"
    model: str = "cnn"
    dataset: str = "synthetic-mnist"
    device: str = "cpu"
    threads: int = field(default_factory=_default_threads)
    batch_size: int = 128
    epochs: int = 2
    steps_per_epoch: int | None = None  # cap on steps per epoch, for quick runs
    lr: float = 1e-3
    optimizer: str = "adam"
    dropout: float = 0.25
    seed: int = 0
    warmup_steps: int = 5
    repeats: int = 1
    train_samples: int | None = None
    test_samples: int | None = None
    target_accuracy: float | None = None  # stop once validation accuracy reaches it
    data_dir: str | None = None
    # The rules that decide a GPU number (docs/gpu.md), applied in the worker and read back.
    precision: str = "fp32"  # fp32 (strict, TF32 off), tf32, amp-fp16, bf16
    autotune: str = "on"  # cuDNN/XLA algorithm autotuning, one choice for every framework
    input: str = "host"  # host: gather + copy in every timed step; device: split resident
    timing: str = "synced"  # synced: sync per step; pipelined: sync every timing_window steps
    timing_window: int = 10
    # Data-parallel training (docs/scaling.md): N processes/devices under the framework's own
    # engine. weak: batch_size is per worker (global = N x batch_size); strong: batch_size is the
    # global batch, split evenly across the workers. threads is per worker.
    workers: int = 1
    scaling: str = "weak"

    # -- validation ---------------------------------------------------------------------------
    def validate(self) -> RunSpec:
        """Return self, or raise SpecError naming the first bad field."""
        _choice("framework", self.framework, catalog.FRAMEWORKS)
        fw = catalog.FRAMEWORKS[self.framework]
        if self.api not in fw.apis:
            raise SpecError(
                "api",
                f"api '{self.api}' is not available for framework '{self.framework}' "
                f"(choose: {', '.join(fw.apis)})",
            )
        _choice("model", self.model, catalog.MODELS)
        _choice("dataset", self.dataset, catalog.DATASETS)
        if not _DEVICE.match(str(self.device)):
            raise SpecError("device", f"device must be cpu, gpu or gpu:N, got {self.device!r}")
        _int_range("threads", self.threads, 1, MAX_THREADS)
        _int_range("batch_size", self.batch_size, 1, 65536)
        _int_range("epochs", self.epochs, 1, 10_000)
        if self.steps_per_epoch is not None:
            _int_range("steps_per_epoch", self.steps_per_epoch, 1, 10_000_000)
        _float_range("lr", self.lr, 0.0, 10.0, low_open=True)
        _choice("optimizer", self.optimizer, catalog.OPTIMIZERS)
        _float_range("dropout", self.dropout, 0.0, 1.0, high_open=True)
        _int_range("seed", self.seed, 0, 2**32 - 1)
        _int_range("warmup_steps", self.warmup_steps, 0, 100_000)
        _int_range("repeats", self.repeats, 1, 1000)
        for name in ("train_samples", "test_samples"):
            value = getattr(self, name)
            if value is not None:
                _int_range(name, value, 1, 100_000_000)
        if self.train_samples is not None:
            usable = self.train_samples - round(self.train_samples * 0.2)
            if usable < self.batch_size:
                raise SpecError(
                    "train_samples",
                    f"train_samples {self.train_samples} leaves {usable} training samples after the "
                    f"20 % validation split, fewer than one batch of {self.batch_size}",
                )
        if self.target_accuracy is not None:
            _float_range("target_accuracy", self.target_accuracy, 0.0, 1.0, low_open=True)
        if self.data_dir is not None and not isinstance(self.data_dir, str):
            raise SpecError("data_dir", f"data_dir must be a path, got {self.data_dir!r}")
        problem = catalog.combination_problem(self.framework, self.api, self.model, self.dataset)
        if problem:
            raise SpecError("model", problem)
        _choice("precision", self.precision, catalog.PRECISIONS)
        _choice("autotune", self.autotune, catalog.AUTOTUNE)
        _choice("input", self.input, catalog.INPUTS)
        _choice("timing", self.timing, catalog.TIMINGS)
        _int_range("timing_window", self.timing_window, 1, 100_000)
        _int_range("workers", self.workers, 1, 64)
        _choice("scaling", self.scaling, catalog.SCALINGS)
        if self.scaling == "strong" and self.batch_size % self.workers:
            raise SpecError(
                "batch_size",
                f"batch_size {self.batch_size} does not split evenly over {self.workers} workers "
                "(strong scaling keeps the global batch fixed)",
            )
        setting = catalog.setting_problem(
            self.framework,
            self.api,
            self.device,
            self.precision,
            self.input,
            self.timing,
            self.workers,
        )
        if setting:
            raise SpecError(*setting)
        return self

    # -- conversion ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], validate: bool = True) -> RunSpec:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise SpecError(
                unknown[0], f"unknown field '{unknown[0]}' (fields: {', '.join(known)})"
            )
        values = {k: _coerce(k, v, known[k].type) for k, v in data.items()}
        spec = cls(**values)
        return spec.validate() if validate else spec

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    def to_toml(self) -> str:
        # TOML has no null: unset optional fields are simply left out.
        return tomli_w.dumps({k: v for k, v in self.to_dict().items() if v is not None})

    @classmethod
    def from_toml(cls, text: str) -> RunSpec:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError("toml", f"not valid TOML: {exc}") from None
        return cls.from_dict(data)

    def with_changes(self, **changes: Any) -> RunSpec:
        return replace(self, **changes)

    def label(self) -> str:
        """Short human name: 'torch/eager cnn synthetic-mnist cpu×2'."""
        where = f"{self.device}×{self.threads}" if self.device == "cpu" else self.device
        if self.workers > 1:  # threads are per worker: 'cpu×1 ×2 workers (weak)'
            where += f" ×{self.workers} workers ({self.scaling})"
        return f"{self.framework}/{self.api} {self.model} {self.dataset} {where}"


def _choice(name: str, value: Any, allowed) -> None:
    if value not in allowed:
        raise SpecError(name, f"{name} '{value}' is not known (choose: {', '.join(allowed)})")


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
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        raise SpecError(name, f"{name} must be in {lo}{low}, {high}{hi}, got {value}")


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """JSON/TOML give ints where floats are meant (lr = 1); accept that, nothing looser."""
    text = str(annotation)
    if text.startswith("float") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
