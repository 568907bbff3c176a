"""What the command modules share: consoles, the spec flags (generated from RunSpec's declared
fields), the run display and Ctrl-C handling, starting and following a batch, and the tables
that several commands print. Command modules import this one, never each other."""

from __future__ import annotations

import argparse
import json
import signal
from contextlib import ExitStack
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tui_bench.engine.errors import HistoryError, PresetError, UsageError
from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.machine import peaks
from tui_bench.engine.results import report, stability
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import follow, presets, supervisor
from tui_bench.engine.runs.follow import left_running_hint
from tui_bench.engine.runs.reducer import BatchView, RunEntry
from tui_bench.engine.spec import RunSpec, WorkerOptions, declared_fields, flag_parser

EXAMPLES = """\
examples:
  tui-bench run                                  the offline default: PyTorch, reference CNN,
                                                 synthetic MNIST-shaped data, all CPU threads
  tui-bench run --threads 1 --epochs 1 --steps-per-epoch 50
  tui-bench run --model lstm --dataset synthetic-imdb --batch-size 500 --lr 1e-2
  tui-bench run --preset my-run.toml --json      a TOML file of spec fields; machine output
  tui-bench run --repeats auto --max-repeats 10  repeat until the median is known to +-2 %
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


def one_line(message: object) -> str:
    """The message with control characters (a newline or a terminal escape typed into an
    argument) shown escaped: an error stays one line and cannot restyle the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(message))


def error_line(message: object) -> str:
    """What every error looks like on stderr."""
    return f"tui-bench: error: {one_line(message)}"


def console(stderr: bool = False) -> Console:
    # NO_COLOR is honoured by rich itself.
    return Console(stderr=stderr, highlight=False)


# -- spec flags ---------------------------------------------------------------------------------
def add_spec_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per RunSpec field (``batch_size`` → ``--batch-size``), typed, with the field's
    declared help, choices and default. Unset flags stay None: the spec's own default applies."""
    group = parser.add_argument_group("run spec (every field of a run; flags override presets)")
    for declared in declared_fields():
        parts = [declared.help.replace("%", "%%")]
        if declared.choices is not None:
            parts.append(", ".join(declared.choices))
        elif declared.pattern is not None and declared.expected:
            parts.append(declared.expected)
        if declared.name == "threads":
            parts[0] = parts[0].replace("all cores", f"all {declared.default}")
        elif declared.default is not None:
            parts.append(f"default {declared.default}")
        metavar = {int: "N", float: "NUM"}.get(declared.type, declared.name.upper())
        group.add_argument(
            "--" + declared.name.replace("_", "-"),
            dest=declared.name,
            # Numbers are parsed and range-checked by their declaration; names are left to
            # RunSpec/preset expansion, where an unknown one in a sweep is a skip, not an error.
            type=flag_parser(declared) if declared.type in (int, float) else declared.type,
            metavar=metavar,
            help="; ".join(parts),
        )


