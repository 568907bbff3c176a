"""The catalog's models as pure JAX functions of an explicit parameter pytree (the ``jit`` API), as
research code writes them: ``params`` is a flat dict of arrays, ``apply(params, x, key, rate)``
returns the logits, and the training step is one ``jax.jit`` over a pure function that returns
the new parameters and optimizer state (their buffers donated).

The parameters carry ``shared_init``'s canonical names and layout (kernels (in, out)), so the
transformer's and the gpt's pytree *is* the shared draw; the other models draw Keras' initialisers
(Glorot-uniform kernels, zero biases, embeddings uniform in ±0.05, an orthogonal recurrent kernel
with the forget bias at 1) from ``jax.random``. Sizes come from ``adapters/models.json``. Dropout
is inverted dropout (kept units scaled by 1/(1 - rate)), drawn from the step's key, in the places
torch puts it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from adapters import shared_init
from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16

Params = dict[str, jax.Array]
GLOROT = jax.nn.initializers.glorot_uniform()


class _Keys:
    """Initialisers drawn in order from one seed."""

    def __init__(self, seed: int) -> None:
        self.key, self.count = jax.random.key(seed), 0

    def __call__(self) -> jax.Array:
        self.count += 1
        return jax.random.fold_in(self.key, self.count)


# tui-bench:begin model jit
def dense(p: Params, name: str, x: jax.Array) -> jax.Array:
    return x @ p[name + ".kernel"] + p[name + ".bias"]


def dropout(x: jax.Array, rate: float, key: Any, index: int) -> jax.Array:
    if key is None or rate == 0:
        return x
    keep = jax.random.bernoulli(jax.random.fold_in(key, index), 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0).astype(x.dtype)


def _dense_init(p: dict[str, Any], keys: _Keys, name: str, fan_in: int, fan_out: int) -> None:
    p[name + ".kernel"] = GLOROT(keys(), (fan_in, fan_out))
    p[name + ".bias"] = jnp.zeros(fan_out)


def _conv_init(
    p: dict[str, Any], keys: _Keys, name: str, k: int, fan_in: int, fan_out: int
) -> None:
    p[name + ".kernel"] = GLOROT(keys(), (k, k, fan_in, fan_out))  # HWIO
    p[name + ".bias"] = jnp.zeros(fan_out)


# tui-bench:end model


# tui-bench:begin model jit cnn vgg16
def conv(p: Params, name: str, x: jax.Array, padding: str) -> jax.Array:
    dims = ("NHWC", "HWIO", "NHWC")
    y = jax.lax.conv_general_dilated(
        x, p[name + ".kernel"], (1, 1), padding, dimension_numbers=dims
    )
    return y + p[name + ".bias"]


def max_pool(x: jax.Array, size: int) -> jax.Array:
    window = (1, size, size, 1)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, window, "VALID")


# tui-bench:end model


# tui-bench:begin model jit cnn
def cnn(p: Params, x: jax.Array, key: Any, rate: float) -> jax.Array:
    x = max_pool(jax.nn.relu(conv(p, "conv1", x, "VALID")), CNN.pool)
    x = max_pool(jax.nn.relu(conv(p, "conv2", x, "VALID")), CNN.pool)
    x = jax.nn.relu(dense(p, "dense", x.reshape(x.shape[0], -1)))
    return dense(p, "out", dropout(x, rate, key, 0))


def _cnn_params(shape: Any, keys: _Keys) -> dict[str, Any]:
    (f1, k1), (f2, k2) = CNN.conv
    h, w, c = shape.input_shape
    side = lambda n: ((n - k1 + 1) // CNN.pool - k2 + 1) // CNN.pool  # noqa: E731
    p: dict[str, Any] = {}
    _conv_init(p, keys, "conv1", k1, c, f1)
    _conv_init(p, keys, "conv2", k2, f1, f2)
    _dense_init(p, keys, "dense", f2 * side(h) * side(w), CNN.dense)
    _dense_init(p, keys, "out", CNN.dense, shape.num_classes)
    return p


# tui-bench:end model


# tui-bench:begin model jit mlp
def mlp(p: Params, x: jax.Array, key: Any, rate: float) -> jax.Array:
    x = x.reshape(x.shape[0], -1)
    for i in range(len(MLP.hidden)):
        x = dropout(jax.nn.relu(dense(p, f"hidden{i}", x)), rate, key, i)
    return dense(p, "out", x)


def _mlp_params(shape: Any, keys: _Keys) -> dict[str, Any]:
    widths = [math.prod(shape.input_shape), *MLP.hidden]
    p: dict[str, Any] = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:], strict=False)):
        _dense_init(p, keys, f"hidden{i}", fan_in, fan_out)
    _dense_init(p, keys, "out", widths[-1], shape.num_classes)
    return p


# tui-bench:end model


# tui-bench:begin model jit vgg16
def vgg16(p: Params, x: jax.Array, key: Any, rate: float) -> jax.Array:
    layer = 0
    for _, repeats in VGG16.stages:
        for _ in range(repeats):
            x, layer = jax.nn.relu(conv(p, f"conv{layer}", x, "SAME")), layer + 1
        x = max_pool(x, VGG16.pool)
    x = jax.nn.relu(dense(p, "dense", x.reshape(x.shape[0], -1)))
    return dense(p, "out", dropout(x, rate, key, 0))


def _vgg16_params(shape: Any, keys: _Keys) -> dict[str, Any]:
    p: dict[str, Any] = {}
    channels, layer = shape.input_shape[2], 0
    for width, repeats in VGG16.stages:
        for _ in range(repeats):
            _conv_init(p, keys, f"conv{layer}", VGG16.kernel, channels, width)
            channels, layer = width, layer + 1
    side = shape.input_shape[0] // VGG16.pool ** len(VGG16.stages)
    _dense_init(p, keys, "dense", channels * side * side, VGG16.dense)
    _dense_init(p, keys, "out", VGG16.dense, shape.num_classes)
    return p


# tui-bench:end model


# tui-bench:begin model jit lstm
def lstm(p: Params, ids: jax.Array, key: Any, rate: float) -> jax.Array:
    """Keras' LSTM: fused kernels, gates input, forget, cell, output; the last step's output."""
    inputs = p["embed"][ids] @ p["lstm.kernel"] + p["lstm.bias"]

    def step(carry: tuple[jax.Array, jax.Array], z: jax.Array) -> tuple[Any, None]:
        h, c = carry
        i, f, g, o = jnp.split(z + h @ p["lstm.recurrent"], 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zeros = jnp.zeros((ids.shape[0], LSTM.hidden), inputs.dtype)
    (h, _), _ = jax.lax.scan(step, (zeros, zeros), jnp.swapaxes(inputs, 0, 1))
    return dense(p, "head", h)


def _lstm_params(shape: Any, keys: _Keys) -> dict[str, Any]:
    hidden = LSTM.hidden
    p: dict[str, Any] = {
        "embed": jax.random.uniform(
            keys(), (shape.vocab_size, LSTM.embed), jnp.float32, -0.05, 0.05
        ),
        "lstm.kernel": GLOROT(keys(), (LSTM.embed, 4 * hidden)),
        "lstm.recurrent": jax.nn.initializers.orthogonal()(keys(), (hidden, 4 * hidden)),
        "lstm.bias": jnp.zeros(4 * hidden).at[hidden : 2 * hidden].set(1.0),
    }
    _dense_init(p, keys, "head", hidden, 1)
    return p


# tui-bench:end model


# tui-bench:begin model jit transformer gpt
def layer_norm(p: Params, name: str, x: jax.Array, eps: float) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p[name + ".gamma"] + p[name + ".beta"]


def attend(
    q: jax.Array, k: jax.Array, v: jax.Array, causal: bool, rate: float, key: Any, index: int
) -> jax.Array:
    if key is None or rate == 0:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    if causal:
        future = jnp.triu(jnp.ones((q.shape[1], k.shape[1]), bool), k=1)
        scores = jnp.where(future, jnp.finfo(scores.dtype).min, scores)
    weights = dropout(jax.nn.softmax(scores, axis=-1), rate, key, index)
    return jnp.einsum("bnts,bsnh->btnh", weights, v)


# tui-bench:end model


# tui-bench:begin model jit transformer
def transformer(p: Params, ids: jax.Array, key: Any, rate: float) -> jax.Array:
    batch, time = ids.shape
    width, heads = TRANSFORMER.d_model, TRANSFORMER.heads
    h = p["tokens"][ids] + p["positions"][:time]
    split = lambda t: t.reshape(batch, time, heads, width // heads)  # noqa: E731
    for b in range(TRANSFORMER.blocks):
        n, at = f"block{b}.", 3 * b
        q, k, v = (split(dense(p, n + name, h)) for name in ("query", "key", "value"))
        a = attend(q, k, v, False, rate, key, at).reshape(batch, time, width)
        h = layer_norm(p, n + "norm1", h + dropout(dense(p, n + "out", a), rate, key, at + 1), 1e-6)
        f = dense(p, n + "back", jax.nn.gelu(dense(p, n + "hidden", h), approximate=False))
        h = layer_norm(p, n + "norm2", h + dropout(f, rate, key, at + 2), 1e-6)
    return dense(p, "head", h.mean(axis=1))


# tui-bench:end model


# tui-bench:begin model jit gpt
def gpt(p: Params, ids: jax.Array, key: Any, rate: float, heads: int) -> jax.Array:
    batch, time = ids.shape
    width = p["tokens"].shape[1]
    h = dropout(p["tokens"][ids] + p["positions"][:time], rate, key, 0)
    for b in range(sum(1 for name in p if name.endswith(".qkv.kernel"))):
        n, at = f"block{b}.", 3 * b + 1
        qkv = dense(p, n + "qkv", layer_norm(p, n + "norm1", h, 1e-5))
        q, k, v = (t.reshape(batch, time, heads, width // heads) for t in jnp.split(qkv, 3, -1))
        a = attend(q, k, v, True, rate, key, at).reshape(batch, time, width)
        h = h + dropout(dense(p, n + "out", a), rate, key, at + 1)
        f = jax.nn.gelu(
            dense(p, n + "hidden", layer_norm(p, n + "norm2", h, 1e-5)), approximate=True
        )
        h = h + dropout(dense(p, n + "back", f), rate, key, at + 2)
    logits = layer_norm(p, "final", h, 1e-5) @ p["tokens"].T  # tied: the token table is the head
    return logits.reshape(-1, logits.shape[-1])


# tui-bench:end model

MODELS: dict[str, Callable[..., jax.Array]] = {
    "cnn": cnn,
    "mlp": mlp,
    "vgg16": vgg16,
    "lstm": lstm,
    "transformer": transformer,
    "gpt": gpt,
}
_INITS = {"cnn": _cnn_params, "mlp": _mlp_params, "vgg16": _vgg16_params, "lstm": _lstm_params}


# tui-bench:begin model jit transformer gpt
def _shared_shapes(model: str, shape: Any, dims: Any) -> dict[str, Any]:
    """The shared draw's names and shapes (``shared_init``'s layout), as placeholders that
    ``load_shared`` replaces with the drawn arrays."""
    if model == "transformer":
        d, hidden = TRANSFORMER.d_model, TRANSFORMER.d_ff
        shapes = {"tokens": (shape.vocab_size, d), "positions": (shape.input_shape[0], d)}
        for b in range(TRANSFORMER.blocks):
            n = f"block{b}."
            for name, fan_in, fan_out in (
                *((projection, d, d) for projection in shared_init.PROJECTIONS),
                ("hidden", d, hidden),
                ("back", hidden, d),
            ):
                shapes.update(
                    {n + name + ".kernel": (fan_in, fan_out), n + name + ".bias": (fan_out,)}
                )
            for norm in ("norm1", "norm2"):
                shapes.update({n + norm + ".gamma": (d,), n + norm + ".beta": (d,)})
        shapes.update({"head.kernel": (d, 1), "head.bias": (1,)})
    else:
        d = dims.d_model
        shapes = {"tokens": (dims.vocab_size, d), "positions": (dims.seq_len, d)}
        for b in range(dims.layers):
            n = f"block{b}."
            for name, fan_in, fan_out in (
                ("qkv", d, 3 * d),
                ("out", d, d),
                ("hidden", d, dims.d_ff),
                ("back", dims.d_ff, d),
            ):
                shapes.update(
                    {n + name + ".kernel": (fan_in, fan_out), n + name + ".bias": (fan_out,)}
                )
            for norm in ("norm1", "norm2"):
                shapes.update({n + norm + ".gamma": (d,), n + norm + ".beta": (d,)})
        shapes.update({"final.gamma": (d,), "final.beta": (d,)})
    return {name: jax.ShapeDtypeStruct(s, jnp.float32) for name, s in shapes.items()}


# tui-bench:end model


def build_model(
    model: str, shape: Any, dims: Any, dtype: Any, seed: int
) -> tuple[dict[str, Any], Callable[..., jax.Array]]:
    """(params, apply): the initial pytree (for the transformer and the gpt, placeholders the
    shared draw fills) and ``apply(params, x, key, rate)``, computing in ``dtype`` (None: float32)
    with float32 parameters."""
    if model not in MODELS:
        raise ValueError(f"model {model!r} is not defined for jax/jit")
    if model in shared_init.SHARED_MODELS:
        params = _shared_shapes(model, shape, dims)
    else:
        # One compiled program draws every initial array (not one small compile per op).
        params = jax.jit(lambda: _INITS[model](shape, _Keys(seed)))()
    forward = MODELS[model]
    if model == "gpt":  # its head count is the run's size, not an array
        forward = functools.partial(gpt, heads=dims.heads)

    if dtype is None:
        return params, forward

    def apply(p: Params, x: jax.Array, key: Any, rate: float) -> jax.Array:
        low = jax.tree_util.tree_map(lambda a: a.astype(dtype), p)
        return forward(
            low, x if jnp.issubdtype(x.dtype, jnp.integer) else x.astype(dtype), key, rate
        )

    return params, apply


def load_shared(params: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
    """The shared draw into the pytree, in place: the same names, the same (in, out) layout."""
    if set(params) != set(weights):
        raise ValueError("the shared weights and jax/jit's parameters do not match")
    for name, value in weights.items():
        params[name] = jnp.asarray(shared_init.checked(name, value, tuple(params[name].shape)))


# tui-bench:begin step jit
def train_step(
    apply: Callable[..., jax.Array],
    tx: optax.GradientTransformation,
    rate: float,
    loss: Callable[..., jax.Array],
) -> Callable[..., Any]:
    def objective(params: Params, key: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        return loss(apply(params, x, key, rate), y)

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(params: Params, opt_state: Any, key: jax.Array, x: jax.Array, y: jax.Array) -> Any:
        key, dropout_key = jax.random.split(key)
        loss_value, grads = jax.value_and_grad(objective)(params, dropout_key, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, key, loss_value

    return step


# tui-bench:end step
