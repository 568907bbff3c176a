from __future__ import annotations

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
