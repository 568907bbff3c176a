"""The gpt generating tokens in TensorFlow (spec mode ``generate``; the contract is in
adapters/generate.py, docs/generation.md): a static KV cache and a cached decode step, as a
TensorFlow user writes fast generation.

- ``eager``: the prefill and the decode step run eagerly, op by op, on the built model's own
  variables (no second copy of the weights at fp32).
- ``graph``: the same two functions in ``tf.function`` with fixed input signatures (the prompt's
  (B, P), the token's (B,)) and the cache and the position as ``tf.Variable``s: each traces once,
  whatever the token (a Python int position would retrace per token: the trap HF's
  tf-xla-generate post warns of). ``traces()`` says how many times they traced.
- ``keras``: the decode step calls the built tf.keras model's own layers (its LayerNormalization,
  MultiHeadAttention's EinsumDense projections, Dense, the tied embedding), inside ``tf.function``
  as Keras' own compiled predict function runs them (jit_compile=False, Keras on TF's default
  here); cache and position as variables, as ``graph``.
- ``xla``: the whole generation, the prefill and a ``tf.while_loop`` over the decode steps, as
  ONE ``tf.function(jit_compile=True)``, the cache as loop state updated by
  ``dynamic_update_slice``: how HF's TF ``generate`` is fast (one XLA program per shape; a
  per-token XLA call pays the call and the host round trip per token). The number of tokens is
  a tensor argument and the output a (B, N) buffer, so a one-token generation (the TTFT probe)
  runs the same program. Its tokens cannot be timed one by one: token_timing "whole".

Weights and cache are stored in the served dtype (bf16: bfloat16 copies of the weights as
variables; fp32: the model's variables themselves). Greedy: argmax of the last position's
logits, computed with the tied head.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla as tf2xla

from adapters.keras_models import GPT_LAYER_NORM_EPSILON

SERVED_DTYPE = {
    "fp32": tf.float32,
    "tf32": tf.float32,
    "bf16": tf.bfloat16,
    "amp-fp16": tf.float16,
}
COMPILE = {
    "eager": "no (eager)",
    "graph": "tf.function(prefill, decode step; fixed input_signature), XLA off",
    "keras": "tf.function(prefill, decode step of the tf.keras layers; fixed input_signature), "
    "XLA off (jit_compile=False)",
    "xla": "tf.function(jit_compile=True) of the whole generation (prefill + tf.while_loop)",
}
PATH = {
    "eager": "eager TF ops on the model's variables, cached decode step",
    "graph": "tf.function prefill and decode step, cache and position as tf.Variables",
    "keras": "the tf.keras model's own layers called in a tf.function decode step, cache and "
    "position as tf.Variables",
    "xla": "one XLA function: prefill + tf.while_loop of decode steps, cache as loop state",
}


class TensorFlowGeneration:
    """The gpt's prefill and decode step over a static KV cache, eager, traced or one XLA loop."""

    def __init__(self, model: Any, api: str, precision: str, device: str) -> None:
        self.model = model
        self.api = api
        self.device = device
        self.dtype = SERVED_DTYPE[precision]
        mha = model.get_layer("block0_attention")
        self.layers = sum(1 for layer in model.layers if layer.name.endswith("_attention"))
        self.heads, self.head_dim = (int(n) for n in mha._query_dense.kernel.shape[1:])
        self.width = self.heads * self.head_dim
        self.weights = self._served_weights()

    def _served_weights(self) -> dict[str, Any]:
        """Every weight the steps read, by name: the model's variables at float32, bfloat16 (or
        float16) variable copies otherwise (served models are stored in their precision)."""
        model = self.model
        found: dict[str, Any] = {
            "tokens": model.get_layer("tokens").embeddings,
            "positions": model.get_layer("positions").table,
            "final.gamma": model.get_layer("final").gamma,
            "final.beta": model.get_layer("final").beta,
        }
        for b in range(self.layers):
            mha = model.get_layer(f"block{b}_attention")
            for name, dense in (
                ("q", mha._query_dense),
                ("k", mha._key_dense),
                ("v", mha._value_dense),
                ("out", mha._output_dense),
            ):
                found[f"{b}.{name}.kernel"], found[f"{b}.{name}.bias"] = dense.kernel, dense.bias
            for name in ("norm1", "norm2"):
                norm = model.get_layer(f"block{b}_{name}")
                found[f"{b}.{name}.gamma"], found[f"{b}.{name}.beta"] = norm.gamma, norm.beta
            for name in ("hidden", "back"):
                dense = model.get_layer(f"block{b}_{name}")
                found[f"{b}.{name}.kernel"], found[f"{b}.{name}.bias"] = dense.kernel, dense.bias
        if self.dtype == tf.float32 or self.api == "keras":  # keras: its layers hold their own
            return found
        with tf.device(self.device):
            return {
                k: tf.Variable(tf.cast(v, self.dtype), trainable=False) for k, v in found.items()
            }

    def prepare(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        self.batch, self.prompt_tokens, self.new_tokens = batch, prompt_tokens, new_tokens
        self.length = length = prompt_tokens + new_tokens
        shape = (batch, self.heads, length, self.head_dim)
        prompt_spec = tf.TensorSpec((batch, prompt_tokens), tf.int32)
        with tf.device(self.device):
            if self.api == "xla":
                self.cache: list[tuple[Any, Any]] = []
                self.whole = tf.function(
                    self._whole,
                    input_signature=[prompt_spec, tf.TensorSpec((), tf.int32)],
                    jit_compile=True,
                )
            else:
                self.cache = [
                    (
                        tf.Variable(tf.zeros(shape, self.dtype), trainable=False),
                        tf.Variable(tf.zeros(shape, self.dtype), trainable=False),
                    )
                    for _ in range(self.layers)
                ]
                self.position = tf.Variable(0, dtype=tf.int32, trainable=False)
                self.prefill_fn, self.decode_fn = self._prefill, self._decode
                if self.api in ("graph", "keras"):
                    self.prefill_fn = tf.function(self._prefill, input_signature=[prompt_spec])
                    self.decode_fn = tf.function(
                        self._decode, input_signature=[tf.TensorSpec((batch,), tf.int32)]
                    )
        stored = self.dtype.name
        weights_dtype = stored
        if self.api == "keras" and self.dtype != tf.float32:
            # The Keras layers hold their own variables (float32 under the mixed policy) and
            # cast them per call: what is stored is float32.
            weights_dtype = f"float32 (Keras {self.model.dtype_policy.name} policy)"
        cache = (
            "static KV cache: per layer k and v of "
            f"(B {batch}, H {self.heads}, P+N {length}, Dh {self.head_dim}), "
        )
        if self.api == "xla":
            cache += (
                "loop state of the compiled while-loop (zeroed per request inside the program), "
                "written by dynamic_update_slice at the position"
            )
        else:
            cache += "tf.Variables written in place at the position (strided-slice assign)"
        cache += (
            "; the decode step attends over the whole cache, masked past its position; the "
            "prefill attends causally over the prompt"
        )
        return {
            "path": PATH[self.api],
            "cache": cache,
            "token_timing": "whole" if self.api == "xla" else "per-token",
            "token_host_copy": (
                "none per token: the (B, N) ids come to the host once, at the end"
                if self.api == "xla"
                else "each token's (B,) ids copied to the host (.numpy()) as it exists"
            ),
            "compile": COMPILE[self.api],
            "weights_dtype": weights_dtype,
            "cache_dtype": stored,
            "mode": "no dropout (the steps call no Dropout layer), no GradientTape",
        }

    def traces(self) -> int:
        """How many times the traced functions have traced (0 for eager): bounded, never per
        token (tests/test_tensorflow_generation.py)."""
        if self.api == "xla":
            return int(self.whole.experimental_get_tracing_count())
        if self.api in ("graph", "keras"):
            return int(
                self.prefill_fn.experimental_get_tracing_count()
                + self.decode_fn.experimental_get_tracing_count()
            )
        return 0

    # -- the model's pieces, on its weights (or, for keras, its own layers) --------------------
    def _norm_name(self, b: int, name: str) -> str:
        return f"{b}_{name}" if self.api == "keras" else f"{b}.{name}"

    def _norm(self, name: str, x: tf.Tensor) -> tf.Tensor:
        if self.api == "keras":
            layer = self.model.get_layer("final" if name == "final" else f"block{name}")
            return tf.cast(layer(x), self.dtype)
        w = self.weights
        x32 = tf.cast(x, tf.float32)  # the statistics in float32, as Keras' LayerNormalization
        mean, var = tf.nn.moments(x32, axes=[-1], keepdims=True)
        y = (x32 - mean) * tf.math.rsqrt(var + GPT_LAYER_NORM_EPSILON)
        return tf.cast(y, self.dtype) * w[f"{name}.gamma"] + w[f"{name}.beta"]

    def _project(self, b: int, name: str, x: tf.Tensor) -> tf.Tensor:
        """q, k or v: (B, T, d) -> (B, T, H, Dh); out: (B, T, H, Dh) -> (B, T, d)."""
        if self.api == "keras":
            mha = self.model.get_layer(f"block{b}_attention")
            dense = {
                "q": mha._query_dense,
                "k": mha._key_dense,
                "v": mha._value_dense,
                "out": mha._output_dense,
            }[name]
            return tf.cast(dense(x), self.dtype)
        kernel, bias = self.weights[f"{b}.{name}.kernel"], self.weights[f"{b}.{name}.bias"]
        if name == "out":
            return tf.einsum("bthk,hkd->btd", x, kernel) + bias
        return tf.einsum("btd,dhk->bthk", x, kernel) + bias

    def _feed(self, b: int, x: tf.Tensor) -> tf.Tensor:
        if self.api == "keras":
            hidden = self.model.get_layer(f"block{b}_hidden")
            return tf.cast(self.model.get_layer(f"block{b}_back")(hidden(x)), self.dtype)
        w = self.weights
        h = tf.matmul(x, w[f"{b}.hidden.kernel"]) + w[f"{b}.hidden.bias"]
        h = tf.nn.gelu(h, approximate=True)  # GPT-2's tanh form, as the model's
        return tf.matmul(h, w[f"{b}.back.kernel"]) + w[f"{b}.back.bias"]

    def _embed(self, ids: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        if self.api == "keras":
            tokens = tf.cast(self.model.get_layer("tokens")(ids), self.dtype)
        else:
            tokens = tf.gather(self.weights["tokens"], ids)
        table = self.weights["positions"]
        return tokens + tf.cast(tf.gather(table, positions), self.dtype)

    def _head(self, h: tf.Tensor) -> tf.Tensor:
        """The last position's logits by the tied token table, greedy: (B,) int32 ids."""
        last = self._norm("final", h[:, -1])
        if self.api == "keras":
            logits = self.model.get_layer("tokens")(last, reverse=True)
        else:
            logits = tf.matmul(last, self.weights["tokens"], transpose_b=True)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def _attention(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        """q (B, H, T, Dh) over k, v (B, H, S, Dh), where ``mask`` (T, S) is True: (B, T, H, Dh)."""
        scores = tf.einsum("bhqk,bhsk->bhqs", q, k) * (1.0 / math.sqrt(self.head_dim))
        scores = tf.where(mask, tf.cast(scores, tf.float32), -1e30)
        weights = tf.cast(tf.nn.softmax(scores, axis=-1), self.dtype)
        return tf.transpose(tf.einsum("bhqs,bhsk->bhqk", weights, v), (0, 2, 1, 3))

    def _blocks(self, h: tf.Tensor, position: Any, caches: list[tuple[Any, Any]]) -> Any:
        """Every block over ``h`` (B, T, d) starting at ``position``; each layer's k and v written
        into its cache first (variables: assigned; loop state: dynamic_update_slice, and the
        new caches returned). The prefill (T = P, position 0) attends causally over itself; a
        decode step (T = 1) over the whole cache masked past its position."""
        time = h.shape[1]
        prefill = time != 1
        new_caches = []
        for b in range(self.layers):
            x = self._norm(self._norm_name(b, "norm1"), h)
            q, k, v = (
                tf.transpose(self._project(b, name, x), (0, 2, 1, 3)) for name in ("q", "k", "v")
            )
            cache_k, cache_v = caches[b]
            if isinstance(cache_k, tf.Variable):
                cache_k[:, :, position : position + time].assign(k)
                cache_v[:, :, position : position + time].assign(v)
                cache_k, cache_v = cache_k.read_value(), cache_v.read_value()
            else:
                start = tf.stack([0, 0, tf.cast(position, tf.int32), 0])
                cache_k = tf2xla.dynamic_update_slice(cache_k, k, start)
                cache_v = tf2xla.dynamic_update_slice(cache_v, v, start)
                new_caches.append((cache_k, cache_v))
            if prefill:
                mask = tf.linalg.band_part(tf.ones((time, time), tf.bool), -1, 0)
                a = self._attention(q, k, v, mask)
            else:
                mask = (tf.range(self.length) <= position)[None, :]
                a = self._attention(q, cache_k, cache_v, mask)
            h = h + self._project(b, "out", a)
            h = h + self._feed(b, self._norm(self._norm_name(b, "norm2"), h))
        return self._head(h), new_caches

    # -- the steps -----------------------------------------------------------------------------
    def _prefill(self, ids: tf.Tensor) -> tf.Tensor:
        time = ids.shape[1]
        token, _ = self._blocks(self._embed(ids, tf.range(time)), 0, self.cache)
        self.position.assign(time)
        return token

    def _decode(self, token: tf.Tensor) -> tf.Tensor:
        position = self.position.read_value()
        h = self._embed(token[:, None], position[None])
        token, _ = self._blocks(h, position, self.cache)
        self.position.assign_add(1)
        return token

    def _whole(self, ids: tf.Tensor, new_tokens: tf.Tensor) -> tf.Tensor:
        """The whole generation as one program: the prefill, then ``new_tokens - 1`` decode steps
        in a while-loop whose state is the cache; (B, N) ids, the first ``new_tokens`` set."""
        batch, time = ids.shape
        shape = (batch, self.heads, self.length, self.head_dim)
        zeros = [(tf.zeros(shape, self.dtype), tf.zeros(shape, self.dtype))] * self.layers
        token, caches = self._blocks(self._embed(ids, tf.range(time)), 0, zeros)
        out = tf.zeros((batch, self.new_tokens), tf.int32)
        out = tf2xla.dynamic_update_slice(out, token[:, None], tf.constant([0, 0]))

        def step(t: Any, token: Any, out: Any, flat: Any) -> Any:
            position = time + t - 1
            pairs = [(flat[2 * i], flat[2 * i + 1]) for i in range(self.layers)]
            h = self._embed(token[:, None], position[None])
            token, pairs = self._blocks(h, position, pairs)
            out = tf2xla.dynamic_update_slice(out, token[:, None], tf.stack([0, t]))
            return t + 1, token, out, [c for pair in pairs for c in pair]

        flat = [c for pair in caches for c in pair]
        _, _, out, _ = tf.while_loop(
            lambda t, *_: t < new_tokens,
            step,
            (tf.constant(1), token, out, flat),
            maximum_iterations=self.new_tokens,
        )
        return out

    # -- one request ---------------------------------------------------------------------------
    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        # The token loop comes first, the XLA path apart: every eager op captures this frame
        # too, at a cost that grows with the lines before the loop (adapters/worker.py).
        if self.api == "xla":
            return self._generate_whole(prompt, new_tokens)
        with tf.device(self.device):
            ids = tf.convert_to_tensor(np.asarray(prompt, dtype=np.int32))
            out = np.empty((len(prompt), new_tokens), dtype=np.int64)
            token = self.prefill_fn(ids)
            for t in range(new_tokens):
                if t:
                    token = self.decode_fn(token)
                out[:, t] = token.numpy()  # waits for the token: it is on the host now
                clock.token(out[:, t])
        return out

    def _generate_whole(self, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
        with tf.device(self.device):
            ids = tf.convert_to_tensor(np.asarray(prompt, dtype=np.int32))
            out = self.whole(ids, tf.constant(new_tokens, tf.int32)).numpy()
        return out[:, :new_tokens].astype(np.int64)


def recompute(model: Any, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy tokens with no cache at all: the whole sequence through the model's own forward
    for every token, padded to its context (causal: the padding after a position changes
    nothing before it); tests/test_tensorflow_generation.py holds the cached paths to it."""
    seq = np.asarray(prompt, dtype=np.int32)
    context = int(model.inputs[0].shape[1])
    for _ in range(new_tokens):
        padded = np.zeros((len(seq), context), dtype=np.int32)
        padded[:, : seq.shape[1]] = seq
        logits = tf.cast(model(padded, training=False), tf.float32).numpy()
        seq = np.concatenate([seq, logits[:, seq.shape[1] - 1].argmax(-1)[:, None]], axis=1)
    return seq[:, prompt.shape[1] :].astype(np.int64)
