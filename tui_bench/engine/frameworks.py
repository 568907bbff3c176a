"""Frameworks as plugins: what the engine knows of each framework, read from its manifest.

A framework is one package (in-tree: ``adapters/torch/``, ``adapters/mxnet/``...; or any installed
distribution's) that holds its adapter (the worker side: ``adapters/backend.py`` is the contract)
and a ``manifest.toml`` (the app side, read here by path, never imported). Every framework, the
in-tree ones too, registers through the entry-point group ``tui_bench.frameworks``::

    [project.entry-points."tui_bench.frameworks"]
    numpy-mlp = "numpy_mlp"          # the framework's name = the package that holds its manifest

The engine finds each entry point's package without importing it (``importlib.util.find_spec``)
and reads its ``manifest.toml``; nothing in the engine names a framework. A plugin whose manifest
is missing or wrong is one line in ``problems()`` and is left out; the others still load.

The manifest (TOML; keys not marked required may be left out)::

    name = "torch"                  # required: the --framework value; the entry point's name
    label = "PyTorch"               # required: the display name
    order = 10                      # where it is listed (lower first; default 100, then by name)
    adapter = "adapter.py"          # the module with make_backend(api, device, threads)
    runtime = "torch"               # the runtime its APIs run in (see runtimes below; "app" is
                                    # the interpreter tui-bench itself runs in)
    imports = ["torch"]             # what a runtime must import for it (checked by the probe)
    thread_env = ["OMP_NUM_THREADS"]  # set to the run's thread count before the import
    pin_affinity = false            # only CPU affinity bounds its threads: pin the worker
    env_prefixes = ["TORCH_"]       # the user's variables with these prefixes reach the worker
    build_env = { XLA_FLAGS = "--xla_backend_optimization_level=0" }  # appended for a worker
                                    # that only builds (a dry run, an equity probe): it times
                                    # nothing, so it may compile for speed of compilation
    hardware_probe = "probe.py"     # a script of the package that measures the machine's peaks
    peak_probe = { api = "graph", kernel = "tensorflow" }  # its matmul joins the measured peak:
                                    # timed by the hardware probe (--framework KERNEL) in that
                                    # API's runtime; the best of every such framework's wins
    unavailable = "why"             # listed (for the studies that used it), never run

    [language]                      # the framework card
    core = "C++, CUDA"
    interfaces = "Python, C++"

    [data_parallel]                 # how workers > 1 start (an API offers it with data_parallel)
    launch = "launcher"             # "launcher": a script of the package starts the ranks
                                    # (launcher, launcher_args; {port} {workers} filled in; the
                                    # worker command follows); "peers": rank 0 starts its peers;
                                    # "devices": one process drives N devices
    cpu_env = { XLA_FLAGS = "--xla_force_host_platform_device_count={workers}" }

    [apis.eager]                    # required: one table per API, in the order they are shown
    label = "eager nn.Module"
    runtime = "..."                 # this API's own runtime (default: the framework's)
    imports = ["..."]               # this API's imports (default: the framework's)
    env = { KERAS_BACKEND = "torch" }   # set before the import
    pin_affinity = true             # this API only honours CPU affinity
    precisions_cpu = ["fp32", "bf16"]   # default ["fp32"]
    precisions_gpu = ["fp32", "tf32", "amp-fp16", "bf16"]   # default ["fp32"]
    inputs = ["host", "device"]     # default ["host"]
    timings = ["synced", "pipelined"]   # default both
    compiles = "no (eager)"         # how it compiles, stated
    data_parallel = "DDP ..."       # its engine for workers > 1 (absent: it refuses them)
    modes = ["train", "inference"]  # default ["train"]; "generate" for an API that generates
    why_not = { precision = "...", workers = "..." }    # the reasons, for one-line refusals
    unsupported = { lstm = "why" }  # models this API cannot express

    [runtimes.torch]                # a managed runtime `tui-bench runtime setup torch` installs
    packages = ["torch==2.13.0", "numpy"]
    modules = ["torch"]             # what its probe imports
    description = "PyTorch 2.13 (CPU build)"
    max_python = "3.11"             # newest Python its pinned wheels exist for
    gpu_packages = ["..."]          # its CUDA variant (--gpu), or
    gpu_note = "..."                # why there is none
    probe_env = { KERAS_BACKEND = "torch" }   # for its probes; {cache} is tui-bench's cache

A runtime is declared once, by one manifest, and any framework may run in it by name.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine.paths import adapters_dir

GROUP = "tui_bench.frameworks"
MANIFEST_NAME = "manifest.toml"
# The runtime name for the interpreter tui-bench itself runs in (a plugin with no runtime of its own).
APP_RUNTIME = "app"

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
LAUNCHES = ("launcher", "peers", "devices")


@dataclass(frozen=True)
class Capabilities:
    """What one framework/API can run. A combination outside these is refused before any
    process starts, with the reason (``catalog.setting_problem``). The defaults are what an
    adapter without the optional settings hooks runs (fp32, host input): a new framework starts
    there."""

    precisions_cpu: tuple[str, ...] = ("fp32",)
    precisions_gpu: tuple[str, ...] = ("fp32",)
    inputs: tuple[str, ...] = ("host",)
    timings: tuple[str, ...] = TIMINGS
    # How the API compiles, stated, never "auto": the worker records the value it resolved.
    compiles: str = "not stated"
    # The framework's own data-parallel engine for workers > 1 (e.g. "torch.distributed DDP"),
    # or None: such an API refuses workers > 1 before anything starts.
    data_parallel: str | None = None
    # What the API can measure: an adapter offers inference once it has ``predict``.
    modes: tuple[str, ...] = ("train",)
    # Why a setting is missing, for the one-line refusal: {"precision": "...", "input": "..."}.
    why_not: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DataParallel:
    """How a framework's workers > 1 start (``[data_parallel]``)."""

    launch: str | None = None  # "launcher", "peers", "devices" (LAUNCHES), or None
    launcher: Path | None = None  # "launcher": the script that starts the ranks
    launcher_args: tuple[str, ...] = ()  # its arguments; {port} and {workers} filled in
    cpu_env: dict[str, str] = field(default_factory=dict)  # appended for a CPU run


