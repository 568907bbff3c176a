"""Generation over batch sizes: time to the first token (p50, p99), time per output token (p50,
p99) and decode tokens/s per family of generation configurations (framework × API and whatever
else they differ in beside the batch) that span two or more batch sizes (docs/generation.md)."""

from __future__ import annotations

from typing import Any

from tui_bench.engine.results import metrics
from tui_bench.engine.results.tables.groups import Group, context_names, count_of, median_of
from tui_bench.engine.results.tables.model import COUNT, NUMBER, Column, Table

# The figures of a generation batch curve, as the registry names them: each a median over the
# configuration's finished repeats of each run's own figure.
CURVE = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "decode_tokens_per_s")

WITH = Column("with")  # the family: what else the configurations differ in
BATCH = Column("batch", COUNT)
N = Column("n", COUNT)
REQUESTS = Column("requests", COUNT, terminal=False)  # the fewest any run's percentiles rest on


def curve_column(key: str) -> Column:
    """The column of one of ``CURVE``'s figures ('TTFT p50' in s, 'decode tokens/s')."""
    m = metrics.get(key)
    name = " ".join(m.short.split()[:2]) if m.unit == "s" else m.short
    return Column(name, NUMBER, m.unit)


def generation_groups(configs: list[Group]) -> list[Group]:
    return [c for c in configs if c.spec.get("mode") == metrics.GENERATE]


def generation_batch_table(configs: list[Group]) -> Table | None:
    """TTFT and TPOT (p50, p99) and decode tokens/s against the batch size, one curve per family,
    for the generation configurations when they span two or more batch sizes. A family's rows go
    up in batch."""
    generated = generation_groups(configs)
    if len({repr(c.spec.get("batch_size")) for c in generated}) < 2:
        return None
    table = Table(
        "generation",
        "generation over batch sizes: TTFT p50 and p99, TPOT p50 and p99, decode tokens/s "
        "per family",
        (WITH, BATCH, N, *(curve_column(key) for key in CURVE), REQUESTS),
        note="cells: median over the finished repeats of each run's own figure; TTFT: a "
        "request's start to its first token on the host; TPOT: (E2E − TTFT) / (N − 1) per "
        "request; a run's p99 rests on its requests (too few for the tail: its latency note, "
        "tui-bench history show); decode tokens/s = batch × (N − 1) × requests / their summed "
        "E2E − TTFT.",
    )
    # The request count moves with the batch (as in serving's curve): it sizes each point's
    # sample, not the curve it belongs to.
    contexts = context_names(generated, "batch_size", "requests")
    families: dict[Any, list[Group]] = {}
    for c in generated:
        family = tuple(p for p in c.config.key if p[0] not in ("batch_size", "requests"))
        families.setdefault(family, []).append(c)
    for members in families.values():
        for c in sorted(members, key=lambda c: count_of(c.spec.get("batch_size")) or 0):
            values = {key: c.values(key) for key in CURVE}
            table.add(
                [
                    contexts[id(c)],
                    count_of(c.spec.get("batch_size")),
                    len(values["tpot_p99_s"]),
                    *(median_of(values[key]) for key in CURVE),
                    int(min(n)) if (n := c.values("generate_requests")) else None,
                ],
                [(c.label, c.verdicts())],
            )
    return table
