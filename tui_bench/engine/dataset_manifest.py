"""The dataset manifest, ``adapters/datasets.json``: the one place dataset facts are written down
(shapes, classes, split sizes, published files, checksums, mirrors). The worker reads the same
file; the app reads it here by path, as ``engine/protocol.py`` loads the event schema, so the two
sides cannot disagree. Plain JSON and no numpy: cheap enough for the first frame of the TUI."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from tui_bench.engine.paths import adapters_dir

MANIFEST_NAME = "datasets.json"


@cache
def manifest() -> dict[str, dict[str, Any]]:
    """Dataset name -> its entry, in the manifest's order (the order pickers show)."""
    path = adapters_dir() / MANIFEST_NAME
    return json.loads(path.read_text(encoding="utf-8"))["datasets"]


def required_size(entry: dict[str, Any]) -> int:
    """Bytes a real dataset needs on disk (its optional files left out)."""
    return sum(f["size"] for f in entry.get("files", ()) if f.get("required", True))
