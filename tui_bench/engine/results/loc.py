"""Lines of code per framework × API: the "ease of coding" metric of the studies.

An adapter marks the code a user of that API would write with ``# tui-bench:begin KIND [API ...]``
and ``# tui-bench:end KIND`` (KIND is ``model`` or ``step``; with no API list the block applies
to every API of the adapter). Counted: non-blank lines that are not only a comment. The source is
read by path, never imported (the app never imports a framework).
"""

from __future__ import annotations

import re
from pathlib import Path

from tui_bench.engine import catalog
from tui_bench.engine.paths import adapters_dir

KINDS = ("model", "step")
_MARKER = re.compile(r"^#\s*tui-bench:(begin|end)\s+(\w+)((?:\s+[\w.-]+)*)\s*$")


class MarkerError(ValueError):
    """Unbalanced or unknown markers in an adapter: one line naming the file and line."""


def count_lines(source: str, api: str, where: str = "<adapter>") -> dict[str, int]:
    """{kind: lines} for one API of one adapter's source."""
    counts = dict.fromkeys(KINDS, 0)
    open_blocks: list[tuple[str, tuple[str, ...], int]] = []
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        marker = _MARKER.match(stripped)
        if marker:
            action, kind, apis = marker.group(1), marker.group(2), tuple(marker.group(3).split())
            if kind not in KINDS:
                raise MarkerError(f"{where}:{number}: unknown marker kind {kind!r}")
            if action == "begin":
                if open_blocks:
                    raise MarkerError(f"{where}:{number}: nested tui-bench:begin")
                open_blocks.append((kind, apis, number))
            else:
                if not open_blocks or open_blocks[-1][0] != kind:
                    raise MarkerError(f"{where}:{number}: tui-bench:end {kind} without its begin")
                open_blocks.pop()
            continue
        if not open_blocks or not stripped or stripped.startswith("#"):
            continue
        kind, apis, _ = open_blocks[-1]
        if not apis or api in apis:
            counts[kind] += 1
    if open_blocks:
        raise MarkerError(f"{where}:{open_blocks[-1][2]}: tui-bench:begin never ended")
    return counts


def adapter_path(framework_name: str) -> Path:
    return adapters_dir() / f"{catalog.framework(framework_name).adapter}.py"


def lines_of_code(framework_name: str, api: str) -> dict[str, int]:
    """``{"loc_model": n, "loc_step": n}`` for a framework × API, from its adapter's source."""
    path = adapter_path(framework_name)
    counts = count_lines(path.read_text(encoding="utf-8"), api, where=str(path))
    return {f"loc_{kind}": n for kind, n in counts.items()}
