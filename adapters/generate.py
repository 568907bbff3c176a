"""Token-by-token generation: the serving loop's sibling for spec mode ``generate`` (the gpt only;
docs/generation.md says what is timed, how and why).

The contract: what a framework × API supplies to generate
===========================================================

An API generates once its backend (``adapters.backend.Backend``) has the two methods
``prepare_generation`` and ``generate`` and its catalog entry lists ``generate`` in its
capabilities' ``modes``. Nothing else is per framework: this module
picks the prompts, times the requests, checks the tokens and makes the summary.

What every API generates, identically:

- **the model**: the gpt as built by ``build`` from the shared initial draw
  (``adapters/shared_init.py``; the worker calls ``shared_init.for_generation()`` before
  ``build``, so the draw an adapter loads through ``shared_init.start`` is already the scaled
  one: nothing to do in the adapter), in evaluation form (no dropout, no gradients); the worker
  sets ``serve_only`` as for inference (no training function need be compiled);
- **the prompts**: ``prompt`` is a host numpy array of shape (batch, P) of token ids (the first P
  tokens of test-split sequences, in the split's seeded order; the same bytes everywhere);
- **greedy, fixed length**: the next token is the argmax of the last position's logits (ties:
  the lowest id, as ``argmax`` in every framework); always exactly ``new_tokens`` of them, no stop
  token (``min_new_tokens = max_new_tokens``);
- **a static KV cache**: sized for P + N positions when ``prepare_generation`` runs, so no shape
  changes from one token to the next (what lets graph compilers keep one compiled step). The
  prefill runs the P prompt positions at once and writes their keys and values; the first new
  token comes from its last position's logits. New token t ≥ 2 comes from one decode step that
  feeds token t - 1 at position P + t - 2, writes its key and value there and attends over
  positions 0..P + t - 2 (a mask over the static cache, or a slice of it: say which in
  ``cache``);
- **precision**: ``fp32`` (and ``tf32``) serve float32 weights and cache; ``bf16`` serves the
  weights and the cache stored in bfloat16 (``amp-fp16``: float16), as served models are; the
  argmax is taken on the logits as computed. Say what is stored in ``weights_dtype`` and
  ``cache_dtype``: the bytes-per-step count reads them.

``prepare_generation(batch, prompt_tokens, new_tokens) -> dict``
    Called once, untimed, after ``build`` and before the first request. Put the model in its
    serving form, allocate the static cache for ``batch`` sequences of ``prompt_tokens +
    new_tokens`` positions, wrap or compile the step (tracing itself may wait for the first
    request: that request's time is reported apart). Return the facts recorded as the summary's
    ``generation``; these keys are required (``FACTS``):

    - ``path``: the API's generation path in words ("eager nn.Module, cached decode step");
    - ``cache``: the cache's design ("static KV cache, per layer (B, H, P+N, Dh) k and v,
      written in place, attention over the whole cache masked past the position");
    - ``token_timing``: ``"per-token"`` when ``generate`` calls ``clock.token`` as each token
      reaches the host, ``"whole"`` when the whole generation is one compiled loop whose tokens
      cannot be timed one by one (an XLA while-loop): the loop then times the prefill as a
      one-token generation (``generate(prompt, 1, clock)``) and takes decode = generate −
      prefill, as optimum-benchmark does;
    - ``compile``: what is compiled and how ("no (eager)", "torch.compile(decode step,
      mode='default')", "tf.function(jit_compile=True) of the whole loop");
    - ``weights_dtype`` and ``cache_dtype``: as stored ("float32", "bfloat16").

    Anything else it returns is recorded too.

``generate(prompt, new_tokens, clock) -> ids``
    One request: ``prompt`` (batch, P) host token ids into the framework, the prefill, then
    ``new_tokens - 1`` decode steps. Returns the (batch, new_tokens) generated ids as a host
    numpy integer array. ``new_tokens`` is the run's N, or 1 (a one-token generation: the
    prefill and its token; every API must serve it: a ``whole`` API's TTFT is timed so). The cache is reused from request to request: each request overwrites
    the positions it attends to (a stale value beyond the current position must be masked).

    With ``token_timing == "per-token"``, call ``clock.token(ids)`` once per generated token, in
    order, right after that token's (batch,) ids are on the host (a numpy copy: the copy waits
    for the device, so the clock reads a finished token). That host copy is what a streaming
    server does per token; it is part of the timed request. With ``"whole"``, never call it.

Joining: implement the two methods, add ``catalog.GENERATE`` to the API's capabilities'
``modes`` (``catalog.GENERATES``); ``tests/test_generation.py``'s equity test (the float64
reference's greedy tokens, stopping at a near-tie), the ``generate-quick`` and ``generate``
presets and the GPU check's rows then take the API in. A cached-vs-recompute test of the API's own
(``tests/test_torch_generation.py`` is torch's) holds its cache to a full forward without one.

The loop around it (``run_generation``): each request is timed alone from a synchronised start
(``sync`` then ``perf_counter_ns``) to its last token on the host; TTFT to its first; TPOT =
(E2E − TTFT) / (N − 1) per request (vLLM's rule); ITL = each gap between tokens (per-token APIs
only). Warm-up requests come first and are reported apart, the first one (tracing, compilation)
on its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from adapters import data as data_module
from adapters import protocol
from adapters.backend import Backend, Hyper
from adapters.clock import TokenClock, compact, percentile
from adapters.serve import LATENCY_QUANTILES, request_batches, tail_bounded, tail_requests

PER_TOKEN = "per-token"
WHOLE = "whole"
TOKEN_TIMINGS = (PER_TOKEN, WHOLE)
# The facts ``prepare_generation`` must state (recorded as the summary's ``generation``).
FACTS = ("path", "cache", "token_timing", "compile", "weights_dtype", "cache_dtype")
GENERATION_SOURCE = "per request, device-synchronised start, last token on the host"


def generates(backend: Any) -> bool:
    """Whether ``backend`` supplies the contract's two methods (its own, not ``Backend``'s)."""
    for name in ("prepare_generation", "generate"):
        own = getattr(type(backend), name, None)
        if own is None or own is getattr(Backend, name):
            return False
    return True


def prompts(
    dataset: data_module.Dataset, batch: int, prompt_tokens: int, seed: int, count: int
) -> tuple[str, list[np.ndarray]]:
    """The split the prompts come from and ``count`` requests' prompts: each a (batch, P) array of
    the first P tokens of test-split sequences, in the split's seeded epoch-1 order, walked in
    consecutive batches and wrapping round (``request_batches``, as inference requests are)."""
    split = "test" if len(dataset.x_test) else "train"
    x = dataset.x_test if split == "test" else dataset.x_train
    order = request_batches(len(x), batch, seed, count)
    return split, [np.ascontiguousarray(x[idx, :prompt_tokens]) for idx in order]


def _checked_ids(ids: Any, batch: int, new_tokens: int, api: str) -> np.ndarray:
    out = np.asarray(ids)
    if out.shape != (batch, new_tokens) or not np.issubdtype(out.dtype, np.integer):
        raise RuntimeError(
            f"{api}.generate returned {out.dtype} ids of shape {out.shape}; the contract is "
            f"({batch}, {new_tokens}) integer ids on the host"
        )
    return out.astype(np.int64, copy=False)


def generation_stats(
    ttft: list[float],
    e2e: list[float],
    itl: list[float],
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
) -> dict[str, Any]:
    """The timed requests' figures: TTFT p50/p90/p99, TPOT p50/p90/p99 (per request, (E2E −
    TTFT) / (N − 1)), E2E p50/p90/p99, ITL p50/p90/p99 (every gap between tokens, per-token
    timing only), prefill tokens/s (batch × P × requests / summed TTFT), decode tokens/s
    (batch × (N − 1) × requests / summed E2E − TTFT), the requests behind the percentiles and
    the tail note (the inference runs' rule: ``tail_bounded``)."""
    n = len(e2e)
    tpot = (
        [(e - t) / (new_tokens - 1) for t, e in zip(ttft, e2e, strict=True)]
        if new_tokens > 1
        else []
    )
    out: dict[str, Any] = {"generate_requests": n}
    for key, values in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e), ("itl", itl)):
        ordered = sorted(values)
        for name, q in LATENCY_QUANTILES:
            out[f"{key}_{name}_s"] = percentile(ordered, q) if ordered else None
        out[f"{key}_mean_s"] = sum(ordered) / len(ordered) if ordered else None
    out["itl_tokens"] = len(itl)
    prefill = sum(ttft)
    decode = sum(e2e) - prefill
    out["prefill_tokens_per_s"] = batch * prompt_tokens * n / prefill if prefill > 0 else None
    out["decode_tokens_per_s"] = (
        batch * (new_tokens - 1) * n / decode if decode > 0 and new_tokens > 1 else None
    )
    out["generated_tokens_per_s"] = batch * new_tokens * n / sum(e2e) if sum(e2e) > 0 else None
    short = [
        f"{name} rests on {n} requests, fewer than the {tail_requests(q)} that bound it "
        "(95 % interval of the quantile)"
        for name, q in LATENCY_QUANTILES
        if not tail_bounded(n, q)
    ]
    out["latency_note"] = "; ".join(short) or None
    return out


