"""``tui-bench run``: one spec (its repeats: a number, or ``--repeats auto``), a replayed run, or a
preset's sweep (``--preset``, ``--resume``), handed to a supervisor and followed here. Watching
and stopping runs already going is in ``runs.py``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tui_bench.cli import common, following, spec_flags
from tui_bench.cli.common import UsageError
from tui_bench.cli.help import EXAMPLES
from tui_bench.engine.results import auto_repeats, render, tables
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import sweep as sweep_module
from tui_bench.engine.runs.presets import PresetError, gpu_problem
from tui_bench.engine.spec import declared_option, flag_parser, range_text


def cmd_run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return dry_run(args)
    if args.cluster:
        from tui_bench.engine.runs import fleet

        fleet.require_ray(args.cluster)  # one line, before a sweep is planned or a process started
    if args.preset or args.resume or spec_flags.listed(args):
        return run_preset(args)  # a list (--batch-size 1,8,64) is a sweep, one run per value
    if args.only:
        raise UsageError(
            "--only picks configurations of a sweep: give --preset (or a flag with a list)"
        )
    auto = _auto_repeats(args, spec_flags.spec_overrides(args))
    if auto is not None:
        args.repeats = 1  # each run is one repeat; the batch decides how many (a replay too)
    spec = spec_flags.spec_from_args(args)
    from tui_bench.engine.datasets import problem as dataset_problem
    from tui_bench.engine.runs.batch import BatchRequest

    if missing := dataset_problem(spec):  # before any process starts: one line, exit 2
        raise UsageError(missing)
    if not args.cluster and (no_gpu := gpu_problem(spec)):  # a cluster's GPUs are its nodes'
        raise UsageError(f"{no_gpu}: --device cpu runs here")
    from tui_bench.engine.model_memory import memory_problem

    if too_big := memory_problem(spec):  # a model that cannot fit: refused before it starts
        raise UsageError(too_big)
    History().mark_interrupted()
    err = common.console(stderr=True)
    spec_flags.warn_if_busy(err)
    if not args.cluster:  # a cluster run's peak is its node's, not this machine's
        _measure_peak(spec.device, spec.threads, spec.precision, err, args.json or args.quiet)
    request = BatchRequest(
        spec=spec.to_dict(), options=spec_flags.worker_options(args), auto_repeats=auto
    )
    return following.start_batch(request, args, err)


def dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: say what the spec's model is and whether it fits this machine, from its
    shape and, where it fits, a build in a worker (``engine/runs/dry_run``); train nothing,
    record nothing."""
    for flag, given in (
        ("--preset", args.preset),
        ("--only", args.only),
        ("--resume", args.resume),
        ("--cluster", args.cluster),
        ("--detach", args.detach),
        ("--require-stable", args.require_stable),
    ):
        if given:
            raise UsageError(f"--dry-run builds one spec here; it cannot be combined with {flag}")
    overrides = spec_flags.spec_overrides(args)
    if overrides.get("repeats") == AUTO:
        raise UsageError(
            "--dry-run builds one spec here; it cannot be combined with --repeats auto"
        )
    for name, values in spec_flags.listed(args).items():
        raise UsageError(
            f"--dry-run builds one spec here; --{name.replace('_', '-')} lists {len(values)} "
            "values (give one)"
        )
    spec = spec_flags.spec_from_args(args)
    from tui_bench.engine.datasets import problem as dataset_problem
    from tui_bench.engine.runs import dry_run as dry_run_module

    if missing := dataset_problem(spec):
        raise UsageError(missing)
    if no_gpu := gpu_problem(spec):
        raise UsageError(f"{no_gpu}: --device cpu runs here")
    if not args.json and not args.quiet:
        common.console(stderr=True).print(
            f"dry run of {spec.label()} (nothing is trained or recorded)", markup=False
        )
    try:
        done = dry_run_module.dry_run(spec)
    except dry_run_module.BuildFailed as exc:
        if exc.log_tail.strip() and not args.quiet:
            print(exc.log_tail.rstrip(), file=sys.stderr)
        raise
    if args.json:
        print(json.dumps(done.as_dict(), indent=2))
        return 0
    print("\n".join(done.lines()))
    return 0


def _measure_peak(device: str, threads: int, precision: str, err: Any, quiet: bool) -> None:
    """This machine's measured peak for the run's setting, once (a few seconds, before the run
    so it competes with nothing): what the run's MFU is held against. A probe that cannot run
    is one line; the run goes on with the nominal peak only."""
    from tui_bench.engine.machine import peaks

    say = (lambda line: None) if quiet else (lambda line: err.print(line, markup=False))
    try:
        _peak, why = peaks.measured(device, threads, precision, progress=say)
    except KeyboardInterrupt:  # the probe's process is killed with it; nothing has started
        err.print("cancelled while measuring the peak: no run started", markup=False)
        raise SystemExit(130) from None
    if why:
        say(f"no measured peak ({why}): MFU is given against the nominal peak only")


