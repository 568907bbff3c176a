"""The gpt written once more, in float64 numpy, as the tests' reference: the loss every framework
must give on a batch from the shared initial weights (adapters/shared_init.py, ``gpt_weights``).

An independent statement of the function (docs/frameworks.md, "The GPT") in the canonical (in, out)
layout: pre-LayerNorm blocks (ε 1e-5), causal attention from the fused q/k/v, GELU in GPT-2's tanh
form, a final LayerNorm, the head tied to the token table, mean next-token cross-entropy over every
position. No dropout.

Greedy generation from it, twice over (docs/generation.md): ``greedy_recompute`` runs the whole
sequence again for every new token (no cache: the definition), ``greedy_cached`` runs the prompt
once and then one position a step over a key/value cache (what every framework's generation
does). Both return each step's top-two logit gap, so a test can stop at a near-tie."""

from __future__ import annotations

import math

import numpy as np


def gpt_loss(weights: dict[str, np.ndarray], heads: int, x: np.ndarray, y: np.ndarray) -> float:
    """Mean cross-entropy of the next token over every position of (batch, S) inputs ``x`` and
    targets ``y``."""
    logits = gpt_logits(weights, heads, x)
    top = logits.max(-1, keepdims=True)
    log_z = (top + np.log(np.exp(logits - top).sum(-1, keepdims=True)))[..., 0]
    picked = np.take_along_axis(logits, y.astype(np.int64)[..., None], -1)[..., 0]
    return float(np.mean(log_z - picked))


def gpt_logits(
    weights: dict[str, np.ndarray],
    heads: int,
    x: np.ndarray,
    start: int = 0,
    cache: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> np.ndarray:
    """(batch, T, V) float64 logits of (batch, T) tokens ``x`` at positions start..start+T-1.
    With ``cache`` (a list, one (keys, values) pair per layer, appended to here), the positions
    before ``start`` are read from it and this call's keys and values are added to it."""
    w = {name: value.astype(np.float64) for name, value in weights.items()}
    batch, time = x.shape
    d = w["tokens"].shape[1]
    h = w["tokens"][x.astype(np.int64)] + w["positions"][None, start : start + time]

    def dense(v: np.ndarray, name: str) -> np.ndarray:
        return v @ w[name + ".kernel"] + w[name + ".bias"]

    def layer_norm(v: np.ndarray, name: str) -> np.ndarray:
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return (v - mean) / np.sqrt(var + 1e-5) * w[name + ".gamma"] + w[name + ".beta"]

    def split(v: np.ndarray) -> np.ndarray:  # (batch, time, d) → (batch, heads, time, d/heads)
        return v.reshape(batch, time, heads, d // heads).transpose(0, 2, 1, 3)

    # query i (position start + i) sees keys 0..start + i only
    future = np.triu(np.ones((time, start + time), dtype=bool), k=start + 1)
    layers = sum(1 for name in w if name.endswith(".qkv.kernel"))
    for b in range(layers):
        p = f"block{b}."
        qkv = dense(layer_norm(h, p + "norm1"), p + "qkv")
        q, k, v = (split(qkv[..., i * d : (i + 1) * d]) for i in range(3))
        if cache is not None:
            if len(cache) <= b:
                cache.append((k[:, :, :0], v[:, :, :0]))
            k = np.concatenate([cache[b][0], k], axis=2)
            v = np.concatenate([cache[b][1], v], axis=2)
            cache[b] = (k, v)
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads)
        scores = np.where(future, -np.inf, scores)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = (scores / scores.sum(-1, keepdims=True)) @ v
        h = h + dense(attention.transpose(0, 2, 1, 3).reshape(batch, time, d), p + "out")
        f = dense(layer_norm(h, p + "norm2"), p + "hidden")
        f = 0.5 * f * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * f**3)))
        h = h + dense(f, p + "back")
    return layer_norm(h, "final") @ w["tokens"].T  # the tied head: no weight, no bias of its own


def _pick(last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy tokens of (batch, V) logits (the lowest id on an exact tie, as argmax) and each
    row's gap between its top two logits."""
    top2 = np.sort(last, axis=-1)[:, -2:]
    return last.argmax(-1), top2[:, 1] - top2[:, 0]


def greedy_recompute(
    weights: dict[str, np.ndarray], heads: int, prompt: np.ndarray, new_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, gaps), each (batch, new_tokens): greedy tokens with no cache, the whole sequence
    through the model for every token, and each step's top-two logit gap."""
    seq = np.asarray(prompt, dtype=np.int64)
    ids, gaps = [], []
    for _ in range(new_tokens):
        token, gap = _pick(gpt_logits(weights, heads, seq)[:, -1])
        ids.append(token)
        gaps.append(gap)
        seq = np.concatenate([seq, token[:, None]], axis=1)
    return np.stack(ids, axis=1), np.stack(gaps, axis=1)


def greedy_cached(
    weights: dict[str, np.ndarray], heads: int, prompt: np.ndarray, new_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """The same as ``greedy_recompute`` with a key/value cache: the prompt once, then one
    position per token."""
    prompt = np.asarray(prompt, dtype=np.int64)
    cache: list[tuple[np.ndarray, np.ndarray]] = []
    token, gap = _pick(gpt_logits(weights, heads, prompt, 0, cache)[:, -1])
    ids, gaps = [token], [gap]
    for i in range(1, new_tokens):
        start = prompt.shape[1] + i - 1
        token, gap = _pick(gpt_logits(weights, heads, token[:, None], start, cache)[:, -1])
        ids.append(token)
        gaps.append(gap)
    return np.stack(ids, axis=1), np.stack(gaps, axis=1)


def agreeing_prefix(
    ids: np.ndarray, reference: np.ndarray, gaps: np.ndarray, tolerance: float
) -> tuple[int, str]:
    """(how many leading tokens of every row to compare, why it stops there): the comparison of
    ``ids`` with the ``reference`` greedy ids stops at the first step where some row's top-two
    reference logits lie within ``tolerance`` (a near-tie: either token is right, and the rest
    may differ from there on)."""
    ties = np.nonzero((gaps < tolerance).any(axis=0))[0]
    if len(ties) == 0:
        return reference.shape[1], "no near-tie: every token compared"
    step = int(ties[0])
    row = int(np.nonzero(gaps[:, step] < tolerance)[0][0])
    return step, (
        f"near-tie at token {step + 1} (row {row}: top-two reference logits "
        f"{gaps[row, step]:.2e} apart, under {tolerance:g}): compared the {step} before it"
    )
