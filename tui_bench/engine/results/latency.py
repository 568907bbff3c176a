"""An inference run's latency in one sentence (``tui-bench run``, ``history show``): its
percentiles with the number of requests behind them, samples/s, the first request, and the
worker's note where the requests are too few for a tail they claim (docs/inference.md). A
generation run's sentence names TTFT, TPOT and E2E, the tokens/s and the bandwidth it drew
(docs/generation.md)."""

from __future__ import annotations

from tui_bench.engine.results import metrics
from tui_bench.engine.results.record import Run

SHOWN = ("latency_p50_s", "latency_p90_s", "latency_p99_s", "latency_max_s", "latency_mean_s")


GENERATION = (
    ("TTFT", ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s")),
    ("TPOT", ("tpot_p50_s", "tpot_p90_s", "tpot_p99_s")),
    ("E2E", ("e2e_p50_s", "e2e_p99_s")),
)
RATES = ("prefill_tokens_per_s", "decode_tokens_per_s", "decode_gbps")


def generation_line(run: Run) -> str | None:
    """'TTFT p50 2.10 · p90 … ms; TPOT p50 0.412 … ms; E2E …; over 200 requests of batch 1
    (P 64 + N 64 tokens); 30,000 prefill tokens/s, 2,400 decode tokens/s, 14 decode GB/s, MBU …',
    or None for a run that generated nothing."""
    n = run.metric("generate_requests")
    if not n:
        return None
    groups = []
    for name, keys in GENERATION:
        parts = [
            f"{metrics.get(key).short.split()[1]} {metrics.get(key).text(value)}"
            for key in keys
            if (value := run.metric(key)) is not None
        ]
        if parts:
            groups.append(f"{name} " + " · ".join(parts) + " ms")
    spec = run.spec
    text = "; ".join(groups) + (
        f" over {n:.0f} requests of batch {spec.get('batch_size')} (P "
        f"{spec.get('prompt_tokens')} + N {spec.get('new_tokens')} tokens, "
        f"{run.metric_text('token_timing') or 'timing unknown'})"
    )
    rates = [
        f"{metrics.get(key).text(value)} {metrics.get(key).short}"
        for key in RATES
        if (value := run.metric(key)) is not None
    ]
    if rates:
        text += "; " + ", ".join(rates)
    for key in ("mbu", "mbu_nominal", "prefill_mfu"):
        if (value := run.metric(key)) is not None:
            text += f", {metrics.get(key).short} {metrics.get(key).text(value)}"
    first = metrics.get("first_request_s")
    if (first_s := run.metric(first.key)) is not None:
        text += f"; {first.short} {first.text(first_s)} s"
    if note := run.metric_text("latency_note"):
        text += f"; too few requests: {note}"
    return text


def line(run: Run) -> str | None:
    """'p50 0.412 ms · p90 … over 1000 requests of batch 1; 2425 infer samples/s; …', or None
    for a run that served no requests; a generation run's ``generation_line``."""
    if run.mode == metrics.GENERATE:
        return generation_line(run)
    n = run.metric("latency_requests")
    if not n:
        return None
    parts = []
    for key in SHOWN:
        m = metrics.get(key)
        value = run.metric(key)
        if value is not None:
            parts.append(f"{m.short.split()[0]} {m.text(value)} ms")
    batch = run.spec.get("batch_size")
    text = " · ".join(parts) + f" over {n:.0f} requests of batch {batch}"
    rate = metrics.get("inference_samples_per_s")
    if (per_s := run.metric(rate.key)) is not None:
        text += f"; {rate.text(per_s)} {rate.short}"
    first = metrics.get("first_request_s")
    if (first_s := run.metric(first.key)) is not None:
        text += f"; {first.short} {first.text(first_s)} s"
    if note := run.metric_text("latency_note"):
        text += f"; too few requests: {note}"
    return text
