"""``tui-bench runtime list|setup``: which interpreter runs each framework/API, and managed
environments with pinned known-good versions. Frameworks are only ever probed in a subprocess.

``setup`` shows one line per runtime (what it installs, time so far, then done or failed); pip's
own output goes to a log file, whose path the error names when a setup fails."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tui_bench.cli import common
from tui_bench.engine import catalog
from tui_bench.engine.errors import UsageError
from tui_bench.engine.machine import runtimes


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
    common.console().print(table)
    return 0


def cmd_runtime_setup(args: argparse.Namespace) -> int:
    out = common.console()
    if args.name != "all":
        if args.left_out:
            raise UsageError("--except goes with `runtime setup all`")
        _setup_one(args.name, args, out, "")
        return 0
    left_out = args.left_out or []
    names = [name for name in runtimes.needed_runtimes() if name not in left_out]
    needs = f"runtimes this installation needs: {', '.join(names) or 'none'}"
    if left_out:
        needs += f" (left out: {', '.join(left_out)})"
    out.print(needs, soft_wrap=True)
    todo = []
    for position, name in enumerate(names, 1):
        counter = f"[{position}/{len(names)}] "
        python = runtimes.managed_python(name)
        if not args.force and python.exists() and runtimes.probe(str(python), name).ok:
            out.print(
                escape(f"{counter}{name}: already set up: {python} (--force recreates it)"),
                soft_wrap=True,
            )
            continue
        todo.append((name, counter))
    _setup_several(todo, args, out)
    return 0


def _setup_several(todo: list[tuple[str, str]], args: argparse.Namespace, out: Console) -> None:
    """``--jobs`` setups at a time, each with its own line and log: pip unpacks and byte-compiles
    on one core, so a second install keeps a second core busy. After a failure no further setup
    starts, the ones already running finish, and the first failure is raised (one line)."""
    if not todo:
        return
    progress = _progress(out)
    stop = threading.Event()

    def one(name: str, counter: str) -> runtimes.RuntimeSetupError | None:
        if stop.is_set():
            return None
        try:
            _setup_one(name, args, out, counter, progress)
        except runtimes.RuntimeSetupError as exc:
            stop.set()
            return exc
        return None

    jobs = max(1, min(args.jobs, len(todo)))
    with progress, ThreadPoolExecutor(jobs, thread_name_prefix="runtime-setup") as pool:
        failures = [f for f in pool.map(lambda item: one(*item), todo) if f is not None]
    if failures:
        raise failures[0]


def _installs(name: str, gpu: bool) -> str:
    spec = runtimes.MANAGED.get(name)
    if spec is None:
        return "?"
    packages = spec.gpu_packages if gpu and spec.gpu_packages else spec.packages
    return ", ".join(packages)


def _progress(out: Console) -> Progress:
    """Live lines, one per runtime being set up (several when setups run side by side)."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.fields[last]}"),
        console=out,
        transient=True,
        # Piped or logged: only the final line per runtime, no redraws.
        disable=not out.is_terminal,
    )


def _setup_one(
    name: str,
    args: argparse.Namespace,
    out: Console,
    counter: str,
    progress: Progress | None = None,
) -> None:
    """Set up one runtime under a single live line (in ``progress`` when given, shared with the
    setups beside it); a failure is raised (one line, log path)."""
    what = f"{counter}{name}: installing {_installs(name, args.gpu)}"
    log_path = runtimes.setup_log_path(name)
    started = time.monotonic()
    live = progress or _progress(out)

    def on_line(line: str) -> None:
        live.update(task, last=escape(line[:60]))

    with contextlib.nullcontext() if progress else live:
        task = live.add_task(escape(what), last="")
        try:
            python = runtimes.setup(
                name, gpu=args.gpu, python=args.python, on_line=on_line, log_path=log_path
            )
        except runtimes.RuntimeSetupError:
            live.remove_task(task)
            out.print(
                f"{escape(what)}: [red]failed[/red] after {time.monotonic() - started:.0f} s",
                soft_wrap=True,
            )
            raise
        live.remove_task(task)
    probe = runtimes.probe(str(python), name)
    out.print(
        f"{escape(what)}: [green]done[/green] in {time.monotonic() - started:.0f} s: {python} "
        f"({escape(probe.versions())})",
        soft_wrap=True,
    )


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(
            f"--jobs must be a whole number of 1 or more, got {text!r}"
        )
    return jobs


def _managed_name(text: str) -> str:
    if text not in runtimes.MANAGED:
        raise argparse.ArgumentTypeError(
            f"--except takes a managed runtime ({', '.join(runtimes.MANAGED)}), got {text!r}"
        )
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    runtime = subparsers.add_parser("runtime", help="framework runtimes: list them, set one up")
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
        description=f"Managed runtimes: {names}. One line per runtime; pip's own output goes "
        f"to a log file under {runtimes.setup_log_path('NAME').parent}.",
    )
    setup.add_argument(
        "name",
        help=f"{', '.join(runtimes.MANAGED)}, or all: every runtime the catalog needs that this "
        "installation lacks (ones already working are kept)",
    )
    setup.add_argument("--force", action="store_true", help="with all: recreate working ones too")
    setup.add_argument(
        "--jobs",
        type=_jobs,
        default=min(2, os.cpu_count() or 1),
        help="with all: how many runtimes to set up at a time (default: 2, 1 on one core); "
        "each pip install keeps about one core busy",
    )
    setup.add_argument(
        "--except",
        dest="left_out",
        metavar="NAME",
        action="append",
        type=_managed_name,
        help="with all: leave this runtime out (repeatable), e.g. one whose framework pip "
        "is installing into the app beside it",
    )
    setup.add_argument("--gpu", action="store_true", help="install the CUDA variant")
    setup.add_argument(
        "--python", help="base interpreter for the environment (default: the app's own)"
    )
    setup.set_defaults(func=cmd_runtime_setup)
