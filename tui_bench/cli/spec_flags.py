"""The spec flags of `run` (and of the commands that start runs), generated from RunSpec's
declared fields, and what they turn into: a spec, a preset, worker options."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from tui_bench.engine.results.history import History
from tui_bench.engine.spec import RunSpec, WorkerOptions, declared_fields, list_flag_parser


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
            # A comma list: values of a field that sweeps, else one line (list_flag_parser); a
            # name never holds a comma, a path or a device pattern may.
            type=list_flag_parser(declared)
            if declared.type in (int, float) or declared.choices is not None
            else declared.type,
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


def listed(args: argparse.Namespace) -> dict[str, list[Any]]:
    """The spec fields given as comma lists (``--batch-size 1,8,64``): a sweep, one run each."""
    return {k: v for k, v in spec_overrides(args).items() if isinstance(v, list)}


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    base: dict[str, Any] = {}
    if getattr(args, "from_history", None):
        # Replay: the recorded spec, as it ran; flags still override it.
        base = dict(History().get(args.from_history).spec)
    base.update(spec_overrides(args))
    return RunSpec.from_dict(base)


def warn_if_busy(err: Console) -> None:
    from tui_bench.engine.runs.run_result import machine_load

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
