"""Model dimensions, read from ``adapters/models.json`` (the one place they are declared; the
app reads the same file by path in ``tui_bench/engine/model_manifest.py``). Every adapter builds
its models from these, and ``shared_init`` draws the transformer's weights in these shapes.

Plain stdlib: it runs in every worker's runtime. Each model's entry is a read-only namespace
(``TRANSFORMER.d_model``); the transformer adds its per-head width, ``head_dim``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

MANIFEST: MappingProxyType = MappingProxyType(
    json.loads(Path(__file__).with_name("models.json").read_text(encoding="utf-8"))["models"]
)


def dims(model: str) -> Any:
    """The model's dimensions as attributes (KeyError: no such model in the manifest)."""
    entry = dict(MANIFEST[model])
    if model == "transformer":
        if entry["d_model"] % entry["heads"]:
            raise ValueError("models.json: the transformer's d_model must divide into its heads")
        entry["head_dim"] = entry["d_model"] // entry["heads"]
    return SimpleNamespace(**entry)


CNN = dims("cnn")
MLP = dims("mlp")
VGG16 = dims("vgg16")
LSTM = dims("lstm")
TRANSFORMER = dims("transformer")
