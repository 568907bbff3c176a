"""The one timed serving loop (spec mode "inference", docs/inference.md): requests of a batch of
test samples, each timed alone after a device sync; the latency statistics; the served loss that
holds every framework to the same function.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from adapters import data as data_module
from adapters import protocol
from adapters.backend import Backend, Hyper, logits_loss_correct, optional_hooks
from adapters.clock import compact, percentile

# The tail a percentile claims is only claimed where the requests can bound it: the upper end of
# the q-quantile's distribution-free 95 % confidence interval (order statistics, the normal
# approximation to the binomial, as stats.median_ci does for the median) must fall inside
# the sample. That needs 8 requests for p50, 53 for p90, 563 for p99 (``tail_requests``).
LATENCY_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
TAIL_Z = 1.96
INFERENCE_SOURCE = "per request, device-synchronised"


def tail_bounded(n: int, q: float, z: float = TAIL_Z) -> bool:
    """Whether n values bound the q-quantile from above: the rank (1-based) of its 95 % upper
    confidence limit, ceil(1 + nq + z sqrt(nq(1-q))), is at most n."""
    if n < 1:
        return False
    return math.ceil(1 + n * q + z * math.sqrt(n * q * (1 - q))) <= n


def tail_requests(q: float, z: float = TAIL_Z) -> int:
    """The fewest requests that bound the q-quantile (``tail_bounded``)."""
    n = 1
    while not tail_bounded(n, q, z):
        n += 1
    return n


def latency_stats(times: list[float], batch_size: int) -> dict[str, Any]:
    """p50, p90, p99, max and mean latency of the timed requests (seconds), the count behind
    them, samples/s (batch × requests / their summed time), and a note naming each percentile
    the requests are too few to bound (None when all are)."""
    ordered = sorted(times)
    n = len(ordered)
    total = sum(ordered)
    out: dict[str, Any] = {"latency_requests": n}
    for name, q in LATENCY_QUANTILES:
        out[f"latency_{name}_s"] = percentile(ordered, q) if n else None
    out["latency_max_s"] = ordered[-1] if n else None
    out["latency_mean_s"] = total / n if n else None
    out["inference_samples_per_s"] = batch_size * n / total if total > 0 else None
    short = [
        f"{name} rests on {n} requests, fewer than the {tail_requests(q)} that bound it "
        "(95 % interval of the quantile)"
        for name, q in LATENCY_QUANTILES
        if not tail_bounded(n, q)
    ]
    out["latency_note"] = "; ".join(short) or None
    return out


def request_batches(n: int, batch_size: int, seed: int, count: int) -> list[np.ndarray]:
    """The index arrays of ``count`` requests over a split of n samples: one seeded order (the
    split's epoch-1 order, the same in every framework), walked in consecutive batches and
    wrapping round, so any number of requests of any size is drawn the same way."""
    order = data_module.epoch_order(n, seed, 1)
    return [
        np.take(order, np.arange(i * batch_size, (i + 1) * batch_size), mode="wrap")
        for i in range(count)
    ]


def served_loss(
    backend: Backend,
    dataset: data_module.Dataset,
    hyper: Hyper,
    x: np.ndarray,
    y: np.ndarray,
    first: np.ndarray,
) -> dict[str, Any]:
    """The first request served once more, untimed, after the timed ones: its outputs' mean
    cross-entropy against the request's labels (float64 numpy, ``logits_loss_correct``) and the
    sha256 of its bytes. Same weights, same bytes, same function: the same number in every
    framework (tests/test_inference_equity.py holds it to the float64 reference for the models
    with a shared draw), so an API that served a different model (dropout left on, weights
    mapped wrongly, a different input layout) shows here."""
    outputs = np.asarray(backend.served_outputs(backend.predict(x[first])), dtype=np.float64)
    labels = y[first]
    binary = data_module.binary_head(hyper.model, dataset.shape.num_classes)
    logits = outputs.reshape(labels.size, -1)
    loss, _ = logits_loss_correct(logits, labels, binary)
    return {
        "served_loss": loss / max(labels.size, 1),
        "first_request_sha256": hashlib.sha256(
            np.ascontiguousarray(x[first]).tobytes()
        ).hexdigest(),
    }


def run_inference(
    backend: Backend,
    dataset: data_module.Dataset,
    hyper: Hyper,
    requests: int,
    warmup: int,
    emit: Callable[..., None],
    weights: str,
) -> dict[str, Any]:
    """Serve ``warmup`` then ``requests`` requests of ``hyper.batch_size`` test samples, each
    timed alone: ``perf_counter_ns`` after a device sync, the request (``predict``: host bytes
    into the framework, forward), a device sync, the clock. Warm-up requests (the first one
    pays tracing and compilation) are reported apart; the timed ones go out as ``requests``
    events and make the summary. ``weights`` says which weights serve (recorded)."""
    if getattr(backend, "predict", None) is None or type(backend).predict is Backend.predict:
        raise RuntimeError(f"inference is not built for {type(backend).__name__} (no predict)")
    hook = optional_hooks(backend)
    serving = backend.prepare_inference()
    split = "test" if len(dataset.x_test) else "train"
    x, y = (
        (dataset.x_test, dataset.y_test) if split == "test" else (dataset.x_train, dataset.y_train)
    )
    total = warmup + requests
    order = request_batches(len(x), hyper.batch_size, hyper.seed, total)
    emit("epoch_started", epoch=1, epochs=1, steps=total)
    clock = time.perf_counter_ns
    flush_every_ns = int(1e9 / protocol.MAX_STEP_MESSAGES_PER_S)
    warm: list[float] = []
    timed: list[float] = []
    pending: list[float] = []
    backend.sync()
    wall0 = last_flush = clock()
    for i, idx in enumerate(order):
        xb = x[idx]  # the request's payload exists before the request: gathered untimed
        backend.sync()
        t0 = clock()
        backend.predict(xb)
        backend.sync()
        elapsed = (clock() - t0) * 1e-9
        if i < warmup:
            warm.append(elapsed)
        else:
            timed.append(elapsed)
            pending.append(elapsed)
        now = t0 + int(elapsed * 1e9)  # outside the timed region: no extra clock read
        if now - last_flush >= flush_every_ns or i == total - 1:
            emit("requests", done=i + 1, **({"latencies": compact(pending)} if pending else {}))
            pending = []
            last_flush = now
    wall = (clock() - wall0) * 1e-9
    return {
        "mode": "inference",
        **served_loss(backend, dataset, hyper, x, y, order[0]),
        "serving": serving,
        "weights": weights,
        "request_split": split,
        "batch_size": hyper.batch_size,
        "warmup_requests": warmup,
        "warmup_s": sum(warm),
        "first_request_s": warm[0] if warm else (timed[0] if timed else None),
        "requests": len(timed),
        "inference_wall_s": wall,
        **latency_stats(timed, hyper.batch_size),
        # The latency series judged by the same rules as training steps (stability.py reads
        # steady_step_times): each request is one "step" of an inference run.
        "steady_steps": len(timed),
        "steady_step_times": compact(timed),
        "step_source": INFERENCE_SOURCE,
        "timing": "per request",
        "input": "host",
        **(
            hook("memory_stats")()
            or {
                "allocator_peak_mib": None,
                "allocator": "n/a: no allocator peak from the framework here (n/a on CPU)",
            }
        ),
    }
