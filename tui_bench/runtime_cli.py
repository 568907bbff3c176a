"""``tui-bench runtime list|setup``: which interpreter runs each framework/API, and managed
environments with pinned known-good versions. Frameworks are only ever probed in a subprocess."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from tui_bench.engine import catalog, runtimes


def cmd_runtime_list(args: argparse.Namespace) -> int:
    rows = [
        runtimes.availability(fw.name, api, refresh=args.refresh)
        for fw in catalog.FRAMEWORKS.values()
        for api in fw.apis
    ]
    if args.json:
        out = []
        for row in rows:
            item = asdict(row)
            item["ok"] = row.ok
            out.append(item)
        print(json.dumps(out, indent=2))
        return 0
    table = Table(title="runtimes", title_justify="left")
    for header in ("framework / api", "runtime", "interpreter", "versions", "status"):
        table.add_column(header, overflow="fold")
    for row in rows:
        where = f"{row.python} ({row.source})" if row.python else "—"
        versions = row.probe.versions() if row.probe else "—"
        status = "[green]available[/]" if row.ok else f"[red]{row.problem}[/]"
        if row.fix:
            status += f"\nfix: {row.fix}"
        table.add_row(f"{row.framework} / {row.api}", row.runtime, where, versions, status)
    Console(highlight=False).print(table)
    return 0


def cmd_runtime_setup(args: argparse.Namespace) -> int:
    if args.name != "all":
        return _setup_one(args.name, args)
    names = runtimes.needed_runtimes()
    print(f"runtimes this installation needs: {', '.join(names) or 'none'}", flush=True)
    for name in names:
        python = runtimes.managed_python(name)
        if not args.force and python.exists() and runtimes.probe(str(python), name).ok:
            print(f"runtime '{name}' is already set up: {python} (--force recreates it)")
            continue
        if code := _setup_one(name, args):
            return code
    return 0


def _setup_one(name: str, args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        python = runtimes.setup(
            name,
            gpu=args.gpu,
            python=args.python,
            on_line=lambda line: print(line, flush=True),
        )
    except runtimes.RuntimeSetupError as exc:
        print(f"tui-bench: error: {exc}", file=sys.stderr)
        return 1
    probe = runtimes.probe(str(python), name)
    print(
        f"runtime '{name}' ready in {time.monotonic() - started:.0f} s: {python} "
        f"({probe.versions()})"
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    runtime = sub.add_parser("runtime", help="framework runtimes: list them, set one up")
    runtime_sub = runtime.add_subparsers(dest="runtime_command", metavar="ACTION", required=True)
    listing = runtime_sub.add_parser(
        "list", help="each framework/API: its interpreter, versions, and whether it can run"
    )
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--refresh", action="store_true", help="probe again, ignore the cache")
    listing.set_defaults(func=cmd_runtime_list)
    names = ", ".join(f"{n} ({s.description})" for n, s in runtimes.MANAGED.items())
    setup = runtime_sub.add_parser(
        "setup",
        help="create a managed virtual environment with pinned known-good versions",
        description=f"Managed runtimes: {names}.",
    )
    setup.add_argument(
        "name",
        help=f"{', '.join(runtimes.MANAGED)}, or all: every runtime the catalog needs that this "
        "installation lacks (ones already working are kept)",
    )
    setup.add_argument("--force", action="store_true", help="with all: recreate working ones too")
    setup.add_argument("--gpu", action="store_true", help="install the CUDA variant")
    setup.add_argument(
        "--python", help="base interpreter for the environment (default: the app's own)"
    )
    setup.set_defaults(func=cmd_runtime_setup)
