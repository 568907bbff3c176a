"""The gpt generating tokens in JAX (spec mode ``generate``; the contract is in
adapters/generate.py, docs/generation.md): a static KV cache, one compiled prefill and one
compiled decode step, each token copied to the host as it exists (per-token timing).

- ``flax``: the two steps call the built Flax modules' own layers under ``nnx.jit``.
- ``jit``: the same two steps as pure functions of the params dict under ``jax.jit``.

The cache is one array per run, (layers, 2, B, P + N, heads, head_dim) for k and v, allocated in
``prepare`` and handed through each step (donated: XLA writes it in place). The prefill writes the
prompt's positions and attends causally over them; the decode step writes position p
(``lax.dynamic_update_slice``) and attends over the whole cache with a mask that hides the
positions past p, so a stale value of an earlier request is never seen. Shapes never change from
one token to the next: each step compiles once, in the first (warm-up) request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from adapters.jax import jit_models


def _attend_cache(q: jax.Array, cache: jax.Array, layer: int, position: Any) -> jax.Array:
    """One new position's attention over the layer's cached keys and values up to it."""
    k, v = cache[layer, 0], cache[layer, 1]
    visible = (jnp.arange(k.shape[1]) <= position)[None, None, None, :]
    return jax.nn.dot_product_attention(q, k, v, mask=visible)


def _steps(
    parts: Callable[[Any], Any], heads: int
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(prefill, decode) as functions of (state, cache, ...): ``parts(state)`` gives the model's
    pieces (embed, layers of (norm1, qkv, out, norm2, feed), head), the Flax modules' or the
    params dict's."""

    def run(state: Any, cache: jax.Array, ids: jax.Array, start: Any, prefill: bool) -> Any:
        embed, layers, head = parts(state)
        batch, time = ids.shape
        h = embed(ids, start + jnp.arange(time))
        for layer, (norm1, qkv, out, norm2, feed) in enumerate(layers):
            width = h.shape[-1]
            q, k, v = (
                t.reshape(batch, time, heads, width // heads)
                for t in jnp.split(qkv(norm1(h)), 3, axis=-1)
            )
            kv = jnp.stack([k, v]).astype(cache.dtype)  # (2, B, T, H, Dh)
            cache = cache.at[layer].set(
                jax.lax.dynamic_update_slice(cache[layer], kv, (0, 0, start, 0, 0))
            )
            if prefill:
                a = jax.nn.dot_product_attention(q, k, v, is_causal=True)
            else:
                a = _attend_cache(q.astype(cache.dtype), cache, layer, start)
            h = h + out(a.astype(h.dtype).reshape(batch, time, width))
            h = h + feed(norm2(h))
        return cache, jnp.argmax(head(h[:, -1]), axis=-1)  # greedy: the lowest id on a tie

    def prefill(state: Any, cache: jax.Array, ids: jax.Array) -> Any:
        return run(state, cache, ids, 0, True)

    def decode(state: Any, cache: jax.Array, token: jax.Array, position: jax.Array) -> Any:
        return run(state, cache, token[:, None], position, False)

    return prefill, decode


def _flax_parts(model: nnx.Module) -> Any:
    def embed(ids: jax.Array, where: jax.Array) -> jax.Array:
        return model.tokens(ids) + model.positions(where)

    layers = [
        (
            block.norm1,
            block.attention.qkv,
            block.attention.out,
            block.norm2,
            lambda x, b=block: b.back(jax.nn.gelu(b.hidden(x), approximate=True)),
        )
        for block in model.blocks
    ]
    return embed, layers, lambda h: model.tokens.attend(model.final(h))


def _jit_parts(p: dict[str, jax.Array]) -> Any:
    dense, norm = jit_models.dense, jit_models.layer_norm

    def embed(ids: jax.Array, where: jax.Array) -> jax.Array:
        return p["tokens"][ids] + p["positions"][where]

    count = sum(1 for name in p if name.endswith(".qkv.kernel"))
    layers = []
    for b in range(count):
        n = f"block{b}."
        layers.append(
            (
                lambda x, n=n: norm(p, n + "norm1", x, 1e-5),
                lambda x, n=n: dense(p, n + "qkv", x),
                lambda x, n=n: dense(p, n + "out", x),
                lambda x, n=n: norm(p, n + "norm2", x, 1e-5),
                lambda x, n=n: dense(
                    p, n + "back", jax.nn.gelu(dense(p, n + "hidden", x), approximate=True)
                ),
            )
        )
    return embed, layers, lambda h: norm(p, "final", h, 1e-5) @ p["tokens"].T


class Generation:
    """The prefill and decode step of a built gpt (either API), over a static cache."""

    def __init__(self, api: str, state: Any, dims: Any, dtype: Any, device: Any) -> None:
        self.api, self.dims, self.device = api, dims, device
        self.dtype = dtype or jnp.float32
        low = lambda a: a.astype(self.dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a  # noqa: E731
        if api == "flax":
            state.eval()
            nnx.update(state, jax.tree_util.tree_map(low, nnx.state(state, nnx.Param)))
            prefill, decode = _steps(_flax_parts, dims.heads)
            self.prefill_fn = nnx.jit(prefill, donate_argnums=1)
            self.decode_fn = nnx.jit(decode, donate_argnums=1)
        else:
            state = jax.tree_util.tree_map(low, state)
            prefill, decode = _steps(_jit_parts, dims.heads)
            self.prefill_fn = jax.jit(prefill, donate_argnums=1)
            self.decode_fn = jax.jit(decode, donate_argnums=1)
        self.state = state

    def prepare(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        d, heads, layers = self.dims.d_model, self.dims.heads, self.dims.layers
        length = prompt_tokens + new_tokens
        shape = (layers, 2, batch, length, heads, d // heads)
        self.cache = jax.device_put(jnp.zeros(shape, self.dtype), self.device)
        self.last = self.cache
        dtype = jnp.dtype(self.dtype).name
        jit = "nnx.jit" if self.api == "flax" else "jax.jit"
        return {
            "path": f"{jit}'d prefill and decode step"
            + (" over the Flax modules' layers" if self.api == "flax" else " over the params dict"),
            "cache": (
                f"static KV cache: one array (L {layers}, k|v, B {batch}, P+N {length}, "
                f"H {heads}, Dh {d // heads}), donated to each step and written in place "
                "(dynamic_update_slice); the decode step attends over the whole cache, masked "
                "past its position; the prefill attends causally over the prompt"
            ),
            "token_timing": "per-token",
            "token_host_copy": "each token's (B,) ids copied to the host (np.asarray) as it exists",
            "compile": f"XLA ({jit} of the prefill and of the decode step, each once)",
            "weights_dtype": dtype,
            "cache_dtype": dtype,
            "mode": "no dropout, no grad transform",
        }

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        out = np.empty((len(prompt), new_tokens), dtype=np.int64)
        ids = jax.device_put(np.asarray(prompt, dtype=np.int32), self.device)
        self.cache, token = self.prefill_fn(self.state, self.cache, ids)
        position = prompt.shape[1]
        for t in range(new_tokens):
            if t:
                where = jax.device_put(np.int32(position), self.device)
                self.cache, token = self.decode_fn(self.state, self.cache, token, where)
                position += 1
            out[:, t] = np.asarray(token)  # waits for the token: it is on the host now
            clock.token(out[:, t])
        self.last = self.cache
        return out
