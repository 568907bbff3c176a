"""Every test gets its own data home, cache and config: tests never touch the user's files.
The managed framework runtimes (GBs, made by `tui-bench runtime setup all`) are shared, read-only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tui_bench.engine.paths import runtimes_home

REPO = Path(__file__).resolve().parents[1]
# Read before any test moves the data home: where this machine's runtimes really are.
INSTALLED_RUNTIMES = runtimes_home()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TUI_BENCH_HOME", str(home))
    monkeypatch.setenv("TUI_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_BENCH_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("TUI_BENCH_RUNTIMES_DIR", str(INSTALLED_RUNTIMES))
    monkeypatch.delenv("TUI_BENCH_FAULT", raising=False)
    # Fault injection (TUI_BENCH_FAULT) only works where the test-suite says so.
    monkeypatch.setenv("TUI_BENCH_TESTING", "1")
    yield home
    _stop_batches_left_running(home)


def _stop_batches_left_running(home: Path) -> None:
    """Runs outlive the process that started them, a test's too: a test that fails (or a
    suite that is killed) must not leave supervisors and workers training behind it."""
    import os
    import signal

    from tui_bench.engine.results.history import read_jsonl
    from tui_bench.engine.runs import supervisor

    if not (home / "batches").is_dir():
        return
    for state in supervisor.all_batches():
        if not state.in_progress:
            continue
        os.kill(state.supervisor["pid"], signal.SIGKILL)
        for run_id in state.run_ids or []:
            for event in read_jsonl(home / "runs" / f"{run_id}.jsonl"):
                if event.get("type") == "worker":
                    from tui_bench.engine.machine.procs import kill_group

                    kill_group(event.get("pid"), event.get("started"))


@pytest.fixture
def adapters_on_path(monkeypatch: pytest.MonkeyPatch):
    """Import the worker-side package in the test process, as the worker names it."""
    import importlib.util

    here = REPO / "adapters"
    spec = importlib.util.spec_from_file_location(
        "adapters", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "adapters", module)
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in sys.modules if n.startswith("adapters.")]:
        monkeypatch.delitem(sys.modules, name, raising=False)