@dataclass(frozen=True)
class Framework:
    """One framework, as its manifest declares it."""

    name: str
    label: str
    apis: tuple[str, ...]
    runtime: str  # default runtime name
    import_name: str  # what a runtime must be able to import
    # The module the worker imports for make_backend, and the package it lives in (the worker
    # loads a package outside ``adapters/`` by path, under its own name): "" when unavailable.
    adapter: str = ""
    package_dir: Path | None = None
    adapter_file: Path | None = None
    # Environment variables that set the CPU thread count; they must be in place before import.
    thread_env: tuple[str, ...] = ()
    # Frameworks that only honour CPU affinity get pinned to the first N CPUs.
    pin_affinity: bool = False
    # Per-API runtime overrides (e.g. the Estimator needs a legacy TensorFlow).
    api_runtimes: dict[str, str] = field(default_factory=dict)
    # (api, model) pairs the API cannot express, with the reason.
    unsupported: dict[tuple[str, str], str] = field(default_factory=dict)
    api_labels: dict[str, str] = field(default_factory=dict)
    # Per-API environment for the worker, set before the framework is imported.
    api_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # APIs that only honour CPU affinity, on top of ``pin_affinity``.
    api_pin_affinity: tuple[str, ...] = ()
    # Per-API modules a runtime must import, when they differ from ``import_name``.
    api_imports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Why no runtime for it can exist here (listed for the studies that used it, never run).
    unavailable: str | None = None
    # Per-API capabilities (precision, input path, timing, compilation); missing: the defaults.
    capabilities: dict[str, Capabilities] = field(default_factory=dict)
    # The framework card's language facts: (core, interfaces).
    language: tuple[str, str] | None = None
    data_parallel: DataParallel = field(default_factory=DataParallel)
    # Prefixes of the user's variables that reach its worker (and are recorded with the run).
    env_prefixes: tuple[str, ...] = ()
    # Appended to the environment of a worker that only builds (dry runs, build probes): no
    # figure comes from it, so its compiler may favour compile time (e.g. XLA's -O0).
    build_env: dict[str, str] = field(default_factory=dict)
    hardware_probe: Path | None = None
    # (api, kernel): the hardware probe times this framework's matmul in that API's runtime.
    peak_probe: tuple[str, str] | None = None
    # Where it came from: "distribution: entry point" (for the one-line problems).
    source: str = ""
    order: int = 100  # where it is listed among the frameworks (lower first, then by name)

    def capabilities_for(self, api: str) -> Capabilities:
        return self.capabilities.get(api, Capabilities())

    def pins_affinity(self, api: str) -> bool:
        return self.pin_affinity or api in self.api_pin_affinity

    def imports_for(self, api: str) -> tuple[str, ...]:
        return self.api_imports.get(api, (self.import_name,))


