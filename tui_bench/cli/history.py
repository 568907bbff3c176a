"""``tui-bench history list|show|export|import|check|delete``: the recorded runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tui_bench.cli import common
from tui_bench.cli.common import UsageError
from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run


def _limit(text: str) -> int:
    """``--limit``, checked and refused like a spec field (the spec module, and with it the
    catalog, imported only when the flag is given)."""
    from tui_bench.engine.spec import bounded_option, flag_parser

    limit = bounded_option(
        "limit", int, "only the newest N runs (0: all)", default=0, low=0, high=10**9
    )
    return flag_parser(limit)(text)


_limit.__name__ = "limit"


def cmd_history(args: argparse.Namespace) -> int:
    if args.history_command == "check":
        return _check(args)
    history = History()
    if args.history_command in (None, "list"):
        records = history.summaries()
        _warn(history)
        shown = records[-args.limit :] if args.limit else records
        if args.json:  # full records: scripts read any field
            full = [dict(r.raw) for r in history.records([r.id for r in shown])]  # as stored
            print(json.dumps(full, indent=2, default=str))
            return 0
        if len(shown) > _PLAIN_ABOVE:
            _print_plain(records, shown, history.home)
            return 0
        # Each action imports what it alone uses: every `history` command pays for every
        # import at start (a tenth of a second of `history list`).
        from rich import box
        from rich.table import Table

        table = Table(
            title=f"{len(records)} run(s) in {history.home}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("run", overflow="fold", min_width=30)
        table.add_column("verdict", no_wrap=True)  # a finished run's; else its status
        for header in ("ms", "samp/s", "acc"):
            table.add_column(header, justify="right", no_wrap=True)
        for r in shown:
            table.add_row(
                f"{r.id}\n[dim]{r.text_field('label') or ''}[/dim]",
                r.state,
                _ms(r),
                common.fmt(r.figure("samples_per_s"), digits=0),
                common.fmt(r.metric("test_accuracy"), digits=3),
            )
        table.caption = (
            "verdict: stable/noisy/unreliable for a finished run (tui-bench history show ID "
            "says why), else its status; ms: median steady-state step, or an inference run's "
            "p50 request latency; samp/s: steady state, or samples served; acc: test"
        )
        common.console().print(table)
        return 0
    if args.history_command == "show":
        record = history.get(args.run_id)
        _warn(history)
        if args.json:
            print(json.dumps(dict(record.raw), indent=2, default=str))  # the record as stored
        else:
            sys.stdout.write("\n".join(show_lines(record)) + "\n")
        return 0
    if args.history_command == "export" and args.mlflow:
        from tui_bench.engine.results import mlflow_export

        uri = mlflow_export.default_uri(history.home) if args.mlflow == "default" else args.mlflow
        done = mlflow_export.export(history.all(), history, uri, by=args.experiment_per)
        _warn(history)
        common.console(stderr=True).print(
            f"exported {done.created} run(s) to {uri} ({done.skipped} already there, "
            f"{done.experiments} experiment(s))"
        )
        return 0
    if args.history_command == "export":
        if args.jsonl:
            from tui_bench.engine.results import transfer

            count = transfer.export_jsonl(history, Path(args.jsonl))
            target = args.jsonl
        else:
            from tui_bench.engine.results import csv_export

            count = csv_export.export_csv(history, Path(args.csv))
            target = args.csv
        _warn(history)
        common.console(stderr=True).print(f"wrote {count} run(s) to {target}")
        return 0
    if args.history_command == "import":
        from tui_bench.engine.results import transfer

        added, present = transfer.import_jsonl(history, Path(args.file))
        _warn(history)
        common.console(stderr=True).print(
            f"imported {added} run(s) from {args.file}; {present} were already in the history"
        )
        return 0
    if args.history_command == "recheck":  # the rules live in engine/results/stability.py
        from tui_bench.engine.results import stability
        from tui_bench.engine.results.recheck import recheck

        rechecked, skipped = recheck(history, args.run_ids)
        for item in [] if args.json else rechecked:
            was = item["before"] != item["stability"]["verdict"]
            line = f"{item['id']}: {stability.stored_line(item['stability'])}"
            print(f"{line} (was {item['before']})" if was else line)
        if args.json:
            print(json.dumps(rechecked, indent=2))
        common.console(stderr=True).print(
            f"rechecked {len(rechecked)} run(s)"
            + (f"; {skipped} recorded without step times" if skipped else "")
        )
        return 0
    if args.history_command == "delete":
        run_id = history.get(args.run_id).id
        history.delete([run_id])
        _warn(history)
        common.console(stderr=True).print(f"deleted {run_id}")
        return 0
    raise UsageError(f"unknown history command {args.history_command}")


# -- history show ------------------------------------------------------------------------------
_WIDTH = 22  # a row's name column


def _row(name: str, value: Any) -> str:
    """A row: its name, then its value folded to the terminal's width under itself."""
    import shutil
    import textwrap

    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    head = f"  {name:<{_WIDTH}} "
    return "\n".join(
        textwrap.wrap(
            str(value),
            width,
            initial_indent=head,
            subsequent_indent=" " * len(head),
            break_on_hyphens=False,
        )
        or [head.rstrip()]
    )


