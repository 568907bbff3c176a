"""The catalog's transformer written once more, in float64 numpy, as the tests' reference: the
loss every framework must give on a batch from the shared initial weights (adapters/shared_init.py).

An independent statement of the function (docs/frameworks.md, "The transformer") in the canonical
(in, out) layout: no framework's layers, so an error all adapters shared would still show here.
Inference mode: no dropout."""

from __future__ import annotations

import math

import numpy as np

try:  # scipy's erf is vectorised; math.erf element by element is the same function, slower
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover - scipy comes with the app's test environment here
    _erf = np.vectorize(math.erf, otypes=[np.float64])


def transformer_loss(weights: dict[str, np.ndarray], ids: np.ndarray, labels: np.ndarray) -> float:
    """Mean sigmoid cross-entropy of the transformer's logits on (batch, time) word ids."""
    w = {name: value.astype(np.float64) for name, value in weights.items()}
    batch, time = ids.shape
    h = w["tokens"][ids.astype(np.int64)] + w["positions"][None, :time]

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[name + ".kernel"] + w[name + ".bias"]

    def layer_norm(x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-6) * w[name + ".gamma"] + w[name + ".beta"]

    def heads(x: np.ndarray) -> np.ndarray:  # (batch, time, 128) → (batch, 4, time, 32)
        return x.reshape(batch, time, 4, 32).transpose(0, 2, 1, 3)

    for b in range(2):
        p = f"block{b}."
        q, k, v = (heads(dense(h, p + name)) for name in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(32.0)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = (scores / scores.sum(-1, keepdims=True)) @ v
        attention = attention.transpose(0, 2, 1, 3).reshape(batch, time, 128)
        h = layer_norm(h + dense(attention, p + "out"), p + "norm1")
        f = dense(h, p + "hidden")
        f = 0.5 * f * (1.0 + _erf(f / math.sqrt(2.0)))  # GELU, the exact erf form
        h = layer_norm(h + dense(f, p + "back"), p + "norm2")
    z = dense(h.mean(axis=1), "head").reshape(-1)
    t = labels.astype(np.float64).reshape(-1)
    return float(np.mean(np.logaddexp(0.0, z) - z * t))
