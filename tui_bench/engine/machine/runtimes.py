"""Which interpreter runs which framework.

A *runtime* is a Python interpreter that can import one framework. Frameworks' dependencies
conflict (TensorFlow needs numpy>=1.26, MXNet 1.9.1 breaks on numpy>=1.24), so each may live in its
own environment. Resolution order for a runtime name:
1. ``[runtimes.NAME] python = "..."`` in the config file (e.g. a conda env on a GPU box);
2. a managed environment under ``<data home>/runtimes/NAME`` (``TUI_BENCH_RUNTIMES_DIR`` moves it) (``tui-bench runtime setup NAME``);
3. the app's own interpreter, if the framework is installed there (checked without importing it).
A framework whose manifest names the runtime ``app`` always runs in the app's own interpreter.
The managed runtimes (what ``tui-bench runtime setup NAME`` installs) are declared by the
frameworks' manifests (engine/frameworks.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine import catalog, frameworks
from tui_bench.engine.config import ConfigError, load_config
from tui_bench.engine.errors import EXIT_BAD_INPUT, RuntimeSetupError, RuntimeUnavailable
from tui_bench.engine.paths import adapters_dir, cache_home, config_file, runtimes_home


@dataclass(frozen=True)
class Runtime:
    name: str
    python: str
    source: str  # "config", "managed" or "app"


def managed_dir(name: str) -> Path:
    return runtimes_home() / name


def managed_python(name: str) -> Path:
    return managed_dir(name) / "bin" / "python"


def resolve(framework_name: str, api: str) -> Runtime:
    fw = catalog.framework(framework_name)
    if fw.unavailable:
        raise RuntimeUnavailable(f"{fw.label} cannot run here: {fw.unavailable}")
    name = catalog.runtime_for(framework_name, api)
    if name == frameworks.APP_RUNTIME:  # a framework that runs in tui-bench's own interpreter
        return Runtime(name, sys.executable, "app")
    configured = load_config().get("runtimes", {}).get(name, {}).get("python")
    if configured:
        if not Path(configured).exists():
            raise RuntimeUnavailable(
                f"runtime '{name}' points at {configured}, which does not exist (fix the config file)"
            )
        if not Path(configured).is_file() or not os.access(configured, os.X_OK):
            raise RuntimeUnavailable(
                f"runtime '{name}' points at {configured}, which is not an executable "
                "interpreter (fix the config file)"
            )
        return Runtime(name, str(configured), "config")
    managed = managed_python(name)
    if managed.exists():
        return Runtime(name, str(managed), "managed")
    if all(importlib.util.find_spec(module) is not None for module in fw.imports_for(api)):
        return Runtime(name, sys.executable, "app")
    raise RuntimeUnavailable(
        f"{fw.label} is not installed: run `tui-bench runtime setup {name}` "
        f"or set [runtimes.{name}] python in the config file"
    )


# -- managed runtimes -----------------------------------------------------------------------------
# Declared by the frameworks' manifests (``[runtimes.NAME]``, engine/frameworks.py), with their
# known-good pins, measured on this project's machines (shared/FIELD-NOTES.md).
ManagedSpec = frameworks.ManagedRuntime
MANAGED: dict[str, ManagedSpec] = dict(frameworks.registry().runtimes)


def setup_plan(name: str, gpu: bool = False, python: str | None = None) -> list[list[str]]:
    """The commands ``setup`` runs, or a one-line RuntimeSetupError saying why it cannot."""
    if name not in MANAGED:
        raise RuntimeSetupError(
            f"no managed runtime named {name!r} (choose: {', '.join(MANAGED)})",
            exit_code=EXIT_BAD_INPUT,
        )
    spec = MANAGED[name]
    base = python or sys.executable
    version = _python_version(base)
    if spec.max_python and version[:2] > spec.max_python:
        have = ".".join(map(str, version[:2]))
        need = ".".join(map(str, spec.max_python))
        raise RuntimeSetupError(
            f"runtime '{name}' needs Python <= {need} (its pinned wheels do not exist for "
            f"{have}); rerun with --python pointing at a Python {need} interpreter"
        )
    if gpu and spec.gpu_packages is None:
        raise RuntimeSetupError(f"runtime '{name}' has no managed GPU variant: {spec.gpu_note}")
    packages = spec.gpu_packages if gpu and spec.gpu_packages else spec.packages
    target = managed_dir(name)
    venv_python = str(target / "bin" / "python")
    return [
        # No --system-site-packages: the worker must see only this environment's packages.
        [base, "-m", "venv", "--clear", str(target)],
        # --no-compile: pip byte-compiles every file it installs (keras + jax: 20 of 29 s of CPU),
        # most never imported. The runtime's interpreter always runs isolated (-I), so it writes
        # the bytecode of what it does import on first use, the end-of-setup probe included.
        [venv_python, "-m", "pip", "install", "--no-compile", "--progress-bar", "off", *packages],
    ]


def _python_version(python: str) -> tuple[int, int, int]:
    if python == sys.executable:
        return tuple(sys.version_info[:3])  # type: ignore[return-value]
    try:
        out = subprocess.run(
            [python, "-I", "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeSetupError(
            f"--python {python} is not a Python interpreter ({exc})", exit_code=EXIT_BAD_INPUT
        ) from None
    try:
        major, minor, micro = (int(part) for part in out.split())
    except ValueError:  # it ran, but it is not Python (/bin/echo, a shell script)
        raise RuntimeSetupError(
            f"--python {python} is not a Python interpreter (it printed {out[:60]!r})",
            exit_code=EXIT_BAD_INPUT,
        ) from None
    return major, minor, micro


def setup_log_path(name: str) -> Path:
    """Where ``setup`` keeps the full output of its commands (pip's log) for runtime NAME."""
    return cache_home() / "logs" / f"runtime-setup-{name}.log"


def setup(
    name: str,
    gpu: bool = False,
    python: str | None = None,
    on_line: Callable[[str], None] = print,
    log_path: Path | None = None,
) -> Path:
    """Create (or recreate) the managed runtime NAME, streaming pip's output lines to ``on_line``
    and, with ``log_path``, into that file (replaced on each setup).

    Returns the new interpreter. Raises RuntimeSetupError with one line when it cannot; with a
    log, the line ends with where the log is."""
    commands = setup_plan(name, gpu=gpu, python=python)
    target = managed_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    log = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("w", encoding="utf-8")
    see_log = f" (full log: {log_path})" if log_path is not None else ""

    def emit(line: str) -> None:
        if log is not None:
            log.write(line + "\n")
            log.flush()
        on_line(line)

    try:
        for step, command in enumerate(commands, 1):
            emit(f"[{step}/{len(commands)}] {' '.join(command)}")
            last_error = ""
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                )
            except OSError as exc:
                raise RuntimeSetupError(
                    f"cannot run {command[0]}: {exc.strerror}{see_log}"
                ) from None
            assert process.stdout is not None
            for line in process.stdout:
                line = line.rstrip()
                if line.startswith("ERROR"):
                    last_error = line
                emit(line)
            if process.wait() != 0:
                # A half-built environment must not be mistaken for a working runtime.
                shutil.rmtree(target, ignore_errors=True)
                why = last_error or f"exit code {process.returncode}"
                raise RuntimeSetupError(f"setting up runtime '{name}' failed: {why}{see_log}")
        probe_result = probe(str(managed_python(name)), name, refresh=True)
        if not probe_result.ok:
            emit(f"probe: {probe_result.problem}")
            raise RuntimeSetupError(
                f"runtime '{name}' was installed but does not work: {probe_result.problem}{see_log}"
            )
    finally:
        if log is not None:
            log.close()
    return managed_python(name)


