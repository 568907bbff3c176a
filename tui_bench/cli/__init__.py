"""``tui-bench``: the TUI with no arguments, headless subcommands otherwise.

Every subcommand reports bad input as one line on stderr (``tui-bench: error: ...``) and a non-zero
exit: 2 for bad input, 1 for a run that failed. Each command group is one module of this package
with a ``register(subparsers)``; what they share lives in ``common``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from tui_bench import __version__
from tui_bench.cli.help import EXAMPLES
from tui_bench.engine.errors import TuiBenchError, UsageError
from tui_bench.engine.paths import usable_home

# The command modules, in the order of `tui-bench --help`. Only the chosen command's module is
# imported (some pull in the whole engine: about half a second of start-up for every command).
# trends adds an action to history's parser: it comes after it.
COMMAND_GROUPS = (
    "run",
    "history",
    "trends",
    "regress",
    "cards",
    "data",
    "presets",
    "report",
    "runtime",
    "runs",
    "doctor",
)
# Each top-level command: the module that registers it (with any that add to its parser) and its
# line in `tui-bench --help`. tests/test_cli.py checks this against what the modules register.
COMMANDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("run", ("run",), "run a benchmark headless"),
    (
        "history",
        ("history", "trends"),
        "browse, show, export, import, check and delete recorded runs",
    ),
    (
        "regress",
        ("regress",),
        "baseline against candidate runs per configuration: the CI gate (exit 1 on a regression)",
    ),
    ("sysinfo", ("cards",), "this machine's hardware and the framework runtimes"),
    (
        "frameworks",
        ("cards",),
        "the framework card: license, languages, hardware, multi-node, tested networks",
    ),
    (
        "hardware",
        ("cards",),
        "the hardware card: measured compute, latency, energy, compatibility per device",
    ),
    ("data", ("data",), "real datasets: list the cache, download, import files copied over"),
    ("presets", ("presets",), "list the shipped and user presets, or show one"),
    (
        "compare",
        ("presets",),
        "statistics, ratios with significance, speed-ups over runs, groups or a sweep",
    ),
    (
        "report",
        ("report",),
        "a comparison as one self-contained HTML page: verdict, machine, tables, figures",
    ),
    ("runtime", ("runtime",), "framework runtimes: list them, set one up"),
    ("ps", ("runs",), "runs in progress (from any terminal)"),
    ("attach", ("runs",), "follow a run in progress (Ctrl-C detaches)"),
    ("stop", ("runs",), "cancel a run in progress (recorded as cancelled)"),
    ("doctor", ("doctor",), "check this machine for what makes benchmark numbers unreliable"),
)


def chosen_command(argv: list[str]) -> str | None:
    """The command word of ``argv`` (the first word that is not a top-level option or the value
    of ``--home``), or None: no command, or a word that names none (argparse says so)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            word = next(words, None)
        elif word.startswith("-"):
            if len(word) >= 4 and "--home".startswith(word):  # --home VALUE, abbreviated too
                next(words, None)
            continue
        return word if any(word == name for name, _, _ in COMMANDS) else None
    return None


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is a UsageError: one line, exit 2, like every other error."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("tui-bench").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser with every command registered; given ``argv``, with only what ``argv``'s
    command needs (the others are one help line each, so `--help` still lists them all)."""
    parser = _Parser(
        prog="tui-bench",
        description="Compare deep-learning frameworks, APIs and settings on this machine. "
        "With no command, opens the terminal UI.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tui-bench {__version__}")
    parser.add_argument(
        "--home",
        help="history directory (default: the user data dir; env TUI_BENCH_HOME); managed "
        "runtimes stay where `runtime setup` put them (env TUI_BENCH_RUNTIMES_DIR)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    if argv is None:
        modules = COMMAND_GROUPS
    else:
        command = chosen_command(argv)
        modules = next((mods for name, mods, _ in COMMANDS if name == command), ())
    if not modules:
        for name, _, line in COMMANDS:
            subparsers.add_parser(name, help=line)
    for module in modules:
        importlib.import_module(f"tui_bench.cli.{module}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser(argv).parse_args(argv)
        if args.home is not None:  # '' too: refused, never silently the default home
            os.environ["TUI_BENCH_HOME"] = str(usable_home(args.home))
        if args.command is None:
            from tui_bench.tui.app import run_app  # lazy: headless commands never load Textual

            return run_app()
        from tui_bench.engine import frameworks
        from tui_bench.engine.results import history

        for problem in frameworks.problems():  # a broken plugin: one line each, the rest load
            print(f"tui-bench: warning: {problem}", file=sys.stderr)
        history.report_progress_to(lambda line: print(line, file=sys.stderr, flush=True))
        return args.func(args)
    except TuiBenchError as exc:
        from tui_bench.cli.common import error_line  # lazy: it loads rich and the presets

        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        from tui_bench.cli.common import error_line

        print(error_line(exc), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