def spec_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Spec fields given as flags: they override a preset's or a replayed run's values."""
    return {
        d.name: getattr(args, d.name)
        for d in declared_fields()
        if getattr(args, d.name, None) is not None
    }


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    base: dict[str, Any] = {}
    if getattr(args, "from_history", None):
        # Replay: the recorded spec, as it ran; flags still override it.
        base = dict(History().get(args.from_history)["spec"])
    base.update(spec_overrides(args))
    return RunSpec.from_dict(base)


def load_preset(name_or_path: str) -> presets.Preset:
    try:
        return presets.load(presets.find(name_or_path))
    except PresetError as exc:
        raise UsageError(str(exc)) from None


def warn_if_busy(err: Console) -> None:
    from tui_bench.engine.runs.runner import machine_load

    load = machine_load()
    if load["busy"]:
        err.print(
            f"[yellow]warning:[/yellow] the machine is busy (load {load['loadavg_1m']:.1f} on "
            f"{load['logical_cores']} logical cores): timings will be slower and noisier; "
            "the load is recorded with the run"
        )


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    options = {"stall_timeout": args.stall_timeout, "sample_interval": args.sample_interval}
    options.update(WorkerOptions.from_dict(options).to_dict())  # checked: SpecError, one line
    if getattr(args, "cluster", None):
        options["cluster"] = args.cluster
    return options


# -- following a batch --------------------------------------------------------------------------
class RunDisplay:
    """Progress bar (epochs/steps, ETA, live loss) on stderr while one run goes on."""

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
        self.task: Any = None
        self.epoch: tuple[int, int] | None = None  # (epoch, its steps) the bar shows

    def __enter__(self) -> RunDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def started(self, event: dict[str, Any]) -> None:
        if self.enabled:
            self.console.print(
                f"  {event.get('framework')} {event.get('framework_version')} on "
                f"{event.get('device')} ({event.get('device_name')}), threads "
                f"{event.get('threads_effective')} effective, "
                f"{event.get('param_count') or 0:,} parameters; "
                f"import {event.get('import_s') or 0:.1f} s, data {event.get('data_s') or 0:.1f} s, "
                f"build {event.get('build_s') or 0:.1f} s"
            )

    def epoch_finished(self, event: dict[str, Any]) -> None:
        if not self.enabled:
            return
        acc = event.get("val_accuracy")
        median = event.get("step_median_s")
        self.console.print(
            f"  epoch {event.get('epoch')}: {event.get('wall_s') or 0:.2f} s"
            + (f" (warm-up {event['warmup_s']:.2f} s)" if event.get("warmup_s") else "")
            + (f", step {median * 1000:.1f} ms median" if median else "")
            + (f", {event['samples_per_s']:.0f} samples/s" if event.get("samples_per_s") else "")
            + (f", val acc {acc:.4f}" if acc is not None else "")
        )

    def steps(self, view: BatchView) -> None:
        """The bar at the view's epoch and step, with the last loss."""
        if view.epoch_steps and self.epoch != (view.epoch, view.epoch_steps):
            self.epoch = (view.epoch, view.epoch_steps)
            description = f"epoch {view.epoch}/{view.epochs}"
            if self.task is None:
                self.task = self.progress.add_task(description, total=view.epoch_steps, loss="—")
            else:
                self.progress.reset(
                    self.task, total=view.epoch_steps, description=description, loss="—"
                )
        if self.task is not None and view.losses:
            loss = view.losses[-1]
            self.progress.update(
                self.task, completed=view.step, loss="nan" if loss is None else f"{loss:.4f}"
            )


