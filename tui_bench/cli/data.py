"""``tui-bench data list|download|import``: the real datasets' cache, headless.

Errors are one line on stderr (``tui-bench: error: ...``): exit 2 for bad input (an unknown name,
a path that does not exist), 1 when a download or an import failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from tui_bench.cli.common import UsageError, console, error_line
from tui_bench.engine import datasets
from tui_bench.engine.errors import EXIT_FAILED, TuiBenchError


class TransferDisplay:
    """One progress bar per file (bytes, speed, ETA) on stderr; silent when disabled."""

    def __init__(self, console: Console, enabled: bool, verb: str) -> None:
        self.verb = verb
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not enabled,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> TransferDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, name: str, done: int, total: int) -> None:
        task = self.tasks.get(name)
        if task is None or (done < self.progress.tasks[task].completed):
            # A new file, or a retry from another mirror: a fresh bar.
            task = self.tasks[name] = self.progress.add_task(f"{self.verb} {name}", total=total)
        self.progress.update(task, completed=done, total=total)


def cmd_data(args: argparse.Namespace) -> int:
    action = args.data_command or "list"
    if action == "list":
        return _list(args)
    if action == "download":
        return _download(args)
    if action == "import":
        return _import(args)
    raise UsageError(f"unknown data command {action}")


def _list(args: argparse.Namespace) -> int:
    states = datasets.status(data_dir=args.data_dir, rehash=args.verify)
    if args.json:
        print(json.dumps([s.as_dict() for s in states], indent=2))
        return 0
    where = args.data_dir or str(datasets.cache_root())
    table = Table(title=f"real datasets in {where}", title_justify="left")
    for header in ("dataset", "present", "verified", "size", "to download", "where"):
        table.add_column(header)
    for s in states:
        if s.verified:
            verified = "[green]yes[/green]"
        elif s.present:
            bad = next((f for f in s.files if f.problem), None)
            verified = f"[red]no[/red]: {bad.name} {bad.problem}" if bad else "[red]no[/red]"
        else:
            verified = "—"
        table.add_row(
            s.name,
            "yes" if s.present else "no",
            verified,
            datasets.megabytes(s.size_on_disk) if s.size_on_disk else "—",
            datasets.megabytes(s.download_size) if s.download_size else "—",
            s.where if s.present else "",
        )
    out = console()
    out.print(table)
    out.print(
        "synthetic-* datasets need no files. Real ones: `tui-bench data download NAME`, or copy "
        "the published files over and `tui-bench data import PATH`.",
        style="dim",
    )
    return 0


def _download(args: argparse.Namespace) -> int:
    names = list(datasets.REGISTRY) if "all" in args.names else args.names
    unknown = [n for n in names if n not in datasets.REGISTRY]
    if unknown:
        raise UsageError(
            f"unknown dataset {unknown[0]!r} (choose: {', '.join(datasets.REGISTRY)}, all)"
        )
    err = console(stderr=True)
    failed = 0
    for name in names:
        with TransferDisplay(err, not args.quiet, "downloading") as display:
            try:
                state = datasets.download(name, progress=display)
            except datasets.DatasetError as exc:
                display.progress.stop()
                print(error_line(exc), file=sys.stderr)
                failed += 1
                continue
        if not args.quiet:
            err.print(
                f"{name}: verified, {datasets.megabytes(state.size_on_disk)} in {state.where}"
            )
    return 1 if failed else 0


def _import(args: argparse.Namespace) -> int:
    err = console(stderr=True)
    total = datasets.ImportReport()
    for path in args.paths:
        with TransferDisplay(err, not args.quiet, "checking") as display:
            # A DatasetError here is bad input (exit 2), raised to main.
            report = datasets.import_path(path, progress=display)
        for name in ("installed", "already", "rejected", "ignored"):
            getattr(total, name).extend(getattr(report, name))
    for item in total.installed:
        err.print(f"installed {item}")
    for item in total.already:
        err.print(f"already in the cache: {item}")
    for item in total.rejected:
        print(error_line(f"rejected {item}"), file=sys.stderr)
    if total.ignored and not args.quiet:
        err.print(f"[dim]ignored {len(total.ignored)} file(s) that are no dataset file[/dim]")
    if not (total.installed or total.already or total.rejected):
        raise TuiBenchError(
            f"no published dataset file found in {', '.join(args.paths)}", exit_code=EXIT_FAILED
        )
    complete = [s.name for s in datasets.status() if s.verified]
    if not args.quiet:
        err.print(f"complete and verified: {', '.join(complete) or 'none yet'}")
    return 1 if total.rejected else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser(
        "data",
        help="real datasets: list the cache, download, import files copied over",
        description="Real datasets (MNIST, Fashion-MNIST, CIFAR-10, IMDb) live in the cache "
        f"({datasets.cache_root()}; env TUI_BENCH_CACHE). Every file is checked against its "
        "pinned checksum before it enters the cache.",
    )
    data_sub = data.add_subparsers(dest="data_command", metavar="ACTION")
    listing = data_sub.add_parser("list", help="each dataset: present, verified, size, where")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--verify", action="store_true", help="re-hash every file now")
    listing.add_argument("--data-dir", help="look in this directory instead of the cache")
    get = data_sub.add_parser("download", help="download from the public mirrors, verified")
    get.add_argument(
        "names", nargs="+", metavar="NAME", help=f"{', '.join(datasets.REGISTRY)}, all"
    )
    get.add_argument("--quiet", "-q", action="store_true")
    put = data_sub.add_parser(
        "import", help="install files copied over (air-gapped machines), verified"
    )
    put.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (recursive)")
    put.add_argument("--quiet", "-q", action="store_true")
    data.set_defaults(func=cmd_data, data_command=None, json=False, verify=False, data_dir=None)
