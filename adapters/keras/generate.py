"""The gpt generating tokens in Keras 3 (spec mode ``generate``; the contract is in
adapters/generate.py, docs/generation.md), written the way KerasHub writes a causal LM's
``generate``: one ``generate_step`` (the prefill through ``call_with_cache``, then the decode loop
as ``keras.ops.while_loop`` over ``call_with_cache`` of one token, the cache as loop state),
compiled as KerasHub's ``make_generate_function`` compiles it per backend:

- ``jax``: ``jax.jit`` of the whole ``generate_step``, the weights passed in as arguments (not
  baked in as constants: KerasHub passes the variables' values in through a stateless scope);
- ``tensorflow``: ``tf.function(generate_step, jit_compile=...)`` with Keras' ``"auto"`` rule for
  ``jit_compile`` (KerasHub's CausalLM default): XLA when TensorFlow sees a GPU, plain graph
  (no XLA) on a CPU-only machine;
- ``torch``: eager under ``torch.no_grad()`` (``"auto"`` resolves to eager for torch: Keras never
  ``torch.compile``s by itself); ``ops.while_loop`` is then a Python loop of eager steps.

One code path over ``keras.ops`` for the three backends: ``generate_step`` and
``call_with_cache`` below never branch on the backend. The step is written over the model's own
weights read out once (``served_weights``: each variable's value, cast to the served dtype) rather
than through the Keras layers' ``call``, so that ``bf16`` serves weights stored in bfloat16 (the
built model's variables stay float32 under a mixed policy) and so the jitted function takes the
weights as arguments.

The cache: per layer a key and a value tensor of (B, P + N, H, Dh) (Keras' attention layout),
allocated inside ``generate_step`` (``ops.zeros``) as KerasHub's ``_build_cache`` does, written
with ``ops.slice_update`` at the position; a decode step attends over the whole cache with a
mask hiding the positions past the current one (``ops.dot_product_attention``); the prefill
attends causally over the prompt. The whole request is one compiled call whose tokens reach the
host together, so token timing is ``whole``: the loop times the prefill as a one-token
generation (``steps`` is an argument, so the one compiled function serves N and 1 alike).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from keras import ops

# A precision's stored dtype for serving: weights and cache (bf16 and fp16 served as stored).
SERVED_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "amp-fp16": "float16"}
# The gpt's LayerNorm epsilon (keras_models.GPT_LAYER_NORM_EPSILON, torch's and GPT-2's).
EPSILON = 1e-5


def auto_jit_compile(api: str, gpu: bool) -> bool:
    """What Keras' ``jit_compile="auto"`` (KerasHub's CausalLM default) resolves to for a
    generate function (``Trainer._resolve_auto_jit_compile``): torch eager, TensorFlow XLA only
    with a GPU visible, JAX always jitted."""
    if api == "torch":
        return False
    if api == "tensorflow":
        return gpu
    return True


def served_weights(model: Any, layers: int, dtype: str) -> dict[str, Any]:
    """The built gpt's weights by name, each variable's value cast to the served dtype (float32:
    the variable's own value, no copy)."""

    def value(variable: Any) -> Any:
        return ops.cast(variable.value, dtype)

    def kernel_bias(layer: Any, name: str) -> dict[str, Any]:
        return {f"{name}.kernel": value(layer.kernel), f"{name}.bias": value(layer.bias)}

    def norm(layer: Any, name: str) -> dict[str, Any]:
        return {f"{name}.gamma": value(layer.gamma), f"{name}.beta": value(layer.beta)}

    out = {
        "tokens": value(model.get_layer("tokens").embeddings),
        "positions": value(model.get_layer("positions").table),
        **norm(model.get_layer("final"), "final"),
    }
    for b in range(layers):
        p = f"block{b}."
        mha = model.get_layer(f"block{b}_attention")
        out.update(norm(model.get_layer(f"block{b}_norm1"), p + "norm1"))
        out.update(norm(model.get_layer(f"block{b}_norm2"), p + "norm2"))
        for sub, name in (
            (mha._query_dense, "query"),
            (mha._key_dense, "key"),
            (mha._value_dense, "value"),
            (mha._output_dense, "out"),
        ):
            out.update(kernel_bias(sub, p + name))
        out.update(kernel_bias(model.get_layer(f"block{b}_hidden"), p + "hidden"))
        out.update(kernel_bias(model.get_layer(f"block{b}_back"), p + "back"))
    return out


# tui-bench:begin generate
def layer_norm(x: Any, w: dict[str, Any], name: str) -> Any:
    mean = ops.mean(x, axis=-1, keepdims=True)
    var = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * ops.rsqrt(var + EPSILON) * w[name + ".gamma"] + w[name + ".beta"]


def call_with_cache(
    w: dict[str, Any], ids: Any, index: Any, caches: tuple, layers: int, prefill: bool
) -> tuple[Any, tuple]:
    """The gpt over ``ids`` (B, T) at positions index..index+T-1: writes their keys and values
    into ``caches`` (per layer (k, v) of (B, P+N, H, Dh)) and returns the greedy next token of
    the last position and the updated caches. The prefill (index 0, T = P) attends causally
    over its own positions; a decode step (T = 1) over the whole cache, masked past ``index``."""
    time = ids.shape[1]
    length = caches[0][0].shape[1]
    positions = ops.slice(w["positions"], (index, 0), (time, w["positions"].shape[1]))
    h = ops.take(w["tokens"], ids, axis=0) + positions
    start = (0, index, 0, 0)
    mask = None if prefill else ops.reshape(ops.arange(length) <= index, (1, 1, 1, length))
    updated = []
    for b in range(layers):
        p = f"block{b}."
        x = layer_norm(h, w, p + "norm1")
        q, k, v = (
            ops.einsum("btd,dhk->bthk", x, w[p + name + ".kernel"]) + w[p + name + ".bias"]
            for name in ("query", "key", "value")
        )
        cache_k = ops.slice_update(caches[b][0], start, k)
        cache_v = ops.slice_update(caches[b][1], start, v)
        updated.append((cache_k, cache_v))
        if prefill:
            a = ops.dot_product_attention(q, k, v, is_causal=True)
        else:
            a = ops.dot_product_attention(q, cache_k, cache_v, mask=mask)
        h = h + ops.einsum("bthk,hkd->btd", a, w[p + "out.kernel"]) + w[p + "out.bias"]
        x = layer_norm(h, w, p + "norm2")
        x = ops.gelu(ops.matmul(x, w[p + "hidden.kernel"]) + w[p + "hidden.bias"], approximate=True)
        h = h + ops.matmul(x, w[p + "back.kernel"]) + w[p + "back.bias"]
    last = layer_norm(h[:, -1], w, "final")
    logits = ops.matmul(last, ops.transpose(w["tokens"]))  # the tied head
    return ops.cast(ops.argmax(logits, axis=-1), "int32"), tuple(updated)


def generate_step(
    w: dict[str, Any], prompt: Any, steps: Any, length: int, new_tokens: int, layers: int
) -> Any:
    """One request: the prefill over the (B, P) ``prompt``, then ``steps - 1`` decode steps in
    an ``ops.while_loop`` whose state is the token, the cache and the (B, N) ids written so far."""
    batch, prompt_tokens = prompt.shape
    heads, head_dim = w["block0.key.kernel"].shape[1:]
    dtype = w["tokens"].dtype
    caches = tuple(
        (
            ops.zeros((batch, length, heads, head_dim), dtype),
            ops.zeros((batch, length, heads, head_dim), dtype),
        )
        for _ in range(layers)
    )
    token, caches = call_with_cache(w, prompt, 0, caches, layers, prefill=True)
    out = ops.slice_update(ops.zeros((batch, new_tokens), "int32"), (0, 0), token[:, None])

    def more(i: Any, token: Any, caches: tuple, out: Any) -> Any:
        return i < steps

    def step(i: Any, token: Any, caches: tuple, out: Any) -> tuple:
        token, caches = call_with_cache(
            w, token[:, None], prompt_tokens + i - 1, caches, layers, prefill=False
        )
        return i + 1, token, caches, ops.slice_update(out, (0, i), token[:, None])

    _, _, _, out = ops.while_loop(more, step, (ops.convert_to_tensor(1), token, caches, out))
    return out


# tui-bench:end generate


class KerasGeneration:
    """The compiled ``generate_step`` for one backend, its weights and static sizes."""

    def __init__(self, model: Any, api: str, gpu: bool, precision: str, layers: int) -> None:
        self.model, self.api, self.gpu, self.layers = model, api, gpu, layers
        self.dtype = SERVED_DTYPE[precision]

    def prepare(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        self.batch, self.prompt_tokens, self.new_tokens = batch, prompt_tokens, new_tokens
        self.length = prompt_tokens + new_tokens
        self.weights = served_weights(self.model, self.layers, self.dtype)
        jit = auto_jit_compile(self.api, self.gpu)
        sizes = {"length": self.length, "new_tokens": new_tokens, "layers": self.layers}
        if self.api == "jax":
            import jax

            # KerasHub's JAX path: jax.jit of the whole generate_step, the weights arguments.
            self.function = jax.jit(
                lambda w, prompt, steps: generate_step(w, prompt, steps, **sizes)
            )
            compiled = "jax.jit(generate_step): the prefill and the ops.while_loop, one XLA program"
        elif self.api == "tensorflow":
            import tensorflow as tf

            self.function = tf.function(
                lambda w, prompt, steps: generate_step(w, prompt, steps, **sizes),
                jit_compile=jit,
            )
            compiled = (
                f"tf.function(generate_step, jit_compile={jit}): the prefill and the "
                "ops.while_loop (tf.while_loop), one graph" + (", XLA" if jit else ", no XLA")
            )
        else:
            import torch

            def eager(w: Any, prompt: Any, steps: Any) -> Any:
                with torch.no_grad():
                    return generate_step(w, prompt, steps, **sizes)

            self.function = eager
            compiled = "no (eager torch under torch.no_grad(); ops.while_loop a Python loop)"
        heads, head_dim = self.weights["block0.key.kernel"].shape[1:]
        return {
            "path": "KerasHub-style generate: generate_step = prefill (call_with_cache over the "
            "prompt) + ops.while_loop of one-token call_with_cache steps, over keras.ops",
            "cache": (
                f"static KV cache: per layer k and v of (B {batch}, P+N {self.length}, "
                f"H {heads}, Dh {head_dim}), loop state allocated in generate_step (ops.zeros), "
                "written with ops.slice_update at the position; a decode step attends over the "
                "whole cache masked past its position (ops.dot_product_attention mask); the "
                "prefill attends causally over the prompt"
            ),
            "token_timing": "whole",
            "compile": compiled,
            "jit_compile": f"'auto' → {jit} (Keras' rule for {self.api})",
            "weights_dtype": self.dtype,
            "cache_dtype": self.dtype,
            "mode": "no dropout (the step has none), no gradients",
        }

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        ids = ops.convert_to_tensor(np.asarray(prompt, dtype=np.int32))
        steps = ops.convert_to_tensor(np.int32(new_tokens))
        out = self.function(self.weights, ids, steps)
        return ops.convert_to_numpy(out)[:, :new_tokens].astype(np.int64)


def recompute(model: Any, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy tokens with no cache at all: the whole sequence through the built model's own
    forward for every token, padded to its context (a causal model: the padding after the last
    real position cannot change that position's logits)."""
    seq = np.asarray(prompt, dtype=np.int32)
    context = model.inputs[0].shape[1]
    for _ in range(new_tokens):
        padded = np.zeros((len(seq), context), np.int32)
        padded[:, : seq.shape[1]] = seq
        logits = ops.convert_to_numpy(model(padded, training=False))
        seq = np.concatenate([seq, logits[:, seq.shape[1] - 1].argmax(-1)[:, None]], axis=1)
    return seq[:, prompt.shape[1] :].astype(np.int64)
