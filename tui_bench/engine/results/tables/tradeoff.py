"""The batch-size trade-off: what a larger batch buys in throughput and what it costs in latency,
step by step of a sweep, and (with a latency bound) which configuration serves the most inside
the bound (MLPerf's Server question). A larger batch always takes longer per request or per
step: that is the price, not a regression, so a sweep over batch sizes is answered here and
not by compare's "faster/slower" ratios.

The pair of figures is a parameter (``TradeOff``), one per mode: a training sweep trades
samples/s against the median step time, an inference sweep samples/s against p99 latency.
Another mode (generation: decode tokens/s against p99 time per output token) is one more
entry in ``TRADE_OFFS``; nothing else here names a figure.

A *family* is the configurations that differ in batch size alone (the request count, which
a preset lowers at a large batch, goes along with it). Rows go up in batch within a family;
each row past a family's first says what the step from the previous batch bought (throughput
×) and cost (latency ×).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tui_bench.engine.errors import UsageError
from tui_bench.engine.results import metrics
from tui_bench.engine.results.tables.groups import Group, context_names, count_of, median_of
from tui_bench.engine.results.tables.model import (
    COUNT,
    FLAG,
    NUMBER,
    RATIO,
    TEXT,
    Column,
    Shown,
    Table,
)

TRAIN = "train"


@dataclass(frozen=True)
class TradeOff:
    """What a batch buys (``throughput``, higher is better) against what it pays (``latency``,
    lower is better, the figure a latency bound holds), for runs of ``mode``; the words name
    each in a sentence ("samples/s", "p99 latency")."""

    mode: str
    throughput: str
    latency: str
    throughput_words: str
    latency_words: str

    @property
    def key(self) -> str:
        """How a row names its pair: 'inference_samples_per_s / latency_p99_s'."""
        return f"{self.throughput} / {self.latency}"


# One entry a mode: the pair its batch sweep trades.
TRADE_OFFS: dict[str, TradeOff] = {
    TRAIN: TradeOff(TRAIN, "samples_per_s", "step_median_s", "samples/s", "step time"),
    metrics.INFERENCE: TradeOff(
        metrics.INFERENCE, "inference_samples_per_s", "latency_p99_s", "samples/s", "p99 latency"
    ),
}


def trade_off_of(mode: Any) -> TradeOff | None:
    """The pair a run of ``mode`` trades (a record without a mode trained)."""
    return TRADE_OFFS.get(mode or TRAIN)


def by_key(key: str) -> TradeOff | None:
    return next((t for t in TRADE_OFFS.values() if t.key == key), None)


@dataclass(frozen=True)
class LatencyBound:
    """The most latency a configuration may pay, in seconds (``--latency-bound MS``)."""

    seconds: float

    @property
    def ms_text(self) -> str:
        return f"{self.seconds * 1000:g} ms"


def latency_bound(text: Any) -> LatencyBound:
    """``--latency-bound`` (and the Compare screen's field) read: milliseconds, a finite number
    above 0; anything else is one line (``UsageError``, exit 2)."""
    try:
        ms = float(str(text).strip().removesuffix("ms").strip())
    except ValueError:
        raise UsageError(
            f"--latency-bound {text!r}: not a number of milliseconds (e.g. 50)"
        ) from None
    if not math.isfinite(ms) or ms <= 0:
        raise UsageError(f"--latency-bound {text!r}: must be a number of milliseconds above 0")
    return LatencyBound(ms / 1000)


# The table's columns, read by the verdict by column (never by the header a page shows).
WITH = Column("with")
BATCH = Column("batch", COUNT)
N = Column("n", COUNT)
THROUGHPUT = Column("throughput", NUMBER)  # its unit: the pair's throughput's
LATENCY = Column("latency", NUMBER, "s")
FROM_BATCH = Column("from batch", COUNT, terminal=False)  # the family's previous batch
GAINED = Column("throughput ×", RATIO)  # against the previous batch of the family
PAID = Column("latency ×", RATIO)
WITHIN = Column("within bound", FLAG)
BOUND = Column("bound", NUMBER, "s", terminal=False)  # the latency bound asked, in each row
PAIR = Column("figures", TEXT, terminal=False)  # TradeOff.key: which pair the row trades
CONFIGURATION = Column("configuration", TEXT, terminal=False)  # the configuration's label


def _families(configs: list[Group]) -> dict[Any, list[Group]]:
    families: dict[Any, list[Group]] = {}
    for c in configs:
        family = tuple(p for p in c.config.key if p[0] not in ("batch_size", "requests"))
        families.setdefault(family, []).append(c)
    return families


def answers_batches(configs: list[Group]) -> bool:
    """Whether some family here spans two or more batch sizes: a batch sweep, which this table
    answers (compare's ratios leave batch size to it)."""
    for members in _families(configs).values():
        if len({count_of(c.spec.get("batch_size")) for c in members} - {None}) >= 2:
            return True
    return False


def tradeoff_table(configs: list[Group], bound: LatencyBound | None = None) -> Table | None:
    """Per family of configurations that differ in batch size only: throughput and latency at
    each batch, and what each step up bought and paid. With a ``bound``, every configuration
    that has the pair (a single batch too) and whether its latency stays within it."""
    if not answers_batches(configs) and bound is None:
        return None
    pairs = {t for c in configs if (t := trade_off_of(c.spec.get("mode"))) is not None}
    one = next(iter(pairs)) if len(pairs) == 1 else None
    throughput_unit = metrics.get(one.throughput).unit if one is not None else ""
    latency = metrics.get(one.latency) if one is not None else None
    columns = (
        WITH,
        BATCH,
        N,
        Column(THROUGHPUT.name, NUMBER, throughput_unit),
        LATENCY,
        FROM_BATCH,
        GAINED,
        PAID,
        *((WITHIN, BOUND) if bound is not None else ()),
        PAIR,
        CONFIGURATION,
    )
    # headers in the pair's words where one pair applies ("samples/s", "p99" + its unit)
    throughput_header = one.throughput_words if one is not None else "throughput"
    latency_header = latency.short.split()[0] if latency is not None else "latency"
    layout = (
        Shown("with", (WITH.name,)),
        Shown("batch", (BATCH.name,)),
        Shown("n", (N.name,)),
        Shown(throughput_header, (THROUGHPUT.name,)),
        Shown(latency_header, (LATENCY.name,)),
        Shown(f"{throughput_header} ×", (GAINED.name,)),
        Shown(f"{latency_header} ×", (PAID.name,)),
        *((Shown(f"≤ {bound.ms_text}", (WITHIN.name,)),) if bound is not None else ()),
    )
    what = (
        f"{one.throughput_words} against {one.latency_words}"
        if one is not None
        else "throughput against latency (training: samples/s and step time; inference: "
        "samples/s and p99 latency)"
    )
    table = Table(
        "tradeoff",
        f"batch-size trade-off: {what}, per step of the sweep",
        columns,
        note="cells: median over the finished repeats of each run's own figure; × : against the "
        "family's previous batch (what the larger batch bought, and what it cost). A larger "
        "batch pays in latency by design: this is the price of its throughput, not a "
        "regression."
        + (
            f" within bound: its {one.latency_words if one else 'latency'} median is at most "
            f"{bound.ms_text}."
            if bound is not None
            else ""
        ),
        layout=layout,
    )
    named = context_names(configs, "batch_size", "requests")
    for members in _families(configs).values():
        ordered = sorted(members, key=lambda c: count_of(c.spec.get("batch_size")) or 0)
        if len(ordered) < 2 and bound is None:
            continue
        previous: tuple[int | None, float | None, float | None] | None = None
        for c in ordered:
            pair = trade_off_of(c.spec.get("mode"))
            if pair is None:
                continue
            rate = median_of(c.values(pair.throughput))
            delay = median_of(c.values(pair.latency))
            gained = paid = None
            from_batch = None
            if previous is not None:
                from_batch, before_rate, before_delay = previous
                gained = rate / before_rate if rate and before_rate else None
                paid = delay / before_delay if delay and before_delay else None
            batch = count_of(c.spec.get("batch_size"))
            within = None if delay is None or bound is None else delay <= bound.seconds
            table.add(
                [
                    named[id(c)],
                    batch,
                    len(c.values(pair.latency)),
                    rate,
                    delay,
                    from_batch,
                    gained,
                    paid,
                    *((within, bound.seconds) if bound is not None else ()),
                    pair.key,
                    c.label,
                ],
                [(c.label, c.verdicts())],
            )
            previous = (batch, rate, delay)
    return table if table.rows else None