# -- probing ------------------------------------------------------------------------------------
# ``adapters/runtime_probe.py`` runs inside the runtime's interpreter (``-I``: none of the app's
# packages). It imports each module, reports its version and whether it can use a GPU; never raises.

PROBE_TIMEOUT_S = 120.0


@dataclass
class Probe:
    python: str
    ok: bool
    problem: str | None = None
    python_version: str | None = None
    numpy: str | None = None
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)

    def versions(self) -> str:
        parts = [f"python {self.python_version}"] if self.python_version else []
        if self.numpy:
            parts.append(f"numpy {self.numpy}")
        for name, info in self.modules.items():
            if "version" in info:
                gpu = info.get("gpu") or {}
                build = f" [{gpu['build']}, {gpu.get('gpus', 0)} GPU]" if gpu.get("build") else ""
                parts.append(f"{name} {info['version']}{build}")
        return ", ".join(parts)


def _probe_key(python: str) -> str:
    """Interpreter path + mtimes of it and of its site-packages: a pip install changes the key."""
    path = Path(python)
    stamps = [str(path.stat().st_mtime_ns)]
    for site in sorted(path.resolve().parent.parent.glob("lib/python*/site-packages")) + sorted(
        path.parent.parent.glob("lib/python*/site-packages")
    ):
        stamps.append(f"{site}:{site.stat().st_mtime_ns}")
    return f"{path}|{'|'.join(stamps)}"


def _probe_cache_path() -> Path:
    return cache_home() / "runtime-probes.json"


