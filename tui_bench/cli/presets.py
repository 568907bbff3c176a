"""``tui-bench presets list|show`` and ``tui-bench compare``: what the presets hold, and the
statistics over runs, groups or sweeps. Running a preset is ``run --preset`` (``run.py``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table as RichTable

from tui_bench.cli import common, reporting
from tui_bench.cli.common import UsageError
from tui_bench.engine.results import metrics, render
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import presets
from tui_bench.engine.runs.presets import PresetError


# -- presets ------------------------------------------------------------------------------------
def cmd_presets(args: argparse.Namespace) -> int:
    console = common.console()
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
    preset = common.load_preset(args.name)
    try:
        configs = presets.expand(preset)
    except PresetError as exc:
        raise UsageError(str(exc)) from None
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


# -- compare ------------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    history = History()
    if args.html:
        reporting.check_output(args.html, "--html")
    records, comparison = reporting.compare_targets(args, history)
    shown = comparison.tables()
    render.write_exports(
        shown,
        Path(args.csv) if args.csv else None,
        Path(args.markdown) if args.markdown else None,
    )
    if args.figure:
        from tui_bench.engine.results import figures  # lazy: matplotlib is an optional extra

        figures.compare_figure(records, comparison.metric.key, args.figure)
    if args.html:
        reporting.write_html_report(args.html, records, comparison, history)
    if args.json:
        print(render.json_text(shown))
    else:
        from rich.text import Text

        from tui_bench.engine.results import verdict

        out = common.console()
        # the answer first, in the words the HTML page and the Compare screen use
        out.print(Text("verdict: " + verdict.text(shown, comparison.metric.key), style="bold"))
        render.terminal(out, shown)
    err = common.console(stderr=True)
    for path in (args.csv, args.markdown, args.figure, args.html):
        if path:
            err.print(f"wrote {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("presets", help="list the shipped and user presets, or show one")
    p_sub = p.add_subparsers(dest="presets_command", metavar="ACTION")
    p_sub.add_parser("list", help="every preset with its study")
    show = p_sub.add_parser("show", help="a preset's configurations and what can run here")
    show.add_argument("name", help="preset name or TOML file")
    show.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_presets, json=False)

    c = subparsers.add_parser(
        "compare",
        help="statistics, ratios with significance, speed-ups over runs, groups or a sweep",
    )
    reporting.add_target_arguments(c)
    c.add_argument(
        "--metric",
        default=None,
        help=f"per-run figure to compare (default {metrics.COMPARED_BY_DEFAULT}, or "
        f"{metrics.in_mode(metrics.COMPARED_BY_DEFAULT, metrics.INFERENCE)} when every run is "
        f"an inference run; {', '.join(metrics.choices())})",
    )
    c.add_argument(
        "--study-metric",
        default="train_wall_s",
        help="figure in the study-shaped table (default train_wall_s, the training time)",
    )
    reporting.add_latency_bound_argument(c)
    c.add_argument("--csv", metavar="FILE", help="write every table to one CSV file")
    c.add_argument("--markdown", metavar="FILE", help="write every table as markdown")
    c.add_argument("--json", action="store_true", help="print the tables as JSON")
    c.add_argument(
        "--html",
        metavar="FILE",
        help="also write the self-contained HTML report (tui-bench report)",
    )
    c.add_argument(
        "--figure",
        metavar="FILE",
        help="also draw bars per configuration (IQR error bars) and thread scaling to FILE.svg "
        "or FILE.png (needs the matplotlib extra)",
    )
    c.set_defaults(func=cmd_compare)
