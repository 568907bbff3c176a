"""This machine and what runs on it: ``tui-bench sysinfo`` (hardware and the runtime of every
framework/API), ``tui-bench frameworks`` and ``tui-bench hardware`` (the framework card and the
hardware card, after Dai & Berleant, filled from the runtimes, a short probe and the history)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from rich.table import Table
from rich.text import Text

from tui_bench.cli import common
from tui_bench.engine import catalog
from tui_bench.engine.results import cards


def _print(
    card_list: list[cards.Card], metrics: tuple[str, ...], title: str, args: argparse.Namespace
) -> None:
    if args.json:
        print(json.dumps([asdict(card) for card in card_list], indent=2))
        return
    if args.markdown:
        print(cards.markdown(card_list, metrics, title), end="")
        return
    console = common.console()
    for card in card_list:
        table = Table(title=Text(f"{title}: {card.label}"), title_justify="left", show_header=False)
        table.add_column("metric", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        extra = [m for m in card.cells if m not in metrics]
        for metric in list(metrics) + extra:
            table.add_row(metric, Text(card.cells.get(metric, cards.MISSING)))
        console.print(table)


def cmd_sysinfo(args: argparse.Namespace) -> int:
    from tui_bench.engine.machine import runtimes
    from tui_bench.engine.machine.sysinfo import logout_trap, machine_fingerprint

    info = {**machine_fingerprint(), "logout_trap": logout_trap()}
    rows = []
    for fw in catalog.FRAMEWORKS.values():
        for api in fw.apis:
            try:
                rt = runtimes.resolve(fw.name, api)
                rows.append(
                    {
                        "framework": fw.name,
                        "api": api,
                        "runtime": rt.name,
                        "python": rt.python,
                        "source": rt.source,
                    }
                )
            except runtimes.RuntimeUnavailable as exc:
                rows.append({"framework": fw.name, "api": api, "unavailable": str(exc)})
    if args.json:
        print(json.dumps({"machine": info, "runtimes": rows}, indent=2))
        return 0
    table = Table(title="machine", show_header=False, title_justify="left")
    for key, value in info.items():
        if key == "gpus":
            continue
        if key == "logout_trap":
            value = f"[red]{value}[/red]" if value else "no (runs survive logout)"
        table.add_row(key, "—" if value is None else str(value))
    for gpu in info["gpus"]:
        table.add_row(
            f"gpu {gpu['index']}", ", ".join(f"{k} {v}" for k, v in gpu.items() if k != "index")
        )
    console = common.console()
    console.print(table)
    rt_table = Table(title="runtimes", title_justify="left")
    for header in ("framework", "api", "runtime / reason"):
        rt_table.add_column(header)
    for row in rows:
        where = row.get("unavailable") or f"{row['runtime']}: {row['python']} ({row['source']})"
        rt_table.add_row(row["framework"], row["api"], where)
    console.print(rt_table)
    return 0


def cmd_frameworks(args: argparse.Namespace) -> int:
    found = cards.framework_card(refresh=args.refresh)
    _print(found, cards.FRAMEWORK_METRICS, "framework card", args)
    return 0


def cmd_hardware(args: argparse.Namespace) -> int:
    from tui_bench.engine.machine.sysinfo import machine_fingerprint

    found = cards.hardware_card(machine_fingerprint())
    _print(found, cards.HARDWARE_METRICS, "hardware card", args)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    info = subparsers.add_parser(
        "sysinfo", help="this machine's hardware and the framework runtimes"
    )
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_sysinfo)
    frameworks = subparsers.add_parser(
        "frameworks",
        help="the framework card: license, languages, hardware, multi-node, tested networks",
        description="Dai & Berleant's framework metrics for every framework in the catalog, "
        "from each runtime's installed metadata and build, and from this machine's history.",
    )
    frameworks.add_argument("--markdown", action="store_true", help="one markdown table")
    frameworks.add_argument("--json", action="store_true")
    frameworks.add_argument("--refresh", action="store_true", help="probe the runtimes again")
    frameworks.set_defaults(func=cmd_frameworks)
    hardware = subparsers.add_parser(
        "hardware",
        help="the hardware card: measured compute, latency, energy, compatibility per device",
        description="Per device: a short matmul/conv probe and a batch-1 latency run in the "
        "runtime of the framework that ships the hardware probe, energy and compatibility from the history; the rest stated as not "
        "measurable on one machine.",
    )
    hardware.add_argument("--markdown", action="store_true", help="one markdown table")
    hardware.add_argument("--json", action="store_true")
    hardware.set_defaults(func=cmd_hardware)