def run_generation(
    backend: Any,
    dataset: data_module.Dataset,
    hyper: Hyper,
    prompt_tokens: int,
    new_tokens: int,
    requests: int,
    warmup: int,
    emit: Callable[..., None],
    weights: str,
) -> dict[str, Any]:
    """Serve ``warmup`` then ``requests`` generation requests of ``hyper.batch_size`` prompts,
    each timed alone (the module docstring); warm-up ones reported apart; the timed ones go out
    as ``requests`` events (their E2E latencies, with their TTFT and TPOT) and make the
    summary."""
    # This function and the two below it stay short, each calling the next early: TensorFlow
    # captures the Python stack on every eager op, and CPython 3.11 reads each captured frame's
    # line by scanning its line table up to where the frame stands (adapters/worker.py).
    facts = _prepared(backend, hyper.batch_size, prompt_tokens, new_tokens)
    split, batches = prompts(
        dataset, hyper.batch_size, prompt_tokens, hyper.seed, warmup + requests
    )
    per_token = facts["token_timing"] == PER_TOKEN
    served = _serve(backend, batches, new_tokens, warmup, per_token, emit)
    return _summary(
        backend, facts, served, split, batches, hyper.batch_size, prompt_tokens, new_tokens, weights
    )


@dataclasses.dataclass
class _Served:
    """What the requests gave: their times, the first request's ids and the timed ones' hash."""

    warm: list[float] = dataclasses.field(default_factory=list)
    ttft: list[float] = dataclasses.field(default_factory=list)
    e2e: list[float] = dataclasses.field(default_factory=list)
    itl: list[float] = dataclasses.field(default_factory=list)
    first_ids: np.ndarray | None = None
    digest: str = ""
    wall_s: float = 0.0


