"""Runs in progress, from any terminal: ``tui-bench ps``, ``attach [ID]``, ``stop ID``; and the
follower that a foreground ``tui-bench run`` uses. Runs belong to their supervisor
(``engine.supervisor``); these commands only read its files, or ask it to stop."""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from tui_bench.engine import follow, supervisor
from tui_bench.engine.history import History, HistoryError

POLL_S = 0.25


def _cli():
    from tui_bench import cli

    return cli


def left_running_hint(batch_id: str) -> str:
    from tui_bench.engine.sysinfo import logout_trap

    hint = f"follow it with: tui-bench attach {batch_id}; cancel it with: tui-bench stop {batch_id}"
    trap = logout_trap()
    return hint + (f"\nwarning: {trap}" if trap else "")


class _Interrupts:
    """Ctrl-C while following. ``cancels``: the first asks the supervisor to cancel the batch and
    keeps following until it has recorded that; a second stops following at once. Otherwise
    (attach) the first Ctrl-C detaches and the run goes on."""

    def __init__(self, batch_id: str, err: Console, cancels: bool) -> None:
        self.batch_id, self.err, self.cancels = batch_id, err, cancels
        self.count = 0

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if not self.cancels or self.count > 1:
            raise KeyboardInterrupt
        self.err.print(
            "[yellow]cancelling: stopping the run (Ctrl-C again to stop waiting)[/yellow]"
        )
        try:
            supervisor.stop(self.batch_id)
        except HistoryError as exc:
            self.err.print(f"[yellow]{exc}[/yellow]")

    def __enter__(self) -> _Interrupts:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)


def follow_batch(
    batch_id: str, err: Console, show: bool, cancels: bool
) -> tuple[dict[str, Any] | None, list[str]]:
    """Follow a batch in the terminal until it ends (or Ctrl-C, see ``_Interrupts``): the same
    progress display as ever, replayed from the first step when attaching late. Returns the
    batch_done event (None if we stopped following first) and the batch's run ids."""
    cli = _cli()
    follower = follow.BatchFollower(batch_id)
    display = None
    done: dict[str, Any] | None = None
    total, index, sweep = 1, 0, False

    def close_display() -> None:
        nonlocal display
        if display is not None:
            display.__exit__(None, None, None)
            display = None

    with _Interrupts(batch_id, err, cancels):
        try:
            while done is None:
                for event in follower.poll():
                    kind = event.get("type")
                    if kind == "plan":
                        total, sweep = event.get("total", 1), bool(event.get("sweep_id"))
                    elif kind == "sweep_run" and show:
                        flag = (
                            " [yellow](oversubscribed)[/yellow]"
                            if event.get("oversubscribed")
                            else ""
                        )
                        err.print(
                            f"[bold][{event['index'] + 1}/{event['total']}][/bold] "
                            f"{event['key']}{flag}, repeat {event['repeat'] + 1}/{event['repeats']}"
                        )
                    elif kind == "record":
                        close_display()
                        index += 1
                        if show and not sweep:
                            label = event["record"].get("label", "")
                            err.print(f"[bold]run {index}/{total}[/bold]: {label}")
                        display = cli.RunDisplay(err, show).__enter__()
                    elif kind == "result":
                        close_display()
                        if show:
                            _print_result(err, event["record"], sweep)
                    elif kind == "batch_done":
                        close_display()
                        done = event
                        if event.get("lost") or event.get("error"):
                            err.print(f"[red]{event.get('lost') or event.get('error')}[/red]")
                    elif display is not None:
                        display.on_event(event)
                if done is None:
                    time.sleep(POLL_S)
        except KeyboardInterrupt:
            close_display()
        finally:
            close_display()
    return done, follower.run_ids


