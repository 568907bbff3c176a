"""What ``compare``, ``report`` and ``regress`` share about the runs they read and the HTML
page they write: the TARGET arguments (``sweep.collect``, the one resolver) and writing the page
(``html_report``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from tui_bench.engine.errors import UsageError
from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """TARGET... and --last/--since: the runs `compare` and `report` read (``sweep.collect``)."""
    parser.add_argument(
        "ids",
        nargs="*",
        metavar="TARGET",
        help="run ids, group ids, sweep ids (prefixes ok) or a preset's name (its latest sweep); "
        "default: the last sweep, or the whole history with --last/--since",
    )
    parser.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="only the newest N runs of each configuration (as regress --last)",
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only runs started then or later: today, yesterday, 3d, 12h, 2026-11-20",
    )


def add_latency_bound_argument(parser: argparse.ArgumentParser) -> None:
    """--latency-bound MS: what `compare` and `report` answer of a batch sweep (``tradeoff``)."""
    parser.add_argument(
        "--latency-bound",
        metavar="MS",
        default=None,
        help="the most latency a configuration may pay, in ms (inference: p99; training: the "
        "median step): the verdict names the configuration with the most samples/s within it",
    )


def collect_targets(
    args: argparse.Namespace, history: History
) -> tuple[list[Run], list[tuple[str, str]], list[Any]]:
    from tui_bench.engine.results.regress import parse_when
    from tui_bench.engine.runs import sweep as sweep_module

    last = getattr(args, "last", None)
    if last is not None and last < 1:
        raise UsageError(f"--last must be at least 1, got {last}")
    since = parse_when(args.since) if getattr(args, "since", None) else None
    return sweep_module.collect(args.ids, history, last=last, since=since)


def compare_targets(args: argparse.Namespace, history: History) -> tuple[list[Run], Any]:
    """The runs TARGETs name and compare's computed tables of them: what `compare`, `report` and
    the HTML page all read (an unknown --metric is one line, before any history is read)."""
    from tui_bench.engine.results import tables

    if args.metric is not None and args.metric not in tables.METRICS:
        raise UsageError(
            f"metric '{args.metric}' is not known (choose: {', '.join(tables.METRICS)})"
        )
    given = getattr(args, "latency_bound", None)
    bound = tables.latency_bound(given) if given is not None else None
    records, skipped, published = collect_targets(args, history)
    comparison = tables.compute(
        records,
        metric=args.metric,
        study_metric=args.study_metric,
        skipped=skipped,
        published=published,
        bound=bound,
    )
    return records, comparison


def check_output(path: str, flag: str) -> None:
    """A file we are about to write: its folder must exist (one line otherwise, exit 2)."""
    from pathlib import Path

    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, not a file")
    if not target.parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {target.parent} does not exist")


def write_html_report(
    path: str,
    records: Sequence[Run],
    comparison: Any,
    history: History,
    command: str = "",
    regress: Any = None,
    metric: str = "step_median_s",
) -> None:
    """The comparison's (a ``tables.Comparison``) self-contained HTML report (``html_report``),
    titled after its sweep; with ``regress`` (a ``regress.Report``) and no comparison, the
    gate's page over ``records``, both sides, for ``metric``."""
    from tui_bench.engine.results import html_report
    from tui_bench.engine.runs import sweep as sweep_module

    check_output(path, "--html")
    title, study = sweep_module.report_title(records)
    if regress is not None:
        title = f"regress: {len(regress.rows)} configuration(s)"
    page = html_report.collect(
        records,
        comparison,
        metric=metric,
        history=history.all(),
        title=title,
        study=study,
        command=command,
        regress=regress,
    )
    html_report.write(path, page)
