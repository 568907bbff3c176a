"""TOML presets: a single run or a sweep, expanded to an ordered list of configurations.

A preset is a TOML file of RunSpec fields plus a few descriptive keys::

    name = "shatnawi-2018-quick"
    description = "..."
    study = "Shatnawi et al. (2018), ..."       # the study it replicates
    repeats = 3                                 # runs per configuration
    model = "cnn"
    threads = [1, 2, 4]                         # a list in any field: one configuration per value
    dataset = ["synthetic-mnist", "synthetic-cifar10"]
    matrix = [{framework = "torch", api = "eager"}, {framework = "mxnet", api = "gluon"}]

Lists expand to their cartesian product; ``matrix`` lists fields that vary *together* (a
framework with its API). Several matrices go under ``[matrix]`` as named lists and multiply too.

A study preset may carry the figures its paper published as ``[[published]]`` tables (see
``engine.results.published``): each is checked like the rest, and a figure about configurations
the preset never runs is an error. A sweep keeps them, and ``compare`` prints them beside ours.

A preset is bounded: the file by the spec's input bounds (1 MiB, 16 levels of nesting), its
expansion by ``MAX_CONFIGURATIONS`` configurations and ``MAX_RUNS`` runs (configurations ×
repeats). The count is the product of the list lengths, taken before anything is expanded, so a
400-byte file whose fields each list ten values is refused at once with its count instead of
filling memory; below the limits, configurations are generated one at a time.

Two kinds of problem, treated differently:
- the preset itself is wrong (bad TOML, an unknown key, threads = 0): ``PresetError``, one line
  naming the file, the key and the problem;
- a configuration this installation cannot run (a framework or dataset not in the catalog, no
  runtime for it, no GPU): the configuration is *skipped* with the reason and the rest runs.
"""

from __future__ import annotations

import difflib
import importlib.util
import itertools
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tui_bench.engine import catalog
from tui_bench.engine.errors import PresetError, did_you_mean
from tui_bench.engine.paths import data_home
from tui_bench.engine.results import published as published_module
from tui_bench.engine.results.published import Figure, FigureError
from tui_bench.engine.spec import (
    GPT_FIELDS,
    RunSpec,
    SpecError,
    check_declared,
    declared_option,
    load_toml,
    read_input,
)

# Far above any study (the largest shipped preset has a few dozen configurations) and still
# quick to check and show: each configuration is validated and probed before a sweep starts.
MAX_CONFIGURATIONS = 10_000
MAX_RUNS = 100_000

META_KEYS = ("name", "description", "study", "matrix", "published")
SPEC_KEYS = tuple(f.name for f in fields(RunSpec))
# Fields whose valid values depend on what this installation's catalog holds.
CATALOG_FIELDS = ("framework", "api", "model", "dataset")


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    study: str
    path: Path
    fixed: dict[str, Any]  # fields with one value
    axes: dict[str, list[Any]]  # fields given as lists
    matrices: list[list[dict[str, Any]]]  # groups of fields that vary together
    repeats: int
    published: tuple[Figure, ...] = ()  # the study's own figures, to print beside ours

    @property
    def shown_path(self) -> str:
        return display_path(self.path)


@dataclass(frozen=True)
class SweepConfig:
    """One configuration of a sweep: a spec, its short key, and whether it can run here."""

    key: str
    spec: RunSpec  # validated when ``skip_reason`` is None
    skip_reason: str | None = None
    oversubscribed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "spec": self.spec.to_dict(),
            "skip_reason": self.skip_reason,
            "oversubscribed": self.oversubscribed,
        }


# -- finding presets ----------------------------------------------------------------------------
def shipped_dir() -> Path | None:
    """The presets shipped with the app: ``<repo>/presets`` in a checkout; an installed wheel
    carries them as the data-only package ``tui_bench_presets`` (found without importing it)."""
    checkout = Path(__file__).resolve().parents[3] / "presets"
    if checkout.is_dir() and any(checkout.glob("*.toml")):
        return checkout
    spec = importlib.util.find_spec("tui_bench_presets")
    if spec and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return None


def user_dir() -> Path:
    """The user's own presets, found by name like the shipped ones (and shadowing them)."""
    return data_home() / "presets"


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        shipped = shipped_dir()
        if shipped is not None and path.resolve().parent == shipped.resolve():
            return f"presets/{path.name}"
        return str(path)


def preset_files() -> dict[str, Path]:
    """Preset name (file stem) → file; user presets shadow shipped ones of the same name."""
    found: dict[str, Path] = {}
    for directory in (shipped_dir(), user_dir()):
        if directory is not None and directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                found[path.stem] = path
    return dict(sorted(found.items()))


