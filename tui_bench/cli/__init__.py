"""``tui-bench``: the TUI with no arguments, headless subcommands otherwise.

Every subcommand reports bad input as one line on stderr (``tui-bench: error: ...``) and a non-zero
exit: 2 for bad input, 1 for a run that failed. Each command group is one module of this package
with a ``register(subparsers)``; what they share lives in ``common``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from tui_bench import __version__
from tui_bench.cli import (
    cards,
    data,
    doctor,
    history,
    presets,
    regress,
    report,
    run,
    runs,
    runtime,
    trends,
)
from tui_bench.cli.common import error_line
from tui_bench.cli.help import EXAMPLES
from tui_bench.engine.errors import TuiBenchError, UsageError
from tui_bench.engine.paths import usable_home

# Order is the order of `tui-bench --help`.
# trends adds an action to history's parser: it comes after it.
COMMAND_GROUPS = (
    run,
    history,
    trends,
    regress,
    cards,
    data,
    presets,
    report,
    runtime,
    runs,
    doctor,
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is a UsageError: one line, exit 2, like every other error."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("tui-bench").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def build_parser() -> argparse.ArgumentParser:
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
    for group in COMMAND_GROUPS:
        group.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.home is not None:  # '' too: refused, never silently the default home
            os.environ["TUI_BENCH_HOME"] = str(usable_home(args.home))
        if args.command is None:
            from tui_bench.tui.app import run_app  # lazy: headless commands never load Textual

            return run_app()
        from tui_bench.engine.results import history

        history.report_progress_to(lambda line: print(line, file=sys.stderr, flush=True))
        return args.func(args)
    except TuiBenchError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
