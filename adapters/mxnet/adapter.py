"""MXNet 1.9.1 adapter. APIs: ``gluon`` (imperative Gluon), ``hybrid`` (the same Gluon network,
hybridized into a static graph), ``module`` (the symbolic Module API).

Same shape as ``adapters/torch``: ``make_backend(api, device, threads)`` returns a ``Backend``;
model and step code sit between ``# tui-bench:begin``/``# tui-bench:end`` markers (a marker naming
APIs applies to those APIs only). MXNet's OpenMP pool is sized from ``OMP_NUM_THREADS`` at import
(its runtime setters have no effect), so the worker sets it before this module is imported; the
effective count is read back from the OpenMP runtime MXNet loaded.
"""

from __future__ import annotations

import ctypes
import math
import os
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd
from mxnet.gluon import nn, rnn

from adapters import shared_init
from adapters.backend import Backend, DeviceError, Hyper, Parallel, Settings, logits_loss_correct
from adapters.data import binary_head
from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16

APIS = ("gluon", "hybrid", "module")


def openmp_threads() -> int | None:
    """omp_get_max_threads() of the OpenMP runtime loaded into this process (MXNet's)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        libraries = {line.split()[-1] for line in maps if "omp" in line.rsplit("/", 1)[-1]}
    for path in sorted(libraries):
        try:
            return int(ctypes.CDLL(path).omp_get_max_threads())
        except (OSError, AttributeError):
            continue
    return None


def resolve_device(device: str) -> mx.Context:
    if device == "cpu":
        return mx.cpu()
    index = int(device.split(":")[1]) if ":" in device else 0
    cuda = mx.runtime.Features().is_enabled("CUDA")
    found = mx.context.num_gpus() if cuda else 0
    if found == 0:
        build = "built with CUDA" if cuda else "CPU-only"
        raise DeviceError(f"mxnet runtime sees 0 GPUs; installed build {mx.__version__} is {build}")
    if index >= found:
        raise DeviceError(
            f"mxnet runtime sees {found} GPU(s) (gpu:0..gpu:{found - 1}); {device} does not exist"
        )
    return mx.gpu(index)


# Keras' defaults: Glorot-uniform kernels, zero biases, orthogonal recurrent kernels, forget-gate
# bias 1, embeddings uniform in ±0.05. (Biases are zeroed by every MXNet initializer.)
GLOROT_UNIFORM = mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3)
ORTHOGONAL = mx.init.Orthogonal(scale=1.0, rand_type="normal")
FORGET_BIAS_1 = mx.init.LSTMBias(forget_bias=1.0)
EMBEDDING_UNIFORM = mx.init.Uniform(0.05)


def _module_initializer() -> mx.init.Mixed:
    """The same initializers, chosen by parameter name for the symbolic API."""
    return mx.init.Mixed(
        [".*h2h_weight", ".*i2h_bias", ".*embed.*weight", ".*"],
        [ORTHOGONAL, FORGET_BIAS_1, EMBEDDING_UNIFORM, GLOROT_UNIFORM],
    )


# tui-bench:begin model gluon hybrid lstm
class _LastStep(gluon.HybridBlock):
    def hybrid_forward(self, F, sequence):  # noqa: N803 - Gluon's signature
        return F.squeeze(F.slice_axis(sequence, axis=1, begin=-1, end=None), axis=1)


# tui-bench:end model


# The convolutional models' kernel and pool windows and the vgg16's same-padding, as the model
# manifest declares them.
(_, C1K), (_, C2K) = CNN.conv
CNN_POOL, VGG_POOL = (CNN.pool, CNN.pool), (VGG16.pool, VGG16.pool)
VGG_KERNEL, PAD, VGG_DENSE = (VGG16.kernel, VGG16.kernel), VGG16.kernel // 2, VGG16.dense

# The transformer's sizes, as the model manifest declares them.
WIDTH, HEADS, HEAD_DIM = TRANSFORMER.d_model, TRANSFORMER.heads, TRANSFORMER.head_dim
D_FF, BLOCKS = TRANSFORMER.d_ff, TRANSFORMER.blocks


# tui-bench:begin model gluon hybrid transformer
class _SelfAttention(gluon.HybridBlock):
    """Multi-head self-attention written from Dense and batch_dot (MXNet 1.9 has no attention
    layer): four width × width projections with biases, scaled dot product, softmax, dropout."""

    def __init__(self, width: int, heads: int, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.width, self.heads = width, heads
        with self.name_scope():
            self.query = nn.Dense(width, flatten=False, in_units=width)
            self.key = nn.Dense(width, flatten=False, in_units=width)
            self.value = nn.Dense(width, flatten=False, in_units=width)
            self.out = nn.Dense(width, flatten=False, in_units=width)
            self.drop = nn.Dropout(dropout)

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        def split(t):  # (batch, time, width) → (batch·heads, time, width / heads)
            t = F.transpose(F.reshape(t, shape=(0, 0, self.heads, -1)), axes=(0, 2, 1, 3))
            return F.reshape(t, shape=(-3, 0, 0))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = F.batch_dot(q, k, transpose_b=True) / math.sqrt(self.width // self.heads)
        h = F.batch_dot(self.drop(F.softmax(scores, axis=-1)), v)
        h = F.transpose(F.reshape(h, shape=(-4, -1, self.heads, 0, 0)), axes=(0, 2, 1, 3))
        return self.out(F.reshape(h, shape=(0, 0, -3)))


class _EncoderBlock(gluon.HybridBlock):
    def __init__(self, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.attention = _SelfAttention(WIDTH, HEADS, dropout)
            self.norm1 = nn.LayerNorm(epsilon=1e-6, in_channels=WIDTH)
            self.hidden = nn.Dense(D_FF, flatten=False, in_units=WIDTH)
            self.back = nn.Dense(WIDTH, flatten=False, in_units=D_FF)
            self.norm2 = nn.LayerNorm(epsilon=1e-6, in_channels=WIDTH)
            self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        x = self.norm1(x + self.drop1(self.attention(x)))
        f = self.back(F.LeakyReLU(self.hidden(x), act_type="gelu"))  # GELU, erf form
        return self.norm2(x + self.drop2(f))


class _Transformer(gluon.HybridBlock):
    def __init__(self, vocab: int, length: int, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.tokens = nn.Embedding(vocab, WIDTH, weight_initializer=EMBEDDING_UNIFORM)
            self.positions = self.params.get(
                "positions_weight", shape=(1, length, WIDTH), init=EMBEDDING_UNIFORM
            )
            self.blocks = nn.HybridSequential()
            self.blocks.add(*(_EncoderBlock(dropout) for _ in range(BLOCKS)))
            self.head = nn.Dense(1, in_units=WIDTH)

    def hybrid_forward(self, F, ids, positions):  # noqa: N803 - Gluon's signature
        h = self.blocks(F.broadcast_add(self.tokens(ids), positions))
        return self.head(F.mean(h, axis=1))


# tui-bench:end model


# tui-bench:begin model module transformer
def _encoder_symbol(x: mx.sym.Symbol, dropout: float, name: str) -> mx.sym.Symbol:
    def dense(t, label, units=WIDTH):
        return mx.sym.FullyConnected(t, num_hidden=units, flatten=False, name=name + label)

    def split(t):  # (batch, time, width) → (batch·heads, time, head_dim)
        t = mx.sym.transpose(mx.sym.reshape(t, shape=(0, 0, HEADS, -1)), axes=(0, 2, 1, 3))
        return mx.sym.reshape(t, shape=(-3, 0, 0))

    q, k, v = (split(dense(x, label)) for label in ("query", "key", "value"))
    scores = mx.sym.batch_dot(q, k, transpose_b=True) / math.sqrt(HEAD_DIM)
    weights = mx.sym.Dropout(mx.sym.softmax(scores, axis=-1), p=dropout)
    h = mx.sym.reshape(mx.sym.batch_dot(weights, v), shape=(-4, -1, HEADS, 0, 0))
    h = dense(mx.sym.reshape(mx.sym.transpose(h, axes=(0, 2, 1, 3)), shape=(0, 0, -3)), "out")
    x = mx.sym.LayerNorm(x + mx.sym.Dropout(h, p=dropout), eps=1e-6, name=name + "norm1")
    f = dense(mx.sym.LeakyReLU(dense(x, "hidden", D_FF), act_type="gelu"), "back")
    return mx.sym.LayerNorm(x + mx.sym.Dropout(f, p=dropout), eps=1e-6, name=name + "norm2")


# tui-bench:end model


# tui-bench:begin model gpt
def _gelu_tanh(F, x):  # noqa: N803 - F: mx.nd or mx.sym, as Gluon passes it
    """GPT-2's GELU, tanh form (MXNet 1.9's ``LeakyReLU(act_type="gelu")`` is the erf form)."""
    return 0.5 * x * (1.0 + F.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _causal_attention(F, qkv, heads: int, head_dim: int, length: int, dropout: float):  # noqa: N803
    """Multi-head attention of the fused (batch, S, 3d) q/k/v, each position seeing itself and
    the ones before it: the log of a 0/1 lower-triangular mask adds -inf above the diagonal of
    the scores before the softmax; dropout on the attention weights. Returns (batch, S, d)."""

    def split(t):  # (batch, S, d) → (batch·heads, S, d / heads)
        t = F.transpose(F.reshape(t, shape=(0, 0, heads, -1)), axes=(0, 2, 1, 3))
        return F.reshape(t, shape=(-3, 0, 0))

    q, k, v = (split(t) for t in F.split(qkv, num_outputs=3, axis=-1))
    where = F.arange(length)
    seen = F.broadcast_lesser_equal(
        F.reshape(where, shape=(1, -1)), F.reshape(where, shape=(-1, 1))
    )
    scores = F.batch_dot(q, k, transpose_b=True) / math.sqrt(head_dim)
    weights = F.softmax(F.broadcast_add(scores, F.expand_dims(F.log(seen), axis=0)), axis=-1)
    h = F.batch_dot(F.Dropout(weights, p=dropout) if dropout > 0 else weights, v)
    h = F.transpose(F.reshape(h, shape=(-4, -1, heads, 0, 0)), axes=(0, 2, 1, 3))
    return F.reshape(h, shape=(0, 0, -3))


# tui-bench:end model


# tui-bench:begin model gluon hybrid gpt
class _GptBlock(gluon.HybridBlock):
    """Pre-LayerNorm: x + attention(LN(x)), then x + MLP(LN(x)); GELU in GPT-2's tanh form."""

    def __init__(self, dims: Any, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dims, self.dropout, d = dims, dropout, dims.d_model
        with self.name_scope():
            self.norm1 = nn.LayerNorm(epsilon=1e-5, in_channels=d)
            self.qkv = nn.Dense(3 * d, flatten=False, in_units=d)
            self.out = nn.Dense(d, flatten=False, in_units=d)
            self.norm2 = nn.LayerNorm(epsilon=1e-5, in_channels=d)
            self.hidden = nn.Dense(dims.d_ff, flatten=False, in_units=d)
            self.back = nn.Dense(d, flatten=False, in_units=dims.d_ff)
            self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        dims = self.dims
        qkv = self.qkv(self.norm1(x))
        a = _causal_attention(F, qkv, dims.heads, dims.head_dim, dims.seq_len, self.dropout)
        x = x + self.drop1(self.out(a))
        return x + self.drop2(self.back(_gelu_tanh(F, self.hidden(self.norm2(x)))))


class _Gpt(gluon.HybridBlock):
    """Token + position embeddings, L blocks, a final LayerNorm and the head: a Dense without
    bias built on the Embedding's own Parameter (``params=``: one weight, tied). Returns
    (batch, S, V) logits."""

    def __init__(self, dims: Any, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        d, vocab = dims.d_model, dims.vocab_size
        with self.name_scope():
            self.tokens = nn.Embedding(vocab, d)
            self.positions = self.params.get("positions_weight", shape=(1, dims.seq_len, d))
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.HybridSequential()
            self.blocks.add(*(_GptBlock(dims, dropout) for _ in range(dims.layers)))
            self.final = nn.LayerNorm(epsilon=1e-5, in_channels=d)
            self.head = nn.Dense(
                vocab, flatten=False, use_bias=False, in_units=d, params=self.tokens.params
            )

    def hybrid_forward(self, F, ids, positions):  # noqa: N803 - Gluon's signature
        h = self.blocks(self.drop(F.broadcast_add(self.tokens(ids), positions)))
        return self.head(self.final(h))


# tui-bench:end model


# tui-bench:begin model module gpt
def _gpt_block_symbol(x: mx.sym.Symbol, dims: Any, dropout: float, name: str) -> mx.sym.Symbol:
    def dense(t, label, units):
        return mx.sym.FullyConnected(t, num_hidden=units, flatten=False, name=name + label)

    def norm(t, label):
        return mx.sym.LayerNorm(t, eps=1e-5, name=name + label)

    def drop(t):
        return mx.sym.Dropout(t, p=dropout) if dropout > 0 else t

    d = dims.d_model
    qkv = dense(norm(x, "norm1"), "qkv", 3 * d)
    a = _causal_attention(mx.sym, qkv, dims.heads, dims.head_dim, dims.seq_len, dropout)
    x = x + drop(dense(a, "out", d))
    f = dense(_gelu_tanh(mx.sym, dense(norm(x, "norm2"), "hidden", dims.d_ff)), "back", d)
    return x + drop(f)


# tui-bench:end model

# How the transformer's attention is computed here (recorded with the run's settings).
ATTENTION = "written out: Dense projections, batch_dot + softmax + Dropout (no fused kernel)"
GPT_ATTENTION = (
    "written out: fused Dense q/k/v, batch_dot + causal mask (-inf above the diagonal) + softmax "
    "+ Dropout (no fused kernel)"
)


def mxnet_layout(name: str, value: np.ndarray) -> np.ndarray:
    """A canonical shared weight (adapters/shared_init.py) in MXNet's layout: FullyConnected
    weights are (out, in), the positions a (1, length, 128) table broadcast over the batch."""
    if name.endswith(".kernel"):
        return value.T
    return value[None] if name == "positions" else value


def gluon_parameters(net: _Transformer) -> dict[str, gluon.Parameter]:
    """The Gluon transformer's parameters under the canonical names."""
    found = {"tokens": net.tokens.weight, "positions": net.positions}
    found.update({"head.kernel": net.head.weight, "head.bias": net.head.bias})
    for b, block in enumerate(net.blocks):
        layers = {name: getattr(block.attention, name) for name in shared_init.PROJECTIONS}
        layers.update(norm1=block.norm1, hidden=block.hidden, back=block.back, norm2=block.norm2)
        for name, layer in layers.items():
            if name.startswith("norm"):
                found.update(
                    {f"block{b}.{name}.gamma": layer.gamma, f"block{b}.{name}.beta": layer.beta}
                )
            else:
                found.update(
                    {f"block{b}.{name}.kernel": layer.weight, f"block{b}.{name}.bias": layer.bias}
                )
    return found


def gpt_gluon_parameters(net: _Gpt) -> dict[str, gluon.Parameter]:
    """The Gluon gpt's parameters under the canonical names (the head has none of its own)."""
    found = {"tokens": net.tokens.weight, "positions": net.positions}
    found.update({"final.gamma": net.final.gamma, "final.beta": net.final.beta})
    for b, block in enumerate(net.blocks):
        for name in ("norm1", "qkv", "out", "norm2", "hidden", "back"):
            layer = getattr(block, name)
            first, second = ("gamma", "beta") if name.startswith("norm") else ("weight", "bias")
            canonical = ("gamma", "beta") if name.startswith("norm") else ("kernel", "bias")
            found[f"block{b}.{name}.{canonical[0]}"] = getattr(layer, first)
            found[f"block{b}.{name}.{canonical[1]}"] = getattr(layer, second)
    return found


def module_name(name: str) -> str:
    """A canonical name as the Module's argument: ``block0.query.kernel`` → ``block0_query_weight``
    (the symbol's layer names, see ``_encoder_symbol`` and ``_gpt_block_symbol``)."""
    special = {"tokens": "embed_weight", "positions": "pos_embed_weight"}
    if name in special:
        return special[name]
    layer, kind = name.rsplit(".", 1)
    layer = "fc" if layer == "head" else layer.replace(".", "_")
    return f"{layer}_{'weight' if kind == 'kernel' else kind}"


# tui-bench:begin model gluon hybrid
def build_net(
    model: str, classes: int, dropout: float, vocab: int, length: int = 0
) -> gluon.HybridBlock:
    net = nn.HybridSequential()
    # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model gluon hybrid cnn
        net.add(
            nn.Conv2D(*CNN.conv[0], activation="relu"),
            nn.MaxPool2D(CNN.pool),
            nn.Conv2D(*CNN.conv[1], activation="relu"),
            nn.MaxPool2D(CNN.pool),
            nn.Flatten(),
            nn.Dense(CNN.dense, activation="relu"),
            nn.Dropout(dropout),
            nn.Dense(classes),
        )
        # tui-bench:end model
    elif model == "mlp":
        # tui-bench:begin model gluon hybrid mlp
        net.add(
            nn.Flatten(),
            nn.Dense(MLP.hidden[0], activation="relu"),
            nn.Dropout(dropout),
            nn.Dense(MLP.hidden[1], activation="relu"),
            nn.Dropout(dropout),
            nn.Dense(classes),
        )
        # tui-bench:end model
    elif model == "vgg16":
        # tui-bench:begin model gluon hybrid vgg16
        for width, repeats in VGG16.stages:
            for _ in range(repeats):
                net.add(nn.Conv2D(width, VGG16.kernel, padding=PAD, activation="relu"))
            net.add(nn.MaxPool2D(VGG16.pool))
        net.add(nn.Flatten(), nn.Dense(VGG16.dense, activation="relu"), nn.Dropout(dropout))
        net.add(nn.Dense(classes))
        # tui-bench:end model
    elif model == "lstm":
        # tui-bench:begin model gluon hybrid lstm
        net.add(
            nn.Embedding(vocab, LSTM.embed, weight_initializer=EMBEDDING_UNIFORM),
            rnn.LSTM(
                LSTM.hidden,
                layout="NTC",
                input_size=LSTM.embed,
                h2h_weight_initializer=ORTHOGONAL,
                i2h_bias_initializer=FORGET_BIAS_1,
            ),
            _LastStep(),
            nn.Dense(1),
        )
        # tui-bench:end model
    elif model == "transformer":
        # tui-bench:begin model gluon hybrid transformer
        return _Transformer(vocab, length, dropout)
        # tui-bench:end model
    else:
        raise ValueError(f"model {model!r} is not defined for mxnet")
    # tui-bench:begin model gluon hybrid
    return net


# tui-bench:end model


# tui-bench:begin model module
def build_symbol(
    model: str, classes: int, dropout: float, vocab: int, seq_len: int, dims: Any = None
) -> mx.sym.Symbol:
    x = mx.sym.Variable("data")
    # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model module cnn
        x = mx.sym.Convolution(x, kernel=(C1K, C1K), num_filter=CNN.conv[0][0], name="conv1")
        x = mx.sym.Pooling(mx.sym.relu(x), kernel=CNN_POOL, stride=CNN_POOL, pool_type="max")
        x = mx.sym.Convolution(x, kernel=(C2K, C2K), num_filter=CNN.conv[1][0], name="conv2")
        x = mx.sym.Pooling(mx.sym.relu(x), kernel=CNN_POOL, stride=CNN_POOL, pool_type="max")
        x = mx.sym.relu(mx.sym.FullyConnected(mx.sym.flatten(x), num_hidden=CNN.dense, name="fc1"))
        x = mx.sym.Dropout(x, p=dropout)
        return mx.sym.FullyConnected(x, num_hidden=classes, name="fc2")
        # tui-bench:end model
    if model == "mlp":
        # tui-bench:begin model module mlp
        x = mx.sym.flatten(x)
        for i, width in enumerate(MLP.hidden, 1):
            x = mx.sym.relu(mx.sym.FullyConnected(x, num_hidden=width, name=f"fc{i}"))
            x = mx.sym.Dropout(x, p=dropout)
        return mx.sym.FullyConnected(x, num_hidden=classes, name=f"fc{len(MLP.hidden) + 1}")
        # tui-bench:end model
    if model == "vgg16":
        # tui-bench:begin model module vgg16
        for block, (width, repeats) in enumerate(VGG16.stages):
            for i in range(repeats):
                x = mx.sym.Convolution(
                    x, kernel=VGG_KERNEL, pad=(PAD, PAD), num_filter=width, name=f"conv{block}_{i}"
                )
                x = mx.sym.relu(x)
            x = mx.sym.Pooling(x, kernel=VGG_POOL, stride=VGG_POOL, pool_type="max")
        x = mx.sym.relu(mx.sym.FullyConnected(mx.sym.flatten(x), num_hidden=VGG_DENSE, name="fc1"))
        return mx.sym.FullyConnected(mx.sym.Dropout(x, p=dropout), num_hidden=classes, name="fc2")
        # tui-bench:end model
    if model == "lstm":
        # tui-bench:begin model module lstm
        x = mx.sym.Embedding(x, input_dim=vocab, output_dim=LSTM.embed, name="embed")
        cell = mx.rnn.LSTMCell(LSTM.hidden, prefix="lstm_")
        outputs, _ = cell.unroll(seq_len, inputs=x, layout="NTC", merge_outputs=False)
        return mx.sym.FullyConnected(outputs[-1], num_hidden=1, name="fc")
        # tui-bench:end model
    if model == "transformer":
        # tui-bench:begin model module transformer
        h = mx.sym.Embedding(x, input_dim=vocab, output_dim=WIDTH, name="embed")
        positions = mx.sym.Variable("pos_embed_weight", shape=(1, seq_len, WIDTH))
        h = mx.sym.broadcast_add(h, positions)
        for block in range(BLOCKS):
            h = _encoder_symbol(h, dropout, f"block{block}_")
        return mx.sym.FullyConnected(mx.sym.mean(h, axis=1), num_hidden=1, name="fc")
        # tui-bench:end model
    if model == "gpt":
        # tui-bench:begin model module gpt
        d, vocab = dims.d_model, dims.vocab_size
        # One variable for the token table and the head (tied): its gradient sums both uses.
        tokens = mx.sym.Variable("embed_weight", shape=(vocab, d))
        h = mx.sym.Embedding(x, weight=tokens, input_dim=vocab, output_dim=d, name="embed")
        h = mx.sym.broadcast_add(h, mx.sym.Variable("pos_embed_weight", shape=(1, seq_len, d)))
        h = mx.sym.Dropout(h, p=dropout) if dropout > 0 else h
        for block in range(dims.layers):
            h = _gpt_block_symbol(h, dims, dropout, f"block{block}_")
        h = mx.sym.LayerNorm(h, eps=1e-5, name="final")
        logits = mx.sym.FullyConnected(
            h, weight=tokens, no_bias=True, num_hidden=vocab, flatten=False, name="head"
        )
        return mx.sym.reshape(logits, shape=(-1, vocab))  # one row per position
        # tui-bench:end model
    raise ValueError(f"model {model!r} is not defined for mxnet")


class GluonBackend(Backend):
    framework = "mxnet"

    def __init__(self, api: str, device: str, threads: int) -> None:
        self.api = api
        self.ctx = resolve_device(device)
        self.ctxs = [self.ctx]
        self.kvstore = "device"  # Gluon's default; one context: no reduction happens
        self.binary = False
        self.amp = False
        self.applied: dict[str, Any] = {}

    def setup_parallel(self, parallel: Parallel) -> dict[str, Any]:
        """Data parallelism inside one process: N contexts (CPU ids or GPUs), each batch split
        across them, gradients reduced by the kvstore ('local' on CPU, 'device' on GPUs)."""
        if parallel.workers == 1:
            return {}
        if self.api == "module":
            raise RuntimeError("the Module API's multi-context path is not wired into tui-bench")
        if self.ctx.device_type == "gpu":
            self.ctxs, self.kvstore = [mx.gpu(i) for i in range(parallel.workers)], "device"
            for ctx in self.ctxs:
                resolve_device(f"gpu:{ctx.device_id}")  # each must exist
        else:
            self.ctxs, self.kvstore = [mx.cpu(i) for i in range(parallel.workers)], "local"
        return {
            "engine": f"Gluon Trainer, kvstore '{self.kvstore}' over N contexts in one process",
            "contexts": [str(ctx) for ctx in self.ctxs],
        }

    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        gpu = self.ctx.device_type == "gpu"
        if settings.precision == "amp-fp16":
            from mxnet.contrib import amp

            amp.init()  # before the network is built: casts lists of ops to float16
            self.amp = True
        compiles = {
            "gluon": "no (imperative)",
            "hybrid": "graph (hybridize static_alloc/static_shape)",
            "module": "graph (symbolic Module)",
        }[self.api]
        self.applied = {
            "precision": settings.precision,
            # TF32 in cuBLAS/cuDNN follows NVIDIA_TF32_OVERRIDE (set to 0 for strict fp32)
            "tf32": None if not gpu else os.environ.get("NVIDIA_TF32_OVERRIDE") != "0",
            "amp": self.amp,
            "autotune": "not applicable on cpu"
            if not gpu
            else f"MXNET_CUDNN_AUTOTUNE_DEFAULT={os.environ.get('MXNET_CUDNN_AUTOTUNE_DEFAULT')}",
            "input": settings.input,
            "timing": settings.timing,
            "compile": compiles,
        }
        return self.applied

    def to_device(self, x: np.ndarray, y: np.ndarray) -> tuple[nd.NDArray, nd.NDArray]:
        return self._arrays(x, y)

    def take(self, x: Any, y: Any, idx: np.ndarray) -> tuple[Any, Any]:
        if isinstance(x, nd.NDArray):  # input="device": gather on the device
            where = nd.array(idx, ctx=self.ctx, dtype=np.int64)
            return nd.take(x, where, axis=0), nd.take(y, where, axis=0)
        return x[idx], y[idx]

    def loss_value(self, loss: Any) -> float:
        return float(loss.asscalar()) if isinstance(loss, nd.NDArray) else float(loss)

    def memory_stats(self) -> dict[str, Any]:
        if self.ctx.device_type != "gpu":
            return {}
        return {"allocator_peak_mib": None, "allocator": "MXNet 1.9 reports no allocator peak"}

    def describe(self) -> dict[str, Any]:
        features = mx.runtime.Features()
        return {
            "framework_version": mx.__version__,
            "device": str(self.ctx),
            "device_name": str(self.ctx),
            "threads_effective": openmp_threads(),
            "interop_threads": None,
            "extra": {
                "cuda": features.is_enabled("CUDA"),
                "mkldnn": features.is_enabled("MKLDNN"),
                "openmp": features.is_enabled("OPENMP"),
            },
        }

    def _arrays(self, x: Any, y: Any) -> tuple[nd.NDArray, nd.NDArray]:
        if isinstance(x, nd.NDArray):
            return x, y  # input="device": already there, in NCHW
        return self._request(x), nd.array(y, ctx=self.ctx, dtype=np.float32)

    def _request(self, x: np.ndarray) -> nd.NDArray:
        """A host batch as the network takes it: float32 on the context, images NHWC → NCHW."""
        xb = nd.array(x, ctx=self.ctx, dtype=np.float32)
        return xb.transpose(axes=(0, 3, 1, 2)) if self.images else xb

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xb, yb = self._arrays(x, y)
        if self.images:
            xb = xb.transpose(axes=(0, 2, 3, 1))
        return xb.asnumpy(), yb.asnumpy()

    def sync(self) -> None:
        nd.waitall()

    def _shape_setup(self, hyper: Hyper, dataset) -> None:
        mx.random.seed(hyper.seed)
        np.random.seed(hyper.seed)  # mx.init.Orthogonal draws from numpy
        shape = dataset.shape
        self.hyper = hyper
        self.binary = binary_head(hyper.model, shape.num_classes)
        self.images = shape.kind == "image"
        if hyper.model in ("transformer", "gpt"):
            self.applied["attention"] = GPT_ATTENTION if hyper.model == "gpt" else ATTENTION
        self.sample = (dataset.x_train[: hyper.batch_size], dataset.y_train[: hyper.batch_size])

    def _load_shared(self, weights: dict[str, np.ndarray]) -> None:
        """The shared draw into the Gluon block's parameters (MXNet's layout)."""
        found = gpt_gluon_parameters if self.hyper.model == "gpt" else gluon_parameters
        targets = found(self.net)
        if set(targets) != set(weights) or len(targets) != len(self.net.collect_params().keys()):
            raise ValueError(f"the shared weights and the Gluon {self.hyper.model} do not match")
        for name, param in targets.items():
            value = shared_init.checked(name, mxnet_layout(name, weights[name]), param.shape)
            param.set_data(nd.array(value, dtype=np.float32))

    def build(self, hyper: Hyper, dataset) -> None:
        self._shape_setup(hyper, dataset)
        shape = dataset.shape
        length = shape.input_shape[0] if shape.kind == "sequence" else 0
        if hyper.model == "gpt":
            # tui-bench:begin model gluon hybrid gpt
            self.net = _Gpt(hyper.dims, hyper.dropout)
            # tui-bench:end model
        else:
            self.net = build_net(
                hyper.model, shape.num_classes, hyper.dropout, shape.vocab_size, length
            )
        self.net.initialize(GLOROT_UNIFORM, ctx=self.ctxs)
        load = self._load_shared
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        if hyper.model == "lstm":
            # Keras has one bias per gate, MXNet two: the second stays zero and frozen so the
            # function and the trainable parameter count match Keras exactly.
            for name, param in self.net.collect_params().items():
                if name.endswith("h2h_bias"):
                    param.grad_req = "null"
        if self.api == "hybrid":
            # tui-bench:begin step hybrid
            self.net.hybridize(static_alloc=True, static_shape=True)
            # tui-bench:end step
        self.net(self._arrays(*self.sample)[0])  # resolve deferred shapes
        # tui-bench:begin step gluon hybrid
        params = {"learning_rate": hyper.lr}
        if hyper.optimizer == "adam":
            params.update(beta1=hyper.beta1, beta2=hyper.beta2, epsilon=hyper.epsilon)
        self.trainer = gluon.Trainer(
            self.net.collect_params(), hyper.optimizer, params, kvstore=self.kvstore
        )
        if self.amp:
            from mxnet.contrib import amp

            amp.init_trainer(self.trainer)  # dynamic loss scaling
        if self.binary:
            self.loss_fn = gluon.loss.SigmoidBinaryCrossEntropyLoss()
        else:
            self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        # tui-bench:end step

    def param_count(self) -> int:
        return int(
            sum(p.data().size for p in self.net.collect_params().values() if p.grad_req != "null")
        )

    def _parallel_step(self, xb: nd.NDArray, yb: nd.NDArray) -> nd.NDArray:
        # Each context takes its contiguous slice; trainer.step all-reduces through the kvstore.
        xs = gluon.utils.split_and_load(xb, self.ctxs, even_split=True)
        ys = gluon.utils.split_and_load(yb, self.ctxs, even_split=True)
        with autograd.record():
            losses = [self.loss_fn(self.net(xi), yi) for xi, yi in zip(xs, ys, strict=True)]
        autograd.backward(losses)
        self.trainer.step(xb.shape[0])
        return losses[0].mean()  # the first slice's mean, as the other engines' rank 0 reports

    # tui-bench:begin step gluon hybrid
    def train_step(self, x: Any, y: Any) -> nd.NDArray:
        xb, yb = self._arrays(x, y)
        if len(self.ctxs) > 1:
            return self._parallel_step(xb, yb)
        with autograd.record():
            loss = self.loss_fn(self.net(xb), yb)
            if self.amp:
                from mxnet.contrib import amp

                with amp.scale_loss(loss, self.trainer) as scaled:
                    autograd.backward(scaled)
        if not self.amp:
            loss.backward()
        self.trainer.step(xb.shape[0])  # the summed gradient / batch = the mean loss's gradient
        return loss.mean()  # read back by the loop (loss_value)

    # tui-bench:end step

    def _logits(self, xb: nd.NDArray) -> np.ndarray:
        return self.net(xb).asnumpy()  # the gpt's: (batch, S, V)

    def prepare_inference(self) -> dict[str, Any]:
        # Hybridized, one CachedOp serves training and inference alike (Dropout reads
        # is_training at run time; static_alloc keeps a memory plan per recording state). Build's
        # shape-resolving call traced it, so hybridizing again drops that graph: the first
        # request traces and plans it in predict mode, as a serving process's first call does,
        # and first_request_s carries it.
        if self.api == "hybrid":
            self.net.hybridize(static_alloc=True, static_shape=True)
        path = {
            "gluon": "imperative Gluon block, net(x)",
            "hybrid": "hybridized Gluon block: net(x) through its CachedOp "
            "(static_alloc, static_shape), traced by the first request",
        }[self.api]
        return {
            "path": path,
            "mode": "autograd.predict_mode(): not recording, is_training False (Dropout off)",
        }

    def predict(self, x: np.ndarray) -> nd.NDArray:
        with autograd.predict_mode():
            return self.net(self._request(x))  # queued on MXNet's engine: sync() waits (waitall)

    def served_outputs(self, outputs: nd.NDArray) -> np.ndarray:
        return outputs.asnumpy()

    # -- generation (spec mode "generate": adapters/generate.py, adapters/mxnet/generate.py) --
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        from adapters.mxnet.generate import MxnetGeneration

        self.generation = MxnetGeneration(self.net, self.hyper.dims, self.ctx, self.api, self.amp)
        return self.generation.prepare(batch, prompt_tokens, new_tokens)

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        return self.generation.generate(prompt, new_tokens, clock)

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        total_loss, correct = 0.0, 0
        for start in range(0, len(x), batch_size):
            xs, ys = x[start : start + batch_size], y[start : start + batch_size]
            real = len(xs)
            if real < batch_size:
                # A hybridized block (static_shape) and a bound Module re-plan for a new batch
                # shape, and re-plan again at the next training step, which then lands in
                # steady state. Pad the last batch to the training shape; score the real rows.
                pad = np.resize(np.arange(real), batch_size - real)
                xs = np.concatenate([xs, xs[pad]])
                ys = np.concatenate([ys, ys[pad]])
            xb, _ = self._arrays(xs, ys)
            logits = self._logits(xb)
            # The real samples' rows (the gpt has one per position), as (rows, classes).
            logits = logits.reshape(batch_size, -1, logits.shape[-1])[:real]
            loss, right = logits_loss_correct(
                logits.reshape(-1, logits.shape[-1]), y[start : start + real], self.binary
            )
            total_loss, correct = total_loss + loss, correct + right
        n = max(y.size, 1)  # per target: the gpt has one per position
        return total_loss / n, correct / n


class ModuleBackend(GluonBackend):
    """The symbolic API: a Symbol bound into a Module, driven by forward_backward/update."""

    def build(self, hyper: Hyper, dataset) -> None:
        self._shape_setup(hyper, dataset)
        shape = dataset.shape
        logits = build_symbol(
            hyper.model,
            shape.num_classes,
            hyper.dropout,
            shape.vocab_size,
            shape.input_shape[0],
            hyper.dims,
        )
        xb, yb = self._arrays(*self.sample)
        self.label_shape = yb.shape
        self.logits_symbol = logits  # what a serving Module binds (prepare_inference)
        self.module = self._bind(hyper, logits, xb.shape, yb.shape)
        load = self._load_shared
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init

    def _load_shared(self, weights: dict[str, np.ndarray]) -> None:
        """The shared draw into the bound Module's arguments (MXNet's layout)."""
        current, _ = self.module.get_params()
        arrays = {}
        for name, value in weights.items():
            arg = module_name(name)
            if arg not in current:
                raise ValueError(f"shared weight {name}: the Module has no {arg}")
            value = shared_init.checked(name, mxnet_layout(name, value), current[arg].shape)
            arrays[arg] = nd.array(value, dtype=np.float32)
        # allow_missing=False: every argument of the Module must come from the shared draw.
        self.module.set_params(arrays, {}, allow_missing=False, force_init=True)

    # tui-bench:begin step module
    def _bind(self, hyper: Hyper, logits, data_shape, label_shape) -> mx.mod.Module:
        label = mx.sym.Variable("label")
        if self.binary:
            head = mx.sym.LogisticRegressionOutput(logits, mx.sym.reshape(label, (-1, 1)))
        else:
            head = mx.sym.SoftmaxOutput(logits, mx.sym.reshape(label, shape=(-1,)))
        # Gradients come from the head; the raw logits are a second, gradient-free output.
        net = mx.sym.Group([head, mx.sym.BlockGrad(logits)])
        fixed = ["lstm_h2h_bias"] if hyper.model == "lstm" else None  # Keras has one bias
        module = mx.mod.Module(
            net, label_names=["label"], context=self.ctx, fixed_param_names=fixed
        )
        module.bind(data_shapes=[("data", data_shape)], label_shapes=[("label", label_shape)])
        module.init_params(initializer=_module_initializer())
        params = {"learning_rate": hyper.lr}  # rescale_grad defaults to 1/batch: a mean loss
        # tui-bench:end step
        if hyper.model == "gpt":
            # tui-bench:begin step module gpt
            params["rescale_grad"] = 1.0 / math.prod(label_shape)  # a mean over every position
            # tui-bench:end step
        # tui-bench:begin step module
        if hyper.optimizer == "adam":
            params.update(beta1=hyper.beta1, beta2=hyper.beta2, epsilon=hyper.epsilon)
        module.init_optimizer(optimizer=hyper.optimizer, optimizer_params=params)
        return module

    def train_step(self, x: Any, y: Any) -> nd.NDArray:
        xb, yb = self._arrays(x, y)
        self.module.forward_backward(mx.io.DataBatch([xb], [yb]))
        self.module.update()
        logits = self.module.get_outputs()[1]
        if self.binary:
            z = logits.reshape((-1,))
            loss = nd.relu(z) - z * yb + nd.log1p(nd.exp(-nd.abs(z)))
        else:
            loss = -nd.pick(nd.log_softmax(logits), yb.reshape((-1,)))
        return loss.mean()  # read back by the loop (loss_value)

    # tui-bench:end step

    def param_count(self) -> int:
        args, _ = self.module.get_params()
        fixed = set(self.module._fixed_param_names or ())
        return int(sum(v.size for k, v in args.items() if k not in fixed))

    def _logits(self, xb: nd.NDArray) -> np.ndarray:
        labels = nd.zeros((xb.shape[0], *self.label_shape[1:]), ctx=self.ctx)
        self.module.forward(mx.io.DataBatch([xb], [labels]), is_train=False)
        return self.module.get_outputs()[1].asnumpy()

    def prepare_inference(self) -> dict[str, Any]:
        # MXNet's serving path for a trained Module: a second Module on the logits alone (no
        # label, no loss head), bound for_training=False (no gradient arrays; its Dropout is a
        # pass-through even when asked is_train=True: tried) at the request's shape, sharing
        # the training Module's parameter arrays (shared_module): one set of weights. It is
        # bound by the first request, so first_request_s carries the executor's planning.
        self.serving: mx.mod.Module | None = None
        batch = self._request(self.sample[0]).shape[0]
        return {
            "path": "symbolic Module forward: a logits-only Module bound for_training=False at "
            f"batch {batch} by the first request, sharing the training Module's parameters "
            "(shared_module)",
            "mode": "Module.forward(DataBatch, is_train=False) (Dropout off, no gradients)",
        }

    def predict(self, x: np.ndarray) -> nd.NDArray:
        xb = self._request(x)
        if self.serving is None:
            self.serving = mx.mod.Module(self.logits_symbol, label_names=None, context=self.ctx)
            self.serving.bind(
                data_shapes=[("data", xb.shape)], for_training=False, shared_module=self.module
            )
        self.serving.forward(mx.io.DataBatch([xb]), is_train=False)
        return self.serving.get_outputs()[0]  # queued on MXNet's engine: sync() waits


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"mxnet adapter has no API {api!r} (choose: {', '.join(APIS)})")
    if api == "module":
        return ModuleBackend(api, device, threads)
    return GluonBackend(api, device, threads)
