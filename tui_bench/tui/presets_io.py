"""Where the TUI finds and saves run presets (RunSpec TOML files). No Textual here.

Shipped presets live in ``presets/`` of the checkout or ``tui_bench/presets`` of an install; the
user's own go to ``<data home>/presets``. Files that are not a plain RunSpec (e.g. sweeps) fail to
load with a one-line SpecError, shown to the user."""

from __future__ import annotations

import re
from pathlib import Path

from tui_bench.engine.paths import data_home
from tui_bench.engine.spec import RunSpec


def user_presets_dir() -> Path:
    return data_home() / "presets"


def preset_dirs() -> list[Path]:
    package = Path(__file__).resolve().parents[1]
    return [package / "presets", package.parent / "presets", user_presets_dir()]


def list_presets() -> list[Path]:
    seen: dict[str, Path] = {}
    for directory in preset_dirs():
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                seen.setdefault(str(path.resolve()), path)
    return list(seen.values())


def load_preset(path: Path) -> RunSpec:
    """Raises SpecError (bad content) or OSError (unreadable)."""
    return RunSpec.from_toml(Path(path).read_text(encoding="utf-8"))


def save_preset(spec: RunSpec, path: Path) -> Path:
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.to_toml(), encoding="utf-8")
    return path


def default_preset_path(spec: RunSpec) -> Path:
    name = re.sub(
        r"[^A-Za-z0-9._-]+", "-", f"{spec.framework}-{spec.api}-{spec.model}-{spec.dataset}"
    )
    return user_presets_dir() / f"{name}.toml"
