"""Compare's tables, computed: typed rows of numbers over recorded runs, and nothing about how
they are shown. ``results/render.py`` turns them into terminal, markdown, CSV and JSON text; the
TUI's Compare screen lays the same rows out; an HTML report reads them too. No statistic is
computed anywhere else: a renderer formats, it never recomputes.

Runs are read through ``record.Run`` and grouped into *configurations* by
``identity.group_by_configuration`` (the grouping trends and regress use: the seed, the repeat
count and the dataset's directory aside); each is named by identity's short label, the fewest
fields that tell the compared configurations apart ('torch · eager', 'mlp · 2 thr'). Only
finished runs give figures; failed ones are counted and their reasons kept.

The API (all a front end or a renderer needs)::

    records, skipped, published = sweep.collect(ids, History())    # run, group or sweep ids
    comparison = tables.compute(records, metric=None, study_metric="train_wall_s",
                                skipped=skipped, published=published)
    comparison.tables()             # the tables with rows, in order: summary first
    comparison.summary              # a Table; and .comparisons, .scaling, .workers, .study,
                                    # .published, .fairness, .skipped: Table | None
    comparison.groups               # [Group]: .config (identity.Configuration), .label, .spec
                                    # (its deciding fields), .runs ([record.Run]), .values(m)
    comparison.varying              # the fields that differ between the groups
    comparison.metric               # Metric: key, label, unit, lower_is_better

    table.name, table.title, table.note
    table.columns                   # (Column(name, kind, unit, terminal), ...)
    table.rows                      # [Row]: .cells, one plain value per column (float, int,
                                    # str, bool or None: never a number formatted as text),
                                    # .verdicts: ((side, Verdicts), ...) of the runs behind the
                                    # numbers (stable / noisy / unreliable counts, n, note)
    table.records()                 # [{column name: cell}]
    table.shown                     # (Shown(header, sources, form), ...): the columns a
                                    # terminal or a page shows, and how cells combine
                                    # ("mean ± std" is mean and std, kept apart in the rows)

A column's ``kind`` says what its cells are: ``text``; ``count`` (int); ``number`` (float, in
``unit``); ``ratio`` (dimensionless, ×); ``fraction`` (0..1, shown as a percentage: efficiency,
noise); ``p`` (a p-value); ``flag`` (bool). Spread has its own numeric columns (IQR, q1, q3,
std, min, max, noise), so a CSV or JSON reader gets every number at full precision.

The summary carries, beside the compared metric, the median of each per-run figure the registry
places in ``metrics.MEDIAN`` (throughput, warm-up): a metric's label, unit and
direction are ``results/metrics.py``'s.

Statistics come from ``results/stats.py`` (median, IQR, Mann-Whitney U, thread scaling) and
verdicts from ``results/stability.py``; the marks a number carries (whose runs are not stable,
how wide the noise is) are made once here (``_sides``, ``_noise``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.machine.peaks import MFU_ABOVE_ONE
from tui_bench.engine.results import identity, metrics, stability, stats
from tui_bench.engine.results import published as published_module
from tui_bench.engine.results.record import Run, number

Cell = float | int | str | bool | None

# Column kinds (see the module docstring).
TEXT, COUNT, NUMBER, RATIO, FRACTION, P_VALUE, FLAG = (
    "text",
    "count",
    "number",
    "ratio",
    "fraction",
    "p",
    "flag",
)
NUMERIC_KINDS = frozenset({COUNT, NUMBER, RATIO, FRACTION, P_VALUE})

# How a shown column combines its source cells (``Shown.form``).
VALUE, PLUS_MINUS, RANGE, WITH_N, PAIR = "value", "plus_minus", "range", "with_n", "pair"


# A metric's label, unit and better direction: ``results/metrics.py``, the one registry.
Metric = metrics.Metric
METRICS: dict[str, Metric] = metrics.choices()  # what compare offers to compare on


def metric_info(key: str) -> Metric:
    """A registered metric, or one read off its key's name (``metrics.get``)."""
    return metrics.get(key)


# Metrics whose spread over repeats comes from the seed (initialisation, shuffling, dropout):
# repeats with one seed are not replicates of them.
SEED_DEPENDENT = ("test_accuracy", "val_accuracy", "target_reached_s")


# -- the typed table ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    name: str
    kind: str = TEXT
    unit: str = ""
    terminal: bool = True  # worth a terminal's width; CSV and JSON always get every column

    @property
    def numeric(self) -> bool:
        return self.kind in NUMERIC_KINDS


@dataclass(frozen=True)
class Shown:
    """A column as a terminal or a page shows it: ``header`` over ``sources`` combined by
    ``form``: value (one cell as is), plus_minus (mean ± std), range (min–max), with_n (a
    median and its n), pair (n/n of a ratio's two sides)."""

    header: str
    sources: tuple[str, ...]
    form: str = VALUE


@dataclass(frozen=True)
class Verdicts:
    """The stability verdicts of the finished runs behind a number (``results/stability.py``)."""

    stable: int = 0
    noisy: int = 0
    unreliable: int = 0
    unjudged: int = 0
    note: str = ""  # "" when all are stable (or unjudged), else "not stable: 1 noisy of 3"

    @property
    def n(self) -> int:
        return self.stable + self.noisy + self.unreliable + self.unjudged

    @property
    def state(self) -> str:
        """The worst verdict: unreliable, noisy, stable, "not judged", or "" with no run."""
        if self.unreliable:
            return stability.UNRELIABLE
        if self.noisy:
            return stability.NOISY
        if self.stable and not self.unjudged:
            return stability.STABLE
        return "not judged" if self.n else ""

    @classmethod
    def of(cls, runs: Sequence[Run]) -> Verdicts:
        counts = {stability.STABLE: 0, stability.NOISY: 0, stability.UNRELIABLE: 0}
        unjudged = 0
        for r in runs:
            if not r.finished:
                continue
            verdict = r.verdict
            if verdict in counts:
                counts[verdict] += 1
            else:
                unjudged += 1
        return cls(
            counts[stability.STABLE],
            counts[stability.NOISY],
            counts[stability.UNRELIABLE],
            unjudged,
            stability.stability_note(runs, unjudged=False),
        )


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    # The verdicts of the runs each side of the row's numbers comes from ("this", "baseline",
    # a configuration's label); empty for a row that is not a measurement.
    verdicts: tuple[tuple[str, Verdicts], ...] = ()