def find(name_or_path: str) -> Path:
    """A preset file from a name (shipped or user) or a path to a TOML file."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    files = preset_files()
    if name_or_path in files:
        return files[name_or_path]
    if path.exists():  # a directory, a device, a FIFO: never read as a preset
        raise PresetError(f"preset file {name_or_path} is not a regular file")
    if path.suffix == ".toml" or os.sep in name_or_path:
        raise PresetError(f"preset file {name_or_path} does not exist")
    close = difflib.get_close_matches(name_or_path, list(files), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f" (presets: {', '.join(files) or 'none'})"
    raise PresetError(f"no preset named '{name_or_path}'{hint}")


# -- loading ------------------------------------------------------------------------------------
def load(path: Path) -> Preset:
    shown = display_path(path)
    try:
        text = read_input(path)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and "too large" are ValueErrors
        raise PresetError(f"{shown}: cannot read: {exc}") from None
    return loads(text, path)


def loads(text: str, path: Path) -> Preset:
    """Parse preset text as if it were the file ``path`` (tests, the TUI's preset editor)."""
    try:
        data = load_toml(text)
    except ValueError as exc:
        raise PresetError(f"{display_path(path)}: {exc}") from None
    return parse(data, path)


def parse(data: dict[str, Any], path: Path) -> Preset:
    shown = display_path(path)

    def fail(key: str, problem: str) -> PresetError:
        return PresetError(f"{shown}: {key}: {problem}")

    for key in data:
        if key not in META_KEYS and key not in SPEC_KEYS:
            raise PresetError(f"{shown}: unknown key {key!r}{_suggest(key)}")
    for key in ("name", "description", "study"):
        if key in data and not isinstance(data[key], str):
            raise fail(key, f"must be a string, got {data[key]!r}")
    repeats = data.get("repeats", 1)
    if isinstance(repeats, list):
        raise fail("repeats", "must be one number, not a list")
    fixed: dict[str, Any] = {}
    axes: dict[str, list[Any]] = {}
    for key in SPEC_KEYS:
        if key not in data or key == "repeats":
            continue
        value = data[key]
        if isinstance(value, list):
            if not value:
                raise fail(key, "an empty list expands to no runs")
            for item in value:
                _check_scalar(fail, key, item)
            axes[key] = list(dict.fromkeys(value))  # a value listed twice is one configuration
        else:
            _check_scalar(fail, key, value)
            fixed[key] = value
    matrices = _parse_matrices(data.get("matrix"), set(fixed) | set(axes), fail)
    try:
        figures = published_module.parse_figures(data.get("published"), SPEC_KEYS)
    except FigureError as exc:
        raise PresetError(f"{shown}: {exc}") from None
    preset = Preset(
        name=data.get("name", path.stem),
        description=data.get("description", ""),
        study=data.get("study", ""),
        path=path,
        fixed=fixed,
        axes=axes,
        matrices=matrices,
        repeats=repeats,
        published=tuple(figures),
    )
    try:  # before the count, which multiplies by it
        check_declared(declared_option("repeats", RunSpec), repeats)
    except SpecError as exc:
        raise fail("repeats", _strip_field("repeats", str(exc))) from None
    _check_size(preset, {}, fail)
    # Field values are checked now (threads = 0 is an error in every installation); catalog
    # names are checked per configuration at expansion, where unknown ones become skips.
    for config in _raw_configs(preset, {}):
        _check_fields(config, fail)
    _check_figures(preset, fail)
    return preset


def _check_figures(preset: Preset, fail) -> None:
    """Each published figure must be about configurations the preset runs (a misspelt api
    would otherwise show as "not run here" for ever)."""
    defaults = RunSpec().to_dict()
    missing = published_module.unmatched(
        list(preset.published),
        lambda: ({**defaults, **config} for config in _raw_configs(preset, {})),
    )
    if missing is not None:
        index, side, conditions = missing
        wanted = ", ".join(f"{k}={v!r}" for k, v in conditions.items())
        raise fail(f"published[{index}].{side}", f"no configuration of this preset has {wanted}")


def _suggest(key: str) -> str:
    return did_you_mean(key, [*SPEC_KEYS, *META_KEYS])


def _check_scalar(fail, key: str, value: Any) -> None:
    if isinstance(value, (dict, list)):
        raise fail(key, f"must be a single value or a list of values, got {value!r}")


def _parse_matrices(raw: Any, top_level: set[str], fail) -> list[list[dict[str, Any]]]:
    if raw is None:
        return []
    named = raw if isinstance(raw, dict) else {"": raw}
    matrices: list[list[dict[str, Any]]] = []
    for name, entries in named.items():
        where = f"matrix.{name}" if name else "matrix"
        if not isinstance(entries, list) or not entries:
            raise fail(where, 'must be a non-empty list of tables, e.g. [{framework = "NAME"}]')
        seen_keys: set[str] = set()
        for index, entry in enumerate(entries):
            at = f"{where}[{index}]"
            if not isinstance(entry, dict):
                raise fail(at, f"must be a table of spec fields, got {entry!r}")
            for key, value in entry.items():
                if key not in SPEC_KEYS or key == "repeats":
                    raise fail(at, f"unknown key {key!r}{_suggest(key)}")
                if key in top_level:
                    raise fail(at, f"'{key}' is also set at the top level; set it in one place")
                _check_scalar(fail, f"{at}.{key}", value)
            seen_keys |= set(entry)
        for other in matrices:
            shared = seen_keys & {k for entry in other for k in entry}
            if shared:
                raise fail(where, f"'{sorted(shared)[0]}' is set in two matrices")
        matrices.append(entries)
    return matrices


def configuration_count(preset: Preset, overrides: dict[str, Any] | None = None) -> int:
    """How many configurations the preset expands to (before duplicates an override may make are
    merged), computed from the list lengths alone: nothing is expanded."""
    overrides = overrides or {}
    lengths = [len(v) for k, v in preset.axes.items() if k not in overrides]
    lengths += [len(matrix) for matrix in preset.matrices]
    return math.prod(lengths)


def _check_size(preset: Preset, overrides: dict[str, Any], fail) -> None:
    """Refuse, by count and before expanding, a preset past MAX_CONFIGURATIONS or MAX_RUNS."""
    count = configuration_count(preset, overrides)
    if count > MAX_CONFIGURATIONS:
        axes = " × ".join(
            [f"{len(v)} {k}" for k, v in preset.axes.items() if k not in overrides]
            + [f"{len(m)} matrix entries" for m in preset.matrices]
        )
        raise fail(
            "configurations",
            f"expands to {count:,} configurations ({axes}), more than the limit of "
            f"{MAX_CONFIGURATIONS:,}; split it into smaller presets",
        )
    repeats = overrides.get("repeats", preset.repeats)
    if isinstance(repeats, int) and count * repeats > MAX_RUNS:
        raise fail(
            "repeats",
            f"{count:,} configurations × {repeats:,} repeats is {count * repeats:,} runs, more "
            f"than the limit of {MAX_RUNS:,}",
        )


def _raw_configs(preset: Preset, overrides: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Field dicts in sweep order, one at a time: the first axis varies slowest, matrix entries
    fastest. Callers check ``_check_size`` first: this is only ever iterated below the limits."""
    axes = {k: v for k, v in preset.axes.items() if k not in overrides}
    matrices = [
        [{k: v for k, v in entry.items() if k not in overrides} for entry in matrix]
        for matrix in preset.matrices
    ]
    seen: set[str] = set()
    for values in itertools.product(*axes.values(), *matrices):
        fields_: dict[str, Any] = {**preset.fixed}
        fields_.update(zip(axes, values[: len(axes)], strict=True))
        for entry in values[len(axes) :]:
            fields_.update(entry)
        fields_.update(overrides)
        fields_["repeats"] = overrides.get("repeats", preset.repeats)
        identity = repr(sorted(fields_.items()))
        if identity not in seen:  # an override can make configurations identical
            seen.add(identity)
            yield fields_


def _check_fields(config: dict[str, Any], fail) -> RunSpec:
    """Build the spec and validate every field that does not depend on the catalog."""
    try:
        spec = RunSpec.from_dict(config, validate=False)
        defaults = RunSpec()
        catalog_free = {f: getattr(defaults, f) for f in CATALOG_FIELDS}
        # The gpt's size settings belong to the model, which is a catalog field: checked with
        # it, per configuration, at expansion; their declared ranges are checked now.
        for name in GPT_FIELDS:
            check_declared(declared_option(name, RunSpec), getattr(spec, name))
        catalog_free.update(dict.fromkeys(GPT_FIELDS))
        if spec.mode == "generate":  # the gpt's alone, checked with the model at expansion;
            for name in ("prompt_tokens", "new_tokens"):  # an inference run's rules meanwhile
                check_declared(declared_option(name, RunSpec), getattr(spec, name))
            catalog_free.update(mode="inference", prompt_tokens=None, new_tokens=None)
        spec.with_changes(**catalog_free).validate()
    except SpecError as exc:
        raise fail(exc.field, _strip_field(exc.field, str(exc))) from None
    except TypeError as exc:
        raise fail("spec", str(exc)) from None
    return spec


def _strip_field(name: str, message: str) -> str:
    return message[len(name) + 1 :] if message.startswith(name + " ") else message


# -- expansion ----------------------------------------------------------------------------------
def gpu_problem(spec: RunSpec) -> str | None:
    """Why this machine has not the GPU(s) a GPU spec names, or None (a CPU spec: None). NVML
    is the judge, as in the Setup screen's device list: a run refused here never starts a peak
    probe or a worker that could only fail."""
    if not spec.device.startswith("gpu"):
        return None
    from tui_bench.engine.machine.sysinfo import machine_fingerprint

    index = int(spec.device.split(":")[1]) if ":" in spec.device else 0
    gpus = machine_fingerprint().get("gpus") or []
    if index >= len(gpus):
        return f"no GPU {index} on this machine (NVML found {len(gpus)})"
    if spec.workers > 1 and spec.workers > len(gpus):
        # One GPU per worker: NCCL refuses two ranks on one device.
        return f"{spec.workers} workers need {spec.workers} GPUs (NVML found {len(gpus)})"
    return None


def availability_problem(spec: RunSpec) -> str | None:
    """Why this installation cannot run a catalog-valid spec right now, or None: no GPU, no
    runtime, or a real dataset not in the cache (each with what fixes it)."""
    from tui_bench.engine import datasets
    from tui_bench.engine.machine import runtimes

    if missing := gpu_problem(spec):
        return missing
    try:
        runtimes.resolve(spec.framework, spec.api)
    except runtimes.RuntimeUnavailable as exc:
        return str(exc)
    return datasets.problem(spec)


def catalog_problem(spec: RunSpec) -> str | None:
    """Why the catalog of this installation does not know this spec, or None."""
    if spec.framework not in catalog.FRAMEWORKS:
        return (
            f"framework '{spec.framework}' is not available in this installation "
            f"(installed adapters: {', '.join(catalog.FRAMEWORKS)})"
        )
    if spec.dataset not in catalog.DATASETS:
        return f"dataset '{spec.dataset}' is not available in this installation"
    try:
        spec.validate()
    except SpecError as exc:
        return str(exc)
    return None


def expand(
    preset: Preset,
    overrides: dict[str, Any] | None = None,
    probe=availability_problem,
    only: Sequence[str] = (),
) -> list[SweepConfig]:
    """The preset's configurations in sweep order, each with its skip reason if it cannot run.

    ``overrides`` (command-line flags) replace a field everywhere, lists and matrices included.
    ``probe`` checks what this machine can run; pass ``None`` to check the catalog only.
    ``only`` (``FRAMEWORK`` or ``FRAMEWORK/API`` each, as ``run --only``) keeps the
    configurations one of them names, as asv's ``-b`` picks benchmarks; their keys are the
    whole preset's, and the others' runtimes are not probed."""
    overrides = dict(overrides or {})
    fail = _failer(preset)
    _check_size(preset, overrides, fail)
    raw = list(_raw_configs(preset, overrides))
    specs = [_check_fields(c, fail) for c in raw]
    varying = [k for k in SPEC_KEYS if k != "repeats" and len({repr(c.get(k)) for c in raw}) > 1]
    _check_only(only, specs, preset.name)
    logical = os.cpu_count() or 1
    configs = []
    for fields_, spec in zip(raw, specs, strict=True):
        if only and not any(_names(wanted, spec) for wanted in only):
            continue
        key = " ".join(f"{k}={fields_.get(k, getattr(spec, k))}" for k in varying)
        reason = catalog_problem(spec)
        if reason is None and probe is not None:
            reason = probe(spec)
        configs.append(
            SweepConfig(
                key=key or spec.label(),
                spec=spec,
                skip_reason=reason,
                oversubscribed=spec.threads * spec.workers > logical,
            )
        )
    return configs


def _names(wanted: str, spec: RunSpec) -> bool:
    framework, _, api = wanted.partition("/")
    return spec.framework == framework and api in ("", spec.api)


def _check_only(only: Sequence[str], specs: list[RunSpec], preset: str) -> None:
    """Each name of ``only`` picks a configuration of the preset, else one line that lists
    what would."""
    for wanted in only:
        if not any(_names(wanted, spec) for spec in specs):
            offered = sorted({f"{spec.framework}/{spec.api}" for spec in specs})
            raise PresetError(
                f"--only {wanted}: no configuration of {preset} is {wanted} "
                f"(it has {', '.join(offered)})"
            )


def _failer(preset: Preset):
    def fail(key: str, problem: str) -> PresetError:
        return PresetError(f"{preset.shown_path}: {key}: {problem}")

    return fail


def interleave(configs: list[SweepConfig], repeats: int) -> list[tuple[SweepConfig, int]]:
    """(configuration, repeat) in run order: A B C A B C …, so drift over the sweep's duration
    spreads over every configuration instead of masquerading as a difference between them."""
    runnable = [c for c in configs if c.skip_reason is None]
    return [(config, repeat) for repeat in range(repeats) for config in runnable]
