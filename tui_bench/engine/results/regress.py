"""``regress``: did a configuration get worse between a baseline and a candidate set of runs?

The run is the unit of repetition: each run contributes one value (its own median step time, or
the metric asked for) and the two sides are compared with a Mann–Whitney U test over those
per-run values. Steps are never pooled across runs: steps inside one run share its process, its
caches and the machine's state at that moment, so they are not independent repeats.

Marks, per configuration (asv compare's spirit, plus what a history can tell):
  ``+`` worse by more than the threshold and significant (p < alpha)
  ``-`` better by more than the threshold and significant
  ``~`` within noise: the change is under the threshold, or not significant
  ``x`` every run of one side failed
  ``?`` the configuration has no runs on one side
  ``!`` a run on either side carries a stability verdict other than "stable"

With the default alpha of 0.01 the test can only reach significance with at least 5 runs per side
(the smallest two-sided exact p for 5 against 5 is 2/252 ≈ 0.008): fewer runs give ``~`` and say
why.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.errors import HistoryError, UsageError
from tui_bench.engine.results import metrics, stats, tables
from tui_bench.engine.results.identity import (
    Configuration,
    changes,
    group_by_configuration,
    labelled,
    versions,
)
from tui_bench.engine.results.record import Run

DEFAULT_METRIC = "step_median_s"
DEFAULT_THRESHOLD = 0.10
DEFAULT_ALPHA = 0.01

WORSE, BETTER, SAME, FAILED, MISSING, UNSTABLE = "+", "-", "~", "x", "?", "!"
MARKS = {  # what each mark says, in the order a reader weighs them
    WORSE: "worse",
    FAILED: "candidate failed",
    UNSTABLE: "not stable",
    BETTER: "better",
    MISSING: "one side missing",
    SAME: "within noise",
}

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_UNSTABLE = 0, 1, 2, 3

# Which way a metric is better: the registry's (an unregistered key read by its name).
higher_is_better = metrics.higher_is_better


# -- time windows -------------------------------------------------------------------------------
def parse_when(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """'yesterday', 'today', '3d' / '12h' ago, or an ISO date or date-time (local time if no
    offset). Raises UsageError naming what is accepted."""
    now = now or dt.datetime.now().astimezone()
    word = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word == "today":
        return midnight
    if word == "yesterday":
        return midnight - dt.timedelta(days=1)
    ago = re.fullmatch(r"(\d+)\s*([dhm])", word)
    if ago:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[ago.group(2)]
        return now - dt.timedelta(**{unit: int(ago.group(1))})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"cannot read the time {text!r}: use today, yesterday, 3d, 12h, 2026-11-20 or "
            "2026-11-20T09:30"
        ) from None
    return when if when.tzinfo else when.astimezone()


def in_window(run: Run, since: dt.datetime | None, until: dt.datetime | None) -> bool:
    when = run.started
    if when is None:
        return since is None and until is None
    return (since is None or when >= since) and (until is None or when < until)


# -- choosing the runs of a side ----------------------------------------------------------------
def select(tokens: Sequence[str], records: Iterable[Run]) -> list[Run]:
    """The records a side names: each token a preset name, a sweep or batch id, or a run id (ids
    may be unique prefixes). Raises HistoryError for a token that matches nothing."""
    runs = list(records)
    chosen: dict[str, Run] = {}
    for token in tokens:
        matched = _match(token, runs)
        if not matched:
            raise HistoryError(f"{token!r} names no run, batch, sweep or preset in this history")
        chosen.update((r.id, r) for r in matched)
    return sorted(chosen.values(), key=_time_order)


def _time_order(run: Run) -> tuple[str, str]:
    return run.started_text, run.id


def _tag(run: Run, key: str) -> str | None:
    return run.id if key == "id" else run.text_field(key)


def _match(token: str, runs: list[Run]) -> list[Run]:
    for key in ("preset", "group", "batch", "id"):
        exact = [r for r in runs if _tag(r, key) == token]
        if exact:
            return exact
    for key in ("group", "batch", "id"):
        values = {_tag(r, key) for r in runs if (_tag(r, key) or "").startswith(token)}
        values.discard(None)
        if len(values) > 1:
            raise HistoryError(
                f"{token!r} is the start of {len(values)} {key} ids; give more of it"
            )
        if values:
            return [r for r in runs if _tag(r, key) in values]
    return []


def finished(records: Iterable[Run]) -> list[Run]:
    """Runs that measured something or failed trying. A run in progress belongs to neither side
    yet; a cancelled or interrupted one was stopped from outside and says nothing either way."""
    return [r for r in records if r.finished or r.failed]


def newest_per_configuration(runs: Sequence[Run], n: int) -> list[Run]:
    """The newest ``n`` runs of each configuration (``runs`` in time order)."""
    kept: list[Run] = []
    for group in group_by_configuration(runs).values():
        kept += group[-n:]
    return kept


def sides(
    records: Iterable[Run],
    baseline_tokens: Sequence[str] = (),
    candidate_tokens: Sequence[str] = (),
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    last: int | None = None,
) -> tuple[list[Run], list[Run]]:
    """The baseline and candidate runs, oldest first.

    Each side starts from what its tokens name (every run when none are given). With ``since``,
    the candidate keeps runs started at or after it (and before ``until``), the baseline runs
    started before it. ``last`` keeps the newest N runs per configuration on each side. With no
    tokens and no ``since``, ``last`` splits each configuration's history: its newest N runs are
    the candidate, the N before them the baseline."""
    runs = sorted(finished(records), key=_time_order)
    if bool(baseline_tokens) != bool(candidate_tokens):
        raise UsageError("give both BASELINE and CANDIDATE, or neither")
    baseline = select(baseline_tokens, runs) if baseline_tokens else runs
    candidate = select(candidate_tokens, runs) if candidate_tokens else runs
    if since is not None or until is not None:
        candidate = [r for r in candidate if in_window(r, since, until)]
        if since is not None:
            baseline = [r for r in baseline if in_window(r, None, since)]
    elif not baseline_tokens:
        if not last:
            raise UsageError(
                "say what to compare: BASELINE CANDIDATE, --since (runs before it against runs "
                "after it) or --last N (each configuration's newest N runs against the N before)"
            )
        candidate, baseline = [], []
        for group in group_by_configuration(runs).values():
            candidate += group[-last:]
            baseline += group[-2 * last : -last]
    if last:
        baseline = newest_per_configuration(baseline, last)
        candidate = newest_per_configuration(candidate, last)
    overlap = {r.id for r in baseline} & {r.id for r in candidate}
    if overlap:
        raise UsageError(
            f"{len(overlap)} run(s) are on both sides (e.g. {sorted(overlap)[0]}): the baseline "
            "and the candidate must be different runs"
        )
    return baseline, candidate


# -- the comparison -----------------------------------------------------------------------------
@dataclass
class Side:
    values: list[float] = field(default_factory=list)  # one per run that has the metric
    runs: list[str] = field(default_factory=list)  # ids of every run on this side
    failed: int = 0
    verdicts: list[str] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)  # of its newest run

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float | None:
        return stats.median(self.values) if self.values else None


@dataclass
class Row:
    configuration: Configuration
    baseline: Side
    candidate: Side
    ratio: float | None  # candidate median / baseline median
    change: float | None  # relative change of the median, signed (+0.18 = 18 % larger)
    p: float | None
    mark: str
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "configuration": self.configuration.id,
            "label": self.configuration.name,
            "mark": self.mark,
            "baseline_median": self.baseline.median,
            "candidate_median": self.candidate.median,
            "ratio": self.ratio,
            "change": self.change,
            "p": self.p,
            "n_baseline": self.baseline.n,
            "n_candidate": self.candidate.n,
            "failed_baseline": self.baseline.failed,
            "failed_candidate": self.candidate.failed,
            "note": self.note,
            "baseline_runs": self.baseline.runs,
            "candidate_runs": self.candidate.runs,
        }


@dataclass
class Report:
    metric: str
    higher_is_better: bool
    threshold: float
    alpha: float
    rows: list[Row]

    @property
    def regressions(self) -> list[Row]:
        """Rows that fail the gate: worse for real, or a configuration that now fails."""
        return [
            r
            for r in self.rows
            if r.mark == WORSE or (r.mark == FAILED and r.candidate.failed and not r.candidate.n)
        ]

    def exit_code(self, fail_on_unstable: bool = False) -> int:
        if self.regressions:
            return EXIT_REGRESSION
        if fail_on_unstable and any(r.mark == UNSTABLE for r in self.rows):
            return EXIT_UNSTABLE
        return EXIT_OK

    @property
    def caption(self) -> str:
        """How to read the rows: the metric, its better way, the ratio, the gate's settings."""
        better = "higher" if self.higher_is_better else "lower"
        return (
            f"{self.metric} ({better} is better); ratio = candidate / baseline median of per-run "
            f"values; threshold {self.threshold:.0%}, alpha {self.alpha:g}; "
            f"{len(self.regressions)} regression(s)"
        )

    def table(self) -> tables.Table:
        """The gate's rows as a typed table of numbers (``tables.Table``), in the metric's unit
        (the registry's): ``render`` writes it to a terminal, Markdown or CSV as it writes
        compare's tables. The terminal shows the two sides' n as one "n/n" column and leaves
        the relative change, the failed counts and each configuration's whole name (its host,
        its device) to CSV, where the row's label is the fewest fields that tell the rows
        apart, as in compare."""
        unit = metrics.get(self.metric).unit
        out = tables.Table(
            "regress",
            f"regress: {len(self.rows)} configuration(s)",
            (
                tables.Column("mark"),
                tables.Column("configuration"),  # its short label among these rows
                tables.Column("name", terminal=False),  # the whole of it: host, device, …
                tables.Column("baseline", tables.NUMBER, unit),
                tables.Column("candidate", tables.NUMBER, unit),
                tables.Column("ratio", tables.RATIO),
                tables.Column("change", tables.FRACTION, terminal=False),
                tables.Column("p", tables.P_VALUE),
                tables.Column("n baseline", tables.COUNT),
                tables.Column("n candidate", tables.COUNT),
                tables.Column("failed baseline", tables.COUNT, terminal=False),
                tables.Column("failed candidate", tables.COUNT, terminal=False),
                tables.Column("note"),
            ),
            note=self.caption,
            layout=(
                tables.Shown("", ("mark",)),  # one character: the width goes to the note
                *(
                    tables.Shown(name, (name,))
                    for name in ("configuration", "baseline", "candidate", "ratio", "p")
                ),
                tables.Shown("n", ("n baseline", "n candidate"), tables.PAIR),
                tables.Shown("note", ("note",)),
            ),
        )
        for row in self.rows:
            out.add(
                [
                    row.mark,
                    row.configuration.label or row.configuration.name,
                    row.configuration.name,
                    row.baseline.median,
                    row.candidate.median,
                    row.ratio,
                    row.change,
                    row.p,
                    row.baseline.n,
                    row.candidate.n,
                    row.baseline.failed,
                    row.candidate.failed,
                    row.note,
                ]
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "better": "higher" if self.higher_is_better else "lower",
            "threshold": self.threshold,
            "alpha": self.alpha,
            "regressions": len(self.regressions),
            "rows": [r.as_dict() for r in self.rows],
        }