class BatchPrinter:
    """Prints a followed batch from its view: a line per run and per epoch, a progress bar for
    the current run, each result; what was printed is never printed again, so the view can be
    rendered after every look at the files (and a late attach replays the whole batch)."""

    def __init__(self, err: Console, show: bool) -> None:
        self.err, self.show = err, show
        self._scope = ExitStack()  # one display per run; it spans many renders
        self._display: RunDisplay | None = None
        self._runs = 0  # runs whose header is printed
        self._started = False  # the current run's framework line is printed
        self._epochs = 0  # the current run's epoch lines printed
        self._result = False  # the current run's result is printed
        self._ended = False

    def __enter__(self) -> BatchPrinter:
        self._scope.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._scope.__exit__(*exc)

    def _close_display(self) -> None:
        self._scope.close()
        self._display = None

    def render(self, view: BatchView) -> None:
        for index in range(max(self._runs - 1, 0), len(view.runs)):
            if index >= self._runs:
                self._new_run(view, index)
            self._run(view, view.runs[index], current=index == len(view.runs) - 1)
        if view.done and not self._ended:
            self._ended = True
            self._close_display()
            problem = view.lost or (view.ending or {}).get("error")
            if problem:
                self.err.print(f"[red]{problem}[/red]")

    def _new_run(self, view: BatchView, index: int) -> None:
        self._close_display()
        self._runs = index + 1
        self._started = self._result = False
        self._epochs = 0
        entry = view.runs[index]
        plan = view.plan or {}
        if entry.position and self.show:
            p = entry.position
            flag = " [yellow](oversubscribed)[/yellow]" if p.get("oversubscribed") else ""
            self.err.print(
                f"[bold][{p.get('index', 0) + 1}/{p.get('total')}][/bold] "
                f"{p.get('key')}{flag}, repeat {p.get('repeat', 0) + 1}/{p.get('repeats')}"
            )
        if self.show and not plan.get("sweep_id"):
            of = f" of at most {plan.get('total')}" if plan.get("auto_repeats") else ""
            of = of or f"/{plan.get('total', 1)}"
            self.err.print(f"[bold]run {index + 1}{of}[/bold]: {entry.label}")
        self._display = self._scope.enter_context(RunDisplay(self.err, self.show))

    def _run(self, view: BatchView, entry: RunEntry, current: bool) -> None:
        display = self._display
        if display is None or self._result:
            return
        if entry.started and not self._started:
            self._started = True
            display.started(entry.started)
        for record in entry.epoch_records[self._epochs :]:
            display.epoch_finished(record)
        self._epochs = len(entry.epoch_records)
        if current and entry.result is None:
            display.steps(view)
        if entry.result is not None:
            self._result = True
            self._close_display()
            if self.show:
                _print_result(self.err, entry.result, bool((view.plan or {}).get("sweep_id")))


class Interrupts:
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

    def __enter__(self) -> Interrupts:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)


def follow_batch(
    batch_id: str, err: Console, show: bool, cancels: bool
) -> tuple[dict[str, Any] | None, list[str]]:
    """Follow a batch in the terminal until it ends (or Ctrl-C, see ``Interrupts``): the same
    progress display as ever, replayed from the first step when attaching late. Returns the
    batch_done event (None if we stopped following first) and the batch's run ids."""
    follower = follow.BatchFollower(batch_id)
    view = follower.view
    with Interrupts(batch_id, err, cancels), BatchPrinter(err, show) as printer:

        def update(_view: BatchView) -> None:
            view.drain()
            printer.render(view)

        try:
            printer.render(follower.catch_up())
            if not follower.done:
                follower.follow(update)
        except KeyboardInterrupt:
            pass
    return (view.ending if view.done else None), follower.run_ids


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
    if status == RunStatus.FINISHED:
        if sweep:
            err.print(f"  {describe_finished(record.get('metrics') or {})}")
        return
    err.print(f"  [red]{status}[/red]: {record.get('reason')}")
    if status == RunStatus.FAILED and record.get("log_tail"):
        err.print("[dim]last lines of the worker log:[/dim]")
        err.print(record["log_tail"], markup=False)


def auto_stop_reason(done: dict[str, Any]) -> str:
    """Why ``--repeats auto`` stopped repeating: the target or the maximum (the batch's
    ``stopped``), else a failed repeat, a cancel or the batch's error."""
    for key in ("stopped", "not_run"):
        reasons = done.get(key)
        if isinstance(reasons, dict) and reasons:
            return "; ".join(str(r) for r in reasons.values())
    if done.get("cancelled"):
        return "cancelled before the median was known to the target"
    return str(done.get("error") or "stopped without a reason recorded")


def records_of(run_ids: list[str]) -> list[dict[str, Any]]:
    history = History()
    found = []
    for run_id in run_ids:
        try:
            found.append(history.get(run_id))
        except HistoryError:
            continue
    return found


def batch_exit_code(done: dict[str, Any] | None, records: list[dict[str, Any]]) -> int:
    """0 all finished, 130 cancelled, 1 anything else (failed, lost, nothing ran)."""
    statuses = [r.get("status") for r in records]
    if (done or {}).get("cancelled") or RunStatus.CANCELLED in statuses:
        return 130
    return 0 if statuses and all(s == RunStatus.FINISHED for s in statuses) else 1


