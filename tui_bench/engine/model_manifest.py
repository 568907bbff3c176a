"""The model manifest, ``adapters/models.json``: the one place each model's dimensions are written
down (widths, kernel sizes, depths). The worker's adapters build from the same file
(``adapters/models.py``); the app reads it here by path, as ``dataset_manifest`` reads the
dataset manifest, so the FLOP count and the models the workers build cannot disagree. The gpt's
size resolver has one home, ``adapters/models.py`` (``resolve_gpt``), loaded here by path as
``protocol`` loads the event schema: ``adapters`` is not importable in the app.

``parameters`` is each model's trainable parameter count by formula, from the declared sizes: the
figure every framework × API's built model is held to (tests/test_model_declaration.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

from tui_bench.engine.paths import adapters_dir

MANIFEST_NAME = "models.json"
_WORKER_MODELS = "tui_bench._worker_models"


def _worker_models() -> Any:
    """``adapters/models.py``, loaded by path once (the gpt's resolver lives there)."""
    if _WORKER_MODELS not in sys.modules:
        spec = importlib.util.spec_from_file_location(_WORKER_MODELS, adapters_dir() / "models.py")
        if spec is None or spec.loader is None:
            raise ImportError("adapters/models.py cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        sys.modules[_WORKER_MODELS] = module
        spec.loader.exec_module(module)
    return sys.modules[_WORKER_MODELS]


@cache
def manifest() -> dict[str, dict[str, Any]]:
    """Model name -> its dimensions, as declared."""
    path = adapters_dir() / MANIFEST_NAME
    return json.loads(path.read_text(encoding="utf-8"))["models"]


def dims(model: str) -> dict[str, Any]:
    """One model's dimensions (KeyError: the manifest declares no such model)."""
    return manifest()[model]


# The gpt's dimensions a run may set, as the worker's resolver names them.
GPT_DIMENSIONS: tuple[str, ...] = _worker_models().GPT_DIMENSIONS


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
    the size's dimension (KeyError: no such size), by the worker's resolver. Divisibility is the
    spec's to refuse."""
    entry = manifest()["gpt"]
    values = _worker_models().resolve_gpt(entry, size, overrides)
    return GptDims(mlp_ratio=int(entry["mlp_ratio"]), **values)


def parameters(
    model: str, input_shape: tuple[int, ...], classes: int, vocab: int, dims: GptDims | None = None
) -> int:
    """Trainable parameters of ``model`` as declared, on inputs of ``input_shape`` (HWC images,
    (length,) sequences) with ``classes`` classes and a ``vocab``-token vocabulary (sequence
    models). Every kernel has its bias; the LSTM one bias per gate (where a framework keeps a
    second, the adapter freezes it at zero); sequence models end in one logit. The gpt: ``GptDims.parameters``."""
    if model == "gpt":
        return (dims or gpt_dims()).parameters
    declared = manifest()[model]

    def dense(inputs: int, outputs: int) -> int:
        return inputs * outputs + outputs

    if model == "mlp":
        widths = [math.prod(input_shape), *declared["hidden"], classes]
        return sum(dense(a, b) for a, b in zip(widths, widths[1:], strict=False))
    if model in ("cnn", "vgg16"):
        height, width, channels = input_shape
        convs = (
            declared["conv"]
            if model == "cnn"
            else [[w, declared["kernel"]] for w, n in declared["stages"] for _ in range(n)]
        )
        total = 0
        for filters, kernel in convs:
            total += dense(kernel * kernel * channels, filters)
            channels = filters
        if model == "cnn":
            for _, kernel in convs:
                height = (height - kernel + 1) // declared["pool"]
                width = (width - kernel + 1) // declared["pool"]
        else:
            for _ in declared["stages"]:
                height, width = height // declared["pool"], width // declared["pool"]
        flat = channels * height * width
        return total + dense(flat, declared["dense"]) + dense(declared["dense"], classes)
    if model == "lstm":
        embed, hidden = declared["embed"], declared["hidden"]
        return vocab * embed + 4 * (embed * hidden + hidden * hidden + hidden) + dense(hidden, 1)
    if model == "transformer":
        d, ff = declared["d_model"], declared["d_ff"]
        block = 4 * dense(d, d) + 2 * 2 * d + dense(d, ff) + dense(ff, d)
        return (vocab + input_shape[0]) * d + declared["blocks"] * block + dense(d, 1)
    raise KeyError(model)


def _layers(widths: list[int], classes: int) -> str:
    return " → ".join([*(f"Dense{w} → Dropout" for w in widths), f"Dense{classes}"])


def describe(model: str, input_shape: tuple[int, ...], classes: int, vocab: int) -> str:
    """The catalog's one-line description of ``model``, written from its declaration, on the data
    of ``input_shape`` / ``classes`` / ``vocab`` (the model's reference dataset)."""
    d = manifest()[model]
    if model == "cnn":
        convs = " → pool → ".join(f"Conv{f} {k}×{k}" for f, k in d["conv"])
        size = "×".join(map(str, input_shape))
        count = parameters(model, input_shape, classes, vocab)
        return f"{convs} → pool → {_layers([d['dense']], classes)} ({count:,} parameters on {size})"
    if model == "mlp":
        return _layers(d["hidden"], classes)
    if model == "vgg16":
        k, widths = d["kernel"], [w for w, _ in d["stages"]]
        convs = sum(n for _, n in d["stages"])
        return (
            f"{convs} conv {k}×{k} layers ({min(widths)}…{max(widths)}) in {len(widths)} pooled "
            f"blocks → {_layers([d['dense']], classes)}"
        )
    if model == "lstm":
        return f"Embedding {vocab}×{d['embed']} → LSTM{d['hidden']} → Dense1 (binary)"
    if model == "transformer":
        w, heads, length = d["d_model"], d["heads"], input_shape[0]
        count = parameters(model, input_shape, classes, vocab)
        return (
            f"Embedding {vocab}×{w} + learned positions {length}×{w} → {d['blocks']} × "
            f"[{heads}-head self-attention ({heads}×{w // heads}) → Dropout → +residual → "
            f"LayerNorm → Dense{d['d_ff']} GELU → Dense{w} → Dropout → +residual → LayerNorm] → "
            f"mean over positions → Dense1 (binary; {count:,} parameters)"
        )
    if model == "gpt":
        sizes = ", ".join(
            f"{name} (L {g.layers}, d {g.d_model}, {g.heads} heads, S {g.seq_len}, "
            f"V {g.vocab_size}: {g.parameters:,} parameters)"
            for name in gpt_sizes()
            for g in (gpt_dims(name),)
        )
        return (
            "GPT-2 layout decoder: tokens V×d + learned positions S×d → L × [LayerNorm → causal "
            f"multi-head self-attention (fused q/k/v) → +residual; LayerNorm → Dense "
            f"{d['mlp_ratio']}d GELU (tanh) → Dense d → +residual] → LayerNorm → head tied to the token table; next-token "
            f"cross-entropy. Sizes: {sizes}; each dimension can be set (--layers --d-model "
            "--heads --seq-len --vocab-size)"
        )
    raise KeyError(model)