def _load_probe_cache() -> dict[str, Any]:
    try:
        data = json.loads(_probe_cache_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # a missing or corrupt cache only costs a re-probe


def _store_probe_cache(cache: dict[str, Any]) -> None:
    path = _probe_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # per thread too: `runtime setup all` sets up (and probes) runtimes side by side
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def needed_runtimes() -> list[str]:
    """Managed runtimes this installation needs for the whole catalog: every framework/API whose
    modules the app's own interpreter lacks (checked without importing them)."""
    needed: dict[str, None] = {}
    for fw in catalog.FRAMEWORKS.values():
        if fw.unavailable:
            continue
        for api in fw.apis:
            if not all(importlib.util.find_spec(m) is not None for m in fw.imports_for(api)):
                needed[catalog.runtime_for(fw.name, api)] = None
    return [name for name in needed if name in MANAGED]


def probe(python: str, modules: tuple[str, ...] | str, refresh: bool = False) -> Probe:
    """Import ``modules`` in ``python -I`` (a subprocess: the app never imports a framework) and
    report versions; cached by interpreter path + mtimes. ``modules`` may be a managed runtime
    name, meaning that runtime's modules."""
    if isinstance(modules, str):
        modules = MANAGED[modules].modules if modules in MANAGED else (modules,)
    if not Path(python).exists():
        return Probe(python, False, f"{python} does not exist")
    key = f"{_probe_key(python)}|{','.join(modules)}"
    cache = _load_probe_cache()
    raw = None if refresh else cache.get(key)
    if raw is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        env.update(probe_environment(modules))  # not the user's: it may be absent
        raw, problem = run_tagged(
            [python, "-I", str(adapters_dir() / "runtime_probe.py"), *modules],
            env,
            "TUI_BENCH_PROBE ",
        )
        if raw is None:
            return Probe(python, False, f"probing {python}: {problem}")
        # Keyed as the probe left the runtime: its imports write bytecode, and the first write
        # creates site-packages/__pycache__, changing the mtime in the key (runtimes install with
        # --no-compile), so a key taken before would miss once, and import the frameworks again.
        cache[f"{_probe_key(python)}|{','.join(modules)}"] = raw
        _store_probe_cache(cache)
    result = Probe(
        python,
        True,
        python_version=raw.get("python"),
        numpy=raw.get("numpy"),
        modules=raw.get("modules", {}),
    )
    errors = [
        f"{name}: {info['error']}" for name, info in result.modules.items() if "error" in info
    ]
    if raw.get("numpy") is None:
        errors.insert(0, f"numpy: {raw.get('numpy_error', 'missing')}")
    if errors:
        result.ok = False
        result.problem = "; ".join(errors)
    return result


def run_tagged(
    command: list[str], env: dict[str, str], tag: str, timeout: float = PROBE_TIMEOUT_S
) -> tuple[dict[str, Any] | None, str | None]:
    """Run a probe script in another interpreter and read its last ``tag``-prefixed JSON line
    from stdout (frameworks print what they like around it): ``(payload, None)``, or
    ``(None, why)`` when it could not run, timed out or printed no such line."""
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"took over {timeout:g} s"
    except OSError as exc:
        return None, f"cannot run {command[0]}: {exc.strerror}"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(tag)]
    if not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"failed to start: {last}"
    try:
        return json.loads(lines[-1].removeprefix(tag)), None
    except ValueError:
        return None, f"printed an unreadable {tag.strip()} line"


def probe_environment(modules: tuple[str, ...]) -> dict[str, str]:
    """The environment a probe importing ``modules`` needs (e.g. the backend a multi-backend
    library imports at import time), as the manifest of the managed runtime with those modules
    declares it (``probe_env``; the first that has them all when none has exactly them).
    ``{cache}`` is tui-bench's cache directory."""
    wanted = set(modules)
    candidates = [rt for rt in MANAGED.values() if set(rt.modules) == wanted]
    candidates += [rt for rt in MANAGED.values() if set(rt.modules) > wanted]
    if not candidates:
        return {}
    cache = str(cache_home())
    return {k: v.replace("{cache}", cache) for k, v in candidates[0].probe_env.items()}


@dataclass
class Availability:
    framework: str
    api: str
    runtime: str
    python: str | None
    source: str | None
    probe: Probe | None
    problem: str | None
    fix: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def fix_command(runtime_name: str) -> str:
    if runtime_name in MANAGED:
        return f"tui-bench runtime setup {runtime_name}"
    return f"set [runtimes.{runtime_name}] python in {config_file()}"


def availability(framework_name: str, api: str, refresh: bool = False) -> Availability:
    """Can this framework/API run here, in which interpreter, with which versions; if not, why
    and the command that fixes it. Never raises for an unavailable runtime."""
    fw = catalog.framework(framework_name)
    name = catalog.runtime_for(framework_name, api)
    modules = fw.imports_for(api)
    if fw.unavailable:
        return Availability(framework_name, api, name, None, None, None, fw.unavailable, None)
    try:
        rt = resolve(framework_name, api)
    except (RuntimeUnavailable, ConfigError) as exc:
        return Availability(
            framework_name, api, name, None, None, None, str(exc), fix_command(name)
        )
    found = probe(rt.python, modules, refresh=refresh)
    fix = None if found.ok else fix_command(name)
    if not found.ok and rt.source == "config":
        fix = f"fix [runtimes.{name}] python in {config_file()} or remove it and run {fix_command(name)}"
    return Availability(framework_name, api, name, rt.python, rt.source, found, found.problem, fix)
