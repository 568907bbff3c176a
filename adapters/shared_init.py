"""The shared initial weights (the transformer's and the gpt's), drawn once from the run's seed:
every adapter loads these exact arrays into the model it built, so all framework × API
combinations start from one point.

numpy only (it runs in every worker's runtime, numpy 1.23 to 2.x). The draw uses the legacy
``np.random.RandomState``, whose stream numpy guarantees not to change between versions (the
``Generator`` streams carry no such promise), so every runtime draws the same bits from one seed.

Initialisers (Keras' defaults, as the other models use them): Glorot-uniform kernels with the fans
of a dense (in, out) kernel, so each attention projection is a 128×128 dense; zero biases;
LayerNorm γ = 1, β = 0; both embeddings uniform in ±0.05.

The sizes are the model manifest's (``adapters/models.json`` through ``adapters.models``); the
figures below are those it declares today (d_model 128, 4 heads of 32, d_ff 512, 2 blocks).
The canonical layout, in draw order (``transformer_weights`` returns it in this order):

| name | shape | initialiser |
|---|---|---|
| ``tokens`` | (vocab, 128) | uniform ±0.05 |
| ``positions`` | (length, 128) | uniform ±0.05 |
| ``block{b}.{query,key,value,out}.kernel`` | (128, 128) as (in, out) | Glorot-uniform |
| ``block{b}.{query,key,value,out}.bias`` | (128,) | zeros |
| ``block{b}.norm1.gamma`` / ``.beta`` | (128,) | ones / zeros |
| ``block{b}.hidden.kernel`` / ``.bias`` | (128, 512) / (512,) | Glorot-uniform / zeros |
| ``block{b}.back.kernel`` / ``.bias`` | (512, 128) / (128,) | Glorot-uniform / zeros |
| ``block{b}.norm2.gamma`` / ``.beta`` | (128,) | ones / zeros |
| ``head.kernel`` / ``head.bias`` | (128, 1) / (1,) | Glorot-uniform / zeros |

for b = 0, 1. Kernels are (in, out): y = x·W + b (Keras' and Theano's layout; torch's and MXNet's
dense weights are the transpose). A projection's output column h·32 + d is head h's feature d, the
split every adapter makes ((batch, time, 4, 32)); Keras' ``MultiHeadAttention`` holds the same
numbers as (128, 4, 32) for query/key/value and (4, 32, 128) for its output kernel.

The gpt (``gpt_weights``) is drawn the same way with GPT-2's initialiser (Radford et al. 2019;
nanoGPT's ``_init_weights``): every embedding and kernel normal(0, 0.02), the two residual
projections of each block (attention out, feed-forward back) normal(0, 0.02/√(2L)), zero biases,
LayerNorm γ = 1, β = 0. Its canonical layout, in draw order (d = d_model, L = layers; only the
normal draws consume the stream, in this order):

| name | shape | initialiser |
|---|---|---|
| ``tokens`` | (V, d) | normal(0, 0.02); also the head's weight (tied: logits = h·tokensᵀ) |
| ``positions`` | (S, d) | normal(0, 0.02) |
| ``block{b}.norm1.gamma`` / ``.beta`` | (d,) | ones / zeros |
| ``block{b}.qkv.kernel`` / ``.bias`` | (d, 3d) / (3d,) | normal(0, 0.02) / zeros |
| ``block{b}.out.kernel`` / ``.bias`` | (d, d) / (d,) | normal(0, 0.02/√(2L)) / zeros |
| ``block{b}.norm2.gamma`` / ``.beta`` | (d,) | ones / zeros |
| ``block{b}.hidden.kernel`` / ``.bias`` | (d, 4d) / (4d,) | normal(0, 0.02) / zeros |
| ``block{b}.back.kernel`` / ``.bias`` | (4d, d) / (d,) | normal(0, 0.02/√(2L)) / zeros |
| ``final.gamma`` / ``final.beta`` | (d,) | ones / zeros |

for b = 0 … L-1, drawn block by block (qkv, out, hidden, back). The fused q/k/v kernel's columns
are [q | k | v], each d wide, and within each head h's feature i is column h·(d/heads) + i (GPT-2's
``c_attn`` split; torch's fused ``Linear(d, 3d)`` holds the transpose).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from adapters.models import TRANSFORMER

# The models whose initial weights come from here; the others still draw from the same
# initialiser family in each framework (docs/frameworks.md).
SHARED_MODELS = ("transformer", "gpt")
# GPT-2's initialiser: the standard deviation of every embedding and kernel, before the residual
# projections' 1/√(2L).
GPT_STD = 0.02
WIDTH, HEADS, HIDDEN, BLOCKS = (
    TRANSFORMER.d_model,
    TRANSFORMER.heads,
    TRANSFORMER.d_ff,
    TRANSFORMER.blocks,
)
PROJECTIONS = ("query", "key", "value", "out")


def setting(seed: int) -> str:
    """What a run records as its ``init`` setting when it loaded these weights."""
    return f"shared: numpy RandomState draw, seed {seed} (adapters/shared_init.py)"


def _glorot_uniform(rng: np.random.RandomState, fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


def transformer_weights(seed: int, vocab: int, length: int) -> dict[str, np.ndarray]:
    """Every trainable array of the transformer (float32, canonical names and layout above)."""
    rng = np.random.RandomState(seed)
    out: dict[str, np.ndarray] = {
        "tokens": rng.uniform(-0.05, 0.05, (vocab, WIDTH)).astype(np.float32),
        "positions": rng.uniform(-0.05, 0.05, (length, WIDTH)).astype(np.float32),
    }

    def dense(name: str, fan_in: int, fan_out: int) -> None:
        out[f"{name}.kernel"] = _glorot_uniform(rng, fan_in, fan_out)
        out[f"{name}.bias"] = np.zeros(fan_out, np.float32)

    def norm(name: str) -> None:
        out[f"{name}.gamma"] = np.ones(WIDTH, np.float32)
        out[f"{name}.beta"] = np.zeros(WIDTH, np.float32)

    for b in range(BLOCKS):
        for projection in PROJECTIONS:
            dense(f"block{b}.{projection}", WIDTH, WIDTH)
        norm(f"block{b}.norm1")
        dense(f"block{b}.hidden", WIDTH, HIDDEN)
        dense(f"block{b}.back", HIDDEN, WIDTH)
        norm(f"block{b}.norm2")
    dense("head", WIDTH, 1)
    return out


def gpt_weights(seed: int, dims: Any, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Every trainable array of the gpt of ``dims`` (``adapters.models.gpt_dims``: layers,
    d_model, seq_len, vocab_size, d_ff), float32, canonical names and layout above; with
    ``scale``, every kernel and both embeddings multiplied by it (``GENERATION_SCALE``)."""
    out = _gpt_draw(seed, dims)
    if scale == 1.0:
        return out
    return {
        name: (value * np.float32(scale) if _scaled(name) else value) for name, value in out.items()
    }