@dataclass
class Table:
    name: str  # short id: summary, comparisons, scaling, workers, study, published, fairness…
    title: str
    columns: tuple[Column, ...]
    rows: list[Row] = field(default_factory=list)
    note: str = ""
    layout: tuple[Shown, ...] | None = None  # None: every terminal column as it is

    def add(self, cells: Sequence[Cell], verdicts: Sequence[tuple[str, Verdicts]] = ()) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.name}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(Row(tuple(cells), tuple(verdicts)))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def index(self, name: str) -> int:
        return self.names.index(name)

    def column(self, name: str) -> Column:
        return self.columns[self.index(name)]

    def values(self, name: str) -> list[Cell]:
        i = self.index(name)
        return [row.cells[i] for row in self.rows]

    def records(self) -> list[dict[str, Cell]]:
        return [dict(zip(self.names, row.cells, strict=True)) for row in self.rows]

    @property
    def shown(self) -> tuple[Shown, ...]:
        if self.layout is not None:
            return self.layout
        return tuple(Shown(c.name, (c.name,)) for c in self.columns if c.terminal)


# -- configurations -------------------------------------------------------------------------------
@dataclass
class Group:
    """The runs of one configuration (``identity.Configuration``: its key, and its short label
    among the configurations compared)."""

    config: identity.Configuration
    runs: list[Run] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.config.label or "all runs"

    @property
    def spec(self) -> dict[str, Any]:
        """The fields that decide its numbers: the spec's, the host and the device model."""
        return self.config.facts

    def finished(self) -> list[Run]:
        return [r for r in self.runs if r.finished]

    def values(self, metric: str) -> list[float]:
        # each run's own figure: an inference run's p50 where a training run's step is asked
        out = (r.figure(metric) for r in self.finished())
        return [v for v in out if v is not None]

    @property
    def oversubscribed(self) -> bool:
        return any(r.oversubscribed for r in self.runs)

    def verdicts(self) -> Verdicts:
        return Verdicts.of(self.runs)


def group(records: Sequence[Run]) -> tuple[list[Group], list[str]]:
    """Configurations, a Group of runs each, in first-seen order (``identity``'s grouping, the
    one compare, trends and regress share), and the fields that differ between them. Runs from
    several hosts: one configuration on two boxes is two measurements, ``host`` a varying field
    like any other."""
    grouped = identity.group_by_configuration(records)
    groups = [Group(config, runs) for config, runs in grouped.items()]
    return groups, identity.varying_fields(list(grouped))


# Fields that vary along with another and are compared as part of it: an API with its framework
# (a matrix), a device's model with the device or the host it is on.
_ALONG = {"framework": ("api",), "device": ("device_model",), "host": ("device_model",)}


def _names(groups: list[Group], keep: Callable[[str], bool]) -> dict[int, str]:
    """Each configuration's short name (by ``id``) as identity makes it, from the deciding
    fields ``keep`` accepts only: "" where those do not tell the configurations apart."""
    reduced = [
        identity.Configuration(tuple(p for p in c.config.key if keep(p[0])), c.label)
        for c in groups
    ]
    fields_ = identity.label_fields(reduced)
    return {
        id(c): " · ".join(identity.short_value(f, r.get(f)) for f in fields_)
        for c, r in zip(groups, reduced, strict=True)
    }


def _contexts(groups: list[Group], field_name: str, *also: str) -> dict[int, str]:
    """What each configuration has beside the compared field (and ``also``, shown in columns of
    their own), named among the compared configurations ("—" for nothing)."""
    drop = {field_name, *_ALONG.get(field_name, ()), *also}
    return {k: v or "—" for k, v in _names(groups, lambda f: f not in drop).items()}


# -- marks: what a number's sides are made of -----------------------------------------------------
def _sides(sides: Sequence[tuple[str, Group]]) -> tuple[tuple[str, Verdicts], ...]:
    return tuple((name, c.verdicts()) for name, c in sides)


def marks_text(verdicts: Sequence[tuple[str, Verdicts]]) -> str:
    """'this: not stable: 1 noisy of 3; baseline: …' for the sides whose runs are not stable."""
    return "; ".join(f"{side}: {v.note}" for side, v in verdicts if v.note)


def marks_short(verdicts: Sequence[tuple[str, Verdicts]]) -> str:
    """The marks in a table cell's few words: 'unstable: this 1 noisy of 3'."""
    parts = [
        f"{side} {v.note.removeprefix('not stable: ')}".strip() for side, v in verdicts if v.note
    ]
    return "unstable: " + ", ".join(parts) if parts else ""


def test_short(significance: stats.Significance) -> str:
    """A Mann-Whitney verdict in a few characters (the note says how to read it): 'sig
    p=0.0079', 'ns p=0.31', or 'n<5' where a side has too few repeats for the test."""
    if significance.p is None:
        if min(significance.n_a, significance.n_b) < stats.MIN_REPEATS_FOR_TEST:
            return f"n<{stats.MIN_REPEATS_FOR_TEST}"
        return "no test"
    return f"{'sig' if significance.significant else 'ns'} p={significance.p:.2g}"


TEST_NOTE = (
    "two-sided Mann-Whitney U, 'sig' below p=0.05, 'ns' above; "
    f"n<{stats.MIN_REPEATS_FOR_TEST}: a side has fewer than {stats.MIN_REPEATS_FOR_TEST} repeats, "
    "so no test; 'unstable' names a side whose runs are not all stable. CSV and JSON carry "
    "the verdict in words (significance)."
)


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _noise(*sides: tuple[Group, list[float]]) -> float | None:
    """How far apart the sides' numbers fall by chance: the widest of their relative noises."""
    spreads = [stability.relative_noise(c.finished(), values) for c, values in sides]
    return max((s for s in spreads if s is not None), default=None)


