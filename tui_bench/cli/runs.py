"""Runs in progress, from any terminal: ``tui-bench ps``, ``attach [ID]``, ``stop ID``. Runs belong
to their supervisor (``engine.supervisor``); these commands only read its files, or ask it to
stop. Kept apart from ``run.py``, which starts work: these never start anything."""

from __future__ import annotations

import argparse
import datetime as dt
import json

from rich.table import Table

from tui_bench.cli import common, following
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import follow, supervisor
from tui_bench.engine.runs.follow import left_running_hint


def cmd_ps(args: argparse.Namespace) -> int:
    History().mark_interrupted()
    rows = []
    for state in supervisor.in_progress():
        p = follow.progress(state.id)
        rows.append(
            {
                "id": state.id,
                "label": state.label,
                "progress": p.describe(),
                "fraction": round(p.fraction, 4),
                "sweep_position": p.position,
                "run_id": p.run_id,
                "started": state.created_at,
                "supervisor_pid": (state.supervisor or {}).get("pid"),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    out = common.console()
    if not rows:
        out.print("no run in progress")
        return 0
    table = Table(title=f"{len(rows)} batch(es) in progress", title_justify="left")
    for header in ("batch", "progress", "started", "pid"):
        table.add_column(header, overflow="fold")
    for row in rows:
        what = f"{row['id']}\n[dim]{row['label']}[/dim]"
        where = row["progress"] + (f"\n{row['sweep_position']}" if row["sweep_position"] else "")
        table.add_row(what, where, _short_time(row["started"]), str(row["supervisor_pid"]))
    table.caption = "tui-bench attach ID follows one; tui-bench stop ID cancels one"
    out.print(table)
    return 0


def cmd_attach(args: argparse.Namespace) -> int:
    err = common.console(stderr=True)
    state = supervisor.find(args.id)
    err.print(f"[bold]{state.id}[/bold]: {state.label} (Ctrl-C detaches; the run goes on)")
    done, run_ids = following.follow_batch(state.id, err, show=True, cancels=False)
    if done is None:
        err.print(f"detached; {left_running_hint(state.id)}")
        return 0
    records = following.records_of(run_ids)
    if records:
        common.console().print(common.summary_table(records))
    return following.batch_exit_code(done, records)


def cmd_stop(args: argparse.Namespace) -> int:
    err = common.console(stderr=True)
    state = supervisor.find(args.id)
    supervisor.stop(state.id)
    err.print(f"stopping {state.id} (supervisor pid {(state.supervisor or {}).get('pid')})…")
    final = supervisor.wait_done(state.id, args.wait)
    if final.done is None:
        err.print(f"[yellow]still stopping after {args.wait:g} s; tui-bench ps shows it[/yellow]")
        return 1
    err.print(f"{state.id}: cancelled; recorded in history")
    return 0


def _short_time(iso: str) -> str:
    """'14:13:08' today, '2026-11-21 14:13' otherwise."""
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if when.date() == dt.datetime.now(when.tzinfo).date():
        return when.strftime("%H:%M:%S")
    return when.strftime("%Y-%m-%d %H:%M")


def register(subparsers: argparse._SubParsersAction) -> None:
    ps = subparsers.add_parser("ps", help="runs in progress (from any terminal)")
    ps.add_argument("--json", action="store_true")
    ps.set_defaults(func=cmd_ps)
    attach = subparsers.add_parser("attach", help="follow a run in progress (Ctrl-C detaches)")
    attach.add_argument("id", nargs="?", help="batch or run id, or a prefix (default: the newest)")
    attach.set_defaults(func=cmd_attach)
    stop = subparsers.add_parser("stop", help="cancel a run in progress (recorded as cancelled)")
    stop.add_argument("id", help="batch or run id, or a prefix")
    stop.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for the cancel (default 30)"
    )
    stop.set_defaults(func=cmd_stop)