def _scaled(name: str) -> bool:
    return name.endswith(".kernel") or name in ("tokens", "positions")


def _gpt_draw(seed: int, dims: Any) -> dict[str, np.ndarray]:
    rng = np.random.RandomState(seed)
    d, residual = dims.d_model, GPT_STD / np.sqrt(2.0 * dims.layers)

    def normal(std: float, shape: tuple[int, ...]) -> np.ndarray:
        return rng.normal(0.0, std, shape).astype(np.float32)

    out: dict[str, np.ndarray] = {
        "tokens": normal(GPT_STD, (dims.vocab_size, d)),
        "positions": normal(GPT_STD, (dims.seq_len, d)),
    }

    def norm(name: str) -> None:
        out[f"{name}.gamma"] = np.ones(d, np.float32)
        out[f"{name}.beta"] = np.zeros(d, np.float32)

    def dense(name: str, fan_in: int, fan_out: int, std: float) -> None:
        out[f"{name}.kernel"] = normal(std, (fan_in, fan_out))
        out[f"{name}.bias"] = np.zeros(fan_out, np.float32)

    for b in range(dims.layers):
        p = f"block{b}."
        norm(p + "norm1")
        dense(p + "qkv", d, 3 * d, GPT_STD)
        dense(p + "out", d, d, residual)
        norm(p + "norm2")
        dense(p + "hidden", d, dims.d_ff, GPT_STD)
        dense(p + "back", dims.d_ff, d, residual)
    norm("final")
    return out


