"""Where things live: the worker-side code shipped with the app, and the user's data directories."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import platformdirs

from tui_bench.engine.errors import UsageError

APP_NAME = "tui-bench"


def adapters_dir() -> Path:
    """The worker-side package directory. In a checkout it is ``<repo>/adapters``; an installed
    wheel carries it as ``tui_bench_adapters`` (found without importing it)."""
    checkout = Path(__file__).resolve().parents[2] / "adapters"
    if (checkout / "worker.py").is_file():
        return checkout
    spec = importlib.util.find_spec("tui_bench_adapters")
    if spec and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    raise FileNotFoundError("the worker package (adapters/) is missing from this installation")


def default_data_home() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


def data_home() -> Path:
    """History and run series. ``TUI_BENCH_HOME`` overrides (the CLI's ``--home`` sets it)."""
    override = os.environ.get("TUI_BENCH_HOME")
    return Path(override) if override else default_data_home()


def runtimes_home() -> Path:
    """Managed framework environments (GBs each), where ``runtime setup`` puts them: under the
    default data home whatever ``--home``/``TUI_BENCH_HOME`` say, since a home keeps history, and
    a second home must not make every installed framework "not installed".
    ``TUI_BENCH_RUNTIMES_DIR`` overrides (both for setup and for finding them)."""
    override = os.environ.get("TUI_BENCH_RUNTIMES_DIR")
    return Path(override) if override else default_data_home() / "runtimes"


def usable_home(text: str) -> Path:
    """``--home``'s argument as an absolute directory, or a one-line UsageError: it must name a
    directory, or a place where one can be created, that this user can write."""
    if not text.strip():
        raise UsageError("--home: an empty path; give the directory that keeps the history")
    try:
        path = Path(text).expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a NUL byte, a symlink loop
        raise UsageError(f"--home {text!r}: not a usable path ({exc})") from None
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"--home {path}: exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"--home {path}: this user cannot write there")
        return path
    parent = path.parent
    while not parent.exists():  # created on first write: the nearest existing ancestor decides
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--home {path}: cannot be created ({parent} is not a writable directory)")
    return path


def cache_home() -> Path:
    """Downloaded datasets and runtime probes. ``TUI_BENCH_CACHE`` overrides."""
    override = os.environ.get("TUI_BENCH_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME))


def config_file() -> Path:
    override = os.environ.get("TUI_BENCH_CONFIG")
    return (
        Path(override) if override else Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
    )
