"""Serving over batch sizes: latency (p50, p90, p99) and samples/s per family of inference
configurations that span two or more batch sizes."""

from __future__ import annotations

from typing import Any

from tui_bench.engine.results import metrics
from tui_bench.engine.results.tables.groups import (
    Group,
    context_names,
    count_of,
    inference_groups,
    median_of,
)
from tui_bench.engine.results.tables.model import COUNT, NUMBER, Column, Table

# -- inference over batch sizes -------------------------------------------------------------------
# The serving figures of a batch-size curve, as the registry names them: latency (p50, with the
# tail beside it) and samples/s, each a median over the configuration's finished repeats.
CURVE = ("latency_p50_s", "latency_p90_s", "latency_p99_s", "inference_samples_per_s")


WITH = Column("with")  # the family: what else the configurations differ in
BATCH = Column("batch", COUNT)


def curve_column(key: str) -> Column:
    """The column of one of ``CURVE``'s figures ('p50' in s, 'infer samples/s')."""
    m = metrics.get(key)
    return Column(m.short.split()[0] if m.unit == "s" else m.short, NUMBER, m.unit)


def batch_curve_table(configs: list[Group]) -> Table | None:
    """Latency and throughput against the batch size, one curve per family (framework × API and
    whatever else the inference configurations differ in beside the batch), for the inference
    configurations when they span two or more batch sizes. A family's rows go up in batch."""
    served = inference_groups(configs)
    if len({repr(c.spec.get("batch_size")) for c in served}) < 2:
        return None
    shown = [metrics.get(key) for key in CURVE]
    table = Table(
        "batches",
        "inference over batch sizes: "
        + ", ".join(m.what.removeprefix("inference ") for m in shown)
        + " per family",
        (
            WITH,
            BATCH,
            Column("n", COUNT),
            *(curve_column(m.key) for m in shown),
            Column("requests", COUNT, terminal=False),
        ),
        note="cells: median over the finished repeats of each run's own figure; a run's p90 and "
        "p99 rest on its requests (too few for the tail: its latency note, tui-bench history "
        "show); samples/s = batch × requests / their summed latency.",
    )
    # The request count moves with the batch (a preset serves fewer, larger requests at a large
    # batch): it sizes each point's sample, not the curve it belongs to (its own column says it).
    contexts = context_names(served, "batch_size", "requests")
    families: dict[Any, list[Group]] = {}
    for c in served:
        family = tuple(p for p in c.config.key if p[0] not in ("batch_size", "requests"))
        families.setdefault(family, []).append(c)
    for members in families.values():
        ordered = sorted(members, key=lambda c: count_of(c.spec.get("batch_size")) or 0)
        for c in ordered:
            values = {key: c.values(key) for key in CURVE}
            table.add(
                [
                    contexts[id(c)],
                    count_of(c.spec.get("batch_size")),
                    len(values[CURVE[0]]),
                    *(median_of(values[key]) for key in CURVE),
                    # the fewest any run's figures rest on
                    int(min(n)) if (n := c.values("latency_requests")) else None,
                ],
                [(c.label, c.verdicts())],
            )
    return table
