"""The one error root. Every failure a user can cause or fix is a ``TuiBenchError``: its ``str()`` is
one line, ``title`` names the kind of problem (the TUI's notice title), ``exit_code`` is what the
CLI exits with. ``main`` catches it once; anything else is a bug and keeps its traceback.

The classes also derive from the builtin they replaced (ValueError, RuntimeError), so code that
caught those keeps working.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


class TuiBenchError(Exception):
    title = "tui-bench"
    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, title: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        if title is not None:
            self.title = title
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class UsageError(TuiBenchError):
    """Bad command-line input."""

    title = "Bad command"


class SpecError(TuiBenchError, ValueError):
    """A spec field has a bad value. ``str()`` is one line that names the field."""

    title = "Bad run spec"

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


class PresetError(TuiBenchError, ValueError):
    """The preset file is wrong. ``str()`` is one line: ``FILE: KEY: problem``."""

    title = "Bad preset"


class ConfigError(TuiBenchError, ValueError):
    """config.toml is unreadable or has a bad value."""

    title = "Bad config file"


class HistoryError(TuiBenchError, RuntimeError):
    """The history store or a run in it cannot be read, found or changed."""

    title = "History"


class SupervisorError(HistoryError):
    """A batch could not be started, found or stopped; the message is one line."""

    title = "Run supervisor"


class FleetError(SupervisorError):
    """A Ray cluster cannot be used (Ray missing, nothing at the address); one line."""

    title = "Ray cluster"


class DatasetError(TuiBenchError):
    """A dataset cannot be used, downloaded or imported. ``str()`` is one line naming the file."""

    title = "Dataset"


class RuntimeUnavailable(TuiBenchError, RuntimeError):
    """No interpreter can run this framework/API; the message says how to get one."""

    title = "Runtime unavailable"


class RuntimeSetupError(TuiBenchError, RuntimeError):
    """A managed runtime could not be created; the message is one line."""

    title = "Runtime setup"
    exit_code = EXIT_FAILED


def did_you_mean(word: str, choices: Collection[str]) -> str:
    """ " (did you mean 'x'?)" for the known word a mistyped one most likely meant, or "".
    difflib's ratio puts 'modle' nearer 'mode' than 'model': of its candidates, the fewest edits
    wins (a swapped pair of letters is one), then the same length."""
    close = difflib.get_close_matches(word, list(choices), n=3)
    if not close:
        return ""
    best = min(close, key=lambda c: (_edits(word, c), abs(len(c) - len(word))))
    return f" (did you mean '{best}'?)"


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of two neighbours that turn a into b."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]