def checked(name: str, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as a contiguous float32 array of the target's shape, or a ValueError naming the
    weight: a loader never lets a framework broadcast or reshape a wrong array silently."""
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"shared weight {name}: shape {value.shape}, the model holds {shape}")
    return np.ascontiguousarray(value, dtype=np.float32)


# A generation run (docs/generation.md) serves the gpt's draw with every kernel and both
# embeddings × GENERATION_SCALE: the plain draw's untrained gpt repeats one token per sequence
# whatever its context (so a broken cache would generate the same tokens); × 5 makes attention
# sharp and each token depend on the context. The worker sets it before ``build``.
GENERATION_SCALE = 5.0
_gpt_scale = 1.0


def for_generation() -> None:
    """This process serves generation: the gpt's draw is scaled (``GENERATION_SCALE``)."""
    global _gpt_scale
    _gpt_scale = GENERATION_SCALE


def start(
    model_name: str,
    seed: int,
    shape: Any,
    load: Callable[[dict[str, np.ndarray]], None],
    dims: Any = None,
) -> str | None:
    """Where ``model_name`` shares its initial weights: draw them for this seed and data shape
    (the gpt: for its ``dims``), hand them to the adapter's ``load`` (which maps them into its
    framework's layout) and return the run's ``init`` setting; None where each framework draws
    its own."""
    if model_name not in SHARED_MODELS:
        return None
    if model_name == "gpt":
        load(gpt_weights(seed, dims, _gpt_scale))
        scaled = f", kernels and embeddings × {_gpt_scale:g} to generate" if _gpt_scale != 1 else ""
        return (
            setting(seed) + ", GPT-2 initialiser (normal 0.02, residual projections /√(2L))"
        ) + scaled
    load(transformer_weights(seed, shape.vocab_size, shape.input_shape[0]))
    return setting(seed)


def load_keras(model: Any, weights: dict[str, np.ndarray]) -> None:
    """Set a built Keras transformer (Keras 3 on any backend, tf.keras 2.15 in the Estimator) to
    these weights, layer by layer in the model's order: Embedding, the positions layer, then per
    block its MultiHeadAttention, two LayerNormalization and two Dense; the head Dense last."""
    layers: dict[str, list[Any]] = {}
    for layer in model.layers:
        layers.setdefault(type(layer).__name__, []).append(layer)
    (embedding,), (positions,) = layers["Embedding"], layers["AddPositions"]
    attention, norms, dense = (
        layers["MultiHeadAttention"],
        layers["LayerNormalization"],
        layers["Dense"],
    )
    if (len(attention), len(norms), len(dense)) != (BLOCKS, 2 * BLOCKS, 2 * BLOCKS + 1):
        raise ValueError("load_keras: the model is not the catalog's transformer")

    def put(layer: Any, *names_shapes: tuple[str, tuple[int, ...]]) -> None:
        # Keras' set_weights refuses an array whose shape differs from the variable's.
        layer.set_weights([np.reshape(weights[n], s) for n, s in names_shapes])

    put(embedding, ("tokens", weights["tokens"].shape))
    put(positions, ("positions", weights["positions"].shape))
    split = (WIDTH, HEADS, WIDTH // HEADS)
    for b in range(BLOCKS):
        mha, p = attention[b], f"block{b}."
        # Keras keeps the four projections as EinsumDense sublayers (the same attributes in
        # Keras 2.15 and 3): query/key/value kernels (d, heads, d/heads) with (heads, d/heads)
        # biases, the output kernel (heads, d/heads, d) with a (d,) bias.
        for projection, sub in zip(
            PROJECTIONS[:3], (mha._query_dense, mha._key_dense, mha._value_dense), strict=True
        ):
            put(sub, (p + projection + ".kernel", split), (p + projection + ".bias", split[1:]))
        put(mha._output_dense, (p + "out.kernel", split[1:] + (WIDTH,)), (p + "out.bias", (WIDTH,)))
        for i, name in enumerate(("norm1", "norm2")):
            put(norms[2 * b + i], (p + name + ".gamma", (WIDTH,)), (p + name + ".beta", (WIDTH,)))
        for i, name in enumerate(("hidden", "back")):
            kernel = weights[p + name + ".kernel"]
            put(
                dense[2 * b + i],
                (p + name + ".kernel", kernel.shape),
                (p + name + ".bias", kernel.shape[1:]),
            )
    put(dense[-1], ("head.kernel", (WIDTH, 1)), ("head.bias", (1,)))


def load_keras_gpt(model: Any, weights: dict[str, np.ndarray]) -> None:
    """Set a built Keras gpt (``keras_models.gpt``: Keras 3 on any backend, tf.keras 2.15 in the
    Estimator) to the shared gpt draw, layer by layer by name.

    Keras' MultiHeadAttention has no fused projection: it keeps query, key and value as three
    EinsumDense kernels of (d, heads, d/heads) with (heads, d/heads) biases. The canonical fused
    (d, 3d) kernel is split column-wise into its [q | k | v] thirds and each reshaped row-major,
    which puts column h·(d/heads) + i at [h, i]: head h's feature i, where the fused layout has
    it. So the three projections compute exactly the fused one's columns, the same function.
    The output kernel (d, d) becomes (heads, d/heads, d) the same way. The head has no weight
    of its own: it is the token table (tied)."""
    loaded: set[int] = set()

    def put(layer: Any, *arrays: np.ndarray) -> None:
        # Each array reshaped to the variable's shape: a wrong size raises, never broadcasts.
        shapes = [tuple(int(n) for n in v.shape) for v in layer.weights]
        layer.set_weights(
            [checked(layer.name, np.reshape(a, s), s) for a, s in zip(arrays, shapes, strict=True)]
        )
        loaded.update(id(v) for v in layer.weights)

    put(model.get_layer("tokens"), weights["tokens"])
    put(model.get_layer("positions"), weights["positions"])
    layers = sum(1 for name in weights if name.endswith(".qkv.kernel"))
    for b in range(layers):
        p = f"block{b}."
        mha = model.get_layer(f"block{b}_attention")
        kernels = np.split(weights[p + "qkv.kernel"], 3, axis=1)
        biases = np.split(weights[p + "qkv.bias"], 3)
        for sub, kernel, bias in zip(
            (mha._query_dense, mha._key_dense, mha._value_dense), kernels, biases, strict=True
        ):
            put(sub, kernel, bias)
        put(mha._output_dense, weights[p + "out.kernel"], weights[p + "out.bias"])
        for name in ("norm1", "norm2"):
            put(
                model.get_layer(f"block{b}_{name}"),
                weights[p + name + ".gamma"],
                weights[p + name + ".beta"],
            )
        for name in ("hidden", "back"):
            put(
                model.get_layer(f"block{b}_{name}"),
                weights[p + name + ".kernel"],
                weights[p + name + ".bias"],
            )
    put(model.get_layer("final"), weights["final.gamma"], weights["final.beta"])
    if {id(v) for v in model.trainable_weights} != loaded:
        raise ValueError("load_keras_gpt: the model is not the catalog's gpt of these weights")
