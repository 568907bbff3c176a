"""Headless commands for presets, sweeps and comparisons: ``tui-bench presets list|show``,
``tui-bench run --preset NAME|FILE [--resume [SWEEP_ID]]`` and ``tui-bench compare``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from tui_bench.engine import presets, report
from tui_bench.engine import sweep as sweep_module
from tui_bench.engine.history import History
from tui_bench.engine.presets import PresetError


def _cli():
    # cli imports this module while building its parser; import it back lazily.
    from tui_bench import cli

    return cli


def _load_preset(name_or_path: str) -> presets.Preset:
    try:
        return presets.load(presets.find(name_or_path))
    except PresetError as exc:
        raise _cli().UsageError(str(exc)) from None


# -- rendering ----------------------------------------------------------------------------------
def render(console: Console, tables: list[report.Table]) -> None:
    for t in tables:
        columns, rows = t.view()
        rich_table = RichTable(title=t.title, title_justify="left", caption=t.note or None)
        for i, column in enumerate(columns):
            numeric = any(isinstance(row[i], (int, float)) for row in rows)
            rich_table.add_column(column, justify="right" if numeric else "left", overflow="fold")
        for row in rows:
            rich_table.add_row(*(report.cell_text(v) for v in row))
        console.print(rich_table)


# -- presets ------------------------------------------------------------------------------------
def cmd_presets(args: argparse.Namespace) -> int:
    cli = _cli()
    console = cli._console()
    if args.presets_command in (None, "list"):
        table = RichTable(title="presets", title_justify="left")
        for header in ("name", "configurations", "repeats", "study / problem"):
            table.add_column(header, overflow="fold")
        for name, path in presets.preset_files().items():
            try:
                preset = presets.load(path)
                configs = presets.expand(preset, probe=None)
                runnable = sum(c.skip_reason is None for c in configs)
                table.add_row(
                    name,
                    f"{len(configs)} ({runnable} in this catalog)",
                    str(preset.repeats),
                    preset.study or preset.description,
                )
            except PresetError as exc:
                table.add_row(name, "—", "—", f"[red]{exc}[/red]")
        console.print(table)
        return 0
    preset = _load_preset(args.name)
    try:
        configs = presets.expand(preset)
    except PresetError as exc:
        raise cli.UsageError(str(exc)) from None
    if args.json:
        print(
            json.dumps(
                {
                    "name": preset.name,
                    "path": str(preset.path),
                    "description": preset.description,
                    "study": preset.study,
                    "repeats": preset.repeats,
                    "configurations": [c.as_dict() for c in configs],
                },
                indent=2,
            )
        )
        return 0
    console.print(f"[bold]{preset.name}[/bold]  ({preset.shown_path})")
    if preset.study:
        console.print(f"study: {preset.study}")
    if preset.description:
        console.print(preset.description)
    runnable = [c for c in configs if c.skip_reason is None]
    console.print(
        f"{len(configs)} configuration(s) × {preset.repeats} repeat(s); {len(runnable)} can run "
        f"here: {len(runnable) * preset.repeats} run(s), interleaved across configurations"
    )
    table = RichTable(title="configurations", title_justify="left")
    for header in ("configuration", "run", "here"):
        table.add_column(header, overflow="fold")
    for c in configs:
        status = "runs" if c.skip_reason is None else f"skipped: {c.skip_reason}"
        if c.oversubscribed:
            status += f" (oversubscribed: {c.spec.threads} threads)"
        table.add_row(c.key, c.spec.label(), status)
    console.print(table)
    return 0


# -- sweeps -------------------------------------------------------------------------------------
def _skipped(sweep: sweep_module.Sweep, not_run: dict[str, str] | None = None) -> list:
    return sweep.skipped() + [(key, reason) for key, reason in (not_run or {}).items()]


def run_preset(args: argparse.Namespace) -> int:
    cli = _cli()
    history = History()
    history.mark_interrupted()
    err = cli._console(stderr=True)
    out = cli._console()
    show = not args.json and not args.quiet
    overrides = cli.spec_overrides(args)
    if args.from_history:
        raise cli.UsageError("--from-history replays one run; it cannot be combined with --preset")
    if args.resume:
        if overrides:
            raise cli.UsageError(
                "a resumed sweep keeps its plan; flags that change spec fields cannot be added"
            )
        if args.resume != "latest":
            sweep = sweep_module.find(args.resume)
        elif args.preset:
            preset = _load_preset(args.preset)
            found = sweep_module.latest_unfinished(preset.name, history)
            if found is None:
                raise cli.UsageError(f"no unfinished sweep of preset '{preset.name}' to resume")
            sweep = found
        else:
            raise cli.UsageError("--resume needs a SWEEP_ID or --preset NAME")
        from tui_bench.engine import supervisor

        for running in supervisor.in_progress():
            if (running.header or {}).get("request", {}).get("sweep_id") == sweep.id:
                raise cli.UsageError(
                    f"sweep {sweep.id} is still running ({running.id}): "
                    f"tui-bench attach {running.id} follows it, tui-bench stop {running.id} stops it"
                )
        sweep.refresh()
    else:
        preset = _load_preset(args.preset)
        try:
            sweep = sweep_module.create(preset, overrides)
        except PresetError as exc:
            raise cli.UsageError(str(exc)) from None
    todo = sweep_module.pending(sweep, history)
    if show:
        runnable = sum(c.skip_reason is None for c in sweep.configs)
        err.print(
            f"[bold]{sweep.preset}[/bold] sweep {sweep.id}: {runnable} of {len(sweep.configs)} "
            f"configuration(s) can run here, {len(todo)} run(s) to go"
            + (f"\nstudy: {sweep.study}" if sweep.study else "")
        )
        for key, reason in _skipped(sweep):
            err.print(f"  [yellow]{key}[/yellow]: {reason}")
    if show:
        cli.warn_if_busy(err)
    started = time.monotonic()
    from tui_bench.engine.batch import BatchRequest

    request = BatchRequest(
        sweep_id=sweep.id, refresh=bool(args.resume), options=cli.worker_options(args)
    )
    code = cli.start_batch(request, args, err)
    if args.detach:
        return code
    records = sweep_module.records(sweep, history)
    remaining = sweep_module.pending(sweep, history)
    failed = {
        r.get("config"): f"repeat {(r.get('repeat') or 0) + 1} failed ({r.get('reason')})"
        for r in records
        if r.get("status") == "failed"
    }
    tables = report.build(records, skipped=_skipped(sweep, failed))
    if args.json:
        print(json.dumps({"sweep": sweep.id, "runs": records}, indent=2, default=str))
    elif not args.quiet:
        render(out, tables)
    if show:
        err.print(
            f"sweep {sweep.id}: {len(records)} run(s) recorded, "
            f"{time.monotonic() - started:.0f} s this session"
        )
        if remaining:
            err.print(
                f"{len(remaining)} run(s) left: resume with "
                f"[bold]tui-bench run --resume {sweep.id}[/bold]"
            )
        err.print(f"compare later with: tui-bench compare {sweep.id} --markdown FILE")
    if code == 130:
        return 130
    if not todo:
        if not records:
            err.print("[red]nothing in this preset can run in this installation[/red]")
        return 0 if records else 1
    return 0 if records and not failed and not remaining else 1


# -- compare ------------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    cli = _cli()
    history = History()
    records, skipped = sweep_module.collect(args.ids, history)
    if args.metric not in report.METRICS:
        raise cli.UsageError(
            f"metric '{args.metric}' is not known (choose: {', '.join(report.METRICS)})"
        )
    tables = report.build(
        records, metric=args.metric, study_metric=args.study_metric, skipped=skipped
    )
    report.write_exports(
        tables,
        Path(args.csv) if args.csv else None,
        Path(args.markdown) if args.markdown else None,
    )
    if args.json:
        print(json.dumps([t.__dict__ for t in tables], indent=2, default=str))
    else:
        render(cli._console(), tables)
    err = cli._console(stderr=True)
    for path in (args.csv, args.markdown):
        if path:
            err.print(f"wrote {path}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list the shipped and user presets, or show one")
    p_sub = p.add_subparsers(dest="presets_command", metavar="ACTION")
    p_sub.add_parser("list", help="every preset with its study")
    show = p_sub.add_parser("show", help="a preset's configurations and what can run here")
    show.add_argument("name", help="preset name or TOML file")
    show.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_presets, json=False)

    c = sub.add_parser(
        "compare",
        help="statistics, ratios with significance, speed-ups over runs, groups or a sweep",
    )
    c.add_argument(
        "ids", nargs="*", help="run ids, group ids or sweep ids (prefixes ok; default: last sweep)"
    )
    c.add_argument(
        "--metric",
        default="step_median_s",
        help=f"per-run figure to compare (default step_median_s; {', '.join(report.METRICS)})",
    )
    c.add_argument(
        "--study-metric",
        default="train_wall_s",
        help="figure in the study-shaped table (default train_wall_s, the training time)",
    )
    c.add_argument("--csv", metavar="FILE", help="write every table to one CSV file")
    c.add_argument("--markdown", metavar="FILE", help="write every table as markdown")
    c.add_argument("--json", action="store_true", help="print the tables as JSON")
    c.set_defaults(func=cmd_compare)
