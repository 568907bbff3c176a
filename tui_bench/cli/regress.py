"""``tui-bench regress [BASELINE CANDIDATE]``: the CI gate over the history."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tui_bench.cli import common, reporting
from tui_bench.engine.errors import UsageError
from tui_bench.engine.results import regress, render
from tui_bench.engine.results.history import History

DESCRIPTION = """\
Compare a baseline set of runs with a candidate set, per configuration (same spec fields that
decide a number, same host, same device). Each run counts once, by its own median (or the
--metric); the sides are compared by the ratio of medians and a two-sided Mann-Whitney U test.

marks:
  +  worse by more than --threshold and significant (p < --alpha)
  -  better by more than --threshold and significant
  ~  within noise (under the threshold, not significant, or too few runs: the test at
     --alpha 0.01 needs >= 5 runs per side)
  x  every run of one side failed
  ?  the configuration has no runs on one side
  !  a run on either side has a stability verdict other than "stable"

exit status:
  0  no regression
  1  a regression: a "+" row, or a configuration whose candidate runs all failed
  2  bad input (unknown id, unreadable time, both sides sharing runs)
  3  no regression, but "!" rows and --fail-on-unstable
"""

EPILOG = """\
each side is one or more of (comma-separated): a preset name, a sweep id, a batch id, a run id
(unique prefixes work). Without BASELINE and CANDIDATE the whole history is used:
  tui-bench regress --since yesterday          runs since yesterday against the runs before
  tui-bench regress --last 5 --since yesterday the newest 5 per configuration on each side
  tui-bench regress --last 5                   each configuration's newest 5 against the 5 before
  tui-bench regress 20261120-0915 20261125-0830 --markdown
  tui-bench regress study-x study-x --since 2026-11-20 --metric test_accuracy
"""


def cmd_regress(args: argparse.Namespace) -> int:
    if args.baseline is not None and args.candidate is None:
        raise UsageError("give both BASELINE and CANDIDATE, or neither")
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last must be at least 1, got {args.last}")
    if args.until and not args.since and args.baseline is None:
        raise UsageError("--until needs --since (or BASELINE and CANDIDATE)")
    since = regress.parse_when(args.since) if args.since else None
    until = regress.parse_when(args.until) if args.until else None
    for path, flag in ((args.html, "--html"), (args.csv, "--csv")):
        if path:
            reporting.check_output(path, flag)
    history = History()
    for warning in history.warnings:
        common.console(stderr=True).print(f"[yellow]warning:[/yellow] {warning}")
    baseline, candidate = regress.sides(
        history.all(),
        _tokens(args.baseline),
        _tokens(args.candidate),
        since=since,
        until=until,
        last=args.last,
    )
    if not baseline and not candidate:
        raise UsageError("no finished runs on either side: nothing to compare")
    report = regress.compare(
        baseline, candidate, args.metric, threshold=args.threshold / 100, alpha=args.alpha
    )
    if args.html:
        records = [*baseline, *candidate]
        reporting.write_html_report(
            args.html, records, None, history, regress=report, metric=args.metric
        )
        common.console(stderr=True).print(f"wrote {args.html}")
    # one typed table, written by the renderer compare's tables go through (results/render.py)
    shown = [report.table()]
    render.write_exports(shown, Path(args.csv) if args.csv else None, None)
    if args.json:
        # the gate's own record, with each side's run ids: what a CI job reads back
        print(json.dumps(report.as_dict(), indent=2))
    elif args.markdown:
        print(render.markdown(shown))
    else:
        render.terminal(common.console(), shown)
    if args.csv:
        common.console(stderr=True).print(f"wrote {args.csv}")
    return report.exit_code(args.fail_on_unstable)


def _tokens(text: str | None) -> list[str]:
    return [t for t in (text or "").split(",") if t.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "regress",
        help="baseline against candidate runs per configuration: the CI gate (exit 1 on a "
        "regression)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("baseline", nargs="?", metavar="BASELINE", help="ids or a preset name")
    parser.add_argument("candidate", nargs="?", metavar="CANDIDATE", help="ids or a preset name")
    parser.add_argument(
        "--since",
        help="candidate: runs from then on; baseline: runs before (today, yesterday, "
        "3d, 12h, 2026-11-20, 2026-11-20T09:30)",
    )
    parser.add_argument("--until", help="candidate: runs before then")
    parser.add_argument(
        "--last", type=int, metavar="N", help="the newest N runs per configuration on each side"
    )
    parser.add_argument(
        "--metric",
        default=regress.DEFAULT_METRIC,
        help="any numeric metric of a run (default step_median_s; an inference configuration "
        "reads its own figure for it: latency_p50_s, inference_samples_per_s for "
        "samples_per_s); accuracy, throughput and per-second metrics are better higher, the "
        "others better lower",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=regress.DEFAULT_THRESHOLD * 100,
        metavar="PERCENT",
        help="smallest change of the median that counts (default 10)",
    )
    parser.add_argument(
        "--alpha", type=float, default=regress.DEFAULT_ALPHA, help="significance (default 0.01)"
    )
    parser.add_argument(
        "--fail-on-unstable", action="store_true", help="exit 3 when a row is marked '!'"
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--markdown", action="store_true", help="a Markdown table (CI comments)")
    output.add_argument("--json", action="store_true", help="machine-readable")
    parser.add_argument(
        "--csv",
        metavar="FILE",
        help="also write the rows to FILE as CSV (numbers at full precision, in base units)",
    )
    parser.add_argument(
        "--html", metavar="FILE", help="also write the gate as a self-contained HTML report"
    )
    parser.set_defaults(func=cmd_regress)