@dataclass(frozen=True)
class ManagedRuntime:
    """A runtime ``tui-bench runtime setup NAME`` can install (``[runtimes.NAME]``)."""

    name: str
    packages: tuple[str, ...]
    # What the probe imports to check the runtime works; versions are read from these modules.
    modules: tuple[str, ...]
    description: str
    max_python: tuple[int, int] | None = None  # newest Python the pinned wheels exist for
    gpu_packages: tuple[str, ...] | None = None  # the CUDA variant, where the project ships one
    gpu_note: str = ""
    # Environment for its probes ({cache}: tui-bench's cache directory).
    probe_env: dict[str, str] = field(default_factory=dict)
    owner: str = ""  # the framework whose manifest declares it


class ManifestError(ValueError):
    """A manifest that cannot be used: one line naming the file and the key."""


@dataclass(frozen=True)
class Registry:
    frameworks: dict[str, Framework]
    runtimes: dict[str, ManagedRuntime]
    problems: tuple[str, ...]


# -- reading one manifest ---------------------------------------------------------------------
def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ManifestError(f"{where}: expected a string, got {value!r}")
    return value


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected a table, got {value!r}")
    return value


def _string_table(value: Any, where: str) -> dict[str, str]:
    table = _table(value, where)
    return {k: _text(v, f"{where}.{k}") for k, v in table.items()}


def _subset(values: tuple[str, ...], allowed: tuple[str, ...], where: str) -> tuple[str, ...]:
    wrong = [v for v in values if v not in allowed]
    if wrong:
        raise ManifestError(f"{where}: {', '.join(wrong)} (choose from: {', '.join(allowed)})")
    return values


def _check_keys(table: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ManifestError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )


_TOP = {
    "name", "label", "order", "adapter", "runtime", "imports", "thread_env", "pin_affinity",
    "env_prefixes", "build_env", "hardware_probe", "peak_probe", "unavailable", "language",
    "data_parallel", "apis", "runtimes",
}  # fmt: skip
_API = {
    "label", "runtime", "imports", "env", "pin_affinity", "precisions_cpu", "precisions_gpu",
    "inputs", "timings", "compiles", "data_parallel", "modes", "why_not", "unsupported",
}  # fmt: skip
_RUNTIME = {
    "packages", "modules", "description", "max_python", "gpu_packages", "gpu_note", "probe_env",
}  # fmt: skip


def _package_file(package_dir: Path, value: Any, where: str) -> Path:
    name = _text(value, where)
    path = (package_dir / name).resolve()
    if not path.is_relative_to(package_dir.resolve()) or not path.is_file():
        raise ManifestError(f"{where}: {name!r} is not a file of the package ({package_dir})")
    return path


