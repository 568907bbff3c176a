"""Model dimensions, read from ``adapters/models.json`` (the one place they are declared; the
app reads the same file by path in ``tui_bench/engine/model_manifest.py``). Every adapter builds
its models from these, and ``shared_init`` draws the transformer's weights in these shapes.

Plain stdlib: it runs in every worker's runtime. Each model's entry is a read-only namespace
(``TRANSFORMER.d_model``); the transformer adds its per-head width, ``head_dim``.

The gpt's size is a run setting, not a constant: ``resolve_gpt`` resolves a ``size`` and its
per-dimension overrides against the manifest's named sizes, for the worker (``gpt_dims``) and for
the app (``tui_bench/engine/model_manifest.py`` loads this file by path, so it runs no copy).
``flat_features`` is the width a convolutional model's dense layer reads, derived from the
declared convolutions and pools.
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


def resolve_gpt(entry: dict[str, Any], size: str | None, overrides: dict[str, Any]) -> dict:
    """The one resolver of a gpt's shape, the worker's and the app's (``tui_bench/engine/
    model_manifest.py`` loads this file by path): the manifest's gpt ``entry``, its named ``size``
    (None: the entry's default) with each dimension of ``overrides`` that is not None in place of
    the size's. Returns ``size`` and the five dimensions (KeyError: no such size)."""
    name = size or entry["default_size"]
    out = dict(entry["sizes"][name])
    out.update({k: overrides[k] for k in GPT_DIMENSIONS if overrides.get(k) is not None})
    return {"size": name, **out}


def gpt_dims(spec: dict[str, Any]) -> Any:
    """The gpt a spec asks for (``resolve_gpt`` on its ``size`` and dimensions). Attributes:
    layers, d_model, heads, seq_len, vocab_size, head_dim, d_ff. The app has refused a d_model
    that heads does not divide; a worker started some other way gets a ValueError."""
    entry = MANIFEST["gpt"]
    out = resolve_gpt(entry, spec.get("size"), spec)
    if out["d_model"] % out["heads"]:
        raise ValueError(f"gpt: d_model {out['d_model']} does not divide into {out['heads']} heads")
    out["head_dim"] = out["d_model"] // out["heads"]
    out["d_ff"] = entry["mlp_ratio"] * out["d_model"]
    return SimpleNamespace(**out)


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


def flat_features(model: str, input_shape: tuple[int, ...]) -> int:
    """The width a convolutional model's dense layer reads: the last convolution's filters times
    the feature map left after the declared convolutions and pools on an (H, W, C) image. The cnn's
    convolutions are valid (each takes kernel - 1 off a side), the vgg16's same-padded."""
    height, width = input_shape[0], input_shape[1]
    if model == "cnn":
        for _, kernel in CNN.conv:
            height, width = (height - kernel + 1) // CNN.pool, (width - kernel + 1) // CNN.pool
        return CNN.conv[-1][0] * height * width
    if model == "vgg16":
        for _ in VGG16.stages:
            height, width = height // VGG16.pool, width // VGG16.pool
        return VGG16.stages[-1][0] * height * width
    raise ValueError(f"{model!r} has no convolutions")
