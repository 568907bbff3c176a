"""``tui-bench history list|show|export|delete``: the recorded runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich import box
from rich.table import Table

from tui_bench.cli import common
from tui_bench.cli.common import UsageError
from tui_bench.engine.results.history import History
from tui_bench.engine.spec import bounded_option, flag_parser

LIMIT = bounded_option(
    "limit", int, "only the newest N runs (0: all)", default=0, low=0, high=10**9
)


def cmd_history(args: argparse.Namespace) -> int:
    history = History()
    for warning in history.warnings:
        common.console(stderr=True).print(f"[yellow]warning:[/yellow] {warning}")
    if args.history_command in (None, "list"):
        records = history.all()
        total = len(records)
        if args.limit:  # the newest N runs, whatever they are repeats of
            records = records[-args.limit :]
        if args.json:
            print(json.dumps(records, indent=2, default=str))
            return 0
        table = Table(
            title=f"{total} run(s) in {history.home}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("run", overflow="fold", min_width=30)
        table.add_column("status", no_wrap=True)
        for header in ("ms/step", "samp/s", "acc"):
            table.add_column(header, justify="right", no_wrap=True)
        for r in records:
            m = r.get("metrics") or {}
            table.add_row(
                f"{r['id']}\n[dim]{r.get('label', '')}[/dim]",
                r.get("status", ""),
                common.fmt(m.get("step_median_s"), 1000, 1),
                common.fmt(m.get("samples_per_s"), digits=0),
                common.fmt(m.get("test_accuracy"), digits=3),
            )
        table.caption = "ms/step: median steady-state step; samp/s: steady state; acc: test"
        common.console().print(table)
        return 0
    if args.history_command == "show":
        record = history.get(args.run_id)
        print(json.dumps(record, indent=2, default=str))
        return 0
    if args.history_command == "export":
        count = history.export_csv(Path(args.csv))
        common.console(stderr=True).print(f"wrote {count} run(s) to {args.csv}")
        return 0
    if args.history_command == "delete":
        record = history.get(args.run_id)
        history.delete([record["id"]])
        common.console(stderr=True).print(f"deleted {record['id']}")
        return 0
    raise UsageError(f"unknown history command {args.history_command}")


def register(subparsers: argparse._SubParsersAction) -> None:
    hist = subparsers.add_parser("history", help="browse, show, export and delete recorded runs")
    hist_sub = hist.add_subparsers(dest="history_command", metavar="ACTION")
    hist_list = hist_sub.add_parser("list", help="one line per run")
    hist_list.add_argument("--limit", type=flag_parser(LIMIT), default=0, help="only the newest N")
    hist_list.add_argument("--json", action="store_true")
    hist_show = hist_sub.add_parser("show", help="everything recorded about a run, as JSON")
    hist_show.add_argument("run_id", help="id or unique prefix")
    hist_export = hist_sub.add_parser("export", help="write all runs to CSV (one row per run)")
    hist_export.add_argument("--csv", required=True, help="output file")
    hist_delete = hist_sub.add_parser("delete", help="delete a run and its series")
    hist_delete.add_argument("run_id")
    hist.set_defaults(func=cmd_history, json=False, limit=0)
