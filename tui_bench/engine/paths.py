"""Where things live: the worker-side code shipped with the app, and the user's data directories."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import platformdirs

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


def data_home() -> Path:
    """History and run series. ``TUI_BENCH_HOME`` overrides (the CLI's ``--home`` sets it)."""
    override = os.environ.get("TUI_BENCH_HOME")
    return Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))


def runtimes_home() -> Path:
    """Managed framework environments (GBs each). ``TUI_BENCH_RUNTIMES_DIR`` overrides, so several
    data homes (or a test suite's temporary ones) can share one set."""
    override = os.environ.get("TUI_BENCH_RUNTIMES_DIR")
    return Path(override) if override else data_home() / "runtimes"


def cache_home() -> Path:
    """Downloaded datasets and runtime probes. ``TUI_BENCH_CACHE`` overrides."""
    override = os.environ.get("TUI_BENCH_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME))


def config_file() -> Path:
    override = os.environ.get("TUI_BENCH_CONFIG")
    return (
        Path(override) if override else Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
    )