def _prepared(backend: Any, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
    """The backend's generation facts, checked."""
    api = type(backend).__name__
    if not generates(backend):
        raise RuntimeError(f"generation is not built for {api} (no prepare_generation/generate)")
    facts = dict(backend.prepare_generation(batch, prompt_tokens, new_tokens))
    missing = [k for k in FACTS if k not in facts]
    if missing or facts.get("token_timing") not in TOKEN_TIMINGS:
        raise RuntimeError(
            f"{api}.prepare_generation must state {', '.join(FACTS)} with token_timing one of "
            f"{', '.join(TOKEN_TIMINGS)} (missing: {', '.join(missing) or 'none'}, token_timing "
            f"{facts.get('token_timing')!r})"
        )
    return facts


def _serve(
    backend: Any,
    batches: list[np.ndarray],
    new_tokens: int,
    warmup: int,
    per_token: bool,
    emit: Callable[..., None],
) -> _Served:
    total = len(batches)
    emit("epoch_started", epoch=1, epochs=1, steps=total)
    now = time.perf_counter_ns
    clock = TokenClock(now)
    flush_every_ns = int(1e9 / protocol.MAX_STEP_MESSAGES_PER_S)
    served = _Served()
    pending: dict[str, list[float]] = {"latencies": [], "ttft": [], "tpot": []}
    digest = hashlib.sha256()
    backend.sync()
    wall0 = last_flush = now()
    for i, prompt in enumerate(batches):
        ids, request_ttft, request_e2e, request_s, gaps, end = _request(
            backend, prompt, new_tokens, clock, per_token, now
        )
        if served.first_ids is None:
            served.first_ids = ids
        if i < warmup:
            served.warm.append(request_s)
        else:
            digest.update(np.ascontiguousarray(ids, dtype="<i8").tobytes())
            served.ttft.append(request_ttft)
            served.e2e.append(request_e2e)
            served.itl.extend(gaps)
            pending["latencies"].append(request_e2e)
            pending["ttft"].append(request_ttft)
            if new_tokens > 1:
                pending["tpot"].append((request_e2e - request_ttft) / (new_tokens - 1))
        if end - last_flush >= flush_every_ns or i == total - 1:
            emit(
                "requests",
                done=i + 1,
                **{k: compact(v) for k, v in pending.items() if v},
            )
            pending = {k: [] for k in pending}
            last_flush = end
    served.wall_s = (now() - wall0) * 1e-9
    served.digest = digest.hexdigest()
    assert served.first_ids is not None  # total >= 1: requests >= 1 (spec)
    return served


def _request(
    backend: Any,
    prompt: np.ndarray,
    new_tokens: int,
    clock: TokenClock,
    per_token: bool,
    now: Callable[[], int],
) -> tuple[np.ndarray, float, float, float, list[float], int]:
    """One timed request: (ids, TTFT s, E2E s, the request's whole time s, the gaps between its
    tokens s, its end in ``now``'s ns)."""
    api = type(backend).__name__
    if per_token:
        clock.reset()
        backend.sync()
        t0 = now()
        ids = backend.generate(prompt, new_tokens, clock)
        end = now()
        if len(clock.stamps) != new_tokens:
            raise RuntimeError(
                f"{api}.generate read the token clock {len(clock.stamps)} times for "
                f"{new_tokens} tokens (token_timing per-token: once per token)"
            )
        first, last = clock.stamps[0] - t0, clock.stamps[-1] - t0
        gaps = (np.diff(np.asarray(clock.stamps, dtype=np.int64)) * 1e-9).tolist()
        checked = _checked_ids(ids, len(prompt), new_tokens, api)
        return checked, first * 1e-9, last * 1e-9, (end - t0) * 1e-9, gaps, end
    # The prefill timed as a one-token generation, then the whole request.
    backend.sync()
    t0 = now()
    one = backend.generate(prompt, 1, clock)
    backend.sync()
    request_ttft = (now() - t0) * 1e-9
    _checked_ids(one, len(prompt), 1, api)
    backend.sync()
    t0 = now()
    ids = backend.generate(prompt, new_tokens, clock)
    backend.sync()
    end = now()
    request_e2e = (end - t0) * 1e-9
    checked = _checked_ids(ids, len(prompt), new_tokens, api)
    return checked, request_ttft, request_e2e, request_e2e + request_ttft, [], end


def _summary(
    backend: Any,
    facts: dict[str, Any],
    served: _Served,
    split: Any,
    batches: list[np.ndarray],
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
    weights: str,
) -> dict[str, Any]:
    e2e = served.e2e
    stats = generation_stats(served.ttft, e2e, served.itl, batch, prompt_tokens, new_tokens)
    return {
        "mode": "generate",
        "generation": facts,
        "token_timing": facts["token_timing"],
        "weights": weights,
        "request_split": split,
        "batch_size": batch,
        "prompt_tokens": prompt_tokens,
        "new_tokens": new_tokens,
        "first_prompt_sha256": hashlib.sha256(
            np.ascontiguousarray(batches[0], dtype="<i8").tobytes()
        ).hexdigest(),
        # The first request's first sequence, prompt and generated ids: what the equity test and a
        # reader compare across frameworks; and every timed request's ids, hashed in order.
        "first_prompt_ids": [int(t) for t in batches[0][0]],
        "first_generated_ids": [int(t) for t in served.first_ids[0]],
        "generated_ids_sha256": served.digest,
        "warmup_requests": len(served.warm),
        "warmup_s": sum(served.warm),
        "first_request_s": served.warm[0] if served.warm else (e2e[0] if e2e else None),
        "requests": len(e2e),
        "generation_wall_s": served.wall_s,
        **stats,
        # The request series judged by the same rules as training steps (stability.py reads
        # steady_step_times): each request's E2E time is one "step" of a generation run.
        "steady_steps": len(e2e),
        "steady_step_times": compact(e2e),
        "step_source": GENERATION_SOURCE,
        "timing": "per request",
        "input": "host",
        **(
            getattr(backend, "memory_stats", dict)()
            or {
                "allocator_peak_mib": None,
                "allocator": "n/a: no allocator peak from the framework here (n/a on CPU)",
            }
        ),
    }
