"""The gpt generating tokens in Theano (spec mode ``generate``; the contract is in
adapters/generate.py, docs/generation.md): a static KV cache in shared variables and two compiled
functions, the prefill and a one-token decode step, written over the built net's own shared
variables (no second copy of the weights).

- The cache: per layer, k and v of (B·H, P + N, Dh) ``theano.shared`` arrays, and the position
  a shared int64 scalar, allocated once in ``prepare``. The functions change them only through
  ``updates=``: ``T.set_subtensor`` at the written positions, which Theano's inplace optimisation
  turns into an in-place write of the shared buffer (no copy of the cache per token).
- The prefill (``theano.function`` of the prompt's (B, P) ids) writes positions 0..P-1, attends
  causally over the prompt, sets the position to P and returns the first token's ids.
- The decode step (``theano.function`` of the previous token's (B,) ids) writes its key and value
  at the position, attends over the whole cache with everything past the position masked (stale
  values of an earlier request are never seen), advances the position and returns the ids.

Both are compiled in ``prepare`` (C code, untimed: the first request pays nothing extra). Theano
on the CPU returns numpy arrays: each token's ids are on the host when the call returns, and the
token clock is read then (per-token timing).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import theano
import theano.tensor as T  # noqa: N812 - Theano's own convention

from adapters.theano.common import FLOATX, gelu_tanh


def _layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = T.sqr(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) / T.sqrt(var + np.float32(1e-5)) * gamma + beta


class TheanoGeneration:
    """The gpt's prefill and decode step over a static KV cache in shared variables.

    ``tokens`` and ``positions``: the embedding tables, ``blocks``: per layer the shared variables
    (g1, b1, wqkv, bqkv, wo, bo, g2, b2, w1, c1, w2, c2) in (in, out) layout, ``final``: the last
    LayerNorm's (gamma, beta); the head is the token table (tied)."""

    def __init__(
        self, tokens: Any, positions: Any, blocks: list[tuple], final: tuple, dims: Any, path: str
    ) -> None:
        self.tokens, self.positions, self.blocks, self.final = tokens, positions, blocks, final
        self.dims, self.path = dims, path

    def prepare(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        dims = self.dims
        heads, dh, d = dims.heads, dims.head_dim, dims.d_model
        length = prompt_tokens + new_tokens
        shape = (batch * heads, length, dh)
        self.cache = [
            (theano.shared(np.zeros(shape, FLOATX)), theano.shared(np.zeros(shape, FLOATX)))
            for _ in self.blocks
        ]
        self.position = theano.shared(np.int64(0))
        scale = np.float32(1.0 / np.sqrt(dh))

        def split(t: Any, time: int) -> Any:  # (B, time, d) → (B·H, time, Dh)
            return (
                t.reshape((batch, time, heads, dh)).dimshuffle(0, 2, 1, 3).reshape((-1, time, dh))
            )

        def merge(h: Any, time: int) -> Any:  # (B·H, time, Dh) → (B, time, d)
            return (
                h.reshape((batch, heads, time, dh)).dimshuffle(0, 2, 1, 3).reshape((batch, time, d))
            )

        def run(h: Any, time: int, attend: Any) -> tuple[Any, list]:
            updates = []
            for (g1, b1, wqkv, bqkv, wo, bo, g2, b2, w1, c1, w2, c2), cache in zip(
                self.blocks, self.cache, strict=True
            ):
                qkv = T.dot(_layer_norm(h, g1, b1), wqkv) + bqkv
                q, k, v = (split(qkv[:, :, i * d : (i + 1) * d], time) for i in range(3))
                a, written = attend(q, k, v, cache)
                updates += written
                h = h + T.dot(merge(a, time), wo) + bo
                h = h + T.dot(gelu_tanh(T.dot(_layer_norm(h, g2, b2), w1) + c1), w2) + c2
            last = _layer_norm(h[:, -1], *self.final)
            return T.argmax(T.dot(last, self.tokens.T), axis=-1), updates  # greedy, tied head

        def softmax(scores: Any, time: int, keys: int) -> Any:
            return T.nnet.softmax(scores.reshape((-1, keys))).reshape((batch * heads, time, keys))

        # The prefill: positions 0..P-1 written, causal among themselves.
        ids = T.lmatrix("prompt")
        future = np.triu(np.full((prompt_tokens,) * 2, -np.inf, FLOATX), k=1)

        def prefill_attend(q: Any, k: Any, v: Any, cache: tuple) -> tuple[Any, list]:
            scores = T.batched_dot(q, k.dimshuffle(0, 2, 1)) * scale + future
            a = T.batched_dot(softmax(scores, prompt_tokens, prompt_tokens), v)
            return a, [
                (cache[0], T.set_subtensor(cache[0][:, :prompt_tokens], k)),
                (cache[1], T.set_subtensor(cache[1][:, :prompt_tokens], v)),
            ]

        h = self.tokens[ids] + self.positions[:prompt_tokens]
        first, updates = run(h, prompt_tokens, prefill_attend)
        self.prefill_fn = theano.function(
            [ids], first, updates=[*updates, (self.position, T.constant(np.int64(prompt_tokens)))]
        )

        # The decode step: one token at the position, attending over the whole cache.
        token = T.lvector("token")
        pos = self.position
        hidden = T.switch(T.le(T.arange(length), pos), np.float32(0), np.float32(-np.inf))

        def decode_attend(q: Any, k: Any, v: Any, cache: tuple) -> tuple[Any, list]:
            keys = T.set_subtensor(cache[0][:, pos : pos + 1], k)
            values = T.set_subtensor(cache[1][:, pos : pos + 1], v)
            scores = T.batched_dot(q, keys.dimshuffle(0, 2, 1)) * scale + hidden
            a = T.batched_dot(softmax(scores, 1, length), values)
            return a, [(cache[0], keys), (cache[1], values)]

        h = self.tokens[token].dimshuffle(0, "x", 1) + self.positions[pos]
        step, updates = run(h, 1, decode_attend)
        self.decode_fn = theano.function([token], step, updates=[*updates, (pos, pos + 1)])
        return {
            "path": self.path,
            "cache": (
                f"static KV cache: per layer k and v of (B·H {batch * heads}, P+N {length}, "
                f"Dh {dh}) theano.shared arrays and the position a shared scalar, changed only "
                "through updates= (set_subtensor at the position, made in place by Theano's "
                "inplace optimisation); the decode step attends over the whole cache, masked past "
                "its position; the prefill attends causally over the prompt"
            ),
            "token_timing": "per-token",
            "token_host_copy": "each call returns the token's (B,) ids as a numpy array (CPU)",
            "compile": (
                "theano.function of the prefill and of the one-token decode step (C code), "
                "compiled in prepare_generation"
            ),
            "weights_dtype": "float32",
            "cache_dtype": "float32",
            "mode": "graph built without dropout or gradients",
        }

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        out = np.empty((len(prompt), new_tokens), dtype=np.int64)
        token = self.prefill_fn(np.asarray(prompt, dtype=np.int64))
        for t in range(new_tokens):
            if t:
                token = self.decode_fn(token)
            out[:, t] = token  # a numpy array: on the host as the call returns
            clock.token(out[:, t])
        return out


def from_net(net: Any, path: str) -> TheanoGeneration:
    """The plain Theano API's ``Net`` (adapters/theano/graph.py): its gpt layers' shared
    variables."""
    layers = dict(net.layers[:1]) | {"head": net.layers[-1][1]}
    tokens, positions = layers["embed"]
    blocks = [args for kind, args in net.layers if kind == "gpt_block"]
    gamma, beta, _tied = layers["head"]
    return TheanoGeneration(tokens, positions, blocks, (gamma, beta), net.dims, path)


def recompute(logits_fn: Any, seq_len: int, vocab: int, prompt: np.ndarray, new: int) -> np.ndarray:
    """Greedy tokens with no cache at all: the whole sequence through the net's compiled forward
    (``logits_fn``: (B, S) ids → (B·S, V) logits) for every token, padded to the net's fixed
    length (causal: the padding is never seen)."""
    seq = np.asarray(prompt, dtype=np.int64)
    batch = len(seq)
    for _ in range(new):
        padded = np.zeros((batch, seq_len), dtype=np.int32)
        padded[:, : seq.shape[1]] = seq
        logits = np.asarray(logits_fn(padded)).reshape(batch, seq_len, vocab)
        seq = np.concatenate([seq, logits[:, seq.shape[1] - 1].argmax(-1)[:, None]], axis=1)
    return seq[:, prompt.shape[1] :]
