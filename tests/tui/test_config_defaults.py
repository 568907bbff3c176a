"""A setting's default is declared once (engine/config.py) and is what the app uses; the README
documents the same value; the app takes what the config already checked."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tui_bench.engine.config import setting_value
from tui_bench.tui.app import TuiBenchApp

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_declared_refresh_rate_is_the_apps_and_the_readmes():
    declared = setting_value({}, "ui.refresh_hz")
    assert declared == 0.5
    documented = re.search(r"^refresh_hz = ([\d.]+)", README.read_text(encoding="utf-8"), re.M)
    assert documented and float(documented.group(1)) == declared
    Path(os.environ["TUI_BENCH_CONFIG"]).unlink(missing_ok=True)
    assert TuiBenchApp(start_mode="setup").refresh_hz == declared


def test_the_app_uses_the_configured_rate_and_theme():
    config = Path(os.environ["TUI_BENCH_CONFIG"])
    config.write_text('[ui]\nrefresh_hz = 4\ntheme = "textual-light"\n', encoding="utf-8")
    app = TuiBenchApp(start_mode="setup")
    assert app.refresh_hz == 4 and app.initial_theme == "textual-light"
    assert app.config_error is None


def test_a_refused_config_file_leaves_the_declared_defaults():
    config = Path(os.environ["TUI_BENCH_CONFIG"])
    config.write_text("[ui]\nrefresh_hz = 100\n", encoding="utf-8")
    app = TuiBenchApp(start_mode="setup")
    assert app.refresh_hz == 0.5 and "refresh_hz" in (app.config_error or "")
