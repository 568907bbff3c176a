"""Tables over recorded runs: per-configuration statistics, comparisons, thread scaling, the
study-shaped pivot and the study's published figures beside ours. Plain data (``Table``) so the CLI renders it with rich, the TUI with its own
widgets, and both export the same CSV and markdown.

Runs are grouped into configurations by their spec (repeats aside); a configuration is named by
the spec fields that differ between the groups being compared. Only finished runs give figures;
failed ones are counted and their reasons kept.

A front end needs two calls::

    records, skipped, published = sweep.collect(ids, History())    # run, group or sweep ids
    tables = report.build(records, metric="step_median_s", skipped=skipped, published=published)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results import published as published_module
from tui_bench.engine.results import stability, stats
from tui_bench.engine.results.export_safety import csv_header, csv_row, markdown_cell
from tui_bench.engine.spec import RunSpec

# metric key → (label, lower is better)
METRICS: dict[str, tuple[str, bool]] = {
    "step_median_s": ("median step time s (steady state, device-synchronised)", True),
    "train_wall_s": ("training wall time s (warm-up included)", True),
    "samples_per_s": ("training samples/s (steady state)", False),
    "test_s": ("test (inference) time s", True),
    "test_accuracy": ("test accuracy", False),
    "val_accuracy": ("validation accuracy, last epoch", False),
    "warmup_s": ("warm-up time s", True),
    "target_reached_s": ("training time to the target accuracy s", True),
}
# Repeats of one configuration differ in their seed (seed + repeat index), so the seed is not
# part of what names a configuration; the accuracy rule below reads it per run.
NOT_CONFIGURATION = ("repeats", "seed")
SPEC_FIELDS = [f for f in RunSpec.__dataclass_fields__ if f not in NOT_CONFIGURATION]
SPEC_DEFAULTS = {
    f: getattr(RunSpec, f)
    for f in ("precision", "autotune", "input", "timing", "timing_window", "workers", "scaling")
}
# Metrics whose spread over repeats comes from the seed (initialisation, shuffling, dropout):
# repeats with one seed are not replicates of them.
SEED_DEPENDENT = ("test_accuracy", "val_accuracy", "target_reached_s")


@dataclass
class Table:
    name: str  # short id: summary, comparisons, scaling, study, skipped
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""
    # The columns worth a terminal's width (and markdown's); CSV always gets every column.
    terminal_columns: list[str] | None = None

    def view(self) -> tuple[list[str], list[list[Any]]]:
        """Columns and rows for a terminal or markdown."""
        if not self.terminal_columns:
            return self.columns, self.rows
        index = [self.columns.index(c) for c in self.terminal_columns]
        return self.terminal_columns, [[row[i] for i in index] for row in self.rows]


@dataclass
class Group:
    """The runs of one configuration."""

    label: str
    spec: dict[str, Any]
    runs: list[dict[str, Any]] = field(default_factory=list)

    def finished(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r.get("status") == RunStatus.FINISHED]

    def values(self, metric: str) -> list[float]:
        out = []
        for r in self.finished():
            value = (r.get("metrics") or {}).get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append(float(value))
        return out

    @property
    def oversubscribed(self) -> bool:
        return any(_oversubscribed(r) for r in self.runs)


def _oversubscribed(record: dict[str, Any]) -> bool:
    if "oversubscribed" in record:
        return bool(record["oversubscribed"])
    cores = (record.get("env") or {}).get("logical_cores")
    spec = record.get("spec") or {}
    threads = (spec.get("threads") or 0) * (spec.get("workers") or 1)
    return bool(cores and threads and threads > cores)


def group_runs(records: Sequence[dict[str, Any]]) -> tuple[list[Group], list[str]]:
    """Groups in first-seen order, and the spec fields that differ between them."""
    by_spec: dict[str, Group] = {}
    for record in records:
        # Runs recorded before a spec field existed ran with its default.
        spec = {**SPEC_DEFAULTS, **(record.get("spec") or {})}
        spec = {k: v for k, v in spec.items() if k not in NOT_CONFIGURATION}
        key = repr(sorted(spec.items()))
        by_spec.setdefault(key, Group("", spec)).runs.append(record)
    groups = list(by_spec.values())
    varying = [f for f in SPEC_FIELDS if len({repr(g.spec.get(f)) for g in groups}) > 1]
    for g in groups:
        if varying:
            g.label = " ".join(f"{f}={g.spec.get(f)}" for f in varying)
        else:
            g.label = (g.runs[0].get("label") if g.runs else "") or "all runs"
    return groups, varying


def run_host(record: dict[str, Any]) -> str:
    """The host a run ran on: a fleet run's node (``engine.fleet``), else its fingerprint's."""
    return str(record.get("host") or (record.get("env") or {}).get("host") or "?")


def split_by_host(groups: list[Group], varying: list[str]) -> tuple[list[Group], list[str]]:
    """When the runs came from several hosts, one configuration on two boxes is two
    measurements: one group per (configuration, host), with ``host`` a varying field, so the
    tables compare the hosts like any other field. Runs from one host are left as they are."""
    if len({run_host(r) for g in groups for r in g.runs}) < 2:
        return groups, varying
    split: list[Group] = []
    for g in groups:
        by_host: dict[str, Group] = {}
        for record in g.runs:
            host = run_host(record)
            by_host.setdefault(host, Group("", {**g.spec, "host": host})).runs.append(record)
        split += by_host.values()
    varying = [*varying, "host"]
    for g in split:
        g.label = " ".join(f"{f}={g.spec.get(f)}" for f in varying)
    return split, varying


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _time_to_accuracy(group: Group) -> str | None:
    target = group.spec.get("target_accuracy")
    if target is None:
        return None
    finished = group.finished()
    reached = [
        r["metrics"]
        for r in finished
        if (r.get("metrics") or {}).get("target_reached_epoch") is not None
    ]
    if not reached:
        return f"not reached ({len(finished)} run(s))"
    seconds = stats.median([m["target_reached_s"] for m in reached])
    epochs = stats.median([m["target_reached_epoch"] for m in reached])
    return f"epoch {epochs:g}, {seconds:.3g} s ({len(reached)}/{len(finished)} reached {target:g})"


def summary_table(groups: list[Group], metric: str) -> Table:
    label, _lower = METRICS.get(metric, (metric, True))
    table = Table(
        "summary",
        f"{label}: per configuration",
        [
            "configuration",
            "n",
            "median",
            "IQR",
            "mean ± std",
            "min–max",
            "notes",
            "q1",
            "q3",
            "mean",
            "std",
            "min",
            "max",
            "failed",
            "oversubscribed",
            "time to accuracy",
            "warning",
            "stability",
        ],
        note="median and IQR over repeats (linear-interpolation quartiles); std is the sample std; "
        "each repeat ran in its own worker process.",
        terminal_columns=["configuration", "n", "median", "IQR", "mean ± std", "min–max", "notes"],
    )
    for g in groups:
        values = g.values(metric)
        failed = [r for r in g.runs if r.get("status") != RunStatus.FINISHED]
        failed_text = (
            f"{len(failed)} not finished (last: {failed[-1].get('status')}: "
            f"{failed[-1].get('reason') or ''})"
            if failed
            else ""
        )
        tta = _time_to_accuracy(g) or ""
        if values:
            s = stats.summarize(values)
            spread = f"{s.mean:.4g} ± {s.std:.2g}" if s.std is not None else f"{s.mean:.4g}"
            row = [g.label, s.n, s.median, s.iqr, spread, f"{s.min:.4g}–{s.max:.4g}"]
            numbers = [s.q1, s.q3, s.mean, s.std, s.min, s.max]
            warning = s.warning or ""
        else:
            row = [g.label, 0, None, None, None, None]
            numbers = [None] * 6
            warning = "no finished run"
        judged = stability.stability_note(g.runs)
        notes = [
            stability.stability_note(g.runs, unjudged=False),
            "oversubscribed" if g.oversubscribed else "",
            f"time to accuracy: {tta}" if tta else "",
            warning,
            failed_text,
        ]
        row += ["; ".join(n for n in notes if n), *numbers]
        row += [len(failed), g.oversubscribed, tta, warning, judged or "stable"]
        table.rows.append(row)
    return table


def _partitions(groups: list[Group], varying: list[str], field_name: str) -> list[list[Group]]:
    """Groups that differ only in ``field_name``, in first-seen order."""
    others = [f for f in varying if f != field_name]
    parts: dict[str, list[Group]] = {}
    for g in groups:
        parts.setdefault(repr([g.spec.get(f) for f in others]), []).append(g)
    return [p for p in parts.values() if len(p) > 1]


def _context(group: Group, varying: list[str], field_name: str) -> str:
    return " ".join(f"{f}={group.spec.get(f)}" for f in varying if f != field_name) or "—"


def _value_name(group: Group, field_name: str) -> str:
    if field_name in ("framework", "api"):
        return f"{group.spec.get('framework')}/{group.spec.get('api')}"
    return f"{field_name}={group.spec.get(field_name)}"


def comparison_table(groups: list[Group], varying: list[str], metric: str) -> Table:
    """Configurations that differ in one field, against a baseline: GPU vs CPU (baseline cpu),
    API vs API, framework vs framework, dataset… (baseline: the first seen)."""
    label, lower_is_better = METRICS.get(metric, (metric, True))
    table = Table(
        "comparisons",
        f"comparisons of {label}",
        [
            "differs in",
            "with",
            "configuration",
            "baseline",
            "ratio",
            "speed-up",
            "stability",
            "significance",
        ],
        note="ratio = median / baseline median; speed-up = how many times faster than the "
        "baseline, left out when the difference is inside the noise (repeats' (max-min)/min, or "
        "one run's step CV); significance: two-sided Mann-Whitney U, needs ≥5 repeats on each "
        "side, and says when runs on either side are not stable.",
        terminal_columns=[
            "differs in",
            "with",
            "configuration",
            "baseline",
            "ratio",
            "speed-up",
            "significance",
        ],
    )
    # framework and api often vary together (a matrix); compare the pair as one field.
    fields_ = [f for f in varying if f not in ("threads", "api")]
    if "api" in varying and "framework" not in varying:
        fields_.append("api")
    for field_name in fields_:
        compare_on = [f for f in varying if f != "api"] if field_name == "framework" else varying
        for part in _partitions(groups, compare_on, field_name):
            base = part[0]
            if field_name == "device":
                base = next((g for g in part if g.spec.get("device") == "cpu"), part[0])
            base_values = base.values(metric)
            for g in part:
                if g is base:
                    continue
                values = g.values(metric)
                if not values or not base_values:
                    table.rows.append(
                        [
                            field_name if field_name != "framework" else "framework/api",
                            _context(g, compare_on, field_name),
                            _value_name(g, field_name),
                            _value_name(base, field_name),
                            None,
                            None,
                            "",
                            "no finished runs on one side",
                        ]
                    )
                    continue
                c = stats.compare_pair(g.label, values, base.label, base_values)
                verdict = c.significance.text
                same_seed = _single_seed(g, base) if metric in SEED_DEPENDENT else None
                if same_seed is not None:
                    verdict = (
                        f"no test: every run used seed {same_seed}, so repeats are not "
                        "replicates of an accuracy"
                    )
                speedup = None
                if c.ratio:
                    speedup = 1 / c.ratio if lower_is_better else c.ratio
                noise = max(
                    (
                        n
                        for n in (
                            stability.relative_noise(g.finished(), values),
                            stability.relative_noise(base.finished(), base_values),
                        )
                        if n is not None
                    ),
                    default=None,
                )
                if c.ratio and noise is not None and abs(c.ratio - 1) <= noise:
                    # inside the noise: no "x times faster", whatever the test says
                    speedup = None
                    verdict = f"within the noise (±{100 * noise:.0f} %); {verdict}"
                marks = [
                    f"{side}: {note}"
                    for side, note in (
                        ("this", stability.stability_note(g.runs, unjudged=False)),
                        ("baseline", stability.stability_note(base.runs, unjudged=False)),
                    )
                    if note
                ]
                if marks:
                    verdict = f"{verdict}; {'; '.join(marks)}"
                table.rows.append(
                    [
                        field_name if field_name != "framework" else "framework/api",
                        _context(g, compare_on, field_name),
                        _value_name(g, field_name),
                        _value_name(base, field_name),
                        c.ratio,
                        speedup,
                        "; ".join(marks),
                        verdict,
                    ]
                )
    return table


def _single_seed(*groups: Group) -> Any:
    """The one seed every finished run of these groups used (``record["spec"]["seed"]``), or
    None when the seeds differ."""
    seeds = {(r.get("spec") or {}).get("seed") for g in groups for r in g.finished()}
    return next(iter(seeds)) if len(seeds) == 1 else None


def scaling_table(groups: list[Group], varying: list[str], metric: str) -> Table | None:
    if "threads" not in varying:
        return None
    label, lower_is_better = METRICS.get(metric, (metric, True))
    if not lower_is_better:
        return None
    table = Table(
        "scaling",
        f"thread scaling of {label}",
        [
            "with",
            "threads",
            "median",
            "speed-up",
            "efficiency",
            "oversubscribed",
            "vs fewest threads",
        ],
        note="speed-up = median at the fewest threads / median here; efficiency = speed-up / "
        "(threads / fewest threads); 100 % is perfect scaling.",
    )
    for part in _partitions(groups, varying, "threads"):
        by_threads = {g.spec["threads"]: g for g in part}
        rows = stats.thread_scaling({t: g.values(metric) for t, g in by_threads.items()})
        for row in rows:
            g = by_threads[row.threads]
            significance = "baseline" if row is rows[0] else row.significance.text
            table.rows.append(
                [
                    _context(g, varying, "threads"),
                    row.threads,
                    row.median,
                    row.speedup,
                    f"{row.efficiency:.0%}" if row.efficiency is not None else None,
                    g.oversubscribed,
                    significance,
                ]
            )
    return table


def worker_scaling_table(groups: list[Group], varying: list[str]) -> Table | None:
    """Data-parallel scaling as DLBS reports it: global throughput against the number of
    workers, each family (weak or strong scaling, framework, …) against its fewest workers.

    efficiency = throughput_N / ((N / N0) x throughput_N0), N0 the fewest workers (1 in a
    sweep that starts there): 100 % means N workers did N times the work of one per second."""
    if "workers" not in varying:
        return None
    table = Table(
        "workers",
        "data-parallel scaling: global samples/s (steady state) against workers",
        [
            "with",
            "scaling",
            "workers",
            "threads/worker",
            "global batch",
            "samples/s",
            "speed-up",
            "efficiency",
            "step median s",
            "comm set-up s",
            "slowest/fastest rank",
            "oversubscribed",
            "n",
        ],
        note="weak: batch_size per worker (the global batch grows with the workers); strong: "
        "batch_size is the global batch, split evenly. samples/s counts global samples per "
        "second of steady-state steps (warm-up and communication set-up excluded). efficiency "
        "= samples/s at N / ((N / fewest) x samples/s at the fewest workers), as DLBS reports; "
        "slowest/fastest rank = ratio of the ranks' own step medians (stragglers).",
        terminal_columns=[
            "with",
            "scaling",
            "workers",
            "threads/worker",
            "samples/s",
            "speed-up",
            "efficiency",
            "comm set-up s",
            "slowest/fastest rank",
            "oversubscribed",
        ],
    )
    # Each family differs only in workers; scaling stays in the family's name (weak vs strong
    # are different questions) even when it does not vary between the compared runs.
    for part in _partitions(groups, varying, "workers"):
        part = sorted(part, key=lambda g: g.spec.get("workers") or 1)
        base = part[0]
        base_workers = base.spec.get("workers") or 1
        base_rate = _median(base.values("samples_per_s"))
        for g in part:
            workers = g.spec.get("workers") or 1
            rate = _median(g.values("samples_per_s"))
            speedup = rate / base_rate if rate and base_rate else None
            efficiency = speedup / (workers / base_workers) if speedup else None
            batch = g.spec.get("batch_size")
            scaling = g.spec.get("scaling") or "weak"
            table.rows.append(
                [
                    _context(g, [f for f in varying if f != "scaling"], "workers"),
                    scaling,
                    workers,
                    g.spec.get("threads"),
                    batch * workers if scaling == "weak" and batch else batch,
                    rate,
                    speedup,
                    f"{efficiency:.0%}" if efficiency is not None else None,
                    _median(g.values("step_median_s")),
                    _median(g.values("comm_setup_s")),
                    _median(g.values("rank_straggler_ratio")),
                    g.oversubscribed,
                    len(g.values("samples_per_s")),
                ]
            )
    return table


def _median(values: list[float]) -> float | None:
    return stats.median(values) if values else None


def worker_scaling_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """The data-parallel scaling table as plain text lines (empty when the runs do not differ
    in workers), for a front end that prints text."""
    groups, varying = group_runs(records)
    table = worker_scaling_table(groups, varying)
    if table is None or not table.rows:
        return []
    return to_markdown([table]).splitlines()


def study_table(groups: list[Group], metric: str = "train_wall_s") -> Table | None:
    """The processing-time table of a thread/framework study: rows dataset × device × threads,
    columns framework/api, cells the median (n)."""
    if len(groups) < 2:
        return None
    label, _ = METRICS.get(metric, (metric, True))
    columns = list(dict.fromkeys(f"{g.spec.get('framework')}/{g.spec.get('api')}" for g in groups))
    rows: dict[tuple, dict[str, str]] = {}
    for g in groups:
        device = g.spec.get("device")
        row_key = (
            g.spec.get("model"),
            g.spec.get("dataset"),
            device,
            g.spec.get("threads") if device == "cpu" else "—",
        )
        values = g.values(metric)
        cell = f"{stats.median(values):.4g} (n={len(values)})" if values else "—"
        rows.setdefault(row_key, {})[f"{g.spec.get('framework')}/{g.spec.get('api')}"] = cell
    table = Table(
        "study",
        f"median {label}: model × dataset × device × threads by framework",
        ["model", "dataset", "device", "threads", *columns],
        note="cells: median over finished repeats (n); — where no run finished or was skipped.",
    )
    for key, cells in rows.items():
        table.rows.append([*key, *(cells.get(c, "—") for c in columns)])
    return table


# -- published figures beside ours ----------------------------------------------------------------
def published_table(
    groups: list[Group],
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
        [
            "figure",
            "with",
            "published",
            "here",
            "n",
            "notes",
            "source",
            "says",
            "metric",
            "kind",
            "direction",
            "stability",
        ],
        note="published: the study's figure, from the source named (the paper's table or "
        "figure, or where it was quoted); here: these runs computed the same way. A ratio is the "
        "median over runs of one configuration / the median over runs of the other, runs as the "
        "unit of repetition (n: runs on each side), so it compares machines only through the "
        "ratio: absolute times depend on the hardware and are never compared. Lines of code "
        "count the run's model and step alone.",
        # 80 columns: the figures first (a long title is cut, not the numbers), and a figure's
        # source named once below the table, not in every row
        terminal_columns=["published", "here", "n", "figure", "with", "notes"],
    )
    for figure in figures:
        if figure.kind == "ratio":
            table.rows += _ratio_rows(figure, groups, varying, skipped)
        else:
            table.rows += _absolute_rows(figure, groups, varying, skipped)
    sources = list(dict.fromkeys(f.source for f in figures))
    table.note += " Source" + ("s: " if len(sources) > 1 else ": ") + "; ".join(sources) + "."
    return table


def _figure_row(
    figure: published_module.Figure,
    context: str,
    here: float | None,
    n: str,
    notes: list[str],
    direction: str = "",
    marks: Sequence[str] = (),
) -> list[Any]:
    notes = [*notes, *marks]
    return [
        figure.title(),
        context,
        figure.value,
        here,
        n,
        "; ".join(n for n in notes if n),
        figure.source,
        figure.says,
        figure.metric,
        figure.kind,
        direction,
        "; ".join(marks),
    ]


def _figure_values(group: Group, metric: str) -> list[float]:
    values = (published_module.run_value(r, metric) for r in group.finished())
    return [v for v in values if v is not None]


def _context_text(group: Group, fields_: list[str]) -> str:
    return " ".join(f"{f}={group.spec.get(f)}" for f in fields_) or "—"


def _differing(groups: list[Group], varying: list[str], named: set[str]) -> list[str]:
    """The fields, other than those a figure names, that tell its configurations apart (a
    workload matrix varies dataset and batch size with the model: not a context of their own)."""
    return [f for f in varying if f not in named and len({repr(g.spec.get(f)) for g in groups}) > 1]


def _not_run(conditions: dict[str, Any], groups: list[Group], skipped) -> str:
    """Why a figure's configuration has no number here: skipped (with its reason), its runs
    failed, or it is not in these runs at all."""
    want = published_module.conditions_text(conditions)
    matched = [g for g in groups if published_module.matches(g.spec, conditions)]
    if matched:
        runs = sum(len(g.runs) for g in matched)
        finished = sum(len(g.finished()) for g in matched)
        if finished:
            return f"not run here: {want} has no figure for this metric ({finished} run(s))"
        return f"not run here: {want} has no finished run ({runs} not finished)"
    for key, reason in skipped:
        fields_ = dict(part.split("=", 1) for part in key.split() if "=" in part)
        if (
            fields_
            and all(k not in fields_ or fields_[k] == str(v) for k, v in conditions.items())
            and any(k in fields_ for k in conditions)
        ):
            return f"not run here: {want}: {reason}"
    return f"not run here: no run of {want}"


def _marks(figure: published_module.Figure, sides: Sequence[tuple[str, Group]]) -> list[str]:
    """For a timed figure, the sides whose runs are not all stable (their verdicts)."""
    if not published_module.METRICS[figure.metric].timed:
        return []
    marks = []
    for name, group in sides:
        note = stability.stability_note(group.runs, unjudged=False)
        if note:
            marks.append(f"{name}: {note}")
    return marks


def _absolute_rows(figure, groups, varying, skipped) -> list[list[Any]]:
    matched = [g for g in groups if published_module.matches(g.spec, figure.where)]
    if not matched:
        return [_figure_row(figure, "—", None, "0", [_not_run(figure.where, groups, skipped)])]
    context_fields = _differing(matched, varying, set(figure.where))
    rows = []
    for g in matched:
        values = _figure_values(g, figure.metric)
        if not values:
            note = _not_run(figure.where, [g], skipped)
            rows.append(_figure_row(figure, _context_text(g, context_fields), None, "0", [note]))
            continue
        here = stats.median(values)
        marks = _marks(figure, [(published_module.conditions_text(figure.where), g)])
        rows.append(
            _figure_row(
                figure, _context_text(g, context_fields), here, str(len(values)), [], "", marks
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


def _ratio_rows(figure, groups, varying, skipped) -> list[list[Any]]:
    named = set(figure.where) | set(figure.numerator) | set(figure.denominator)
    if "framework" in named:
        named.add("api")  # a framework's API varies with it (a matrix), not beside it
    sides = {name: conditions for name, conditions in figure.sides}
    found = {
        name: [g for g in groups if published_module.matches(g.spec, conditions)]
        for name, conditions in sides.items()
    }
    context_fields = _differing(found["numerator"] + found["denominator"], varying, named)
    contexts = list(
        dict.fromkeys(
            _context_text(g, context_fields) for g in found["numerator"] + found["denominator"]
        )
    )
    if not contexts:
        notes = [_not_run(sides[name], groups, skipped) for name in sides]
        return [_figure_row(figure, "—", None, "0/0", notes)]
    rows = []
    for context in contexts:
        num = [g for g in found["numerator"] if _context_text(g, context_fields) == context]
        den = [g for g in found["denominator"] if _context_text(g, context_fields) == context]
        if not num or not den:
            name = "numerator" if not num else "denominator"
            want = {**sides[name], **_context_fields(context)}
            counts = [
                sum(len(_figure_values(g, figure.metric)) for g in side) for side in (num, den)
            ]
            n = f"{counts[0]}/{counts[1]}"
            rows.append(_figure_row(figure, context, None, n, [_not_run(want, groups, skipped)]))
            continue
        for n_group in num:
            for d_group in den:
                rows.append(_ratio_row(figure, context, n_group, d_group, skipped))
    return rows


def _context_fields(context: str) -> dict[str, Any]:
    return dict(part.split("=", 1) for part in context.split() if "=" in part)


def _ratio_row(figure, context, num: Group, den: Group, skipped) -> list[Any]:
    num_values = _figure_values(num, figure.metric)
    den_values = _figure_values(den, figure.metric)
    n = f"{len(num_values)}/{len(den_values)}"
    if not num_values or not den_values:
        name, missing = ("numerator", num) if not num_values else ("denominator", den)
        conditions = dict(figure.sides)[name]
        return _figure_row(figure, context, None, n, [_not_run(conditions, [missing], skipped)])
    num_median, den_median = stats.median(num_values), stats.median(den_values)
    if den_median == 0:
        return _figure_row(figure, context, None, n, ["the denominator's median is 0"])
    here = num_median / den_median
    noise = None
    if published_module.METRICS[figure.metric].timed:
        spreads = [
            stability.relative_noise(g.finished(), values)
            for g, values in ((num, num_values), (den, den_values))
        ]
        noise = max((s for s in spreads if s is not None), default=None)
    direction = _direction(figure.value, here, noise)
    marks = _marks(
        figure,
        [
            (published_module.conditions_text(figure.numerator), num),
            (published_module.conditions_text(figure.denominator), den),
        ],
    )
    return _figure_row(figure, context, here, n, [direction], direction, marks)


# -- fairness card -------------------------------------------------------------------------------
def _settings(record: dict[str, Any]) -> dict[str, Any]:
    return (record.get("worker") or {}).get("settings") or {}


def _gpu_driver(record: dict[str, Any]) -> Any:
    gpus = (record.get("env") or {}).get("gpus") or []
    return gpus[0].get("driver") if gpus and isinstance(gpus[0], dict) else None


def _load(record: dict[str, Any]) -> Any:
    load = record.get("load_at_start") or {}
    if not load:
        return None
    state = "busy" if load.get("busy") else "quiet"
    return f"{state} (load ≈{round(load.get('loadavg_1m') or 0)} on {load.get('logical_cores')})"


def _observed(record: dict[str, Any]) -> Any:
    # to the half core: the card is for differences a reader should weigh, not sampling noise
    cores = (record.get("metrics") or {}).get("cores_observed")
    return None if cores is None else f"≈{round(cores * 2) / 2:g} cores"


def _versions(record: dict[str, Any]) -> Any:
    worker = record.get("worker") or {}
    version = worker.get("framework_version")
    backend = (worker.get("extra") or {}).get("backend_version")
    if version is None:
        return None
    return f"{version} ({backend})" if backend else version


# (label, how to read it from a record): what a ratio between runs is made of, beside the
# spec's own fields. Per-group values are joined when the repeats of a group disagree.
# Card rows that are a spec field: left out when that field is what the comparison varies (the
# configuration names already say it).
CARD_SPEC_FIELD = {
    "precision": "precision",
    "autotune": "autotune",
    "input path": "input",
    "timing mode": "timing",
    "threads configured": "threads",
}
FAIRNESS_SETTINGS: list[tuple[str, Any]] = [
    ("precision", lambda r: (r.get("spec") or {}).get("precision", "fp32")),
    ("compilation", lambda r: _settings(r).get("compile")),
    # The kernel a transformer's attention ran in (torch's SDPA backend, Keras' path and XLA).
    ("attention kernel", lambda r: _settings(r).get("attention")),
    ("autotune", lambda r: _settings(r).get("autotune") or (r.get("spec") or {}).get("autotune")),
    ("input path", lambda r: (r.get("spec") or {}).get("input", "host")),
    ("timing mode", lambda r: (r.get("spec") or {}).get("timing", "synced")),
    ("threads configured", lambda r: (r.get("spec") or {}).get("threads")),
    ("threads observed", _observed),
    ("framework version", _versions),
    ("GPU driver", _gpu_driver),
    ("machine load", _load),
]


def fairness_card(groups: list[Group], varying: Sequence[str] = ()) -> Table | None:
    """Only the settings that differ between the compared configurations, one row each, so a
    reader sees at once what a ratio is made of besides what the comparison varies on purpose.
    None when nothing else differs (or there is one group)."""
    if len(groups) < 2:
        return None
    table = Table(
        "fairness",
        "fairness card: settings that differ between the compared runs",
        ["setting", *(g.label for g in groups)],
        note="only settings that differ are shown; precision, compilation, autotune, input "
        "path, timing mode, threads, versions, driver and load that all runs share are left out",
    )
    for label, read in FAIRNESS_SETTINGS:
        if CARD_SPEC_FIELD.get(label) in varying:
            continue
        cells = []
        for g in groups:
            values = list(dict.fromkeys(_fmt(read(r)) for r in g.runs if r.get("status")))
            cells.append(" / ".join(values) if values else "—")
        if len(set(cells)) > 1:
            table.rows.append([label, *cells])
    # Shown whenever any run has it, even if all do: an emulated bf16 number is not a bf16 one.
    emulated = [
        list(dict.fromkeys(_settings(r).get("bf16_note") or "" for r in g.runs if r.get("status")))
        for g in groups
    ]
    if any(any(notes) for notes in emulated):
        table.rows.append(["bf16", *(" / ".join(n for n in notes if n) for notes in emulated)])
    flagged = [
        g.label for g in groups if any((r.get("metrics") or {}).get("threads_flag") for r in g.runs)
    ]
    if flagged:
        table.rows.append(
            [
                "thread flag",
                *("used more cores than configured" if g.label in flagged else "" for g in groups),
            ]
        )
    return table if table.rows else None


def skipped_table(skipped: Sequence[tuple[str, str]]) -> Table | None:
    if not skipped:
        return None
    table = Table("skipped", "configurations not run", ["configuration", "reason"])
    table.rows.extend([key, reason] for key, reason in skipped)
    return table


def build(
    records: Sequence[dict[str, Any]],
    metric: str = "step_median_s",
    study_metric: str = "train_wall_s",
    skipped: Sequence[tuple[str, str]] = (),
    published: Sequence[published_module.Figure] = (),
) -> list[Table]:
    """Every table for a set of runs (a sweep, a group, or runs picked by id); ``published``:
    the figures their study published, printed beside ours."""
    groups, varying = split_by_host(*group_runs(records))
    tables = [summary_table(groups, metric)]
    comparisons = comparison_table(groups, varying, metric)
    if comparisons.rows:
        tables.append(comparisons)
    scaling = scaling_table(groups, varying, metric)
    if scaling is not None and scaling.rows:
        tables.append(scaling)
    workers = worker_scaling_table(groups, varying)
    if workers is not None and workers.rows:
        tables.append(workers)
    study = study_table(groups, study_metric)
    if study is not None:
        tables.append(study)
    figures = published_table(groups, varying, published, skipped)
    if figures is not None:
        tables.append(figures)
    card = fairness_card(groups, varying)
    if card is not None:
        tables.append(card)
    skipped_ = skipped_table(skipped)
    if skipped_ is not None:
        tables.append(skipped_)
    return tables


# -- export -------------------------------------------------------------------------------------
def cell_text(value: Any) -> str:
    return _fmt(value)


def to_markdown(tables: Sequence[Table]) -> str:
    out = []
    for t in tables:
        columns, rows = t.view()
        out.append(f"### {markdown_cell(t.title)}\n")
        out.append("| " + " | ".join(markdown_cell(c) for c in columns) + " |")
        out.append("|" + "|".join("---" for _ in columns) + "|")
        for row in rows:
            out.append("| " + " | ".join(markdown_cell(cell_text(v)) for v in row) + " |")
        if t.note:
            out.append(f"\n{t.note}")
        out.append("")
    return "\n".join(out)


def to_csv(tables: Sequence[Table]) -> str:
    """One file, one row per table row; the ``table`` column says which table it belongs to.
    Numbers are written at full precision; text that a spreadsheet would run is neutralised."""
    columns: dict[str, None] = {"table": None}
    for t in tables:
        for c in t.columns:
            columns.setdefault(c, None)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns))
    writer.writerow(csv_header(list(columns)))
    for t in tables:
        for row in t.rows:
            writer.writerow(
                csv_row(
                    {
                        "table": t.name,
                        **{
                            c: ("" if v is None else v) for c, v in zip(t.columns, row, strict=True)
                        },
                    }
                )
            )
    return buffer.getvalue()


def write_exports(
    tables: Sequence[Table], csv_path: Path | None, markdown_path: Path | None
) -> None:
    if csv_path is not None:
        csv_path.write_text(to_csv(tables), encoding="utf-8")
    if markdown_path is not None:
        markdown_path.write_text(to_markdown(tables), encoding="utf-8")
