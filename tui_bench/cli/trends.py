"""``tui-bench history trends [FILTER]``: each configuration's runs over time and its change points.

A command group like its siblings, but its one action lives under ``history``: ``register`` finds
the history parser already registered (``COMMAND_GROUPS`` puts this module after it) and adds to
it, so cli/history.py needs no import of this module."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tui_bench.cli import common
from tui_bench.engine.errors import UsageError
from tui_bench.engine.results.history import History

if TYPE_CHECKING:  # imported where used: every `history` command registers this one
    from rich.table import Table

    from tui_bench.engine.results import trends as trends_module


def cmd_trends(args: argparse.Namespace) -> int:
    from tui_bench.engine.results import trends as trends_module

    if args.limit < 0:
        raise UsageError(f"--limit must be 0 (all) or more, got {args.limit}")
    history = History()
    for warning in history.warnings:
        common.console(stderr=True).print(f"[yellow]warning:[/yellow] {warning}")
    metric = args.metric or trends_module.DEFAULT_METRIC
    found = trends_module.trends(history.all(), args.filter, metric)
    if not found:
        what = f" matching {' '.join(args.filter)!r}" if args.filter else ""
        raise UsageError(f"no configuration{what} has a run with {metric} in this history")
    if args.figure:
        from tui_bench.engine.results import figures  # lazy: matplotlib is an optional extra

        figures.trends_figure(found, args.figure)
        common.console(stderr=True).print(f"wrote {args.figure}")
    if args.json:
        print(json.dumps([t.as_dict() for t in found], indent=2, default=str))
        return 0
    console = common.console()
    for item in found:
        console.print(render(item, args.limit))
    return 0


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    from tui_bench.engine.results import metrics  # a time's unit: the registry's

    return f"{value * 1000:.2f}" if metrics.get(metric).unit == "s" else f"{value:.4g}"


def render(item: trends_module.Trend, limit: int = 12) -> Table:
    """One configuration: its newest runs as rows, its change points in the caption. Fits 80
    columns: no date column (a run id starts with the date and time it was started), the
    framework's version only."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from tui_bench.engine.results import trends as trends_module
    from tui_bench.engine.results.identity import versions

    default = item.metric == trends_module.DEFAULT_METRIC
    shown = item.points[-limit:] if limit else item.points
    framework = str(item.configuration.get("framework") or "")
    changed_at = {c.index for c in item.change_points}
    table = Table(
        title=f"{escape(item.title)}  [dim]{item.configuration.id} · {len(item.points)} run(s)"
        + (f", {item.failed} failed" if item.failed else "")
        + "[/dim]",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("run (▶ a change point)", no_wrap=True)
    from tui_bench.engine.results import metrics  # the column's name: the registry's

    known = metrics.BY_KEY.get(item.metric)
    header = "ms/step" if default else known.header if known else item.metric
    table.add_column(header, justify="right", no_wrap=True)
    if default:
        table.add_column("IQR", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column(framework or "version", overflow="fold")
    offset = len(item.points) - len(shown)
    for i, point in enumerate(shown, start=offset):
        cells = [("▶" if i in changed_at else " ") + point.run_id]
        cells.append(_fmt(item.metric, point.value))
        if default:
            cells.append(_fmt(item.metric, point.iqr))
        cells += [point.verdict or "—", str(versions(point.run).get(framework) or "?")]
        table.add_row(*cells)
    lines = [c.describe(item.metric) for c in item.change_points] or ["no change point"]
    if offset:
        lines.append(f"(newest {len(shown)} of {len(item.points)} runs shown; --limit 0: all)")
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def register(subparsers: argparse._SubParsersAction) -> None:
    history = subparsers.choices["history"]
    actions = next(a for a in history._actions if isinstance(a, argparse._SubParsersAction))
    parser = actions.add_parser(
        "trends",
        help="each configuration's runs over time and where its series stepped",
        description="Per configuration (the spec fields that decide a number, the host, the "
        "device): its runs in time order, one value per run, and the change points of that "
        "series (penalised least squares on log values, penalty 4·ln(n)·σ², at least 2 runs per "
        "level, steps under 5 %% merged), each with what changed between the runs on either side.",
    )
    parser.add_argument(
        "filter",
        nargs="*",
        metavar="FILTER",
        help="words that must all appear in the configuration's label, or its key's start",
    )
    # None: trends.DEFAULT_METRIC, read when the command runs (registering imports no engine)
    parser.add_argument(
        "--metric",
        default=None,
        help="a run metric (default: the step time; an inference configuration's p50 request)",
    )
    parser.add_argument(
        "--limit", type=int, default=12, help="newest N runs per configuration shown (0: all)"
    )
    parser.add_argument("--json", action="store_true", help="every run and change point")
    parser.add_argument(
        "--figure",
        metavar="FILE",
        help="also draw the series with their change points to FILE.svg or FILE.png "
        "(needs the matplotlib extra)",
    )
    parser.set_defaults(func=cmd_trends)