def _capabilities(api: dict[str, Any], where: str) -> Capabilities:
    defaults = Capabilities()
    return Capabilities(
        precisions_cpu=_subset(
            _strings(
                api.get("precisions_cpu", list(defaults.precisions_cpu)), f"{where}.precisions_cpu"
            ),
            PRECISIONS,
            f"{where}.precisions_cpu",
        ),
        precisions_gpu=_subset(
            _strings(
                api.get("precisions_gpu", list(defaults.precisions_gpu)), f"{where}.precisions_gpu"
            ),
            PRECISIONS,
            f"{where}.precisions_gpu",
        ),
        inputs=_subset(
            _strings(api.get("inputs", list(defaults.inputs)), f"{where}.inputs"),
            INPUTS,
            f"{where}.inputs",
        ),
        timings=_subset(
            _strings(api.get("timings", list(defaults.timings)), f"{where}.timings"),
            TIMINGS,
            f"{where}.timings",
        ),
        compiles=_text(api.get("compiles", defaults.compiles), f"{where}.compiles"),
        data_parallel=(
            _text(api["data_parallel"], f"{where}.data_parallel")
            if "data_parallel" in api
            else None
        ),
        modes=_subset(
            _strings(api.get("modes", list(defaults.modes)), f"{where}.modes"),
            SPEC_MODES,
            f"{where}.modes",
        ),
        why_not=_string_table(api.get("why_not", {}), f"{where}.why_not"),
    )