def _count(value: Any) -> int | None:
    """A spec's count (threads, workers, batch size), or None where a damaged record has none."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _median(values: list[float]) -> float | None:
    return stats.median(values) if values else None


# -- summary ---------------------------------------------------------------------------------------
def _time_to_accuracy(c: Group) -> str | None:
    target = c.spec.get("target_accuracy")
    if target is None:
        return None
    finished = c.finished()
    reached = [
        (epoch, seconds)
        for epoch, seconds in (
            (r.metric("target_reached_epoch"), r.metric("target_reached_s")) for r in finished
        )
        if epoch is not None and seconds is not None
    ]
    if not reached:
        return f"not reached ({len(finished)} run(s))"
    seconds = stats.median([s for _e, s in reached])
    epochs = stats.median([e for e, _s in reached])
    return f"epoch {epochs:g}, {seconds:.3g} s ({len(reached)}/{len(finished)} reached {target:g})"


def summary_table(configs: list[Group], metric: str) -> Table:
    m = metric_info(metric)
    # What else it carries per configuration, beside the compared metric: the median over
    # finished runs of each figure the registry places in MEDIAN (``metrics``), in a column of
    # its own (CSV, JSON and a page; not a terminal's width).
    extras = [
        (e.key, f"median {e.short}", NUMBER, e.unit)
        for e in metrics.placed(metrics.MEDIAN)
        if e.key != metric
    ]
    number = lambda name, terminal=False: Column(name, NUMBER, m.unit, terminal)  # noqa: E731
    table = Table(
        "summary",
        f"{m.what}: per configuration",
        (
            Column("configuration"),
            Column("n", COUNT),
            number("median", True),
            number("IQR", True),
            Column("notes"),
            number("q1"),
            number("q3"),
            number("mean"),
            number("std"),
            number("min"),
            number("max"),
            Column("failed", COUNT, terminal=False),
            Column("oversubscribed", FLAG, terminal=False),
            Column("time to accuracy", terminal=False),
            Column("warning", terminal=False),
            Column("stability", terminal=False),
            *(Column(name, kind, unit, terminal=False) for _key, name, kind, unit in extras),
        ),
        note="median and IQR over repeats (linear-interpolation quartiles); std is the sample std; "
        "each repeat ran in its own worker process.",
        layout=(
            Shown("configuration", ("configuration",)),
            Shown("n", ("n",)),
            Shown("median", ("median",)),
            Shown("IQR", ("IQR",)),
            Shown("mean ± std", ("mean", "std"), PLUS_MINUS),
            Shown("min–max", ("min", "max"), RANGE),
            Shown("notes", ("notes",)),
        ),
    )
    for c in configs:
        values = c.values(metric)
        failed = [r for r in c.runs if not r.finished]
        failed_text = (
            f"{len(failed)} not finished (last: {failed[-1].status}: "
            f"{failed[-1].text_field('reason') or ''})"
            if failed
            else ""
        )
        tta = _time_to_accuracy(c) or ""
        numbers: list[Cell]
        if values:
            s = stats.summarize(values)
            head: list[Cell] = [c.label, s.n, s.median, s.iqr]
            numbers = [s.q1, s.q3, s.mean, s.std, s.min, s.max]
            warning = s.warning or ""
        else:
            head = [c.label, 0, None, None]
            numbers = [None] * 6
            warning = "no finished run"
        verdicts = c.verdicts()
        notes = [
            verdicts.note,
            "oversubscribed" if c.oversubscribed else "",
            f"time to accuracy: {tta}" if tta else "",
            warning,
            failed_text,
        ]
        judged = stability.stability_note(c.runs)
        table.add(
            [
                *head,
                "; ".join(n for n in notes if n),
                *numbers,
                len(failed),
                c.oversubscribed,
                tta,
                warning,
                judged or "stable",
                *(_median(c.values(key)) for key, *_ in extras),
            ],
            [(c.label, verdicts)],
        )
    return table


# -- comparisons -----------------------------------------------------------------------------------
def _partitions(configs: list[Group], varying: list[str], field_name: str) -> list[list[Group]]:
    """Configurations that differ only in ``field_name``, in first-seen order."""
    others = [f for f in varying if f != field_name]
    parts: dict[str, list[Group]] = {}
    for c in configs:
        parts.setdefault(repr([c.spec.get(f) for f in others]), []).append(c)
    return [p for p in parts.values() if len(p) > 1]


def _value_names(groups: list[Group], field_name: str) -> dict[int, str]:
    """Each configuration's value of the compared field (with what goes along with it), named
    among the compared configurations: 'torch' and 'keras' when the framework tells them apart,
    'torch · eager' and 'torch · compile' when it takes the API too."""
    keep = {field_name, *_ALONG.get(field_name, ())}
    names = _names(groups, lambda f: f in keep)
    return {
        id(c): names[id(c)] or identity.short_value(field_name, c.spec.get(field_name))
        for c in groups
    }


def _single_seed(*configs: Group) -> Any:
    """The one seed every finished run of these configurations used, or None when they differ."""
    seeds = {r.spec.get("seed") for c in configs for r in c.finished()}
    return next(iter(seeds)) if len(seeds) == 1 else None


def comparison_table(configs: list[Group], varying: list[str], metric: str) -> Table:
    """Configurations that differ in one field, against a baseline: GPU vs CPU (baseline cpu),
    API vs API, framework vs framework, dataset… (baseline: the first seen)."""
    m = metric_info(metric)
    table = Table(
        "comparisons",
        f"comparisons of {m.what}",
        (
            Column("differs in"),
            Column("with"),
            Column("configuration"),
            Column("baseline"),
            Column("ratio", RATIO),
            Column("speed-up", RATIO),
            Column("p", P_VALUE, terminal=False),
            Column("n", COUNT, terminal=False),
            Column("n baseline", COUNT, terminal=False),
            Column("noise", FRACTION, terminal=False),
            Column("stability", terminal=False),
            Column("test"),
            Column("significance", terminal=False),
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
        if f not in ("api", "device_model") and (f != "threads" or alone or not m.lower_is_better)
    ]
    if "api" in varying and "framework" not in varying:
        fields_.append("api")
    if "device_model" in varying and not {"device", "host"} & set(varying):
        fields_.append("device_model")
    for field_name in fields_:
        along = _ALONG.get(field_name, ())
        compare_on = [f for f in varying if f not in along]
        parts = _partitions(configs, compare_on, field_name)
        contexts = _contexts(configs, field_name)
        names = _value_names(configs, field_name)
        differs = field_name if field_name != "framework" else "framework/api"
        for part in parts:
            base = part[0]
            if field_name == "device":
                base = next((c for c in part if c.spec.get("device") == "cpu"), part[0])
            if field_name == "threads":
                base = min(part, key=lambda c: _count(c.spec.get("threads")) or 1)
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
                noise = _noise((c, values), (base, base_values))
                if result.ratio and noise is not None and abs(result.ratio - 1) <= noise:
                    # inside the noise: no "x times faster", whatever the test says
                    speedup = None
                    verdict = f"within the noise (±{100 * noise:.0f} %); {verdict}"
                    short = f"noise ±{100 * noise:.0f}%; {short}"
                sides = _sides([("this", c), ("baseline", base)])
                marks = marks_text(sides)
                short = _joined(short, marks_short(sides))
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


# -- scaling ---------------------------------------------------------------------------------------
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
            Column("with"),
            Column("threads", COUNT),
            Column("median", NUMBER, m.unit),
            Column("speed-up", RATIO),
            Column("efficiency", FRACTION),
            Column("oversubscribed", FLAG),
            Column("p", P_VALUE, terminal=False),
            Column("n", COUNT, terminal=False),
            Column("test"),
            Column("vs fewest threads", terminal=False),
        ),
        note="speed-up = median at the fewest threads / median here; efficiency = speed-up / "
        "(threads / fewest threads); 100 % is perfect scaling. test: against the fewest "
        "threads, " + TEST_NOTE,
    )
    parts = _partitions(configs, varying, "threads")
    contexts = _contexts(configs, "threads")
    for part in parts:
        # a damaged record's threads ("two") is no count to scale against: left out
        by_threads = {t: c for c in part if (t := _count(c.spec.get("threads"))) is not None}
        rows = stats.thread_scaling({t: c.values(metric) for t, c in by_threads.items()})
        for row in rows:
            c = by_threads[row.threads]
            significance = "baseline" if row is rows[0] else row.significance.text
            verdicts = c.verdicts()
            short = "baseline" if row is rows[0] else test_short(row.significance)
            short = _joined(short, marks_short([("", verdicts)]))
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
            Column("with"),
            Column("scaling"),
            Column("workers", COUNT),
            Column("threads/worker", COUNT),
            Column("global batch", COUNT, terminal=False),
            Column("samples/s", NUMBER, "samples/s"),
            Column("speed-up", RATIO),
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
    parts = _partitions(configs, varying, "workers")
    contexts = _contexts(configs, "workers", "scaling")
    for part in parts:
        part = sorted(part, key=lambda c: _count(c.spec.get("workers")) or 1)
        base = part[0]
        base_workers = _count(base.spec.get("workers")) or 1
        base_rate = _median(base.values("samples_per_s"))
        for c in part:
            workers = _count(c.spec.get("workers")) or 1
            rate = _median(c.values("samples_per_s"))
            speedup = rate / base_rate if rate and base_rate else None
            efficiency = speedup / (workers / base_workers) if speedup else None
            batch = _count(c.spec.get("batch_size"))
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
                    _median(c.values("step_median_s")),
                    _median(c.values("comm_setup_s")),
                    _median(c.values("rank_straggler_ratio")),
                    c.oversubscribed,
                    len(c.values("samples_per_s")),
                ],
                [(c.label, c.verdicts())],
            )
    return table


# -- inference over batch sizes -------------------------------------------------------------------
# The serving figures of a batch-size curve, as the registry names them: latency (p50, with the
# tail beside it) and samples/s, each a median over the configuration's finished repeats.
CURVE = ("latency_p50_s", "latency_p90_s", "latency_p99_s", "inference_samples_per_s")


def _inference(configs: list[Group]) -> list[Group]:
    return [c for c in configs if c.spec.get("mode") == metrics.INFERENCE]


def batch_curve_table(configs: list[Group]) -> Table | None:
    """Latency and throughput against the batch size, one curve per family (framework × API and
    whatever else the inference configurations differ in beside the batch), for the inference
    configurations when they span two or more batch sizes. A family's rows go up in batch."""
    served = _inference(configs)
    if len({repr(c.spec.get("batch_size")) for c in served}) < 2:
        return None
    shown = [metrics.get(key) for key in CURVE]
    table = Table(
        "batches",
        "inference over batch sizes: "
        + ", ".join(m.what.removeprefix("inference ") for m in shown)
        + " per family",
        (
            Column("with"),
            Column("batch", COUNT),
            Column("n", COUNT),
            *(
                Column(m.short.split()[0] if m.unit == "s" else m.short, NUMBER, m.unit)
                for m in shown
            ),
            Column("requests", COUNT, terminal=False),
        ),
        note="cells: median over the finished repeats of each run's own figure; a run's p90 and "
        "p99 rest on its requests (too few for the tail: its latency note, tui-bench history "
        "show); samples/s = batch × requests / their summed latency.",
    )
    # The request count moves with the batch (a preset serves fewer, larger requests at a large
    # batch): it sizes each point's sample, not the curve it belongs to (its own column says it).
    contexts = _contexts(served, "batch_size", "requests")
    families: dict[Any, list[Group]] = {}
    for c in served:
        family = tuple(p for p in c.config.key if p[0] not in ("batch_size", "requests"))
        families.setdefault(family, []).append(c)
    for members in families.values():
        ordered = sorted(members, key=lambda c: _count(c.spec.get("batch_size")) or 0)
        for c in ordered:
            values = {key: c.values(key) for key in CURVE}
            table.add(
                [
                    contexts[id(c)],
                    _count(c.spec.get("batch_size")),
                    len(values[CURVE[0]]),
                    *(_median(values[key]) for key in CURVE),
                    # the fewest any run's figures rest on
                    int(min(n)) if (n := c.values("latency_requests")) else None,
                ],
                [(c.label, c.verdicts())],
            )
    return table


