"""The gpt generating tokens in MXNet Gluon (spec mode ``generate``; the contract is in
adapters/generate.py, docs/generation.md): a static KV cache, a prefill block and a one-token
decode block built on the built ``_Gpt``'s own layers (no second copy of the weights).

- ``gluon``: the two blocks run imperatively (each operator queued on MXNet's engine as called).
- ``hybrid``: the same two blocks hybridized (``static_alloc``, ``static_shape``): each is traced
  once, in the first (warm-up) request, into a CachedOp. Nothing changes shape from one token to
  the next (the cache is static and an input of the step; the position is a (1,) input array), so
  the decode step is never traced again.

The cache: per layer, k and v of (B·H, P + N, Dh) NDArrays allocated once in ``prepare``. The
decode step takes them as inputs, attends over the whole cache with this token's key and value
blended in at its position and everything past the position masked (stale values of an earlier
request are never seen), and returns the token's ids and its (B·H, 1, Dh) key and value, which
are then written into the cache in place (a slice assignment on the engine) before the next step.
Returning only those (not a whole updated cache) keeps the step from copying the cache per token.
Each token's ids are copied to the host (``asnumpy``, which waits for the engine) and the token
clock read then: per-token timing.
"""

from __future__ import annotations

import math
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

from adapters.mxnet.adapter import _gelu_tanh


def _split(F, t, heads: int):  # noqa: N803 - (B, S, d) → (B·H, S, d / H)
    t = F.transpose(F.reshape(t, shape=(0, 0, heads, -1)), axes=(0, 2, 1, 3))
    return F.reshape(t, shape=(-3, 0, 0))


def _merge(F, h, heads: int):  # noqa: N803 - (B·H, S, Dh) → (B, S, d)
    h = F.transpose(F.reshape(h, shape=(-4, -1, heads, 0, 0)), axes=(0, 2, 1, 3))
    return F.reshape(h, shape=(0, 0, -3))


def _feed(F, block, x):  # noqa: N803 - the block's MLP half, residual included
    return x + block.back(_gelu_tanh(F, block.hidden(block.norm2(x))))


def _head(F, gpt, h, tokens_weight):  # noqa: N803 - the last position's greedy ids, (B,)
    last = gpt.final(F.squeeze(F.slice_axis(h, axis=1, begin=-1, end=None), axis=1))
    logits = F.FullyConnected(last, tokens_weight, num_hidden=gpt.vocab, no_bias=True)
    return F.argmax(logits, axis=-1)  # ties: the lowest id


class _Prefill(gluon.HybridBlock):
    """The prompt's P positions at once, causal among themselves: returns the last position's
    greedy ids and every layer's (B·H, P, Dh) k and v (flat: k0, v0, k1, v1, ...)."""

    def __init__(self, gpt: Any, prompt_tokens: int, **kwargs: Any) -> None:
        super().__init__(prefix=gpt.prefix, params=gpt.params, **kwargs)
        self.gpt, self.prompt_tokens = gpt, prompt_tokens
        with self.name_scope():
            self.positions = self.params.get("positions_weight")

    def hybrid_forward(self, F, ids, positions=None, tokens_weight=None):  # noqa: N803
        gpt, p, heads = self.gpt, self.prompt_tokens, self.gpt.heads
        h = F.broadcast_add(gpt.tokens(ids), F.slice_axis(positions, axis=1, begin=0, end=p))
        where = F.arange(p)
        seen = F.broadcast_lesser_equal(
            F.reshape(where, shape=(1, -1)), F.reshape(where, shape=(-1, 1))
        )
        cache = []
        for block in gpt.blocks:
            q, k, v = (
                _split(F, t, heads)
                for t in F.split(block.qkv(block.norm1(h)), num_outputs=3, axis=-1)
            )
            scores = F.batch_dot(q, k, transpose_b=True) / math.sqrt(gpt.head_dim)
            w = F.softmax(F.broadcast_add(scores, F.expand_dims(F.log(seen), axis=0)), axis=-1)
            h = _feed(F, block, h + block.out(_merge(F, F.batch_dot(w, v), heads)))
            cache += [k, v]
        return (_head(F, gpt, h, tokens_weight), *cache)