def show_lines(run: Run) -> list[str]:
    """One run as a person reads it: who and when, the configuration (the spec fields a run of
    its mode reads), its figures with their units and its verdicts, the framework settings
    read back, the host and the versions. Everything else is in ``--json``."""
    from tui_bench.engine.results import latency, metrics, stability
    from tui_bench.engine.spec import SIZED_MODEL, declared_fields

    spec = run.spec
    mode = str(spec.get("mode") or "train")
    lines = [f"run {run.id}", _row("label", run.text_field("label") or "")]
    verdict = f" ({run.state})" if run.finished and run.state != run.status else ""
    lines.append(_row("status", f"{run.status}{verdict}"))
    if run.reason:
        lines.append(_row("reason", run.reason))
    started, finished = run.raw.get("started_at"), run.raw.get("finished_at")
    if started:
        lines.append(_row("started", f"{started}" + (f", finished {finished}" if finished else "")))
    for name in ("group", "batch", "preset"):
        if value := run.text_field(name):
            lines.append(_row(name, value))

    lines += ["", "configuration"]
    gpt_fields = {"size", "layers", "d_model", "heads", "seq_len", "vocab_size"}
    for declared in declared_fields():
        value = spec.get(declared.name)
        if value is None or not declared.used_in(mode):
            continue
        if declared.name in gpt_fields and spec.get("model") != SIZED_MODEL:
            continue
        lines.append(_row(declared.name.replace("_", " "), value))

    lines += ["", "figures"]
    tokens = spec.get("model") == SIZED_MODEL  # a gpt's samples are sequences: tokens/s
    rate = metrics.get(metrics.throughput(mode, tokens))
    shown = [rate, *(m for m in metrics.placed(metrics.RUN) if m.key != rate.key)]
    for m in shown:
        value = run.metric(m.key)
        if value is None:
            continue
        if m.key == "param_count":
            text = f"{value:,.0f}"
        elif m.shown_unit and m.shown_unit in m.short:  # 'step ms median': the number alone
            text = m.quantity(value).removesuffix(m.shown_unit).strip()
        else:
            text = m.quantity(value)
        lines.append(_row(m.short, text + (f" ({m.note})" if m.note else "")))
    from tui_bench.engine.machine.limits import Limits

    limits = Limits.from_metrics(run.metrics)
    if limits is None:  # the limits line says why an MFU is missing; without it, here
        for name in ("mfu_error", "mfu_nominal_error"):
            if why := run.metric_text(name):
                lines.append(_row(name.replace("_", " "), why))
    said = stability.verdict_line(run)
    verdicts = [
        ("stability", said.removeprefix(f"{run.id}: ") if said else None),
        ("latency", latency.line(run)),
        ("machine use", limits.line() if limits is not None else None),
    ]
    for name, text in verdicts:
        if text:
            lines.append(_row(name, text))

    settings = run.settings
    if settings:
        lines += ["", "settings (read back from the framework)"]
        lines += [_row(str(k), v) for k, v in settings.items() if v is not None]

    env, worker = run.env, run.worker
    lines += ["", "host"]
    host_rows = (
        ("host", env.get("host")),
        ("cpu", env.get("cpu_model")),
        ("cores", _cores(env)),
        ("memory", f"{env['ram_gib']} GiB" if env.get("ram_gib") is not None else None),
        ("gpu", env.get("gpu_model")),
        ("os", env.get("os")),
        ("load at start", _load_text(run.load)),
    )
    lines += [_row(name, value) for name, value in host_rows if value]

    lines += ["", "versions"]
    version_rows = (
        ("framework", _joined(worker.get("framework"), worker.get("framework_version"))),
        ("worker python", worker.get("python")),
        ("numpy", worker.get("numpy_version")),
        ("gpu driver", env.get("gpu_driver")),
        ("cuda driver", env.get("cuda_driver")),
        ("tui-bench", env.get("tui_bench")),
        ("app python", env.get("python")),
    )
    lines += [_row(name, value) for name, value in version_rows if value]
    lines += ["", f"everything recorded: tui-bench history show {run.id} --json"]
    return lines


def _joined(*parts: Any) -> str | None:
    words = [str(p) for p in parts if p]
    return " ".join(words) or None


def _cores(env: Any) -> str | None:
    logical, physical = env.get("logical_cores"), env.get("physical_cores")
    if logical is None:
        return None
    return f"{logical} logical" + (f", {physical} physical" if physical else "")