def _stack_headers(stacks: list[str]) -> list[str]:
    """The study's column headers: the framework alone where it tells the stacks apart (the
    API alone where that does), as the configurations' names do; the columns keep 'fw/api'."""
    for part in (0, 1):
        names = [stack.split("/", 1)[part] for stack in stacks]
        if len(set(names)) == len(names):
            return names
    return stacks


# -- the study's table -----------------------------------------------------------------------------
def study_table(configs: list[Group], metric: str = "train_wall_s") -> Table | None:
    """The processing-time table of a thread/framework study: rows model × dataset × device ×
    threads, a column per framework/api with the median and, beside it, its n. Inference runs
    among them add rows of their own, a row per batch size, of their median request (p50) where
    the study's figure is a time: the serving figure beside the study's, which stays as it is
    (Kabakus's test time is the training runs' ``test_s``)."""
    if len(configs) < 2:
        return None
    m = metric_info(metric)
    served = metrics.in_mode(metric, metrics.INFERENCE)
    if served == metric:  # no inference figure stands for it: a time's is the median request
        served = metrics.in_mode(metrics.COMPARED_BY_DEFAULT, metrics.INFERENCE)
    if metrics.get(served).unit != m.unit:
        served = ""  # the columns hold the study's unit: no inference row in another one
    inference = bool(served) and bool(_inference(configs))
    stacks = list(dict.fromkeys(f"{c.spec.get('framework')}/{c.spec.get('api')}" for c in configs))
    rows: dict[tuple[Any, ...], dict[str, Group]] = {}
    for c in configs:
        device = c.spec.get("device")
        key: tuple[Any, ...] = (
            c.spec.get("model"),
            c.spec.get("dataset"),
            device,
            c.spec.get("threads") if device == "cpu" else None,
        )
        if c.spec.get("mode") == metrics.INFERENCE:
            if not inference:
                continue
            key += (_figure_name(served), _count(c.spec.get("batch_size")))
        elif inference:
            key += (_figure_name(metric), None)
        rows.setdefault(key, {})[f"{c.spec.get('framework')}/{c.spec.get('api')}"] = c
    columns = [Column("model"), Column("dataset"), Column("device"), Column("threads", COUNT)]
    if inference:
        columns += [Column("figure"), Column("batch", COUNT)]
    layout = [Shown(c.name, (c.name,)) for c in columns]
    for stack, header in zip(stacks, _stack_headers(stacks), strict=True):
        columns += [Column(stack, NUMBER, m.unit), Column(f"{stack} n", COUNT)]
        layout.append(Shown(header, (stack, f"{stack} n"), WITH_N))
    table = Table(
        "study",
        f"median {m.what}: model × dataset × device × threads by framework"
        + (f"; inference runs: {metrics.get(served).what} per batch size" if inference else ""),
        tuple(columns),
        note="cells: median over finished repeats (n); — where no run finished or was skipped.",
        layout=tuple(layout),
    )
    for key, by_stack in rows.items():
        cells: list[Cell] = list(key)
        sides = []
        for stack in stacks:
            found = by_stack.get(stack)
            read = (
                served
                if found is not None and found.spec.get("mode") == metrics.INFERENCE
                else metric
            )
            values = found.values(read) if found is not None else []
            cells += [_median(values), len(values) if values else None]
            if found is not None:
                sides.append((found.label, found.verdicts()))
        table.add(cells, sides)
    return table


