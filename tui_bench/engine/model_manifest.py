"""The model manifest, ``adapters/models.json``: the one place each model's dimensions are written
down (widths, kernel sizes, depths). The worker's adapters build from the same file
(``adapters/models.py``); the app reads it here by path, as ``dataset_manifest`` reads the
dataset manifest, so the FLOP count and the models the workers build cannot disagree."""

from __future__ import annotations

import json
from dataclasses import dataclass
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


GPT_DIMENSIONS = ("layers", "d_model", "heads", "seq_len", "vocab_size")


@dataclass(frozen=True)
class GptDims:
    """One gpt's shape: L blocks of width d with ``heads`` heads, context S, vocabulary V; the
    feed-forward is ``mlp_ratio`` × d (4 in GPT-2)."""

    size: str
    layers: int
    d_model: int
    heads: int
    seq_len: int
    vocab_size: int
    mlp_ratio: int = 4

    @property
    def d_ff(self) -> int:
        return self.mlp_ratio * self.d_model

    @property
    def parameters(self) -> int:
        """Trainable parameters: token (V×d) and position (S×d) tables; per block two
        LayerNorms (2·2d), the fused q/k/v (3d² + 3d), the output projection (d² + d) and the
        feed-forward (d·d_ff + d_ff + d_ff·d + d); the final LayerNorm (2d). The head is the
        token table (tied): no parameters of its own. GPT-2 small: 124,439,808."""
        d, f = self.d_model, self.d_ff
        block = 4 * d + 4 * d * d + 4 * d + 2 * d * f + f + d
        return (self.vocab_size + self.seq_len) * d + self.layers * block + 2 * d

    @property
    def non_embedding_parameters(self) -> int:
        """N of the 6N rule (nanoGPT's ``get_num_params``): every parameter but the position
        table; the token table stays in, as it is also the head's weight."""
        return self.parameters - self.seq_len * self.d_model


def gpt_sizes() -> tuple[str, ...]:
    """The gpt's named sizes, in the manifest's order."""
    return tuple(manifest()["gpt"]["sizes"])


def default_gpt_size() -> str:
    return str(manifest()["gpt"]["default_size"])


def gpt_dims(size: str | None = None, **overrides: int | None) -> GptDims:
    """The named size (default: the manifest's) with each override that is not None in place of
    the size's dimension (KeyError: no such size). Divisibility is the spec's to refuse."""
    entry = manifest()["gpt"]
    name = size or entry["default_size"]
    values = dict(entry["sizes"][name])
    values.update({k: v for k, v in overrides.items() if k in GPT_DIMENSIONS and v is not None})
    return GptDims(size=name, mlp_ratio=int(entry["mlp_ratio"]), **values)
