"""The gpt generating tokens in PyTorch (spec mode ``generate``; the contract is in
adapters/generate.py, docs/generation.md): a static KV cache and a cached decode step, as
gpt-fast writes fast generation.

- ``eager``: the prefill and the decode step run as plain PyTorch, from the built ``_Gpt``'s own
  modules (no second copy of the weights).
- ``compile``: the same two functions through ``torch.compile``: the decode step with
  ``mode="reduce-overhead"`` on a GPU (CUDA graphs: gpt-fast's choice for its decode step) and
  ``mode="default"`` on the CPU (CUDA graphs do not apply there); the prefill with the default
  mode. Shapes never change from one token to the next (the cache is static, the position a
  device tensor), so each compiles once, in the first (warm-up) request.

The cache: per layer, k and v of (B, H, P + N, Dh), allocated once in ``prepare``, written in
place (``index_copy_``) at each position; the decode step attends over the whole cache with a
mask that hides the positions past the current one (stale values of an earlier request there
are never seen). Each token's ids are copied to the host as the token exists (``.cpu()``, which
waits for the device) and the token clock is read then: per-token timing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

# A precision's stored dtype for serving: weights and cache (bf16 and fp16 served as stored).
SERVED_DTYPE = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "bf16": torch.bfloat16,
    "amp-fp16": torch.float16,
}


class _Cache(nn.Module):
    """One layer's keys and values: buffers, so that a compiled step sees fixed addresses (what
    CUDA graphs need of a tensor they write into), as gpt-fast's KVCache holds them."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.register_buffer("k", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v", torch.zeros(shape, dtype=dtype, device=device))


class TorchGeneration(nn.Module):
    """The gpt's prefill and decode step over a static KV cache, eager or compiled."""

    def __init__(self, model: nn.Module, device: torch.device, api: str, precision: str) -> None:
        super().__init__()
        self.dtype = SERVED_DTYPE[precision]
        self.model = model.eval().to(self.dtype)  # a generation run serves, never trains
        self.device = device
        self.api = api
        first = model.blocks[0].attention
        self.heads = first.heads
        self.width = model.tokens.weight.shape[1]
        self.layers = len(model.blocks)

    def prepare(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        self.batch, self.prompt_tokens, self.new_tokens = batch, prompt_tokens, new_tokens
        length = prompt_tokens + new_tokens
        shape = (batch, self.heads, length, self.width // self.heads)
        self.cache = nn.ModuleList(
            _Cache(shape, self.dtype, self.device) for _ in range(self.layers)
        )
        self.register_buffer("where", torch.arange(length, device=self.device))
        self.register_buffer("position", torch.zeros(1, dtype=torch.long, device=self.device))
        cuda = self.device.type == "cuda"
        decode_mode = "reduce-overhead" if cuda else "default"
        self.prefill_fn = self._prefill
        self.decode_fn = self._decode
        compiled = "no (eager)"
        if self.api == "compile":
            self.prefill_fn = torch.compile(self._prefill, mode="default", fullgraph=True)
            self.decode_fn = torch.compile(self._decode, mode=decode_mode, fullgraph=True)
            compiled = (
                f"torch.compile (inductor): decode step mode={decode_mode!r}, prefill "
                "mode='default', fullgraph"
            )
        dtype = str(self.dtype).replace("torch.", "")
        return {
            "path": (
                "torch.compile'd prefill and decode step"
                if self.api == "compile"
                else "eager nn.Module, cached decode step"
            ),
            "cache": (
                f"static KV cache: per layer k and v of (B {batch}, H {self.heads}, "
                f"P+N {length}, Dh {self.width // self.heads}), written in place (index_copy_); "
                "the decode step attends over the whole cache, masked past its position (SDPA "
                "attn_mask); the prefill attends causally over the prompt (is_causal)"
            ),
            "token_timing": "per-token",
            "token_host_copy": "each token's (B,) ids copied to the host (.cpu()) as it exists",
            "compile": compiled,
            "weights_dtype": dtype,
            "cache_dtype": dtype,
            "mode": "model.eval() (no dropout), torch.inference_mode()",
        }

    # -- the two steps -------------------------------------------------------------------------
    def _attend(self, block: nn.Module, x: torch.Tensor, layer: int, mask: Any) -> torch.Tensor:
        """One block's attention over the cache; writes this call's keys and values first."""
        batch, time, width = x.shape
        attention = block.attention
        q, k, v = (
            t.view(batch, time, self.heads, width // self.heads).transpose(1, 2)
            for t in attention.qkv(x).split(width, dim=2)
        )
        cache = self.cache[layer]
        if mask is None:  # the prefill: positions 0..P-1, causal among themselves
            cache.k[:, :, :time] = k
            cache.v[:, :, :time] = v
            h = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # one position: write it, attend over the whole cache up to it
            cache.k.index_copy_(2, self.position, k)
            cache.v.index_copy_(2, self.position, v)
            h = nn.functional.scaled_dot_product_attention(q, cache.k, cache.v, attn_mask=mask)
        return attention.out(h.transpose(1, 2).reshape(batch, time, width))

    def _blocks(self, h: torch.Tensor, mask: Any) -> torch.Tensor:
        model = self.model
        for layer, block in enumerate(model.blocks):
            h = h + self._attend(block, block.norm1(h), layer, mask)
            h = h + block.feed(block.norm2(h))
        last = model.final(h[:, -1])
        return nn.functional.linear(last, model.tokens.weight).argmax(-1)  # tied head, greedy

    def _prefill(self, ids: torch.Tensor) -> torch.Tensor:
        model = self.model
        where = self.where[: ids.shape[1]]
        return self._blocks(model.tokens(ids) + model.positions(where), None)

    def _decode(self, token: torch.Tensor) -> torch.Tensor:
        model = self.model
        mask = (self.where <= self.position).view(1, 1, 1, -1)
        h = model.tokens(token.view(-1, 1)) + model.positions(self.position)
        return self._blocks(h, mask)

    # -- one request ---------------------------------------------------------------------------
    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        out = np.empty((len(prompt), new_tokens), dtype=np.int64)
        with torch.inference_mode():
            ids = torch.from_numpy(np.asarray(prompt, dtype=np.int64)).to(self.device)
            token = self.prefill_fn(ids).clone()
            self.position.fill_(ids.shape[1])
            for t in range(new_tokens):
                if t:
                    token = self.decode_fn(token).clone()  # CUDA graphs reuse their outputs
                    self.position += 1
                out[:, t] = token.cpu().numpy()  # waits for the token: it is on the host now
                clock.token(out[:, t])
        return out


def recompute(model: nn.Module, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy tokens with no cache at all: the whole sequence through the model's own forward
    for every token (tests/test_generation.py holds the cached path to it)."""
    seq = torch.from_numpy(np.asarray(prompt, dtype=np.int64))
    batch = seq.shape[0]
    with torch.inference_mode():
        for _ in range(new_tokens):
            logits = model.eval()(seq).view(batch, seq.shape[1], -1)
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[:, prompt.shape[1] :].numpy()
