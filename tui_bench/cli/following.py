"""Starting a batch from the terminal and following it there: the progress display, Ctrl-C
(cancel, then stop waiting; or detach when attached), how the batch ended and its exit code."""

from __future__ import annotations

import argparse
import json
import signal
from contextlib import ExitStack
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tui_bench.cli.common import console, summary_table
from tui_bench.engine.errors import HistoryError
from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results import latency, metrics, stability
from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs import follow, supervisor
from tui_bench.engine.runs.follow import left_running_hint
from tui_bench.engine.runs.reducer import BatchView, RunEntry


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

    def epoch_finished(self, event: dict[str, Any], rate: tuple[str, int] = ("", 1)) -> None:
        """An epoch's line; ``rate``: the key the run states its rate under and the samples it
        counts per unit of it (a gpt's tokens/s: S tokens a sample)."""
        if not self.enabled:
            return
        acc = event.get("val_accuracy")
        median = event.get("step_median_s")
        samples = event.get("samples_per_s")
        key, per_sample = rate if rate[0] else ("samples_per_s", 1)
        self.console.print(
            f"  epoch {event.get('epoch')}: {event.get('wall_s') or 0:.2f} s"
            + (
                f" (warm-up {_said('warmup_s', event['warmup_s'])})"
                if event.get("warmup_s")
                else ""
            )
            + (f", step {_said('step_median_s', median)} median" if median else "")
            + (f", {_said(key, samples * per_sample)}" if samples else "")
            + (f", val acc {_said('val_accuracy', acc)}" if acc is not None else "")
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
        elif self.task is not None and view.latencies:  # an inference run: requests, no loss
            self.progress.update(self.task, completed=view.step)


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
        dims = view.spec.model_dims()  # a gpt states tokens/s: S tokens a sample
        rate = (view.throughput_key, dims.seq_len if dims is not None else 1)
        for record in entry.epoch_records[self._epochs :]:
            display.epoch_finished(record, rate)
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


def _said(key: str, value: float | None) -> str:
    """A figure with its unit, as the metric registry shows it ("12.3 ms", "1,234 tokens/s")."""
    return metrics.get(key).quantity(value)


def describe_finished(run: Run) -> str:
    """One line for a finished run of a sweep: step time, training time, target accuracy."""
    parts = []
    if (p50 := run.metric("latency_p50_s")) is not None:
        parts.append(f"latency p50 {_said('latency_p50_s', p50)}")
    if (served := run.metric("inference_samples_per_s")) is not None:
        parts.append(f"{_said('inference_samples_per_s', served)} served")
    if (tpot := run.metric("tpot_p50_s")) is not None:  # a generation run
        ttft = run.metric("ttft_p50_s") or 0.0
        parts.append(f"TTFT p50 {_said('ttft_p50_s', ttft)}, TPOT p50 {_said('tpot_p50_s', tpot)}")
    if (decoded := run.metric("decode_tokens_per_s")) is not None:
        parts.append(_said("decode_tokens_per_s", decoded))
    if (step := run.metric("step_median_s")) is not None:
        parts.append(f"step {_said('step_median_s', step)} median")
    if (tokens := run.metric("tokens_per_s")) is not None:  # a gpt: its rate in tokens
        parts.append(_said("tokens_per_s", tokens))
    if (train := run.metric("train_wall_s")) is not None:
        parts.append(f"train {_said('train_wall_s', train)}")
    if (target := run.metric("target_accuracy")) is not None:
        reached = run.metric("target_reached_epoch")
        when = run.metric("target_reached_s")
        parts.append(
            f"target {target:g} reached at epoch {reached:g}, {when or 0:.2f} s"
            if reached is not None
            else f"target {target:g} not reached"
        )
    return "finished: " + ", ".join(parts)


def _print_result(err: Console, run: Run, sweep: bool) -> None:
    if run.finished:
        if sweep:
            err.print(f"  {describe_finished(run)}")
        return
    err.print(f"  [red]{run.status}[/red]: {run.reason}")
    if run.failed and run.log_tail:
        err.print("[dim]last lines of the worker log:[/dim]")
        err.print(run.log_tail, markup=False)


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


def records_of(run_ids: list[str]) -> list[Run]:
    history = History()
    found = []
    for run_id in run_ids:
        try:
            found.append(history.get(run_id))
        except HistoryError:
            continue
    return found


def batch_exit_code(done: dict[str, Any] | None, records: list[Run]) -> int:
    """0 all finished, 130 cancelled, 1 anything else (failed, lost, nothing ran)."""
    statuses = [r.status for r in records]
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
            out = {"group": batch_id, "stopped": why, "runs": [dict(r.raw) for r in records]}
            print(json.dumps(out, indent=2, default=str))
        else:  # the records as stored: a file format
            print(json.dumps([dict(r.raw) for r in records], indent=2, default=str))
    elif not args.quiet and not getattr(args, "preset", None) and records:
        console().print(summary_table(records))
        for line in filter(None, map(stability.verdict_line, records)):
            console().print(f"stability {line}", markup=False, highlight=False, soft_wrap=True)
        for run in records:  # an inference run's latency, with the requests behind it
            if (served := latency.line(run)) is not None:
                console().print(
                    f"latency {run.id}: {served}", markup=False, highlight=False, soft_wrap=True
                )
        for run in records:  # how good the numbers are: FLOP/s, MFU, energy, memory
            if run.limits is not None:
                console().print(
                    f"limits {run.id}: {run.limits.line()}",
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
    unreliable = any(r.verdict == stability.UNRELIABLE for r in records)
    if code == 0 and getattr(args, "require_stable", False) and unreliable:
        return stability.EXIT_UNRELIABLE
    return code
