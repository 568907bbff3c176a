"""JSON lines read as ``json.loads`` reads them, faster: the journal's lines, a run's series
file, a batch file. orjson parses where it gives the same value, json's scanner judges the rest;
a damaged line is skipped by every reader here (the journal's own scan, which reports damage, is
``journal.scan``). Also the collector's pause for reading many lines at once.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import orjson


@contextlib.contextmanager
def collector_paused() -> Generator[None, None, None]:
    """The cyclic garbage collector paused while tens of thousands of containers are built
    that hold no cycles (a cache's summaries, records parsed from JSON): left on, it walks
    them again and again as they pile up (a third of loading 10,000 summaries). Refcounting
    still frees them."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# Digits as "0", everything else as " ": a run of 19 zeros is an integer orjson may not hold.
_DIGITS_AS_ZERO = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_LONG_DIGITS = b"0" * 19


def loads(raw: bytes) -> Any:
    """``json.loads(raw)``, read by orjson where that gives the same value: about twice as fast
    (parsing is most of exporting 10,000 runs). orjson is stricter (it refuses NaN, Infinity,
    lone surrogates, a byte-order mark, deep nesting): json reads those lines, and judges them,
    as before. The one value orjson reads otherwise is an integer beyond 64 bits, which it
    makes a float: a line with 19 digits in a row is read by json."""
    if _LONG_DIGITS not in raw.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


# Accepts what json.loads accepts (the same scanner), but leaves numbers with a fraction as their
# text: a check that a line is JSON need not build a float for each of 10,000 runs' step times.
_CHECKER = json.JSONDecoder(parse_float=str, parse_constant=str)


def checked_object(raw: bytes) -> dict[str, Any] | None:
    """``raw`` as a JSON object if ``json.loads(raw)`` would give one (decoded as it decodes
    bytes), else None: a check, whose values are not used. orjson reads it first (about twice
    as fast as json's scanner, and a 10,000-run JSONL export checks 40,000 lines): what orjson
    accepts json accepts too; what it refuses (NaN, a byte-order mark, a lone surrogate, another
    encoding) json's scanner judges, with its non-integer numbers left as text."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value = _CHECKER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _object_lines(
    path: Path, parse: Callable[[bytes], Any] = json.loads
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Each complete JSON-object line of a series or batch file with its bytes as stored;
    damaged lines are skipped. ``parse``: ``checked_object`` where only the check is wanted."""
    try:
        handle = open(path, "rb")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return
    with handle:
        for raw in handle:
            try:
                event = parse(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(event, dict):
                yield raw, event


def iter_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Complete JSON-object lines of a series or batch file; damaged lines are skipped."""
    for _raw, event in _object_lines(path):
        yield event


def iter_line_texts(path: Path) -> Iterator[str]:
    """The text of each line ``iter_lines`` yields, as stored (outer whitespace and a byte-order
    mark dropped): checked as it does, never re-encoded (an export copies 10,000 series). A line
    that is not UTF-8 is skipped (the runner writes none)."""
    for raw, _event in _object_lines(path, checked_object):
        try:
            yield raw.decode("utf-8-sig").strip()
        except UnicodeDecodeError:
            continue