def describe_finished(metrics: dict[str, Any]) -> str:
    """One line for a finished run of a sweep: step time, training time, target accuracy."""
    m = metrics
    parts = []
    if m.get("step_median_s") is not None:
        parts.append(f"step {m['step_median_s'] * 1000:.1f} ms median")
    if m.get("train_wall_s") is not None:
        parts.append(f"train {m['train_wall_s']:.2f} s")
    if m.get("target_accuracy") is not None:
        reached = m.get("target_reached_epoch")
        parts.append(
            f"target {m['target_accuracy']:g} reached at epoch {reached}, "
            f"{m['target_reached_s']:.2f} s"
            if reached is not None
            else f"target {m['target_accuracy']:g} not reached"
        )
    return "finished: " + ", ".join(parts)


def _print_result(err: Console, record: dict[str, Any], sweep: bool) -> None:
    status = record.get("status")
    if status == "finished":
        if sweep:
            err.print(f"  {describe_finished(record.get('metrics') or {})}")
        return
    err.print(f"  [red]{status}[/red]: {record.get('reason')}")
    if status == "failed" and record.get("log_tail"):
        err.print("[dim]last lines of the worker log:[/dim]")
        err.print(record["log_tail"], markup=False)


def records_of(run_ids: list[str]) -> list[dict[str, Any]]:
    history = History()
    found = []
    for run_id in run_ids:
        try:
            found.append(history.get(run_id))
        except HistoryError:
            continue
    return found


# -- commands -----------------------------------------------------------------------------------
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
    console = _cli()._console()
    if not rows:
        console.print("no run in progress")
        return 0
    table = Table(title=f"{len(rows)} batch(es) in progress", title_justify="left")
    for header in ("batch", "progress", "started", "pid"):
        table.add_column(header, overflow="fold")
    for row in rows:
        what = f"{row['id']}\n[dim]{row['label']}[/dim]"
        where = row["progress"] + (f"\n{row['sweep_position']}" if row["sweep_position"] else "")
        table.add_row(what, where, _short_time(row["started"]), str(row["supervisor_pid"]))
    table.caption = "tui-bench attach ID follows one; tui-bench stop ID cancels one"
    console.print(table)
    return 0


def cmd_attach(args: argparse.Namespace) -> int:
    cli = _cli()
    err = cli._console(stderr=True)
    state = supervisor.find(args.id)
    err.print(f"[bold]{state.id}[/bold]: {state.label} (Ctrl-C detaches; the run goes on)")
    done, run_ids = follow_batch(state.id, err, show=True, cancels=False)
    if done is None:
        err.print(f"detached; {left_running_hint(state.id)}")
        return 0
    records = records_of(run_ids)
    if records:
        cli._console().print(cli.summary_table(records))
    return batch_exit_code(done, records)


def cmd_stop(args: argparse.Namespace) -> int:
    err = _cli()._console(stderr=True)
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
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if when.date() == dt.datetime.now(when.tzinfo).date():
        return when.strftime("%H:%M:%S")
    return when.strftime("%Y-%m-%d %H:%M")


def batch_exit_code(done: dict[str, Any] | None, records: list[dict[str, Any]]) -> int:
    """0 all finished, 130 cancelled, 1 anything else (failed, lost, nothing ran)."""
    statuses = [r.get("status") for r in records]
    if (done or {}).get("cancelled") or "cancelled" in statuses:
        return 130
    return 0 if statuses and all(s == "finished" for s in statuses) else 1


def add_commands(sub: argparse._SubParsersAction) -> None:
    ps = sub.add_parser("ps", help="runs in progress (from any terminal)")
    ps.add_argument("--json", action="store_true")
    ps.set_defaults(func=cmd_ps)
    attach = sub.add_parser("attach", help="follow a run in progress (Ctrl-C detaches)")
    attach.add_argument("id", nargs="?", help="batch or run id, or a prefix (default: the newest)")
    attach.set_defaults(func=cmd_attach)
    stop = sub.add_parser("stop", help="cancel a run in progress (recorded as cancelled)")
    stop.add_argument("id", help="batch or run id, or a prefix")
    stop.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for the cancel (default 30)"
    )
    stop.set_defaults(func=cmd_stop)
