"""The model manifest, ``adapters/models.json``: the one place each model's dimensions are written
down (widths, kernel sizes, depths). The worker's adapters build from the same file
(``adapters/models.py``); the app reads it here by path, as ``dataset_manifest`` reads the
dataset manifest, so the FLOP count and the models the workers build cannot disagree."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from tui_bench.engine.paths import adapters_dir

MANIFEST_NAME = "models.json"


@cache
def manifest() -> dict[str, dict[str, Any]]:
    """Model name -> its dimensions, as declared."""
    path = adapters_dir() / MANIFEST_NAME
    return json.loads(path.read_text(encoding="utf-8"))["models"]


def dims(model: str) -> dict[str, Any]:
    """One model's dimensions (KeyError: the manifest declares no such model)."""
    return manifest()[model]