# -- sweeps -------------------------------------------------------------------------------------
def _skipped(sweep: sweep_module.Sweep, not_run: dict[str, str] | None = None) -> list:
    return sweep.skipped() + [(key, reason) for key, reason in (not_run or {}).items()]


def _sweep_to_run(args: argparse.Namespace, history: History) -> sweep_module.Sweep:
    """The sweep ``run --preset/--resume`` means: a new one from the preset, or one to finish."""
    overrides = spec_flags.spec_overrides(args)
    auto = _auto_repeats(args, overrides)
    listed = {k: v for k, v in overrides.items() if isinstance(v, list)}
    if args.from_history and (args.preset or args.resume):
        raise UsageError("--from-history replays one run; it cannot be combined with --preset")
    if not args.resume:
        try:
            if args.preset:
                preset = sweep_module.with_listed(common.load_preset(args.preset), listed)
            else:  # lists on the command line: the spec (a replayed one's too), swept
                base = dict(History().get(args.from_history).spec) if args.from_history else {}
                preset = sweep_module.listed_preset({**base, **overrides}, listed)
                overrides = {"repeats": overrides["repeats"]} if "repeats" in overrides else {}
            fixed = {k: v for k, v in overrides.items() if k not in listed}
            return sweep_module.create(preset, fixed, auto_repeats=auto, only=args.only)
        except PresetError as exc:
            raise UsageError(str(exc)) from None
    if overrides or args.only:
        raise UsageError(
            "a resumed sweep keeps its plan; flags that change spec fields or --only cannot "
            "be added"
        )
    if args.resume != "latest":
        sweep = sweep_module.find(args.resume)
    elif args.preset:
        preset = common.load_preset(args.preset)
        found = sweep_module.latest_unfinished(preset.name, history)
        if found is None:
            raise UsageError(f"no unfinished sweep of preset '{preset.name}' to resume")
        sweep = found
    else:
        raise UsageError("--resume needs a SWEEP_ID or --preset NAME")
    from tui_bench.engine.runs import supervisor

    for running in supervisor.in_progress():
        if (running.header or {}).get("request", {}).get("sweep_id") == sweep.id:
            raise UsageError(
                f"sweep {sweep.id} is still running ({running.id}): "
                f"tui-bench attach {running.id} follows it, tui-bench stop {running.id} stops it"
            )
    sweep.refresh()
    return sweep


def run_preset(args: argparse.Namespace) -> int:
    history = History()
    history.mark_interrupted()
    err = common.console(stderr=True)
    show = not args.json and not args.quiet
    sweep = _sweep_to_run(args, history)
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
        spec_flags.warn_if_busy(err)
    if not args.cluster and todo:
        settings = {
            (c.spec.device, c.spec.threads, c.spec.precision)
            for c in sweep.configs
            if c.skip_reason is None
        }
        for device, threads, precision in sorted(settings):
            _measure_peak(device, threads, precision, err, not show)
    started = time.monotonic()
    from tui_bench.engine.runs.batch import BatchRequest

    request = BatchRequest(
        sweep_id=sweep.id, refresh=bool(args.resume), options=spec_flags.worker_options(args)
    )
    code = following.start_batch(request, args, err)
    if args.detach:
        return code
    records = sweep_module.records(sweep, history)
    remaining = sweep_module.pending(sweep, history)
    failed = {
        str(r.config): f"repeat {(r.repeat or 0) + 1} failed ({r.reason})"
        for r in records
        if r.failed
    }
    comparison = tables.compute(records, skipped=_skipped(sweep, failed), published=sweep.figures())
    if args.json:
        runs = [dict(r.raw) for r in records]  # as stored: a file format
        print(json.dumps({"sweep": sweep.id, "runs": runs}, indent=2, default=str))
    elif not args.quiet:
        render.terminal(common.console(), comparison.tables())
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