class _Decode(gluon.HybridBlock):
    """One token at position ``position`` over the static cache: returns its greedy ids and each
    layer's (B·H, 1, Dh) k and v (flat), for the caller to write at the position."""

    def __init__(self, gpt: Any, length: int, **kwargs: Any) -> None:
        super().__init__(prefix=gpt.prefix, params=gpt.params, **kwargs)
        self.gpt, self.length = gpt, length
        with self.name_scope():
            self.positions = self.params.get("positions_weight")

    def hybrid_forward(self, F, token, position, *cache, positions=None, tokens_weight=None):  # noqa: N803
        gpt, heads = self.gpt, self.gpt.heads
        table = F.reshape(positions, shape=(-3, 0))  # (S, d)
        h = F.broadcast_add(gpt.tokens(F.expand_dims(token, axis=1)), F.take(table, position))
        where = F.arange(self.length)
        here = F.reshape(F.broadcast_equal(where, position), shape=(1, -1, 1))  # (1, L, 1)
        seen = F.reshape(F.broadcast_lesser_equal(where, position), shape=(1, 1, -1))
        new = []
        for layer, block in enumerate(gpt.blocks):
            q, k, v = (
                _split(F, t, heads)
                for t in F.split(block.qkv(block.norm1(h)), num_outputs=3, axis=-1)
            )
            keys, values = (
                F.broadcast_add(F.broadcast_mul(c, 1 - here), F.broadcast_mul(t, here))
                for c, t in ((cache[2 * layer], k), (cache[2 * layer + 1], v))
            )
            scores = F.batch_dot(q, keys, transpose_b=True) / math.sqrt(gpt.head_dim)
            w = F.softmax(F.broadcast_add(scores, F.log(seen)), axis=-1)
            h = _feed(F, block, h + block.out(_merge(F, F.batch_dot(w, values), heads)))
            new += [k, v]
        return (_head(F, gpt, h, tokens_weight), *new)


class MxnetGeneration:
    """The gpt's prefill and decode step over a static KV cache, imperative or hybridized."""

    def __init__(self, net: Any, dims: Any, ctx: mx.Context, api: str, amp: bool) -> None:
        self.net, self.dims, self.ctx, self.api, self.amp = net, dims, ctx, api, amp
        net.vocab, net.heads, net.head_dim = dims.vocab_size, dims.heads, dims.head_dim

    def prepare(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        dims = self.dims
        length = prompt_tokens + new_tokens
        shape = (batch * dims.heads, length, dims.head_dim)
        self.cache = [nd.zeros(shape, ctx=self.ctx) for _ in range(2 * dims.layers)]
        self.position = nd.zeros((1,), ctx=self.ctx)
        self.prefill = _Prefill(self.net, prompt_tokens)
        self.decode = _Decode(self.net, length)
        # The blocks' parameters are the net's own (shared ParameterDict): one copy of the weights.
        self.prefill.tokens_weight = self.decode.tokens_weight = self.net.tokens.weight
        compiled = "no (imperative)"
        if self.api == "hybrid":
            for block in (self.prefill, self.decode):
                block.hybridize(static_alloc=True, static_shape=True)
            compiled = (
                "hybridize(static_alloc=True, static_shape=True) of the prefill and of the "
                "one-token decode step: each traced once, in the first request"
            )
        return {
            "path": (
                "hybridized Gluon prefill and one-token decode step (CachedOp)"
                if self.api == "hybrid"
                else "imperative Gluon, cached one-token decode step"
            ),
            "cache": (
                f"static KV cache: per layer k and v of (B·H {batch * dims.heads}, P+N {length}, "
                f"Dh {dims.head_dim}) NDArrays, inputs of the decode step; the step attends over "
                "the whole cache with its own key and value blended in at the position and the "
                "rest past the position masked, returns that key and value, written into the "
                "cache in place (slice assignment); the prefill attends causally over the prompt"
            ),
            "token_timing": "per-token",
            "token_host_copy": "each token's (B,) ids copied to the host (asnumpy) as it exists",
            "compile": compiled,
            "weights_dtype": "float32",
            "cache_dtype": "float32",
            "mode": "autograd.predict_mode() (no dropout, not recording)",
            **(
                {"compute": "AMP float16: amp.init() casts its listed ops (FullyConnected, ...)"}
                if self.amp
                else {}
            ),
        }

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        out = np.empty((len(prompt), new_tokens), dtype=np.int64)
        p = prompt.shape[1]
        with autograd.predict_mode():
            ids = nd.array(prompt, ctx=self.ctx, dtype=np.float32)
            token, *kv = self.prefill(ids)
            for cache, new in zip(self.cache, kv, strict=True):
                cache[:, :p] = new
            for t in range(new_tokens):
                if t:
                    pos = p + t - 1
                    self.position[:] = pos
                    token, *kv = self.decode(token, self.position, *self.cache)
                    for cache, new in zip(self.cache, kv, strict=True):
                        cache[:, pos : pos + 1] = new
                out[:, t] = token.asnumpy()  # waits for the engine: the token is on the host
                clock.token(out[:, t])
        return out


def recompute(net: Any, seq_len: int, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy tokens with no cache at all: the whole sequence through the net's own forward for
    every token, padded to the net's fixed length (causal: the padding is never seen)."""
    seq = np.asarray(prompt, dtype=np.int64)
    batch = len(seq)
    with autograd.predict_mode():
        for _ in range(new_tokens):
            padded = np.zeros((batch, seq_len), dtype=np.float32)
            padded[:, : seq.shape[1]] = seq
            logits = net(nd.array(padded)).asnumpy()
            seq = np.concatenate([seq, logits[:, seq.shape[1] - 1].argmax(-1)[:, None]], axis=1)
    return seq[:, prompt.shape[1] :]
