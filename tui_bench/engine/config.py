"""User settings from ``config.toml`` (path: ``TUI_BENCH_CONFIG`` or the user config directory).

```toml
[runtimes.torch]
python = "/opt/conda/envs/torch-cuda/bin/python"   # use an interpreter you already have

[keys]
cancel_run = "ctrl+x"                               # remap a TUI binding by its id

[ui]
theme = "textual-dark"
refresh_hz = 0.5                                    # live graphs' redraw rate, 0.2-4
```

Every key the file accepts is declared once in ``SETTINGS``, with its default; a key not declared
there, a value of the wrong type or a number out of its declared range (NaN and infinities
included) is a one-line ``ConfigError`` that names the key. The file is read within the spec's
bounds (size, nesting). Readers take a value with ``setting_value``: what the file says (already
checked) or the declared default, so no reader checks a setting again or keeps its own default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine import catalog
from tui_bench.engine.errors import ConfigError, SpecError
from tui_bench.engine.paths import config_file
from tui_bench.engine.spec import (
    DeclaredField,
    bounded_option,
    check_declared,
    load_toml,
    read_input,
)


@dataclass(frozen=True)
class Setting:
    """One accepted key. ``key`` is dotted; ``*`` stands for any one name (a runtime, a binding)."""

    key: str
    type: type | tuple[type, ...]
    expected: str  # the type in words, for the error message
    help: str
    # The names ``*`` may take, where they are known here (binding ids live in the TUI: any).
    names: Callable[[], Iterable[str]] | None = None
    # A number's range, declared as a spec field's is and checked by the same code.
    bounds: DeclaredField | None = None
    default: Any = None  # what a reader gets when the file does not set it (else bounds')


def runtime_names() -> list[str]:
    """Every runtime name the catalog uses: what ``[runtimes.NAME]`` may be."""
    return sorted(
        {catalog.runtime_for(fw.name, api) for fw in catalog.FRAMEWORKS.values() for api in fw.apis}
    )


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "runtimes.*.python",
        str,
        "a path",
        "interpreter that runs this runtime (e.g. a conda env); `tui-bench runtime list` names them",
        names=runtime_names,
    ),
    Setting(
        "keys.*", str, "a key name", "remap a TUI binding by its id, e.g. cancel_run = 'ctrl+x'"
    ),
    Setting("ui.theme", str, "a theme name", "Textual theme; TUI_BENCH_THEME overrides it"),
    # 0.5 Hz (every 2 s, like btop and nvitop) keeps the UI under 5 % of a core while a run
    # streams; 1 Hz measured 8.8 %. More than 4 Hz: plotext redraws (5-20 ms each) would show in
    # the run's own figures.
    Setting(
        "ui.refresh_hz",
        (int, float),
        "a number",
        "live graphs' redraw rate in Hz, 0.2-4",
        bounds=bounded_option(
            "ui.refresh_hz", float, "live graphs' redraw rate in Hz", default=0.5, low=0.2, high=4.0
        ),
    ),
)


def setting(key: str) -> Setting:
    return next(s for s in SETTINGS if s.key == key)


def setting_value(config: dict[str, Any], key: str) -> Any:
    """A checked config's value for a dotted ``key`` (no ``*``), or the setting's declared
    default when the file does not set it. ``config`` is what ``load_config`` returned (an
    empty dict when there is no file or it was refused)."""
    declared = setting(key)
    default = declared.bounds.default if declared.bounds is not None else declared.default
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _matches(pattern: str, parts: list[str]) -> bool:
    wanted = pattern.split(".")
    return len(wanted) == len(parts) and all(
        w in ("*", p) for w, p in zip(wanted, parts, strict=True)
    )


def _is_prefix(pattern: str, parts: list[str]) -> bool:
    wanted = pattern.split(".")
    return len(wanted) > len(parts) and all(
        w in ("*", p) for w, p in zip(wanted, parts, strict=False)
    )


def _shown(parts: list[str]) -> str:
    return ".".join(p if p.isprintable() else repr(p) for p in parts)


def _check_names(here: list[str], path: Path) -> None:
    """A ``*`` segment with known names (a runtime's) must be one of them: a typo is an error."""
    for setting in SETTINGS:
        wanted = setting.key.split(".")
        if setting.names is None or len(here) > len(wanted):
            continue
        if all(w in ("*", p) for w, p in zip(wanted, here, strict=False)):
            star = wanted.index("*") if "*" in wanted else -1
            if star == len(here) - 1 and here[star] not in (names := list(setting.names())):
                raise ConfigError(
                    f"{path}: unknown key {_shown(here)} ({'.'.join(wanted[:star])} are: "
                    f"{', '.join(names)})"
                )


def _check(table: dict[str, Any], parts: list[str], path: Path) -> None:
    for name, value in table.items():
        here = [*parts, name]
        _check_names(here, path)
        setting = next((s for s in SETTINGS if _matches(s.key, here)), None)
        if setting is not None:
            wrong = isinstance(value, bool) or not isinstance(value, setting.type)
            if wrong:
                raise ConfigError(
                    f"{path}: {_shown(here)} must be {setting.expected}, got {type(value).__name__}"
                )
            if setting.bounds is not None:
                try:
                    check_declared(setting.bounds, value)
                except SpecError as exc:
                    raise ConfigError(f"{path}: {exc}") from None
            continue
        if any(_is_prefix(s.key, here) for s in SETTINGS):
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{path}: {_shown(here)} must be a table, got {type(value).__name__}"
                )
            _check(value, here, path)
            continue
        known = sorted({s.key for s in SETTINGS})
        raise ConfigError(f"{path}: unknown key {_shown(here)} (known: {', '.join(known)})")


def validate_config(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Return ``data``, or raise a one-line ConfigError naming the first bad key."""
    _check(data, [], path)
    return data


def parse_config(text: str, path: Path) -> dict[str, Any]:
    try:
        data = load_toml(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return validate_config(data, path)


def load_config() -> dict[str, Any]:
    path = config_file()
    if not path.is_file():
        return {}
    try:
        text = read_input(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse_config(text, path)
