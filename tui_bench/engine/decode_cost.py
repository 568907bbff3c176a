"""What the gpt's generation costs, per request and per decode step, from its shape: the one home
of a generation run's prefill FLOPs and of the bytes a decode step reads (docs/generation.md).

**Prefill** (the prompt's P positions at once, then the first token): the forward matmuls of
``flops.gpt_count`` at a context of P (attention over the full P×P, as every MFU convention
here counts it), with the tied head on the last position only (a generation needs no other
position's logits): per sequence fwd(P) − (P − 1)·2·d·V.

**Decode step** (one new token per sequence): small batches are memory-bound, so its limit is
the bytes it must read, as Databricks' MBU counts them: every weight once in its stored precision
(the token table once: it is the tied head, read whole for the logits; of the position table one
row) plus the KV cache read for attention. The cache is static (P + N positions, docs/generation.md)
and a masked step reads it whole: 2 (k and v) · L · B · (P + N) · d values in the cache's
precision. Writes (one position's k and v, the activations) are not counted: they are
O(B·d) a step, not O(weights).
"""

from __future__ import annotations

from dataclasses import replace

from tui_bench.engine import flops
from tui_bench.engine.model_manifest import GptDims

# Bytes per stored value of a precision setting: what a generation run serves (weights and
# cache stored in bfloat16 or float16 for bf16 and amp-fp16: adapters/generate.py's contract).
STORED_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "amp-fp16": 2}


def prefill_flops(dims: GptDims, batch: int, prompt_tokens: int) -> int:
    """Matmul FLOPs of one request's prefill: ``batch`` prompts of ``prompt_tokens`` tokens."""
    forward = flops.gpt_count(replace(dims, seq_len=prompt_tokens)).forward_per_sample
    unused_head = (prompt_tokens - 1) * 2 * dims.d_model * dims.vocab_size
    return batch * (forward - unused_head)


def weight_bytes(dims: GptDims, precision: str) -> int:
    """Bytes of the weights one decode step reads: every parameter but the position table's
    other rows, in the stored precision."""
    values = dims.parameters - (dims.seq_len - 1) * dims.d_model
    return values * STORED_BYTES.get(precision, 4)


def cache_bytes(
    dims: GptDims, batch: int, prompt_tokens: int, new_tokens: int, precision: str
) -> int:
    """Bytes of the static KV cache one decode step reads (the whole P + N positions)."""
    values = 2 * dims.layers * batch * (prompt_tokens + new_tokens) * dims.d_model
    return values * STORED_BYTES.get(precision, 4)


def decode_step_bytes(
    dims: GptDims, batch: int, prompt_tokens: int, new_tokens: int, precision: str
) -> int:
    """Bytes one decode step reads: the weights and the KV cache."""
    return weight_bytes(dims, precision) + cache_bytes(
        dims, batch, prompt_tokens, new_tokens, precision
    )
