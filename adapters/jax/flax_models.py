"""The catalog's models as Flax NNX modules (the ``flax`` API), sized from ``adapters/models.json``.

Every layer is NHWC / (batch, time, features), Flax's own layout, so an image batch goes in as the
data holds it. Initialisers are Keras' defaults, as every other framework's: Glorot-uniform kernels
(a convolution's fans count its receptive field, as torch's ``xavier_uniform_`` does), zero biases,
embeddings uniform in ±0.05, the LSTM's recurrent kernel orthogonal as one (hidden, 4·hidden)
matrix with the forget gate's bias at 1. The transformer and the gpt then load the shared draw
(``load_shared``): a Flax ``Linear`` kernel is (in, out), the canonical layout, so nothing is
transposed.

``dtype`` is the compute dtype (None: float32; ``jnp.bfloat16`` for precision bf16); parameters
stay float32 whatever it is. Dropout follows the module's mode (``model.train()`` / ``.eval()``):
the same places, the same rate and the same inverted scaling as torch's ``nn.Dropout``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from adapters import shared_init
from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16

GLOROT = nnx.initializers.glorot_uniform()


def _embedding_init(key: Any, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
    return jax.random.uniform(key, shape, dtype, -0.05, 0.05)


def attention_kernel(dropout: float, causal: bool) -> str:
    """What computes the attention here (a recorded setting): ``jax.nn.dot_product_attention``
    where no dropout is asked for (training at dropout 0, and every evaluation and request), the
    written-out einsum + softmax + dropout where training drops attention weights."""
    fused = "jax.nn.dot_product_attention (XLA chooses the implementation)"
    mask = ", causal" if causal else ""
    if dropout > 0:
        return f"written out: einsum + softmax + dropout{mask} (training); {fused} (evaluation)"
    return f"{fused}{mask}, training and evaluation"


# tui-bench:begin model flax transformer gpt
def attend(q: jax.Array, k: jax.Array, v: jax.Array, drop: nnx.Dropout, causal: bool) -> jax.Array:
    """Scaled dot-product attention over (batch, time, heads, head_dim); dropout on the weights
    while training."""
    if drop.deterministic or drop.rate == 0:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    if causal:
        future = jnp.triu(jnp.ones((q.shape[1], k.shape[1]), bool), k=1)
        scores = jnp.where(future, jnp.finfo(scores.dtype).min, scores)
    weights = drop(jax.nn.softmax(scores, axis=-1))
    return jnp.einsum("bnts,bsnh->btnh", weights, v)


# tui-bench:end model


# tui-bench:begin model flax transformer
class SelfAttention(nnx.Module):
    def __init__(self, width: int, heads: int, dropout: float, dtype: Any, rngs: nnx.Rngs) -> None:
        self.heads = heads
        dense = lambda: nnx.Linear(width, width, kernel_init=GLOROT, dtype=dtype, rngs=rngs)  # noqa: E731
        self.query, self.key, self.value, self.out = dense(), dense(), dense(), dense()
        self.drop = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        batch, time, width = x.shape
        split = lambda t: t.reshape(batch, time, self.heads, width // self.heads)  # noqa: E731
        h = attend(split(self.query(x)), split(self.key(x)), split(self.value(x)), self.drop, False)
        return self.out(h.reshape(batch, time, width))


class Block(nnx.Module):
    """Post-LayerNorm encoder block (ε 1e-6), GELU in its exact erf form."""

    def __init__(self, dropout: float, dtype: Any, rngs: nnx.Rngs) -> None:
        width, hidden = TRANSFORMER.d_model, TRANSFORMER.d_ff
        self.attention = SelfAttention(width, TRANSFORMER.heads, dropout, dtype, rngs)
        self.norm1 = nnx.LayerNorm(width, epsilon=1e-6, dtype=dtype, rngs=rngs)
        self.hidden = nnx.Linear(width, hidden, kernel_init=GLOROT, dtype=dtype, rngs=rngs)
        self.back = nnx.Linear(hidden, width, kernel_init=GLOROT, dtype=dtype, rngs=rngs)
        self.norm2 = nnx.LayerNorm(width, epsilon=1e-6, dtype=dtype, rngs=rngs)
        self.drop1, self.drop2 = nnx.Dropout(dropout, rngs=rngs), nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.norm1(x + self.drop1(self.attention(x)))
        feed = self.back(jax.nn.gelu(self.hidden(x), approximate=False))
        return self.norm2(x + self.drop2(feed))


class Transformer(nnx.Module):
    def __init__(self, vocab: int, length: int, dropout: float, dtype: Any, rngs: nnx.Rngs) -> None:
        width = TRANSFORMER.d_model
        kw = {"embedding_init": _embedding_init, "dtype": dtype, "rngs": rngs}
        self.tokens, self.positions = nnx.Embed(vocab, width, **kw), nnx.Embed(length, width, **kw)
        self.blocks = nnx.List(Block(dropout, dtype, rngs) for _ in range(TRANSFORMER.blocks))
        self.head = nnx.Linear(width, 1, kernel_init=GLOROT, dtype=dtype, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        h = self.tokens(ids) + self.positions(jnp.arange(ids.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.head(h.mean(axis=1))


# tui-bench:end model


# tui-bench:begin model flax gpt
class CausalSelfAttention(nnx.Module):
    """GPT-2's attention: one fused d × 3d projection for q, k, v, causal, output projection."""

    def __init__(self, width: int, heads: int, dropout: float, dtype: Any, rngs: nnx.Rngs) -> None:
        self.heads = heads
        self.qkv = nnx.Linear(width, 3 * width, dtype=dtype, rngs=rngs)
        self.out = nnx.Linear(width, width, dtype=dtype, rngs=rngs)
        self.drop = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        batch, time, width = x.shape
        q, k, v = (
            t.reshape(batch, time, self.heads, width // self.heads)
            for t in jnp.split(self.qkv(x), 3, axis=-1)
        )
        return self.out(attend(q, k, v, self.drop, True).reshape(batch, time, width))


class GptBlock(nnx.Module):
    """Pre-LayerNorm (ε 1e-5): x + attention(LN(x)), then x + MLP(LN(x)); GELU in its tanh form."""

    def __init__(self, dims: Any, dropout: float, dtype: Any, rngs: nnx.Rngs) -> None:
        width = dims.d_model
        self.norm1 = nnx.LayerNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.attention = CausalSelfAttention(width, dims.heads, dropout, dtype, rngs)
        self.norm2 = nnx.LayerNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.hidden = nnx.Linear(width, dims.d_ff, dtype=dtype, rngs=rngs)
        self.back = nnx.Linear(dims.d_ff, width, dtype=dtype, rngs=rngs)
        self.drop1, self.drop2 = nnx.Dropout(dropout, rngs=rngs), nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.drop1(self.attention(self.norm1(x)))
        feed = self.back(jax.nn.gelu(self.hidden(self.norm2(x)), approximate=True))
        return x + self.drop2(feed)


class Gpt(nnx.Module):
    """Token + position embeddings, L blocks, a final LayerNorm, the head tied to the token
    table. Returns (batch · S, V) logits: one row per position, as the targets are flattened."""

    def __init__(self, dims: Any, dropout: float, dtype: Any, rngs: nnx.Rngs) -> None:
        width = dims.d_model
        self.tokens = nnx.Embed(dims.vocab_size, width, dtype=dtype, rngs=rngs)
        self.positions = nnx.Embed(dims.seq_len, width, dtype=dtype, rngs=rngs)
        self.drop = nnx.Dropout(dropout, rngs=rngs)
        self.blocks = nnx.List(GptBlock(dims, dropout, dtype, rngs) for _ in range(dims.layers))
        self.final = nnx.LayerNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        h = self.drop(self.tokens(ids) + self.positions(jnp.arange(ids.shape[1])))
        for block in self.blocks:
            h = block(h)
        logits = self.tokens.attend(self.final(h))  # tied: the token table is the head
        return logits.reshape(-1, logits.shape[-1])


# tui-bench:end model


# tui-bench:begin model flax cnn
class Cnn(nnx.Module):
    def __init__(
        self, shape: Any, classes: int, dropout: float, dtype: Any, rngs: nnx.Rngs
    ) -> None:
        (f1, k1), (f2, k2) = CNN.conv
        h, w, c = shape
        side = lambda n: ((n - k1 + 1) // CNN.pool - k2 + 1) // CNN.pool  # noqa: E731
        kw = {"padding": "VALID", "kernel_init": GLOROT, "dtype": dtype, "rngs": rngs}
        self.conv1 = nnx.Conv(c, f1, (k1, k1), **kw)
        self.conv2 = nnx.Conv(f1, f2, (k2, k2), **kw)
        self.dense = nnx.Linear(
            f2 * side(h) * side(w), CNN.dense, kernel_init=GLOROT, dtype=dtype, rngs=rngs
        )
        self.drop = nnx.Dropout(dropout, rngs=rngs)
        self.out = nnx.Linear(CNN.dense, classes, kernel_init=GLOROT, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        window = (CNN.pool, CNN.pool)
        x = nnx.max_pool(nnx.relu(self.conv1(x)), window, strides=window)
        x = nnx.max_pool(nnx.relu(self.conv2(x)), window, strides=window)
        x = nnx.relu(self.dense(x.reshape(x.shape[0], -1)))
        return self.out(self.drop(x))


# tui-bench:end model


# tui-bench:begin model flax mlp
class Mlp(nnx.Module):
    def __init__(
        self, shape: Any, classes: int, dropout: float, dtype: Any, rngs: nnx.Rngs
    ) -> None:
        widths = [math.prod(shape), *MLP.hidden]
        self.hidden = nnx.List(
            nnx.Linear(i, o, kernel_init=GLOROT, dtype=dtype, rngs=rngs)
            for i, o in zip(widths, widths[1:], strict=False)
        )
        self.drops = nnx.List(nnx.Dropout(dropout, rngs=rngs) for _ in MLP.hidden)
        self.out = nnx.Linear(widths[-1], classes, kernel_init=GLOROT, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[0], -1)
        for layer, drop in zip(self.hidden, self.drops, strict=True):
            x = drop(nnx.relu(layer(x)))
        return self.out(x)


# tui-bench:end model


# tui-bench:begin model flax vgg16
class Vgg16(nnx.Module):
    def __init__(
        self, shape: Any, classes: int, dropout: float, dtype: Any, rngs: nnx.Rngs
    ) -> None:
        convs, channels, k = [], shape[2], VGG16.kernel
        for width, repeats in VGG16.stages:
            for _ in range(repeats):
                convs.append(
                    nnx.Conv(
                        channels,
                        width,
                        (k, k),
                        padding="SAME",
                        kernel_init=GLOROT,
                        dtype=dtype,
                        rngs=rngs,
                    )
                )
                channels = width
        self.convs = nnx.List(convs)
        side = shape[0] // VGG16.pool ** len(VGG16.stages)
        self.dense = nnx.Linear(
            channels * side * side, VGG16.dense, kernel_init=GLOROT, dtype=dtype, rngs=rngs
        )
        self.drop = nnx.Dropout(dropout, rngs=rngs)
        self.out = nnx.Linear(VGG16.dense, classes, kernel_init=GLOROT, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        window, layers = (VGG16.pool, VGG16.pool), iter(self.convs)
        for _, repeats in VGG16.stages:
            for _ in range(repeats):
                x = nnx.relu(next(layers)(x))
            x = nnx.max_pool(x, window, strides=window)
        x = nnx.relu(self.dense(x.reshape(x.shape[0], -1)))
        return self.out(self.drop(x))


# tui-bench:end model


# tui-bench:begin model flax lstm
class Lstm(nnx.Module):
    """Keras' LSTM layer: fused (in, 4h) and (h, 4h) kernels, one bias, gates in the order
    input, forget, cell, output; the last step's output."""

    def __init__(self, features: int, hidden: int, dtype: Any, rngs: nnx.Rngs) -> None:
        orthogonal = nnx.initializers.orthogonal()
        self.kernel = nnx.Param(GLOROT(rngs.params(), (features, 4 * hidden)))
        self.recurrent = nnx.Param(orthogonal(rngs.params(), (hidden, 4 * hidden)))
        self.bias = nnx.Param(jnp.zeros(4 * hidden).at[hidden : 2 * hidden].set(1.0))
        self.hidden, self.dtype = hidden, dtype or jnp.float32

    def __call__(self, x: jax.Array) -> jax.Array:
        kernel, recurrent = (
            self.kernel[...].astype(self.dtype),
            self.recurrent[...].astype(self.dtype),
        )
        inputs = x.astype(self.dtype) @ kernel + self.bias[...].astype(self.dtype)

        def step(carry: tuple[jax.Array, jax.Array], z: jax.Array) -> tuple[Any, None]:
            h, c = carry
            i, f, g, o = jnp.split(z + h @ recurrent, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

        zeros = jnp.zeros((x.shape[0], self.hidden), self.dtype)
        (h, _), _ = jax.lax.scan(step, (zeros, zeros), jnp.swapaxes(inputs, 0, 1))
        return h


class LstmClassifier(nnx.Module):
    def __init__(self, vocab: int, dtype: Any, rngs: nnx.Rngs) -> None:
        self.embed = nnx.Embed(
            vocab, LSTM.embed, embedding_init=_embedding_init, dtype=dtype, rngs=rngs
        )
        self.lstm = Lstm(LSTM.embed, LSTM.hidden, dtype, rngs)
        self.head = nnx.Linear(LSTM.hidden, 1, kernel_init=GLOROT, dtype=dtype, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        return self.head(self.lstm(self.embed(ids)))


# tui-bench:end model


# tui-bench:begin model flax
def build_model(
    model: str, shape: Any, dropout: float, dims: Any, dtype: Any, seed: int
) -> nnx.Module:
    rngs = nnx.Rngs(params=seed, dropout=seed + 1)
    # tui-bench:end model
    if model == "gpt":
        # tui-bench:begin model flax gpt
        return Gpt(dims, dropout, dtype, rngs)
        # tui-bench:end model
    if model == "transformer":
        # tui-bench:begin model flax transformer
        return Transformer(shape.vocab_size, shape.input_shape[0], dropout, dtype, rngs)
        # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model flax cnn
        return Cnn(shape.input_shape, shape.num_classes, dropout, dtype, rngs)
        # tui-bench:end model
    if model == "mlp":
        # tui-bench:begin model flax mlp
        return Mlp(shape.input_shape, shape.num_classes, dropout, dtype, rngs)
        # tui-bench:end model
    if model == "vgg16":
        # tui-bench:begin model flax vgg16
        return Vgg16(shape.input_shape, shape.num_classes, dropout, dtype, rngs)
        # tui-bench:end model
    if model == "lstm":
        # tui-bench:begin model flax lstm
        return LstmClassifier(shape.vocab_size, dtype, rngs)
        # tui-bench:end model
    raise ValueError(f"model {model!r} is not defined for flax")


def _shared_path(model: str, name: str) -> tuple[Any, ...]:
    """Where a canonical shared weight (``shared_init``'s names) lives in the Flax module: the
    attribute path of its ``nnx.Param``. Flax names a LayerNorm's γ ``scale`` and an Embed's table
    ``embedding``."""
    parts = name.split(".")
    if parts[0] in ("tokens", "positions"):
        return (parts[0], "embedding")
    leaf = {"gamma": "scale", "beta": "bias"}.get(parts[-1], parts[-1])
    if parts[0].startswith("block"):
        block, layer = int(parts[0][len("block") :]), parts[1]
        inside = {
            "transformer": ("query", "key", "value", "out"),
            "gpt": ("qkv", "out"),
        }[model]
        where = ("attention", layer) if layer in inside else (layer,)
        return ("blocks", block, *where, leaf)
    return (parts[0], leaf)  # head (transformer), final (gpt)


def load_shared(model: nnx.Module, what: str, weights: dict[str, np.ndarray]) -> None:
    """The shared draw (``shared_init``) into the built module: every trainable parameter gets
    its array, and nothing else; a Flax kernel is (in, out), the canonical layout."""
    state = nnx.state(model, nnx.Param)
    flat = dict(nnx.to_flat_state(state))
    targets = {name: _shared_path(what, name) for name in weights}
    if set(targets.values()) != set(flat) or len(set(targets.values())) != len(targets):
        raise ValueError(f"the shared weights and flax's {what} parameters do not match")
    for name, path in targets.items():
        variable = flat[path]
        variable.set_value(jnp.asarray(shared_init.checked(name, weights[name], variable.shape)))
    nnx.update(model, state)