# -- parser -------------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run",
        help="run a benchmark headless",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    spec_flags.add_spec_flags(run)
    run.add_argument(
        "--preset",
        metavar="NAME|FILE",
        help="a shipped or user preset (see `tui-bench presets list`) or a TOML file: one run or "
        "a sweep; flags override its fields",
    )
    run.add_argument(
        "--only",
        type=_only_list,
        default=(),
        metavar="FRAMEWORK[/API],...",
        help="run only the configurations of a sweep with these frameworks, or framework/API "
        "pairs (`tui-bench runtime list` names them); the rest are left out of the sweep",
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
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="build the model in a worker and stop: parameters, FLOPs per training step, the "
        "worker's peak memory, in seconds; nothing is trained or recorded",
    )
    run.add_argument("--json", action="store_true", help="print the run records as JSON on stdout")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress, no table")
    run.add_argument(
        "--require-stable",
        action="store_true",
        help="exit 3 when a run finished but its stability verdict is unreliable (for CI)",
    )
    run.add_argument(
        "--detach",
        "-d",
        action="store_true",
        help="start the run in the background and print its id (tui-bench attach ID follows it)",
    )
    for name in ("stall_timeout", "sample_interval"):  # declared, with ranges, in WorkerOptions
        declared = declared_option(name)
        run.add_argument(
            "--" + name.replace("_", "-"),
            type=flag_parser(declared),
            default=declared.default,
            metavar="SECONDS",
            help=f"{declared.help} (default {declared.default:g}; {range_text(declared)})",
        )
    run.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run on a Ray cluster: its address (HOST:PORT, ray://HOST:PORT) or auto "
        "(docs/cluster.md)",
    )
    _add_auto_repeats(run)
    run.set_defaults(func=cmd_run)


def _only_list(text: str) -> tuple[str, ...]:
    """``--only``'s value: FRAMEWORK or FRAMEWORK/API names, comma-separated, each a known
    framework's (and API's)."""
    from tui_bench.engine import catalog

    wanted = tuple(part.strip() for part in text.split(",") if part.strip())
    if not wanted:
        raise argparse.ArgumentTypeError("give FRAMEWORK or FRAMEWORK/API, comma-separated")
    for name in wanted:
        framework, _, api = name.partition("/")
        if framework not in catalog.FRAMEWORKS:
            raise argparse.ArgumentTypeError(
                f"no framework {framework!r} (known: {', '.join(catalog.FRAMEWORKS)})"
            )
        apis = catalog.FRAMEWORKS[framework].apis
        if api and api not in apis:
            raise argparse.ArgumentTypeError(
                f"{framework} has no API {api!r} (it has {', '.join(apis)})"
            )
    return wanted


# -- --repeats auto -----------------------------------------------------------------------------
AUTO = "auto"


def _add_auto_repeats(parser: argparse.ArgumentParser) -> None:
    """``--repeats auto`` beside the spec's numeric ``--repeats``, with its two settings."""
    for action in parser._actions:
        if "--repeats" in action.option_strings:
            number = action.type

            def repeats_or_auto(text: str, number=number) -> int | str:
                return AUTO if text == AUTO else number(text)

            action.type = repeats_or_auto
            action.help = (action.help or "") + (
                "; auto: until the median is known to --target-ci (with --json: an object of "
                "the group, why it stopped and the runs)"
            )
    parser.add_argument(
        "--max-repeats",
        type=int,
        metavar="N",
        help=f"with --repeats auto: stop at N repeats (default {DEFAULT_MAX_REPEATS})",
    )
    parser.add_argument(
        "--target-ci",
        type=float,
        metavar="PCT",
        help="with --repeats auto: stop when the 95 %% CI of the median is within +-PCT %% "
        f"(default {DEFAULT_TARGET_PCT:g})",
    )


DEFAULT_MAX_REPEATS = auto_repeats.DEFAULT_MAX_REPEATS
DEFAULT_TARGET_PCT = 100 * auto_repeats.DEFAULT_TARGET_CI


def _auto_repeats(args: argparse.Namespace, overrides: dict) -> dict | None:
    """``--repeats auto``'s settings (and ``repeats`` taken out of ``overrides``), or None;
    its two flags without it would change nothing, so they are refused."""
    if overrides.get("repeats") != AUTO:
        for flag, value in (("--max-repeats", args.max_repeats), ("--target-ci", args.target_ci)):
            if value is not None:
                raise UsageError(f"{flag} only applies with --repeats auto")
        return None
    del overrides["repeats"]
    max_repeats = DEFAULT_MAX_REPEATS if args.max_repeats is None else args.max_repeats
    target_pct = DEFAULT_TARGET_PCT if args.target_ci is None else args.target_ci
    if not 2 <= max_repeats <= sweep_module.MAX_AUTO_REPEATS:
        raise UsageError(f"--max-repeats must be between 2 and {sweep_module.MAX_AUTO_REPEATS}")
    if not 0 < target_pct < 100:
        raise UsageError("--target-ci is a percentage between 0 and 100")
    return sweep_module.check_auto_repeats({"max": max_repeats, "target_ci": target_pct / 100})