def _figure_name(key: str) -> str:
    """'inference latency p50', 'training wall time': a study row's figure, in a few words."""
    return metrics.get(key).what.split(" (")[0]


# -- published figures beside ours -----------------------------------------------------------------
def published_table(
    configs: list[Group],
    varying: list[str],
    figures: Sequence[published_module.Figure],
    skipped: Sequence[tuple[str, str]] = (),
) -> Table | None:
    """Each figure a study published beside ours, computed the same way from these runs.

    A ratio is the median over the numerator's runs / the median over the denominator's runs
    (each run, in its own worker, is one repetition), one row per pair of configurations that
    differ only in what the figure compares (so a sweep over threads gives a row per thread
    count). An absolute figure gives a row per configuration it is about. A configuration
    without a finished run is "not run here" (with the reason it was skipped, when it was);
    a timed figure whose runs are not all stable says so."""
    if not figures:
        return None
    table = Table(
        "published",
        "published figures beside ours",
        (
            Column("figure"),
            Column("with"),
            Column("published", NUMBER),
            Column("here", NUMBER),
            Column("n", COUNT),
            Column("n denominator", COUNT, terminal=False),
            Column("notes"),
            Column("source", terminal=False),
            Column("says", terminal=False),
            Column("metric", terminal=False),
            Column("kind", terminal=False),
            Column("direction", terminal=False),
            Column("stability", terminal=False),
        ),
        note="published: the study's figure, from the source named (the paper's table or "
        "figure, or where it was quoted); here: these runs computed the same way. A ratio is the "
        "median over runs of one configuration / the median over runs of the other, runs as the "
        "unit of repetition (n: runs on each side), so it compares machines only through the "
        "ratio: absolute times depend on the hardware and are never compared. Lines of code "
        "count the run's model and step alone.",
        # 80 columns: the figures first (a long title is cut, not the numbers), and a figure's
        # source named once below the table, not in every row
        layout=(
            Shown("published", ("published",)),
            Shown("here", ("here",)),
            Shown("n", ("n", "n denominator"), PAIR),
            Shown("figure", ("figure",)),
            Shown("with", ("with",)),
            Shown("notes", ("notes",)),
        ),
    )
    for figure in figures:
        rows = (_ratio_rows if figure.kind == "ratio" else _absolute_rows)(
            figure, configs, varying, skipped
        )
        for cells, verdicts in rows:
            table.add(cells, verdicts)
    sources = list(dict.fromkeys(f.source for f in figures))
    table.note += " Source" + ("s: " if len(sources) > 1 else ": ") + "; ".join(sources) + "."
    return table


