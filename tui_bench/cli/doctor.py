"""``tui-bench doctor``: the machine check (like `pyperf system show`). Exit 0 when nothing fails,
1 when something would make numbers unreliable; it never runs a fix and never needs root."""

from __future__ import annotations

import argparse
import json

from rich import box
from rich.table import Table

from tui_bench.cli import common
from tui_bench.engine.machine import doctor

STYLE = {doctor.OK: "green", doctor.WARN: "yellow", doctor.FAIL: "red"}


def cmd_doctor(args: argparse.Namespace) -> int:
    report = doctor.check(processes=None if args.no_processes else "auto")
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
        return report.exit_code
    table = Table(title=report.banner(), title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("check", "", "value", "what to do"):
        table.add_column(header, overflow="fold")
    for c in report.checks:
        table.add_row(f"{c.area} {c.name}", f"[{STYLE[c.status]}]{c.status}[/]", c.value, c.advice)
    common.console().print(table)
    return report.exit_code


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check this machine for what makes benchmark numbers unreliable"
    )
    parser.add_argument("--json", action="store_true", help="the checks as JSON")
    parser.add_argument(
        "--no-processes",
        action="store_true",
        help="skip measuring other processes' CPU (half a second)",
    )
    parser.set_defaults(func=cmd_doctor)
