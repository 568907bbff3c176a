"""Scaling: a figure against the threads a run was given, and data-parallel throughput against
the workers (each family against its fewest)."""

from __future__ import annotations

from tui_bench.engine.results import stats
from tui_bench.engine.results.tables.groups import (
    TEST_NOTE,
    Group,
    context_names,
    count_of,
    joined,
    marks_short,
    median_of,
    partitions,
    test_short,
)
from tui_bench.engine.results.tables.model import (
    COUNT,
    FLAG,
    FRACTION,
    NUMBER,
    P_VALUE,
    RATIO,
    Column,
    Table,
    metric_info,
)

# -- scaling ---------------------------------------------------------------------------------------
# The columns a reader (the figures) names: both tables have WITH and SPEEDUP; the threads
# table's x is THREADS (its baseline row says so in VS_FEWEST), the workers table's WORKERS.
WITH = Column("with")
THREADS = Column("threads", COUNT)
WORKERS = Column("workers", COUNT)
SCALING = Column("scaling")  # weak or strong
SPEEDUP = Column("speed-up", RATIO)
VS_FEWEST = Column("vs fewest threads", terminal=False)  # "baseline", or the test in words


def scaling_table(configs: list[Group], varying: list[str], metric: str) -> Table | None:
    if "threads" not in varying:
        return None
    m = metric_info(metric)
    if not m.lower_is_better:
        return None
    table = Table(
        "scaling",
        f"thread scaling of {m.what}",
        (
            WITH,
            THREADS,
            Column("median", NUMBER, m.unit),
            SPEEDUP,
            Column("efficiency", FRACTION),
            Column("oversubscribed", FLAG),
            Column("p", P_VALUE, terminal=False),
            Column("n", COUNT, terminal=False),
            Column("test"),
            VS_FEWEST,
        ),
        note="speed-up = median at the fewest threads / median here; efficiency = speed-up / "
        "(threads / fewest threads); 100 % is perfect scaling. test: against the fewest "
        "threads, " + TEST_NOTE,
    )
    parts = partitions(configs, varying, "threads")
    contexts = context_names(configs, "threads")
    for part in parts:
        # a damaged record's threads ("two") is no count to scale against: left out
        by_threads = {t: c for c in part if (t := count_of(c.spec.get("threads"))) is not None}
        rows = stats.thread_scaling({t: c.values(metric) for t, c in by_threads.items()})
        for row in rows:
            c = by_threads[row.threads]
            significance = "baseline" if row is rows[0] else row.significance.text
            verdicts = c.verdicts()
            short = "baseline" if row is rows[0] else test_short(row.significance)
            short = joined(short, marks_short([("", verdicts)]))
            table.add(
                [
                    contexts[id(c)],
                    row.threads,
                    row.median,
                    row.speedup,
                    row.efficiency,
                    c.oversubscribed,
                    None if row is rows[0] else row.significance.p,
                    len(c.values(metric)),
                    short,
                    significance,
                ],
                [(c.label, verdicts)],
            )
    return table


def worker_scaling_table(configs: list[Group], varying: list[str]) -> Table | None:
    """Data-parallel scaling as DLBS reports it: global throughput against the number of
    workers, each family (weak or strong scaling, framework, …) against its fewest workers.

    efficiency = throughput_N / ((N / N0) x throughput_N0), N0 the fewest workers (1 in a
    sweep that starts there): 100 % means N workers did N times the work of one per second."""
    if "workers" not in varying:
        return None
    table = Table(
        "workers",
        "data-parallel scaling: global samples/s (steady state) against workers",
        (
            WITH,
            SCALING,
            WORKERS,
            Column("threads/worker", COUNT),
            Column("global batch", COUNT, terminal=False),
            Column("samples/s", NUMBER, "samples/s"),
            SPEEDUP,
            Column("efficiency", FRACTION),
            Column("step median s", NUMBER, "s", terminal=False),
            Column("comm set-up s", NUMBER, "s"),
            Column("slowest/fastest rank", RATIO),
            Column("oversubscribed", FLAG),
            Column("n", COUNT, terminal=False),
        ),
        note="weak: batch_size per worker (the global batch grows with the workers); strong: "
        "batch_size is the global batch, split evenly. samples/s counts global samples per "
        "second of steady-state steps (warm-up and communication set-up excluded). efficiency "
        "= samples/s at N / ((N / fewest) x samples/s at the fewest workers), as DLBS reports; "
        "slowest/fastest rank = ratio of the ranks' own step medians (stragglers).",
    )
    # Each family differs only in workers; scaling stays in the family's name (weak vs strong
    # are different questions) even when it does not vary between the compared runs.
    parts = partitions(configs, varying, "workers")
    contexts = context_names(configs, "workers", "scaling")
    for part in parts:
        part = sorted(part, key=lambda c: count_of(c.spec.get("workers")) or 1)
        base = part[0]
        base_workers = count_of(base.spec.get("workers")) or 1
        base_rate = median_of(base.values("samples_per_s"))
        for c in part:
            workers = count_of(c.spec.get("workers")) or 1
            rate = median_of(c.values("samples_per_s"))
            speedup = rate / base_rate if rate and base_rate else None
            efficiency = speedup / (workers / base_workers) if speedup else None
            batch = count_of(c.spec.get("batch_size"))
            scaling = c.spec.get("scaling") or "weak"
            table.add(
                [
                    contexts[id(c)],
                    scaling,
                    workers,
                    c.spec.get("threads"),
                    batch * workers if scaling == "weak" and batch else batch,
                    rate,
                    speedup,
                    efficiency,
                    median_of(c.values("step_median_s")),
                    median_of(c.values("comm_setup_s")),
                    median_of(c.values("rank_straggler_ratio")),
                    c.oversubscribed,
                    len(c.values("samples_per_s")),
                ],
                [(c.label, c.verdicts())],
            )
    return table
