"""``tui-bench``: the TUI with no arguments, headless subcommands otherwise.

Every subcommand reports bad input as one line on stderr (``tui-bench: error: ...``) and a non-zero
exit: 2 for bad input, 1 for a run that failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tui_bench import __version__
from tui_bench.engine import catalog
from tui_bench.engine.errors import TuiBenchError, UsageError
from tui_bench.engine.history import History
from tui_bench.engine.spec import RunSpec

EXAMPLES = """\
examples:
  tui-bench run                                  the offline default: PyTorch, reference CNN,
                                                 synthetic MNIST-shaped data, all CPU threads
  tui-bench run --threads 1 --epochs 1 --steps-per-epoch 50
  tui-bench run --model lstm --dataset synthetic-imdb --batch-size 500 --lr 1e-2
  tui-bench run --preset my-run.toml --json      a TOML file of spec fields; machine output
  tui-bench presets list                         shipped study replications and quick variants
  tui-bench run --preset shatnawi-2018-quick     a sweep: configurations x repeats, interleaved
  tui-bench run --preset shatnawi-2018-quick --resume   finish an interrupted sweep
  tui-bench compare SWEEP_ID --markdown out.md   statistics, speed-ups, significance
  tui-bench history list
  tui-bench history export --csv runs.csv
  tui-bench sysinfo

Figures are honest: device-synchronised step times, warm-up and compile time reported apart
from steady-state, effective thread count, versions and hardware recorded with every run.
"""


def _console(stderr: bool = False) -> Console:
    # NO_COLOR is honoured by rich itself.
    return Console(stderr=stderr, highlight=False)


# -- run ----------------------------------------------------------------------------------------
_SPEC_FLAGS = {
    "framework": str,
    "api": str,
    "model": str,
    "dataset": str,
    "device": str,
    "threads": int,
    "batch_size": int,
    "epochs": int,
    "steps_per_epoch": int,
    "lr": float,
    "optimizer": str,
    "dropout": float,
    "seed": int,
    "warmup_steps": int,
    "repeats": int,
    "train_samples": int,
    "test_samples": int,
    "target_accuracy": float,
    "data_dir": str,
    "precision": str,
    "autotune": str,
    "input": str,
    "timing": str,
    "timing_window": int,
}


def spec_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Spec fields given as flags: they override a preset's or a replayed run's values."""
    return {name: getattr(args, name) for name in _SPEC_FLAGS if getattr(args, name) is not None}


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    base: dict[str, Any] = {}
    if getattr(args, "from_history", None):
        # Replay: the recorded spec, as it ran; flags still override it.
        base = dict(History().get(args.from_history)["spec"])
    base.update(spec_overrides(args))
    return RunSpec.from_dict(base)


class RunDisplay:
    """Progress bar (epochs/steps, ETA, live loss) on stderr while a run streams events."""

    def __init__(self, console: Console, enabled: bool) -> None:
        self.console = console
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} steps"),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not enabled,
        )
        self.task = None

    def __enter__(self) -> RunDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "run_started" and self.enabled:
            self.console.print(
                f"  {event['framework']} {event['framework_version']} on {event['device']} "
                f"({event['device_name']}), threads {event['threads_effective']} effective, "
                f"{event['param_count']:,} parameters; import {event['import_s']:.1f} s, "
                f"data {event['data_s']:.1f} s, build {event['build_s']:.1f} s"
            )
        elif kind == "epoch_started":
            description = f"epoch {event['epoch']}/{event['epochs']}"
            if self.task is None:
                self.task = self.progress.add_task(description, total=event["steps"], loss="—")
            else:
                self.progress.reset(
                    self.task, total=event["steps"], description=description, loss="—"
                )
        elif kind == "steps" and self.task is not None:
            loss = event["losses"][-1]
            self.progress.update(
                self.task,
                advance=len(event["losses"]),
                loss="nan" if loss is None else f"{loss:.4f}",
            )
        elif kind == "epoch_finished" and self.enabled:
            acc = event.get("val_accuracy")
            median = event.get("step_median_s")
            self.console.print(
                f"  epoch {event['epoch']}: {event['wall_s']:.2f} s"
                + (f" (warm-up {event['warmup_s']:.2f} s)" if event.get("warmup_s") else "")
                + (f", step {median * 1000:.1f} ms median" if median else "")
                + (
                    f", {event['samples_per_s']:.0f} samples/s"
                    if event.get("samples_per_s")
                    else ""
                )
                + (f", val acc {acc:.4f}" if acc is not None else "")
            )


