"""Comparisons: configurations that differ in one field, each against a baseline (ratio of
medians, speed-up, the Mann-Whitney verdict or why there is none)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tui_bench.engine.results import identity, stats
from tui_bench.engine.results.tables.groups import (
    ALONG,
    TEST_NOTE,
    Group,
    context_names,
    count_of,
    joined,
    marks_short,
    marks_text,
    noise_of,
    partitions,
    short_names,
    side_verdicts,
    test_short,
)
from tui_bench.engine.results.tables.model import (
    COUNT,
    FRACTION,
    P_VALUE,
    RATIO,
    SEED_DEPENDENT,
    Column,
    Table,
    metric_info,
)

# -- comparisons -----------------------------------------------------------------------------------
# The table's columns: the verdict and the figures read cells by these, never by header text.
DIFFERS_IN = Column("differs in")  # the field: 'framework/api', 'threads', …
WITH = Column("with")  # what the pair has beside it
CONFIGURATION = Column("configuration")
BASELINE = Column("baseline")
RATIO_OF_MEDIANS = Column("ratio", RATIO)  # median / baseline median
SPEEDUP = Column("speed-up", RATIO)  # times faster than the baseline; None inside the noise
P = Column("p", P_VALUE, terminal=False)
N = Column("n", COUNT, terminal=False)
N_BASELINE = Column("n baseline", COUNT, terminal=False)
NOISE = Column("noise", FRACTION, terminal=False)
STABILITY = Column("stability", terminal=False)
TEST = Column("test")
SIGNIFICANCE = Column("significance", terminal=False)  # the verdict in words


def _value_names(groups: list[Group], field_name: str) -> dict[int, str]:
    """Each configuration's value of the compared field (with what goes along with it), named
    among the compared configurations: 'torch' and 'keras' when the framework tells them apart,
    'torch · eager' and 'torch · compile' when it takes the API too."""
    keep = {field_name, *ALONG.get(field_name, ())}
    names = short_names(groups, lambda f: f in keep)
    return {
        id(c): names[id(c)] or identity.short_value(field_name, c.spec.get(field_name))
        for c in groups
    }


def _single_seed(*configs: Group) -> Any:
    """The one seed every finished run of these configurations used, or None when they differ."""
    seeds = {r.spec.get("seed") for c in configs for r in c.finished()}
    return next(iter(seeds)) if len(seeds) == 1 else None


def comparison_table(
    configs: list[Group], varying: list[str], metric: str, leave_out: Sequence[str] = ()
) -> Table:
    """Configurations that differ in one field, against a baseline: GPU vs CPU (baseline cpu),
    API vs API, framework vs framework, dataset… (baseline: the first seen). ``leave_out``:
    fields another table answers (batch size, where the trade-off table does)."""
    m = metric_info(metric)
    table = Table(
        "comparisons",
        f"comparisons of {m.what}",
        (
            DIFFERS_IN,
            WITH,
            CONFIGURATION,
            BASELINE,
            RATIO_OF_MEDIANS,
            SPEEDUP,
            P,
            N,
            N_BASELINE,
            NOISE,
            STABILITY,
            TEST,
            SIGNIFICANCE,
        ),
        note="ratio = median / baseline median; speed-up = how many times faster than the "
        "baseline, left out when the difference is inside the noise (repeats' (max-min)/min, or "
        "one run's step CV: 'noise ±x%'). test: against the baseline, " + TEST_NOTE,
    )
    # framework and api often vary together (a matrix); compare the pair as one field. A
    # device's model changes with the device or the host: compared as part of them.
    # Threads are answered by the scaling table beside this one; here too (ratio and test
    # against the fewest) where nothing else varies or no scaling table is drawn (a metric
    # better higher): 1 thread against 2 is a question with an answer like any other.
    alone = [f for f in varying if f not in ("api", "device_model")] == ["threads"]
    fields_ = [
        f
        for f in varying
        if f not in ("api", "device_model", *leave_out)
        and (f != "threads" or alone or not m.lower_is_better)
    ]
    if "api" in varying and "framework" not in varying:
        fields_.append("api")
    if "device_model" in varying and not {"device", "host"} & set(varying):
        fields_.append("device_model")
    for field_name in fields_:
        along = ALONG.get(field_name, ())
        compare_on = [f for f in varying if f not in along]
        parts = partitions(configs, compare_on, field_name)
        contexts = context_names(configs, field_name)
        names = _value_names(configs, field_name)
        differs = field_name if field_name != "framework" else "framework/api"
        for part in parts:
            base = part[0]
            if field_name == "device":
                base = next((c for c in part if c.spec.get("device") == "cpu"), part[0])
            if field_name == "threads":
                base = min(part, key=lambda c: count_of(c.spec.get("threads")) or 1)
            base_values = base.values(metric)
            for c in part:
                if c is base:
                    continue
                values = c.values(metric)
                head = [differs, contexts[id(c)], names[id(c)], names[id(base)]]
                if not values or not base_values:
                    table.add(
                        [*head, None, None, None, len(values), len(base_values), None, ""]
                        + ["no runs", "no finished runs on one side"]
                    )
                    continue
                result = stats.compare_pair(c.label, values, base.label, base_values)
                verdict = result.significance.text
                short = test_short(result.significance)
                same_seed = _single_seed(c, base) if metric in SEED_DEPENDENT else None
                if same_seed is not None:
                    verdict = (
                        f"no test: every run used seed {same_seed}, so repeats are not "
                        "replicates of an accuracy"
                    )
                    short = f"one seed ({same_seed})"
                speedup = None
                if result.ratio:
                    speedup = 1 / result.ratio if m.lower_is_better else result.ratio
                noise = noise_of((c, values), (base, base_values))
                if result.ratio and noise is not None and abs(result.ratio - 1) <= noise:
                    # inside the noise: no "x times faster", whatever the test says
                    speedup = None
                    verdict = f"within the noise (±{100 * noise:.0f} %); {verdict}"
                    short = f"noise ±{100 * noise:.0f}%; {short}"
                sides = side_verdicts([("this", c), ("baseline", base)])
                marks = marks_text(sides)
                short = joined(short, marks_short(sides))
                if marks:
                    verdict = f"{verdict}; {marks}"
                p = result.significance.p if same_seed is None else None
                table.add(
                    [
                        *head,
                        result.ratio,
                        speedup,
                        p,
                        len(values),
                        len(base_values),
                        noise,
                        marks,
                        short,
                        verdict,
                    ],
                    sides,
                )
    return table
