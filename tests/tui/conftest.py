from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest


@pytest.fixture
def tui_home(tmp_path, monkeypatch):
    """Private data, cache and config dirs; a fixed theme so screens do not depend on $COLORTERM."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TUI_BENCH_HOME", str(home))
    monkeypatch.setenv("TUI_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_BENCH_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("TUI_BENCH_THEME", "textual-dark")
    monkeypatch.delenv("TUI_BENCH_FAULT", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return home


async def wait_for(
    pilot, condition: Callable[[], bool], timeout: float = 120.0, what: str = ""
) -> None:
    """Let the app run until ``condition()`` holds (real workers take seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.1)
