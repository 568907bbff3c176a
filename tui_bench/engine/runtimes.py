"""Which interpreter runs which framework.

A *runtime* is a Python interpreter that can import one framework. Frameworks' dependencies
conflict (TensorFlow needs numpy>=1.26, MXNet 1.9.1 breaks on numpy>=1.24), so each may live in its
own environment. Resolution order for a runtime name:
1. ``[runtimes.NAME] python = "..."`` in the config file (e.g. a conda env on a GPU box);
2. a managed environment under ``<data home>/runtimes/NAME`` (``tui-bench runtime setup NAME``);
3. the app's own interpreter, if the framework is installed there (checked without importing it).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from tui_bench.engine import catalog
from tui_bench.engine.config import load_config
from tui_bench.engine.paths import data_home


class RuntimeUnavailable(RuntimeError):
    """No interpreter can run this framework/API; the message says how to get one."""


@dataclass(frozen=True)
class Runtime:
    name: str
    python: str
    source: str  # "config", "managed" or "app"


def managed_dir(name: str) -> Path:
    return data_home() / "runtimes" / name


def managed_python(name: str) -> Path:
    return managed_dir(name) / "bin" / "python"


def resolve(framework_name: str, api: str) -> Runtime:
    fw = catalog.framework(framework_name)
    name = catalog.runtime_for(framework_name, api)
    configured = load_config().get("runtimes", {}).get(name, {}).get("python")
    if configured:
        if not Path(configured).exists():
            raise RuntimeUnavailable(
                f"runtime '{name}' points at {configured}, which does not exist (fix the config file)"
            )
        return Runtime(name, str(configured), "config")
    managed = managed_python(name)
    if managed.exists():
        return Runtime(name, str(managed), "managed")
    if importlib.util.find_spec(fw.import_name) is not None:
        return Runtime(name, sys.executable, "app")
    raise RuntimeUnavailable(
        f"{fw.label} is not installed: run `tui-bench runtime setup {name}` "
        f"or set [runtimes.{name}] python in the config file"
    )