def _order(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ManifestError(f"{where}: expected an integer, got {value!r}")
    return value


def _python_version(value: Any, where: str) -> tuple[int, int]:
    text = _text(value, where)
    try:
        major, minor = (int(part) for part in text.split("."))
    except ValueError:
        raise ManifestError(f"{where}: expected 'MAJOR.MINOR', got {text!r}") from None
    return major, minor


def _runtime(name: str, table: Any, owner: str, where: str) -> ManagedRuntime:
    table = _table(table, where)
    _check_keys(table, _RUNTIME, where)
    return ManagedRuntime(
        name=name,
        packages=_strings(table.get("packages"), f"{where}.packages"),
        modules=_strings(table.get("modules"), f"{where}.modules"),
        description=_text(table.get("description", ""), f"{where}.description"),
        max_python=(
            _python_version(table["max_python"], f"{where}.max_python")
            if "max_python" in table
            else None
        ),
        gpu_packages=(
            _strings(table["gpu_packages"], f"{where}.gpu_packages")
            if "gpu_packages" in table
            else None
        ),
        gpu_note=_text(table.get("gpu_note", ""), f"{where}.gpu_note"),
        probe_env=_string_table(table.get("probe_env", {}), f"{where}.probe_env"),
        owner=owner,
    )


def read_manifest(
    package_dir: Path, worker_package: str, source: str = ""
) -> tuple[Framework, list[ManagedRuntime]]:
    """The framework and the runtimes the manifest in ``package_dir`` declares, or a one-line
    ManifestError. ``worker_package`` is the name the worker imports the package under."""
    path = package_dir / MANIFEST_NAME
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ManifestError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not valid TOML ({exc})") from None
    where = str(path)
    _check_keys(raw, _TOP, where)
    name = _text(raw.get("name"), f"{where}: name")
    label = _text(raw.get("label"), f"{where}: label")
    apis_raw = _table(raw.get("apis"), f"{where}: apis")
    if not apis_raw:
        raise ManifestError(f"{where}: apis: a framework needs at least one API")
    unavailable = raw.get("unavailable")
    imports = _strings(raw.get("imports", [name]), f"{where}: imports")
    if not imports:
        raise ManifestError(f"{where}: imports: name at least one module")
    apis: list[str] = []
    labels: dict[str, str] = {}
    api_runtimes: dict[str, str] = {}
    api_env: dict[str, dict[str, str]] = {}
    api_imports: dict[str, tuple[str, ...]] = {}
    api_pins: list[str] = []
    capabilities: dict[str, Capabilities] = {}
    unsupported: dict[tuple[str, str], str] = {}
    for api, table in apis_raw.items():
        at = f"{where}: apis.{api}"
        table = _table(table, at)
        _check_keys(table, _API, at)
        apis.append(api)
        labels[api] = _text(table.get("label", api), f"{at}.label")
        if "runtime" in table:
            api_runtimes[api] = _text(table["runtime"], f"{at}.runtime")
        if "env" in table:
            api_env[api] = _string_table(table["env"], f"{at}.env")
        if "imports" in table:
            api_imports[api] = _strings(table["imports"], f"{at}.imports")
        if table.get("pin_affinity", False) is True:
            api_pins.append(api)
        if set(table) & (
            _API - {"label", "runtime", "imports", "env", "pin_affinity", "unsupported"}
        ):
            capabilities[api] = _capabilities(table, at)
        for model, why in _string_table(table.get("unsupported", {}), f"{at}.unsupported").items():
            unsupported[(api, model)] = why
    adapter_file = None
    if unavailable is None:
        adapter_file = _package_file(
            package_dir, raw.get("adapter", "adapter.py"), f"{where}: adapter"
        )
    language = None
    if "language" in raw:
        lang = _string_table(raw["language"], f"{where}: language")
        language = (lang.get("core", ""), lang.get("interfaces", ""))
    dp_raw = _table(raw.get("data_parallel", {}), f"{where}: data_parallel")
    _check_keys(
        dp_raw, {"launch", "launcher", "launcher_args", "cpu_env"}, f"{where}: data_parallel"
    )
    launch = dp_raw.get("launch")
    if launch is not None:
        _subset(
            (_text(launch, f"{where}: data_parallel.launch"),),
            LAUNCHES,
            f"{where}: data_parallel.launch",
        )
    launcher = None
    if launch == "launcher":
        launcher = _package_file(
            package_dir, dp_raw.get("launcher"), f"{where}: data_parallel.launcher"
        )
    data_parallel = DataParallel(
        launch=launch,
        launcher=launcher,
        launcher_args=_strings(
            dp_raw.get("launcher_args", []), f"{where}: data_parallel.launcher_args"
        ),
        cpu_env=_string_table(dp_raw.get("cpu_env", {}), f"{where}: data_parallel.cpu_env"),
    )
    hardware_probe = None
    if "hardware_probe" in raw:
        hardware_probe = _package_file(
            package_dir, raw["hardware_probe"], f"{where}: hardware_probe"
        )
    peak_probe: tuple[str, str] | None = None
    if "peak_probe" in raw:
        probe_raw = _string_table(raw["peak_probe"], f"{where}: peak_probe")
        probe_api, kernel = probe_raw.get("api", ""), probe_raw.get("kernel", "")
        if probe_api not in apis or not kernel or set(probe_raw) - {"api", "kernel"}:
            raise ManifestError(
                f"{where}: peak_probe needs api (one of {', '.join(apis)}) and kernel, no more"
            )
        peak_probe = (probe_api, kernel)
    framework = Framework(
        name=name,
        label=label,
        apis=tuple(apis),
        runtime=_text(raw.get("runtime", name), f"{where}: runtime"),
        import_name=imports[0],
        adapter=f"{worker_package}.{adapter_file.stem}" if adapter_file else "",
        package_dir=package_dir,
        adapter_file=adapter_file,
        thread_env=_strings(raw.get("thread_env", []), f"{where}: thread_env"),
        pin_affinity=raw.get("pin_affinity", False) is True,
        api_runtimes=api_runtimes,
        unsupported=unsupported,
        api_labels=labels,
        api_env=api_env,
        api_pin_affinity=tuple(api_pins),
        api_imports=api_imports,
        unavailable=_text(unavailable, f"{where}: unavailable")
        if unavailable is not None
        else None,
        capabilities=capabilities,
        language=language,
        data_parallel=data_parallel,
        env_prefixes=_strings(raw.get("env_prefixes", []), f"{where}: env_prefixes"),
        build_env=_string_table(raw.get("build_env", {}), f"{where}: build_env"),
        hardware_probe=hardware_probe,
        peak_probe=peak_probe,
        source=source,
        order=_order(raw.get("order", 100), f"{where}: order"),
    )
    runtimes_raw = _table(raw.get("runtimes", {}), f"{where}: runtimes")
    managed = [
        _runtime(rt, table, name, f"{where}: runtimes.{rt}") for rt, table in runtimes_raw.items()
    ]
    return framework, managed


# -- discovery --------------------------------------------------------------------------------
def _package_dir(value: str) -> Path:
    """Where the entry point's package is, found without importing it."""
    try:
        spec = importlib.util.find_spec(value)
    except (ImportError, ValueError) as exc:
        raise ManifestError(f"package {value!r} cannot be found ({exc})") from None
    if spec is None or not spec.submodule_search_locations:
        raise ManifestError(f"{value!r} is not an installed package")
    return Path(next(iter(spec.submodule_search_locations)))


def _worker_package(package_dir: Path, value: str) -> str:
    """The name the worker imports the package under: ``adapters.<pkg>`` for one of the tree the
    worker loads itself, else the package's own import name (loaded by path in the worker)."""
    try:
        inside = package_dir.resolve().relative_to(adapters_dir().resolve())
    except (ValueError, FileNotFoundError):
        return value
    return ".".join(("adapters", *inside.parts))


def entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=GROUP))