def _fmt(value: Any, scale: float = 1.0, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "—"
    return f"{value * scale:.{digits}f}{suffix}"


SUMMARY_ROWS: list[tuple[str, str, float, int, str]] = [
    # (label, metric key, scale, digits, what it means)
    ("train s", "train_wall_s", 1, 2, "wall time of all training steps, warm-up included"),
    (
        "warm-up s",
        "warmup_s",
        1,
        2,
        "warm-up steps (tracing, compilation), kept out of steady state",
    ),
    ("first step s", "first_step_s", 1, 3, ""),
    ("step ms median", "step_median_s", 1000, 1, "steady state, device-synchronised"),
    ("step ms IQR", "step_iqr_s", 1000, 1, ""),
    ("samples/s", "samples_per_s", 1, 0, "steady state"),
    ("val accuracy", "val_accuracy", 1, 4, "last epoch"),
    ("test s", "test_s", 1, 2, "inference over the test set"),
    ("test accuracy", "test_accuracy", 1, 4, ""),
    ("threads", "threads_effective", 1, 0, "read back from the framework"),
    ("cores observed", "cores_observed", 1, 1, "steady-state CPU use of the worker (sampler)"),
    ("busy threads", "busy_threads_observed", 1, 1, "OS threads busy ≥ half the time (sampler)"),
    ("parameters", "param_count", 1, 0, "trainable"),
    ("peak RSS MiB", "res_peak_rss_mib", 1, 0, "worker process tree"),
    ("CPU %", "res_mean_cpu_pct", 1, 0, "mean; 100 % = one core"),
    ("GPU util %", "res_mean_gpu_util", 1, 0, "mean"),
    ("GPU mem MiB", "res_peak_gpu_mem_mib", 1, 0, "peak, device-wide (NVML)"),
    ("allocator MiB", "allocator_peak_mib", 1, 0, "peak of the framework's own allocator"),
    ("energy J", "res_energy_j", 1, 0, "GPU, whole process"),
    ("steady energy J", "res_steady_energy_j", 1, 0, "GPU, steady-state windows (NVML counter)"),
    ("samples/J", "samples_per_joule", 1, 1, "steady samples / steady energy"),
]


def summary_table(records: list[dict[str, Any]]) -> Table:
    """Metrics as rows, runs as columns: stays readable at 80 columns."""
    table = Table(title="tui-bench results", title_justify="left")
    table.add_column("metric")
    for r in records:
        spec = r.get("spec") or {}
        table.add_column(f"{r['id']}\n{spec.get('framework')}/{spec.get('api')}", justify="right")
    table.add_row(
        "status",
        *(
            r.get("status") if r.get("status") == "finished" else f"[red]{r.get('status')}[/red]"
            for r in records
        ),
    )
    metrics = [r.get("metrics") or {} for r in records]
    for label, key, scale, digits, _meaning in SUMMARY_ROWS:
        if all(m.get(key) is None for m in metrics):
            continue
        table.add_row(
            label,
            *(
                _fmt(m.get(key), scale, digits)
                if key != "param_count" or m.get(key) is None
                else f"{m[key]:,}"
                for m in metrics
            ),
        )
    notes = [
        f"{label}: {meaning}"
        for label, key, _s, _d, meaning in SUMMARY_ROWS
        if meaning and any(m.get(key) is not None for m in metrics)
    ]
    table.caption = "; ".join(notes)
    return table


def warn_if_busy(err: Console) -> None:
    from tui_bench.engine.runner import machine_load

    load = machine_load()
    if load["busy"]:
        err.print(
            f"[yellow]warning:[/yellow] the machine is busy (load {load['loadavg_1m']:.1f} on "
            f"{load['logical_cores']} logical cores): timings will be slower and noisier; "
            "the load is recorded with the run"
        )


def start_batch(request: Any, args: argparse.Namespace, err: Console) -> int:
    """Hand a batch to a supervisor, then follow it here (or return at once with --detach).

    The run belongs to the supervisor: a hangup or a killed terminal leaves it running; Ctrl-C
    here cancels it (asks the supervisor), a second Ctrl-C stops waiting."""
    from tui_bench.commands_runs import batch_exit_code, follow_batch, left_running_hint, records_of
    from tui_bench.engine import supervisor

    batch_id = supervisor.launch(request)
    if args.detach:
        if args.json:
            print(json.dumps({"batch": batch_id}))
        else:
            print(batch_id)
            err.print(f"running in the background; {left_running_hint(batch_id)}")
        return 0
    done, run_ids = follow_batch(batch_id, err, show=not args.json and not args.quiet, cancels=True)
    records = records_of(run_ids)
    if done is None:
        err.print(f"stopped waiting; {left_running_hint(batch_id)}")
        return 130
    if getattr(args, "json", False) and not getattr(args, "preset", None):
        print(json.dumps(records, indent=2, default=str))
    elif not args.quiet and not getattr(args, "preset", None) and records:
        _console().print(summary_table(records))
    return batch_exit_code(done, records)


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    options = {"stall_timeout": args.stall_timeout, "sample_interval": args.sample_interval}
    if getattr(args, "cluster", None):
        options["cluster"] = args.cluster
    return options


def cmd_run(args: argparse.Namespace) -> int:
    if args.cluster:
        from tui_bench.engine import fleet

        fleet.require_ray()  # one line, before a sweep is planned or a process started
    if args.preset or args.resume:
        from tui_bench.commands_presets import run_preset

        return run_preset(args)
    spec = spec_from_args(args)
    from tui_bench.engine.batch import BatchRequest
    from tui_bench.engine.datasets import problem as dataset_problem

    if missing := dataset_problem(spec):  # before any process starts: one line, exit 2
        raise UsageError(missing)
    History().mark_interrupted()
    err = _console(stderr=True)
    warn_if_busy(err)
    return start_batch(BatchRequest(spec=spec.to_dict(), options=worker_options(args)), args, err)


# -- history ------------------------------------------------------------------------------------
def cmd_history(args: argparse.Namespace) -> int:
    history = History()
    for warning in history.warnings:
        _console(stderr=True).print(f"[yellow]warning:[/yellow] {warning}")
    if args.history_command in (None, "list"):
        records = history.all()
        if args.json:
            print(json.dumps(records, indent=2, default=str))
            return 0
        table = Table(
            title=f"{len(records)} run(s) in {history.home}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("run", overflow="fold", min_width=30)
        table.add_column("status", no_wrap=True)
        for header in ("ms/step", "samp/s", "acc"):
            table.add_column(header, justify="right", no_wrap=True)
        for r in records[-args.limit :] if args.limit else records:
            m = r.get("metrics") or {}
            table.add_row(
                f"{r['id']}\n[dim]{r.get('label', '')}[/dim]",
                r.get("status", ""),
                _fmt(m.get("step_median_s"), 1000, 1),
                _fmt(m.get("samples_per_s"), digits=0),
                _fmt(m.get("test_accuracy"), digits=3),
            )
        table.caption = "ms/step: median steady-state step; samp/s: steady state; acc: test"
        _console().print(table)
        return 0
    if args.history_command == "show":
        record = history.get(args.run_id)
        print(json.dumps(record, indent=2, default=str))
        return 0
    if args.history_command == "export":
        count = history.export_csv(Path(args.csv))
        _console(stderr=True).print(f"wrote {count} run(s) to {args.csv}")
        return 0
    if args.history_command == "delete":
        record = history.get(args.run_id)
        history.delete([record["id"]])
        _console(stderr=True).print(f"deleted {record['id']}")
        return 0
    raise UsageError(f"unknown history command {args.history_command}")


# -- sysinfo ------------------------------------------------------------------------------------
def cmd_sysinfo(args: argparse.Namespace) -> int:
    from tui_bench.engine import runtimes
    from tui_bench.engine.sysinfo import fingerprint, logout_trap

    info = {**fingerprint(), "logout_trap": logout_trap()}
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
    console = _console()
    console.print(table)
    rt_table = Table(title="runtimes", title_justify="left")
    for header in ("framework", "api", "runtime / reason"):
        rt_table.add_column(header)
    for row in rows:
        where = row.get("unavailable") or f"{row['runtime']}: {row['python']} ({row['source']})"
        rt_table.add_row(row["framework"], row["api"], where)
    console.print(rt_table)
    return 0


# -- parser -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tui-bench",
        description="Compare deep-learning frameworks, APIs and settings on this machine. "
        "With no command, opens the terminal UI.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tui-bench {__version__}")
    parser.add_argument(
        "--home", help="history directory (default: the user data dir; env TUI_BENCH_HOME)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a benchmark headless",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = RunSpec()
    fw_names = ", ".join(catalog.FRAMEWORKS)
    apis = "; ".join(f"{f.name}: {', '.join(f.apis)}" for f in catalog.FRAMEWORKS.values())
    run.add_argument("--framework", help=f"{fw_names} (default {defaults.framework})")
    run.add_argument("--api", help=f"{apis} (default {defaults.api})")
    run.add_argument("--model", help=f"{', '.join(catalog.MODELS)} (default {defaults.model})")
    run.add_argument(
        "--dataset", help=f"{', '.join(catalog.DATASETS)} (default {defaults.dataset})"
    )
    run.add_argument("--device", help="cpu, gpu or gpu:N (default cpu)")
    run.add_argument(
        "--threads", type=int, help=f"CPU threads, 1-64 (default: all {defaults.threads})"
    )
    run.add_argument("--batch-size", type=int, help=f"default {defaults.batch_size}")
    run.add_argument("--epochs", type=int, help=f"default {defaults.epochs}")
    run.add_argument("--steps-per-epoch", type=int, help="cap on steps per epoch (quick runs)")
    run.add_argument("--lr", type=float, help=f"learning rate (default {defaults.lr})")
    run.add_argument("--optimizer", help=f"{', '.join(catalog.OPTIMIZERS)} (default adam)")
    run.add_argument("--dropout", type=float, help=f"default {defaults.dropout}")
    run.add_argument("--seed", type=int, help="initialisation and shuffling seed (default 0)")
    run.add_argument(
        "--warmup-steps",
        type=int,
        help=f"steps kept out of steady-state figures (default {defaults.warmup_steps})",
    )
    run.add_argument("--repeats", type=int, help="run the spec N times, each in its own worker")
    run.add_argument(
        "--train-samples",
        type=int,
        help="use the first N training samples (20 %% of them validate)",
    )
    run.add_argument("--test-samples", type=int, help="use the first N test samples")
    run.add_argument(
        "--target-accuracy", type=float, help="stop once validation accuracy reaches it"
    )
    run.add_argument("--data-dir", help="directory with dataset files")
    run.add_argument(
        "--precision",
        help=f"{', '.join(catalog.PRECISIONS)} (default fp32: strict, TF32 off everywhere)",
    )
    run.add_argument("--autotune", help="cuDNN/XLA algorithm autotuning: on or off (default on)")
    run.add_argument(
        "--input",
        help="host: gather + copy each batch inside the timed step (default); device: the "
        "split is resident on the device",
    )
    run.add_argument(
        "--timing",
        help="synced: sync around every step (default); pipelined: no per-step sync, one "
        "sync per --timing-window steps",
    )
    run.add_argument("--timing-window", type=int, help="steps per pipelined window (default 10)")
    run.add_argument(
        "--preset",
        metavar="NAME|FILE",
        help="a shipped or user preset (see `tui-bench presets list`) or a TOML file: one run or "
        "a sweep; flags override its fields",
    )
    run.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="SWEEP_ID",
        help="continue an interrupted sweep (the preset's latest unfinished one, or SWEEP_ID)",
    )
    run.add_argument(
        "--from-history", metavar="ID", help="replay a recorded run's spec; flags override it"
    )
    run.add_argument("--json", action="store_true", help="print the run records as JSON on stdout")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress, no table")
    run.add_argument(
        "--detach",
        "-d",
        action="store_true",
        help="start the run in the background and print its id (tui-bench attach ID follows it)",
    )
    run.add_argument(
        "--stall-timeout",
        type=float,
        default=300.0,
        help="kill a worker silent for this many seconds (default 300)",
    )
    run.add_argument(
        "--sample-interval",
        type=float,
        default=1.0,
        help="resource sampling interval in seconds (default 1)",
    )
    run.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run on a Ray cluster: its address (HOST:PORT, ray://HOST:PORT) or auto "
        "(docs/cluster.md)",
    )
    run.set_defaults(func=cmd_run)

    hist = sub.add_parser("history", help="browse, show, export and delete recorded runs")
    hist_sub = hist.add_subparsers(dest="history_command", metavar="ACTION")
    hist_list = hist_sub.add_parser("list", help="one line per run")
    hist_list.add_argument("--limit", type=int, default=0, help="only the newest N")
    hist_list.add_argument("--json", action="store_true")
    hist_show = hist_sub.add_parser("show", help="everything recorded about a run, as JSON")
    hist_show.add_argument("run_id", help="id or unique prefix")
    hist_export = hist_sub.add_parser("export", help="write all runs to CSV (one row per run)")
    hist_export.add_argument("--csv", required=True, help="output file")
    hist_delete = hist_sub.add_parser("delete", help="delete a run and its series")
    hist_delete.add_argument("run_id")
    hist.set_defaults(func=cmd_history, json=False, limit=0)

    info = sub.add_parser("sysinfo", help="this machine's hardware and the framework runtimes")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_sysinfo)

    from tui_bench.commands_data import add_data_commands  # real datasets: list/download/import

    add_data_commands(sub)
    # -- presets, sweeps and comparisons (tui_bench/commands_presets.py) --
    from tui_bench.commands_presets import add_commands

    add_commands(sub)
    from tui_bench import runtime_cli  # `tui-bench runtime list|setup`

    runtime_cli.add_parser(sub)
    from tui_bench.commands_runs import add_commands as add_run_commands  # ps, attach, stop

    add_run_commands(sub)
    from tui_bench.commands_cards import add_commands as add_card_commands  # frameworks, hardware

    add_card_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.home:
        os.environ["TUI_BENCH_HOME"] = str(Path(args.home).expanduser().resolve())
    if args.command is None:
        from tui_bench.tui.app import run_app  # lazy: headless commands never load Textual

        return run_app()
    try:
        return args.func(args)
    except TuiBenchError as exc:
        print(f"tui-bench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"tui-bench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
