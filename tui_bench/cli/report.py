"""``tui-bench report TARGET... --html FILE``: a comparison as one self-contained HTML page
(``engine.results.html_report``) for a team to open anywhere, without network. The tables are
``compare``'s own (``tables.compute``); the page adds the machine, versions, verdicts with their
reasons, trends and figures."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from tui_bench.cli import common, reporting
from tui_bench.engine.results import tables
from tui_bench.engine.results.history import History


def cmd_report(args: argparse.Namespace) -> int:
    reporting.check_output(args.html, "--html")
    history = History()
    records, comparison = reporting.compare_targets(args, history)
    command = shlex.join(["tui-bench", "report", *command_words(args)])
    reporting.write_html_report(args.html, records, comparison, history, command)
    common.console(stderr=True).print(f"wrote {args.html} ({len(records)} run(s))")
    return 0


def command_words(args: argparse.Namespace) -> list[str]:
    """The arguments that chose these runs, for the page to say how it was made."""
    words = list(args.ids)
    for flag, value in (("--last", args.last), ("--since", args.since)):
        if value is not None:
            words += [flag, str(value)]
    if args.metric is not None:
        words += ["--metric", args.metric]
    if args.latency_bound is not None:
        words += ["--latency-bound", str(args.latency_bound)]
    return [*words, "--html", Path(args.html).name]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="a comparison as one self-contained HTML page: verdict, machine, tables, figures",
    )
    reporting.add_target_arguments(p)
    p.add_argument("--html", metavar="FILE", required=True, help="the HTML file to write")
    p.add_argument(
        "--metric",
        default=None,
        help="per-run figure to compare (default step_median_s, or latency_p50_s when every run "
        f"is an inference run; {', '.join(tables.METRICS)})",
    )
    reporting.add_latency_bound_argument(p)
    p.add_argument(
        "--study-metric",
        default="train_wall_s",
        help="figure in the study-shaped table (default train_wall_s, the training time)",
    )
    p.set_defaults(func=cmd_report)
