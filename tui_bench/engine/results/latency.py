"""An inference run's latency in one sentence (``tui-bench run``, ``history show``): its
percentiles with the number of requests behind them, samples/s, the first request, and the
worker's note where the requests are too few for a tail they claim (docs/inference.md)."""

from __future__ import annotations

from tui_bench.engine.results import metrics
from tui_bench.engine.results.record import Run

SHOWN = ("latency_p50_s", "latency_p90_s", "latency_p99_s", "latency_max_s", "latency_mean_s")


def line(run: Run) -> str | None:
    """'p50 0.412 ms · p90 … over 1000 requests of batch 1; 2425 infer samples/s; …', or None
    for a run that served no requests."""
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