_FigureRow = tuple[list[Cell], tuple[tuple[str, Verdicts], ...]]


def _figure_row(
    figure: published_module.Figure,
    context: str,
    here: float | None,
    n: tuple[int, int | None],
    notes: Sequence[str],
    direction: str = "",
    sides: tuple[tuple[str, Verdicts], ...] = (),
) -> _FigureRow:
    # Lines of code and accuracy are not timed: no run's verdict applies to them.
    if not published_module.METRICS[figure.metric].timed:
        sides = ()
    marks = marks_text(sides)
    cells: list[Cell] = [
        figure.title(),
        context,
        figure.value,
        here,
        n[0],
        n[1],
        "; ".join(x for x in [*notes, marks] if x),
        figure.source,
        figure.says,
        figure.metric,
        figure.kind,
        direction,
        marks,
    ]
    return cells, sides


def _figure_values(c: Group, metric: str) -> list[float]:
    values = (published_module.run_value(r, metric) for r in c.finished())
    return [v for v in values if v is not None]


def _differing(configs: list[Group], varying: list[str], named: set[str]) -> list[str]:
    """The fields, other than those a figure names, that tell its configurations apart (a
    workload matrix varies dataset and batch size with the model: not a context of their own)."""
    out = [f for f in varying if f not in named and len({repr(c.spec.get(f)) for c in configs}) > 1]
    if {"device", "host"} & (set(out) | named):
        out = [f for f in out if f != "device_model"]  # it goes along with them
    return out


def _context_text(c: Group, fields_: list[str]) -> str:
    return " · ".join(identity.short_value(f, c.spec.get(f)) for f in fields_) or "—"


def _not_run(
    conditions: dict[str, Any], configs: list[Group], skipped: Sequence[tuple[str, str]]
) -> str:
    """Why a figure's configuration has no number here: skipped (with its reason), its runs
    failed, or it is not in these runs at all."""
    want = published_module.conditions_text(conditions)
    matched = [c for c in configs if published_module.matches(c.spec, conditions)]
    if matched:
        runs = sum(len(c.runs) for c in matched)
        finished = sum(len(c.finished()) for c in matched)
        if finished:
            return f"not run here: {want} has no figure for this metric ({finished} run(s))"
        return f"not run here: {want} has no finished run ({runs} not finished)"
    for key, reason in skipped:
        # a sweep's configuration key ("framework=mxnet api=gluon"): the sweep's own words
        fields_ = dict(part.split("=", 1) for part in key.split() if "=" in part)
        if (
            fields_
            and all(k not in fields_ or fields_[k] == str(v) for k, v in conditions.items())
            and any(k in fields_ for k in conditions)
        ):
            return f"not run here: {want}: {reason}"
    return f"not run here: no run of {want}"


def _absolute_rows(figure, configs, varying, skipped) -> list[_FigureRow]:
    matched = [c for c in configs if published_module.matches(c.spec, figure.where)]
    if not matched:
        return [
            _figure_row(figure, "—", None, (0, None), [_not_run(figure.where, configs, skipped)])
        ]
    context_fields = _differing(matched, varying, set(figure.where))
    rows = []
    for c in matched:
        values = _figure_values(c, figure.metric)
        context = _context_text(c, context_fields)
        if not values:
            note = _not_run(figure.where, [c], skipped)
            rows.append(_figure_row(figure, context, None, (0, None), [note]))
            continue
        side = published_module.conditions_text(figure.where)
        rows.append(
            _figure_row(
                figure,
                context,
                stats.median(values),
                (len(values), None),
                [],
                "",
                _sides([(side, c)]),
            )
        )
    return rows


def _direction(published: float, here: float, noise: float | None) -> str:
    """Whether ours points the way the paper's does (both above 1 or both below)."""
    if noise is not None and abs(here - 1) <= noise:
        return f"within the noise (±{100 * noise:.0f} %)"
    if (published - 1) * (here - 1) > 0:
        return "same direction"
    if (published - 1) * (here - 1) < 0:
        return "reversed"
    return ""


def _ratio_rows(figure, configs, varying, skipped) -> list[_FigureRow]:
    named = set(figure.where) | set(figure.numerator) | set(figure.denominator)
    if "framework" in named:
        named.add("api")  # a framework's API varies with it (a matrix), not beside it
    sides = dict(figure.sides)
    found = {
        name: [c for c in configs if published_module.matches(c.spec, conditions)]
        for name, conditions in sides.items()
    }
    both = found["numerator"] + found["denominator"]
    context_fields = _differing(both, varying, named)

    def key(c: Group) -> tuple[str, ...]:
        return tuple(repr(c.spec.get(f)) for f in context_fields)

    contexts = {key(c): c for c in both}  # each context with one configuration that has it
    if not contexts:
        notes = [_not_run(sides[name], configs, skipped) for name in sides]
        return [_figure_row(figure, "—", None, (0, 0), notes)]
    rows = []
    for context, example in contexts.items():
        text = _context_text(example, context_fields)
        num = [c for c in found["numerator"] if key(c) == context]
        den = [c for c in found["denominator"] if key(c) == context]
        if not num or not den:
            name = "numerator" if not num else "denominator"
            want = {**sides[name], **{f: example.spec.get(f) for f in context_fields}}
            counts = [sum(len(_figure_values(c, figure.metric)) for c in s) for s in (num, den)]
            note = _not_run(want, configs, skipped)
            rows.append(_figure_row(figure, text, None, (counts[0], counts[1]), [note]))
            continue
        for n_config in num:
            for d_config in den:
                rows.append(_ratio_row(figure, text, n_config, d_config, skipped))
    return rows