def _load_text(load: Any) -> str | None:
    one = load.get("loadavg_1m")
    if not isinstance(one, int | float):
        return None
    return f"{one:g} (1-min load average)" + (", busy" if load.get("busy") else "")


# rich measures every cell to size a table: 10,000 rows took 18 s. Long lists print plain columns.
_PLAIN_ABOVE = 200


def _print_plain(records: list[Run], shown: list[Run], home: Path) -> None:
    lines = [
        f"{len(records)} run(s) in {home}",
        "run                       verdict           ms   samp/s    acc  label",
    ]
    for r in shown:
        lines.append(
            f"{r.id:<25} {r.state:<11} "
            f"{_ms(r):>8} "
            f"{common.fmt(r.figure('samples_per_s'), digits=0):>8} "
            f"{common.fmt(r.metric('test_accuracy'), digits=3):>6}  {r.text_field('label') or ''}"
        )
    sys.stdout.write("\n".join(lines) + "\n")


def _ms(run: Run) -> str:
    """The step in ms to 1 decimal; an inference run's p50 request to 3 (its registry digits:
    a batch-1 request takes a fraction of a millisecond)."""
    from tui_bench.engine.results import metrics

    shown = metrics.get(metrics.in_mode("step_median_s", run.mode))
    return common.fmt(run.metric(shown.key), shown.scale, shown.digits)


def _warn(history: History) -> None:
    for warning in history.warnings:
        common.console(stderr=True).print(f"[yellow]warning:[/yellow] {warning}")


def _check(args: argparse.Namespace) -> int:
    from tui_bench.engine.results import check

    report = check.check(repair=args.repair)
    out = common.console()
    for problem in report.problems:
        out.print(f"problem: {problem}", highlight=False)
    for note in report.notes:
        out.print(f"note: {note}", highlight=False)
    for done in report.repaired:
        out.print(f"repaired: {done}", highlight=False)
    if not report.problems:
        out.print("history is sound")
        return 0
    if report.repaired:
        after = check.check(repair=False)
        for problem in after.problems:
            out.print(f"still: {problem}", highlight=False)
        return 1 if after.problems else 0
    out.print("run `tui-bench history check --repair` to repair (damaged files are kept aside)")
    return 1


def register(subparsers: argparse._SubParsersAction) -> None:
    hist = subparsers.add_parser(
        "history", help="browse, show, export, import, check and delete recorded runs"
    )
    hist_sub = hist.add_subparsers(dest="history_command", metavar="ACTION")
    hist_list = hist_sub.add_parser("list", help="one line per run")
    hist_list.add_argument("--limit", type=_limit, default=0, help="only the newest N")
    hist_list.add_argument("--json", action="store_true")
    hist_show = hist_sub.add_parser(
        "show",
        help="one run, readable: configuration, figures and verdict, settings, host, versions",
    )
    hist_show.add_argument("run_id", help="id or unique prefix")
    hist_show.add_argument(
        "--json", action="store_true", help="the record as stored (everything, for machines)"
    )
    hist_export = hist_sub.add_parser(
        "export", help="write all runs to CSV (one row per run) or JSON lines (runs + series)"
    )
    target = hist_export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", metavar="FILE", help="one row per run, for spreadsheets")
    target.add_argument(
        "--jsonl",
        metavar="FILE",
        help="every run with its series, schema-versioned: `history import` reads it",
    )
    target.add_argument(
        "--mlflow",
        nargs="?",
        const="default",
        metavar="URI",
        help="one MLflow run per run (needs the mlflow extra; default URI: "
        "sqlite:///<home>/mlflow.db); exporting again adds only new runs",
    )
    hist_export.add_argument(
        "--experiment-per",
        choices=("configuration", "preset"),
        default="configuration",
        help="MLflow experiments: one per configuration, or per preset for a preset's runs",
    )
    hist_import = hist_sub.add_parser(
        "import", help="merge runs from a `history export --jsonl` file (by run id)"
    )
    hist_import.add_argument("file")
    hist_check = hist_sub.add_parser(
        "check",
        help="check history, series and batch files; exit 1 if anything is wrong",
        description="Lists every problem found in the history, the series files and the batch "
        "files. Exit status: 0 sound, 1 problems found (or left after --repair), 2 bad input.",
    )
    hist_check.add_argument(
        "--repair", action="store_true", help="repair what can be (damaged originals are kept)"
    )
    hist_delete = hist_sub.add_parser("delete", help="delete a run and its series")
    hist_delete.add_argument("run_id")
    hist_recheck = hist_sub.add_parser(
        "recheck", help="judge runs' stability again from their stored step times"
    )
    hist_recheck.add_argument("run_ids", nargs="*", metavar="ID", help="default: every run")
    hist_recheck.add_argument("--json", action="store_true")
    hist.set_defaults(func=cmd_history, json=False, limit=0, repair=False)
