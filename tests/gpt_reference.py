"""The gpt written once more, in float64 numpy, as the tests' reference: the loss every framework
must give on a batch from the shared initial weights (adapters/shared_init.py, ``gpt_weights``).

An independent statement of the function (docs/frameworks.md, "The GPT") in the canonical (in, out)
layout: pre-LayerNorm blocks (ε 1e-5), causal attention from the fused q/k/v, GELU in GPT-2's tanh
form, a final LayerNorm, the head tied to the token table, mean next-token cross-entropy over every
position. No dropout."""

from __future__ import annotations

import math

import numpy as np


def gpt_loss(weights: dict[str, np.ndarray], heads: int, x: np.ndarray, y: np.ndarray) -> float:
    """Mean cross-entropy of the next token over every position of (batch, S) inputs ``x`` and
    targets ``y``."""
    w = {name: value.astype(np.float64) for name, value in weights.items()}
    batch, time = x.shape
    d = w["tokens"].shape[1]
    h = w["tokens"][x.astype(np.int64)] + w["positions"][None, :time]

    def dense(v: np.ndarray, name: str) -> np.ndarray:
        return v @ w[name + ".kernel"] + w[name + ".bias"]

    def layer_norm(v: np.ndarray, name: str) -> np.ndarray:
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return (v - mean) / np.sqrt(var + 1e-5) * w[name + ".gamma"] + w[name + ".beta"]

    def split(v: np.ndarray) -> np.ndarray:  # (batch, time, d) → (batch, heads, time, d/heads)
        return v.reshape(batch, time, heads, d // heads).transpose(0, 2, 1, 3)

    future = np.triu(np.ones((time, time), dtype=bool), k=1)  # position t sees 0..t only
    layers = sum(1 for name in w if name.endswith(".qkv.kernel"))
    for b in range(layers):
        p = f"block{b}."
        qkv = dense(layer_norm(h, p + "norm1"), p + "qkv")
        q, k, v = (split(qkv[..., i * d : (i + 1) * d]) for i in range(3))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads)
        scores = np.where(future, -np.inf, scores)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = (scores / scores.sum(-1, keepdims=True)) @ v
        h = h + dense(attention.transpose(0, 2, 1, 3).reshape(batch, time, d), p + "out")
        f = dense(layer_norm(h, p + "norm2"), p + "hidden")
        f = 0.5 * f * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * f**3)))
        h = h + dense(f, p + "back")
    logits = layer_norm(h, "final") @ w["tokens"].T  # the tied head: no weight, no bias of its own
    top = logits.max(-1, keepdims=True)
    log_z = (top + np.log(np.exp(logits - top).sum(-1, keepdims=True)))[..., 0]
    picked = np.take_along_axis(logits, y.astype(np.int64)[..., None], -1)[..., 0]
    return float(np.mean(log_z - picked))