def _ratio_row(figure, context: str, num: Group, den: Group, skipped) -> _FigureRow:
    num_values = _figure_values(num, figure.metric)
    den_values = _figure_values(den, figure.metric)
    n = (len(num_values), len(den_values))
    if not num_values or not den_values:
        name, missing = ("numerator", num) if not num_values else ("denominator", den)
        conditions = dict(figure.sides)[name]
        return _figure_row(figure, context, None, n, [_not_run(conditions, [missing], skipped)])
    num_median, den_median = stats.median(num_values), stats.median(den_values)
    if den_median == 0:
        return _figure_row(figure, context, None, n, ["the denominator's median is 0"])
    here = num_median / den_median
    timed = published_module.METRICS[figure.metric].timed
    noise = _noise((num, num_values), (den, den_values)) if timed else None
    direction = _direction(figure.value, here, noise)
    sides = _sides(
        [
            (published_module.conditions_text(figure.numerator), num),
            (published_module.conditions_text(figure.denominator), den),
        ]
    )
    return _figure_row(figure, context, here, n, [direction], direction, sides)


# -- fairness card ---------------------------------------------------------------------------------
def _gpu_driver(run: Run) -> Any:
    gpus = run.env.get("gpus")
    first = gpus[0] if isinstance(gpus, list) and gpus else None
    return first.get("driver") if isinstance(first, dict) else None


def _load(run: Run) -> Any:
    load = run.load
    if not load:
        return None
    state = "busy" if run.busy else "quiet"
    average = number(load.get("loadavg_1m")) or 0
    return f"{state} (load ≈{round(average)} on {load.get('logical_cores')})"


def _observed(run: Run) -> Any:
    # to the half core: the card is for differences a reader should weigh, not sampling noise
    cores = run.metric("cores_observed")
    return None if cores is None else f"≈{round(cores * 2) / 2:g} cores"


def _versions(run: Run) -> Any:
    version, backend = run.framework_version, run.backend_version
    if version is None:
        return None
    return f"{version} ({backend})" if backend else version


# Card rows that are a spec field: left out when that field is what the comparison varies (the
# configuration names already say it).
CARD_SPEC_FIELD = {
    "precision": "precision",
    "autotune": "autotune",
    "input path": "input",
    "timing mode": "timing",
    "threads configured": "threads",
}
# Card rows that are an observed consequence of another setting, not a setting of their own: the
# cores a run used follow from the threads it was given. Where the comparison varies the
# setting, both rows are shown (configured beside observed), and neither is a second difference.
CONSEQUENCES = {"threads observed": "threads configured"}
# (label, how to read it from a record): what a ratio between runs is made of, beside the
# spec's own fields. Per-configuration values are joined when its repeats disagree.
FAIRNESS_SETTINGS: list[tuple[str, Callable[[Run], Any]]] = [
    ("precision", lambda r: r.spec.get("precision", "fp32")),
    ("compilation", lambda r: r.settings.get("compile")),
    # The kernel a transformer's attention ran in (torch's SDPA backend, Keras' path and XLA).
    ("attention kernel", lambda r: r.settings.get("attention")),
    # Where the initial weights came from: one shared numpy draw from the seed (the transformer,
    # adapters/shared_init.py); absent where each framework drew its own.
    ("initial weights", lambda r: r.settings.get("init")),
    ("autotune", lambda r: r.settings.get("autotune") or r.spec.get("autotune")),
    ("input path", lambda r: r.spec.get("input", "host")),
    ("timing mode", lambda r: r.spec.get("timing", "synced")),
    ("threads configured", lambda r: r.spec.get("threads")),
    ("threads observed", _observed),
    ("framework version", _versions),
    ("GPU driver", _gpu_driver),
    ("machine load", _load),
]


def setting_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def fairness_card(configs: list[Group]) -> Table | None:
    """Only the settings that differ between the compared configurations: one row per setting
    and value, naming the configurations that have it, so a reader sees at once what a ratio
    is made of besides what their names say, and a sweep of many configurations stays three
    columns wide. A spec field in the names is left out; one that varies along with them (a
    precision that changes with the API) is not. None when nothing else differs (or there is
    one configuration)."""
    if len(configs) < 2:
        return None
    named = identity.label_fields([c.config for c in configs])
    table = Table(
        "fairness",
        "fairness card: settings that differ between the compared runs",
        (Column("setting"), Column("value"), Column("configurations")),
    )
    in_names = []  # settings the configurations' names already say
    for label, read in FAIRNESS_SETTINGS:
        if CARD_SPEC_FIELD.get(label) in named and label not in CONSEQUENCES.values():
            in_names.append(label)
            continue
        cells = []
        for c in configs:
            values = list(dict.fromkeys(setting_text(read(r)) for r in c.runs if r.status))
            cells.append(" / ".join(values) if values else "—")
        if len(set(cells)) > 1:
            for value in dict.fromkeys(cells):
                having = [c.label for c, cell in zip(configs, cells, strict=True) if cell == value]
                table.add([label, value, ", ".join(having)])
    # Shown whenever any run has it, even if all do: an emulated bf16 number is not a bf16 one.
    notes: dict[str, list[str]] = {}
    for c in configs:
        for note in dict.fromkeys(r.settings.get("bf16_note") for r in c.runs if r.status):
            if note:
                notes.setdefault(str(note), []).append(c.label)
    for note, having in notes.items():
        table.add(["bf16", note, ", ".join(having)])
    flagged = [c.label for c in configs if any(r.metric_text("threads_flag") for r in c.runs)]
    if flagged:
        table.add(["thread flag", "used more cores than configured", ", ".join(flagged)])
    shown = set(table.values("setting"))
    shared = [label for label, _ in FAIRNESS_SETTINGS if label not in shown | set(in_names)]
    table.note = "only settings that differ are shown" + (
        f"; {', '.join(shared)}: the same in every run" if shared else ""
    )
    if in_names:
        table.note += f"; {', '.join(in_names)}: in the configurations' names"
    return table if table.rows else None


def skipped_table(skipped: Sequence[tuple[str, str]]) -> Table | None:
    if not skipped:
        return None
    table = Table("skipped", "configurations not run", (Column("configuration"), Column("reason")))
    for key, reason in skipped:
        table.add([key, reason])
    return table