def load(points: list[importlib.metadata.EntryPoint] | None = None) -> Registry:
    """Every framework registered in the environment, the runtimes their manifests declare, and
    one line per plugin that could not be used (left out; the others still load)."""
    frameworks: dict[str, Framework] = {}
    runtimes: dict[str, ManagedRuntime] = {}
    problems: list[str] = []
    points = entry_points() if points is None else points
    # tui-bench's own frameworks first: a plugin cannot take the name of one of them.
    points = sorted(points, key=lambda point: getattr(point.dist, "name", "") != "tui-bench")
    for point in points:
        dist = getattr(point.dist, "name", None) or "?"
        source = f"{dist}: {point.name} = {point.value}"
        try:
            package_dir = _package_dir(point.value)
            framework, managed = read_manifest(
                package_dir, _worker_package(package_dir, point.value), source
            )
            if framework.name != point.name:
                raise ManifestError(
                    f"{package_dir / MANIFEST_NAME}: name {framework.name!r} differs from its "
                    f"entry point's {point.name!r}"
                )
            if framework.name in frameworks:
                raise ManifestError(
                    f"framework {framework.name!r} is already registered by "
                    f"{frameworks[framework.name].source}"
                )
            taken = [rt.name for rt in managed if rt.name in runtimes or rt.name == APP_RUNTIME]
            if taken:
                raise ManifestError(f"runtime {taken[0]!r} is already declared elsewhere")
        except ManifestError as exc:
            problems.append(f"framework plugin {source}: {exc}")
            continue
        frameworks[framework.name] = framework
        runtimes.update({rt.name: rt for rt in managed})
    if not frameworks and not problems:
        problems.append(
            f"no framework is registered (entry-point group {GROUP}): is tui-bench installed "
            "in this environment (pip install -e .)?"
        )
    listed = sorted(frameworks.values(), key=lambda fw: (fw.order, fw.name))
    owners = [fw.name for fw in listed]
    ordered = sorted(runtimes.values(), key=lambda rt: owners.index(rt.owner))
    return Registry(
        {fw.name: fw for fw in listed}, {rt.name: rt for rt in ordered}, tuple(problems)
    )


@functools.cache
def registry() -> Registry:
    """``load()``, once per process."""
    return load()


def problems() -> tuple[str, ...]:
    """One line per framework plugin that could not be used."""
    return registry().problems