def start_batch(request: Any, args: argparse.Namespace, err: Console) -> int:
    """Hand a batch to a supervisor, then follow it here (or return at once with --detach).

    The run belongs to the supervisor: a hangup or a killed terminal leaves it running; Ctrl-C
    here cancels it (asks the supervisor), a second Ctrl-C stops waiting."""
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
    auto = getattr(request, "auto_repeats", None) is not None
    why = auto_stop_reason(done) if auto else None
    if getattr(args, "json", False) and not getattr(args, "preset", None):
        if auto:  # the runs are one group; why they stopped belongs with them
            out = {"group": batch_id, "stopped": why, "runs": records}
            print(json.dumps(out, indent=2, default=str))
        else:
            print(json.dumps(records, indent=2, default=str))
    elif not args.quiet and not getattr(args, "preset", None) and records:
        console().print(summary_table(records))
        for line in filter(None, map(stability.verdict_line, records)):
            console().print(f"stability {line}", markup=False, highlight=False, soft_wrap=True)
        for record in records:
            limits = peaks.limits_line(record.get("metrics") or {})
            if limits:
                console().print(
                    f"limits {record['id']}: {limits}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        if auto:
            console().print(
                f"repeats: {len(records)} run(s) in group {batch_id}; {why}\n"
                f"compare them: tui-bench compare {batch_id}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    code = batch_exit_code(done, records)
    unreliable = any(stability.verdict_of(r) == stability.UNRELIABLE for r in records)
    if code == 0 and getattr(args, "require_stable", False) and unreliable:
        return stability.EXIT_UNRELIABLE
    return code


# -- tables -------------------------------------------------------------------------------------
def fmt(value: Any, scale: float = 1.0, digits: int = 2, suffix: str = "") -> str:
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
    ("GFLOP/step", "flops_per_step", 1e-9, 3, "model FLOPs of a training step (engine/flops.py)"),
    ("GFLOP/s", "achieved_tflops", 1000, 2, "steady-state median step"),
    ("MFU %", "mfu", 100, 1, "of the measured matmul peak"),
    ("MFU % nominal", "mfu_nominal", 100, 1, "of the vendor / ISA peak"),
    ("CPU J/step", "cpu_joules_per_step", 1, 3, "CPU package, RAPL, device-level"),
    ("GPU J/step", "gpu_joules_per_step", 1, 3, "GPU board, NVML, device-level"),
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
            r.get("status")
            if r.get("status") == RunStatus.FINISHED
            else f"[red]{r.get('status')}[/red]"
            for r in records
        ),
    )
    metrics = [r.get("metrics") or {} for r in records]
    for label, key, scale, digits, _meaning in SUMMARY_ROWS:
        if all(m.get(key) is None and not m.get(f"{key}_error") for m in metrics):
            continue
        table.add_row(
            label,
            *(
                # an MFU above 1 is a wrong count or peak: its line says so, never a number
                "[red]error[/red]"
                if m.get(key) is None and m.get(f"{key}_error") == peaks.MFU_ABOVE_ONE
                else fmt(m.get(key), scale, digits)
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


def render_report(out: Console, tables: list[report.Table]) -> None:
    """The report's tables (a sweep's results, a comparison) as rich tables."""
    for t in tables:
        columns, rows = t.view()
        rich_table = Table(title=t.title, title_justify="left", caption=t.note or None)
        for i, column in enumerate(columns):
            numeric = any(isinstance(row[i], (int, float)) for row in rows)
            rich_table.add_column(column, justify="right" if numeric else "left", overflow="fold")
        for row in rows:
            rich_table.add_row(*(report.cell_text(v) for v in row))
        out.print(rich_table)