# -- the machine's limits ------------------------------------------------------------------------
def limits_table(configs: list[Group]) -> Table | None:
    """Per configuration: achieved FLOP/s, MFU of the measured and of the nominal peak (each
    named), energy per step per device and the memory peaks (medians over finished runs); the
    note names the configuration that uses the machine best. None when no run has a FLOP count.
    A run whose MFU exceeds 1 has no MFU number (machine/peaks.py): its row says so."""
    if not any(c.values("flops_per_step") for c in configs):
        return None
    table = Table(
        "limits",
        "machine use: per configuration (model FLOPs against this machine's peaks)",
        (
            Column("configuration"),
            Column("n", COUNT),
            Column("GFLOP/s", NUMBER, "GFLOP/s"),
            Column("MFU", FRACTION),
            Column("MFU nominal", FRACTION),
            Column("peak RSS MiB", NUMBER, "MiB"),
            Column("notes"),
            Column("measured peak", terminal=False),
            Column("nominal peak", terminal=False),
            Column("CPU J/step", NUMBER, "J", terminal=False),
            Column("GPU J/step", NUMBER, "J", terminal=False),
            Column("allocator peak MiB", NUMBER, "MiB", terminal=False),
        ),
    )
    for c in configs:
        runs = c.finished()
        achieved = _median(c.values("achieved_tflops"))
        mfu, nominal = _median(c.values("mfu")), _median(c.values("mfu_nominal"))
        wrong = sum(r.metric_text("mfu_error") == MFU_ABOVE_ONE for r in runs)
        why = next((r.metric_text("mfu_error") for r in runs if r.metric_text("mfu_error")), None)
        notes = [f"{wrong} run(s): {MFU_ABOVE_ONE}" if wrong else (why if mfu is None else "")]
        table.add(
            [
                c.label,
                len(runs),
                achieved * 1000 if achieved is not None else None,
                mfu,
                nominal,
                _median(c.values("res_peak_rss_mib")),
                "; ".join(n for n in notes if n),
                next((r.metric_text("mfu_peak") for r in runs if r.metric_text("mfu_peak")), None),
                next(
                    (t for r in runs if (t := r.metric_text("mfu_nominal_peak"))),
                    None,
                ),
                _median(c.values("cpu_joules_per_step")),
                _median(c.values("gpu_joules_per_step")),
                _median(c.values("allocator_peak_mib")),
            ],
            [(c.label, c.verdicts())],
        )
    # The best by the measured peak where any configuration has one, else by the nominal one.
    for key, kind in (("mfu", "measured"), ("mfu_nominal", "nominal")):
        ranked = [(m, c.label) for c in configs if (m := _median(c.values(key))) is not None]
        if ranked:
            if len(configs) > 1:
                value, label = max(ranked)
                table.note = f"uses the machine best: {label} (median MFU {value:.1%} of the "
                table.note += f"{kind} peak). "
            break
    for device in ("GPU", "CPU"):
        key = f"{device.lower()}_energy_problem"
        unread = {t for c in configs for r in c.finished() if (t := r.metric_text(key))}
        if unread:
            table.note += f"{device} energy not read: {'; '.join(sorted(unread))}. "
    table.note += (
        "MFU = model FLOPs of a step (engine/flops.py) / steady median step / peak "
        "(engine/machine/peaks.py); energy is device-level (whole CPU package / GPU board)"
    )
    return table


# -- everything at once ----------------------------------------------------------------------------
@dataclass
class Comparison:
    """Every table for a set of runs; ``tables()`` lists those with rows, in order."""

    metric: Metric
    groups: list[Group]
    varying: list[str]
    summary: Table
    comparisons: Table | None = None
    scaling: Table | None = None
    workers: Table | None = None
    batches: Table | None = None
    study: Table | None = None
    published: Table | None = None
    fairness: Table | None = None
    limits: Table | None = None
    skipped: Table | None = None

    def tables(self) -> list[Table]:
        optional = (
            self.comparisons,
            self.scaling,
            self.workers,
            self.batches,
            self.study,
            self.published,
            self.fairness,
            self.limits,
            self.skipped,
        )
        return [self.summary, *(t for t in optional if t is not None and t.rows)]

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables() if t.name == name), None)

    def also_differs(self) -> list[str]:
        """The fairness card's settings that differ beside what is compared, once each: what a
        reader must weigh besides the configurations' names. A setting the names carry is what
        is compared, and so is its observed consequence (``CONSEQUENCES``: threads observed
        follow the threads configured); the card shows both side by side, but neither is a
        second difference."""
        card = self.table("fairness")
        if card is None:
            return []
        named = identity.label_fields([g.config for g in self.groups])
        compared = {label for label, spec in CARD_SPEC_FIELD.items() if spec in named}
        compared |= {seen for seen, setting in CONSEQUENCES.items() if setting in compared}
        settings = dict.fromkeys(str(s) for s in card.values("setting"))
        return [s for s in settings if s not in compared]


def compute(
    records: Sequence[Run],
    metric: str | None = None,
    study_metric: str = "train_wall_s",
    skipped: Sequence[tuple[str, str]] = (),
    published: Sequence[published_module.Figure] = (),
) -> Comparison:
    """Every table for a set of runs (a sweep, a group, or runs picked by id); ``published``:
    the figures their study published, computed from these runs beside them. ``metric``
    unnamed: the steady step, or the median request where every run is an inference run
    (``metrics.compared_for``)."""
    if metric is None:
        metric = metrics.compared_for(r.mode for r in records)
    configs, varying = group(records)
    return Comparison(
        metric=metric_info(metric),
        groups=configs,
        varying=varying,
        summary=summary_table(configs, metric),
        comparisons=comparison_table(configs, varying, metric),
        scaling=scaling_table(configs, varying, metric),
        workers=worker_scaling_table(configs, varying),
        batches=batch_curve_table(configs),
        study=study_table(configs, study_metric),
        published=published_table(configs, varying, published, skipped),
        fairness=fairness_card(configs),
        limits=limits_table(configs),
        skipped=skipped_table(skipped),
    )
