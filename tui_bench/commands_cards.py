"""``tui-bench frameworks`` and ``tui-bench hardware``: the framework card and the hardware card
(after Dai & Berleant), filled from this machine's runtimes, a short probe and the history."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tui_bench.engine import cards


def _print(card_list: list[cards.Card], metrics: tuple[str, ...], title: str, args) -> None:
    if args.json:
        print(json.dumps([asdict(card) for card in card_list], indent=2))
        return
    if args.markdown:
        print(cards.markdown(card_list, metrics, title), end="")
        return
    console = Console(highlight=False)
    for card in card_list:
        table = Table(title=Text(f"{title}: {card.label}"), title_justify="left", show_header=False)
        table.add_column("metric", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        extra = [m for m in card.cells if m not in metrics]
        for metric in list(metrics) + extra:
            table.add_row(metric, Text(card.cells.get(metric, cards.MISSING)))
        console.print(table)


def cmd_frameworks(args: argparse.Namespace) -> int:
    found = cards.framework_card(refresh=args.refresh)
    _print(found, cards.FRAMEWORK_METRICS, "framework card", args)
    return 0


def cmd_hardware(args: argparse.Namespace) -> int:
    from tui_bench.engine.sysinfo import fingerprint

    found = cards.hardware_card(fingerprint())
    _print(found, cards.HARDWARE_METRICS, "hardware card", args)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    frameworks = sub.add_parser(
        "frameworks",
        help="the framework card: license, languages, hardware, multi-node, tested networks",
        description="Dai & Berleant's framework metrics for every framework in the catalog, "
        "from each runtime's installed metadata and build, and from this machine's history.",
    )
    frameworks.add_argument("--markdown", action="store_true", help="one markdown table")
    frameworks.add_argument("--json", action="store_true")
    frameworks.add_argument("--refresh", action="store_true", help="probe the runtimes again")
    frameworks.set_defaults(func=cmd_frameworks)
    hardware = sub.add_parser(
        "hardware",
        help="the hardware card: measured compute, latency, energy, compatibility per device",
        description="Per device: a short matmul/conv probe and a batch-1 latency run in the "
        "torch runtime, energy and compatibility from the history; the rest stated as not "
        "measurable on one machine.",
    )
    hardware.add_argument("--markdown", action="store_true", help="one markdown table")
    hardware.add_argument("--json", action="store_true")
    hardware.set_defaults(func=cmd_hardware)
