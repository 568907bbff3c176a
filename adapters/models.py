"""Model dimensions, read from ``adapters/models.json`` (the one place they are declared; the
app reads the same file by path in ``tui_bench/engine/model_manifest.py``). Every adapter builds
its models from these, and ``shared_init`` draws the transformer's weights in these shapes.

Plain stdlib: it runs in every worker's runtime. Each model's entry is a read-only namespace
(``TRANSFORMER.d_model``); the transformer adds its per-head width, ``head_dim``.

The gpt's size is a run setting, not a constant: ``gpt_dims`` resolves a spec's ``size`` and its
per-dimension overrides against the manifest's named sizes (the app resolves them the same way in
``tui_bench/engine/model_manifest.py``, from the same file).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

MANIFEST: MappingProxyType = MappingProxyType(
    json.loads(Path(__file__).with_name("models.json").read_text(encoding="utf-8"))["models"]
)


GPT_DIMENSIONS = ("layers", "d_model", "heads", "seq_len", "vocab_size")


def gpt_dims(spec: dict[str, Any]) -> Any:
    """The gpt a spec asks for: its named ``size`` (default the manifest's) with each dimension
    the spec sets (not None) in place of the size's. Attributes: layers, d_model, heads, seq_len,
    vocab_size, head_dim, d_ff. The app has refused a d_model that heads does not divide; a
    worker started some other way gets a ValueError."""
    entry = MANIFEST["gpt"]
    size = spec.get("size") or entry["default_size"]
    out = dict(entry["sizes"][size])
    out.update({k: spec[k] for k in GPT_DIMENSIONS if spec.get(k) is not None})
    if out["d_model"] % out["heads"]:
        raise ValueError(f"gpt: d_model {out['d_model']} does not divide into {out['heads']} heads")
    out["head_dim"] = out["d_model"] // out["heads"]
    out["d_ff"] = entry["mlp_ratio"] * out["d_model"]
    return SimpleNamespace(size=size, **out)


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