def _side(runs: list[Run], metric: str) -> Side:
    side = Side()
    for run in runs:
        side.runs.append(run.id)
        side.versions = versions(run)
        if run.verdict:
            side.verdicts.append(run.verdict)
        if not run.finished:
            side.failed += 1
            continue
        value = run.metric(metric)
        if value is not None:
            side.values.append(value)
    return side


def compare(
    baseline: Sequence[Run],
    candidate: Sequence[Run],
    metric: str = DEFAULT_METRIC,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> Report:
    """One row per configuration found on either side, worst first. An inference
    configuration is read by its own figure for ``metric`` (``metrics.in_mode``: its median
    request for the steady step, its inference samples/s for samples/s), which is better the
    same way; the report names the figure its rows read when they all read one."""
    if threshold < 0:
        raise UsageError(f"--threshold must be ≥ 0, got {threshold:g}")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {alpha:g}")
    up = higher_is_better(metric)
    base_runs, cand_runs = list(baseline), list(candidate)
    base_groups = group_by_configuration(base_runs)
    cand_groups = group_by_configuration(cand_runs)
    configs = list(dict.fromkeys([*base_groups, *cand_groups]))
    if len(configs) > 1:  # short labels among every configuration on either side, as compare's
        configs = labelled(configs)
    rows = []
    read = set()
    for config in configs:
        key = metrics.in_mode(metric, config.get("mode"))
        read.add(key)
        b = _side(base_groups.get(config, []), key)
        c = _side(cand_groups.get(config, []), key)
        rows.append(_row(config, b, c, up, threshold, alpha, key))
    if rows and not any(r.baseline.n or r.candidate.n for r in rows):
        # a misspelt --metric must not pass a CI gate by finding nothing to compare
        known = sorted({k for r in [*base_runs, *cand_runs] for k in r.metric_names()})
        if known:
            raise UsageError(
                f"no run has the metric {metric!r} (these runs have: {', '.join(known[:12])}"
                + (", …)" if len(known) > 12 else ")")
            )
    order = {WORSE: 0, FAILED: 1, UNSTABLE: 2, BETTER: 3, MISSING: 4, SAME: 5}
    rows.sort(key=lambda r: (order[r.mark], r.configuration.name))
    return Report(read.pop() if len(read) == 1 else metric, up, threshold, alpha, rows)


def _row(
    config: Configuration, b: Side, c: Side, up: bool, threshold: float, alpha: float, metric: str
) -> Row:
    def row(mark: str, note: str, ratio=None, change=None, p=None) -> Row:
        return Row(config, b, c, ratio, change, p, mark, note)

    if not b.runs or not c.runs:
        return row(MISSING, f"no runs on the {'baseline' if not b.runs else 'candidate'} side")
    for name, side in (("baseline", b), ("candidate", c)):
        if not side.n:
            why = (
                f"all {side.failed} run(s) failed"
                if side.failed
                else f"no run has the metric {metric}"
            )
            return row(FAILED if side.failed else MISSING, f"{name}: {why}")
    assert b.median is not None and c.median is not None
    ratio = c.median / b.median if b.median else None
    change = ratio - 1 if ratio is not None else None
    test = stats.mann_whitney_u(c.values, b.values)
    notes = changes(b.versions, c.versions)  # what a change may be down to
    if b.failed or c.failed:
        notes.append(f"failed runs left out: {b.failed}/{c.failed}")
    unstable = sorted({v for v in [*b.verdicts, *c.verdicts] if v != "stable"})
    if unstable:
        notes.append(f"stability verdict {', '.join(unstable)}")
        return row(UNSTABLE, "; ".join(notes), ratio, change, test.p)
    if change is None:
        return row(
            SAME, "; ".join([*notes, "baseline median is 0: no ratio"]), ratio, change, test.p
        )
    worse = change < 0 if up else change > 0
    if abs(change) <= threshold:
        notes.append(f"within the {threshold:.0%} threshold")
        return row(SAME, "; ".join(notes), ratio, change, test.p)
    if test.p is None:
        notes.append(f"{test.reason}; at alpha {alpha:g} a change needs ≥5 runs per side")
        return row(SAME, "; ".join(notes), ratio, change, None)
    if test.p >= alpha:
        notes.append(f"not significant (p ≥ {alpha:g})")
        return row(SAME, "; ".join(notes), ratio, change, test.p)
    return row(WORSE if worse else BETTER, "; ".join(notes), ratio, change, test.p)
