"""The history's storage: an append-only journal that tinydb can open, plus a summary cache.

Layout under the data home::

    history.jsonl       the journal: a header line, then one line per write (put / patch / delete)
    history.cache       summaries of every run and the journal offset they cover (derived, disposable)
    history.lock        one writer at a time, across processes
    runs/<id>.jsonl     the run's series: everything it streamed (header, events, samples, result)

Why a journal: tinydb's JSON storage rewrites the whole file on every write, which at 10,000 runs
(49 MB) turned a 20-step run from 4 s into 14 s. Here a write appends one line (O(1), a single
``write`` on an O_APPEND descriptor under the lock), so a crash mid-write leaves at worst a torn last
line, which every reader skips. Why a cache: listing 10,000 runs must not parse 46 MB of records;
the cache holds the few fields a list shows, and a reader replays only the lines appended since it
was written. A run leaves two lines (its start and its result); ``history check --repair``
compacts the journal (one ``put`` per live run, written aside and swapped in atomically) once
superseded lines outnumber live runs. Compaction is never done inside a run's write: that one
write would cost a whole rewrite again.

``JournalStorage`` is a tinydb ``Storage`` over the same file, so ``TinyDB(path,
storage=JournalStorage)`` still queries the history; the History class writes through the
journal's append path directly, because tinydb's ``write(whole_database)`` is what made it slow.

The rooms: this module is the journal (its lines, reading them, appending, rewriting);
``summary_cache.py`` the summaries and their cache; ``migration.py`` the older schemas;
``tinydb_storage.py`` tinydb's view; ``jsonlines.py`` the tolerant line reader they share with
the series and batch files; ``history.py`` the API over them all.
"""

from __future__ import annotations

import datetime as dt
import json
import mmap
import os
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine.results.jsonlines import checked_object, loads

SCHEMA = "tui-bench-history"
# 1: history.json, one tinydb JSON document; 2: the journal.
VERSION = 2
JOURNAL_NAME = "history.jsonl"


def header_line() -> bytes:
    return _line({"schema": SCHEMA, "version": VERSION})


def _line(entry: dict[str, Any]) -> bytes:
    return (json.dumps(entry, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def put_line(record: dict[str, Any]) -> bytes:
    # The id goes first so a reader can pick one run's lines without parsing the others.
    return _line({"id": record["id"], "op": "put", "record": record})


def patch_line(run_id: str, fields: dict[str, Any]) -> bytes:
    return _line({"id": run_id, "op": "patch", "fields": fields})


def delete_line(run_id: str) -> bytes:
    return _line({"id": run_id, "op": "del"})


def id_prefix(run_id: str) -> bytes:
    return b'{"id":' + json.dumps(run_id).encode("utf-8") + b","


@dataclass
class Damage:
    """What a scan of the journal found wrong: line numbers (1-based) and why."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    header: str | None = None  # why the header is not ours, if it is not

    def __bool__(self) -> bool:
        return bool(self.lines) or self.header is not None

    def describe(self) -> str:
        parts = []
        if self.header:
            parts.append(self.header)
        if self.lines:
            shown = ", ".join(str(n) for n, _ in self.lines[:5])
            more = f" and {len(self.lines) - 5} more" if len(self.lines) > 5 else ""
            parts.append(
                f"{len(self.lines)} damaged line(s) (line {shown}{more}: {self.lines[0][1]})"
            )
        return "; ".join(parts)


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """One journal line as an entry, or None and why not."""
    try:
        entry = loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"not JSON ({type(exc).__name__})"
    if not isinstance(entry, dict):
        return None, "not an object"
    run_id, op = entry.get("id"), entry.get("op")
    if not isinstance(run_id, str) or not run_id:
        return None, "no run id"
    if op == "put" and isinstance(entry.get("record"), dict):
        return entry, ""
    if op == "patch" and isinstance(entry.get("fields"), dict):
        return entry, ""
    if op == "del":
        return entry, ""
    return None, f"unknown entry {str(op)[:20]!r}"


def check_header(raw: bytes) -> str | None:
    """None if ``raw`` is our header line, else why not (a newer version is refused, not read)."""
    try:
        head = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "the header line is damaged"
    if not isinstance(head, dict) or head.get("schema") != SCHEMA:
        return "the header line is damaged"
    version = head.get("version")
    if not isinstance(version, int) or version < 1:
        return "the header names no schema version"
    if version > VERSION:
        return f"written by a newer tui-bench (schema {version}; this one reads up to {VERSION})"
    return None


@dataclass
class Scan:
    """The journal read from ``start`` on: entries in order, and what was wrong."""

    entries: list[tuple[int, dict[str, Any]]]  # (line number, entry)
    damage: Damage
    end: int  # byte offset just past the last complete line
    lines: int  # complete lines seen (header included)
    torn: bool = False  # bytes after the last newline: a write in flight, or torn by a crash


def scan(
    path: Path,
    start: int = 0,
    first_line: int = 1,
    only: bytes | None = None,
    each: Callable[[dict[str, Any]], None] | None = None,
) -> Scan:
    """Read complete lines from byte ``start``. A last line without its newline is a write in
    flight (or torn by a crash) and is left for later, never counted as damage. ``only``: skip,
    unparsed, every line that does not start with this prefix (one run's lines). ``each``: hand
    each entry to it instead of keeping them all (a cold summary read of 10,000 full records)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return Scan([], Damage(), 0, 0)
    complete = data.rfind(b"\n") + 1
    entries: list[tuple[int, dict[str, Any]]] = []
    damage = Damage()
    number = first_line - 1
    lines = data.split(b"\n")
    del lines[-1]  # what follows the last newline: nothing, or a partial line
    for raw in lines:
        number += 1
        if number == 1:
            damage.header = check_header(raw)
            continue
        if only is not None and not raw.startswith(only):
            continue
        if not raw.strip():
            damage.lines.append((number, "empty line"))
            continue
        entry, why = _parse(raw)
        if entry is None:
            damage.lines.append((number, why))
        elif each is not None:
            each(entry)
        else:
            entries.append((number, entry))
    if first_line == 1 and complete == 0 and not data:
        damage.header = "the file is empty"
    elif first_line == 1 and complete == 0:
        damage.header = "the header line is damaged"
    return Scan(entries, damage, start + complete, number, torn=complete < len(data))


_ID_START = b'{"id":"'


def lines_by_run(path: Path, keep: Container[str] | None = None) -> dict[str, list[bytes]]:
    """The journal's complete entry lines, unparsed, grouped by run id in journal order: one
    run's final record can then be parsed alone (``final_record``), so a reader of 10,000 runs
    holds their bytes (~5 kB each) instead of their parsed dicts (~26 kB each). The id is read
    from the line's start as the writer puts it; any other line is parsed for it, and one that
    does not parse is left out (``scan`` reports it). ``keep``: only these runs' lines."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}
    groups: dict[str, list[bytes]] = {}
    # Each line found in place and copied out only if kept (a split of every line would hold
    # the journal twice, and more than twice for a reader of half the runs).
    at = data.find(b"\n") + 1  # past the header (no newline: nothing follows it)
    while at:
        stop = data.find(b"\n", at)
        if stop < 0:  # what follows the last newline: a line still being written, or torn
            break
        end = data.find(b'"', at + 7, stop) if data.startswith(_ID_START, at) else -1
        run_id = data[at + 7 : end] if end > at + 7 else b""
        if run_id and b"\\" not in run_id:
            text = run_id.decode("utf-8", "replace")
            if keep is None or text in keep:
                groups.setdefault(text, []).append(data[at:stop])
        else:
            entry, _ = _parse(data[at:stop])  # written otherwise, or an id with escapes in it
            if entry is not None and (keep is None or entry["id"] in keep):
                groups.setdefault(entry["id"], []).append(data[at:stop])
        at = stop + 1
    return groups


def lines_of(path: Path, run_ids: Iterable[str]) -> dict[str, list[bytes]]:
    """The journal lines that decide a few runs' records, in journal order, found by searching
    the file backwards for each run's line prefix (as ``put_line``/``patch_line``/``delete_line``
    write it) down to its last ``put`` or ``del`` (what came before is superseded), instead of
    splitting every line: a recent run out of 10,000 costs a search of the journal's tail. A
    line written otherwise is found by ``lines_by_run`` (a whole read)."""
    found: dict[str, list[bytes]] = {}
    try:
        with open(path, "rb") as handle:
            try:
                data: Any = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file cannot be mapped
                return found
    except FileNotFoundError:
        return found
    with data:
        complete = data.rfind(b"\n") + 1
        for run_id in dict.fromkeys(run_ids):
            prefix = id_prefix(run_id)
            needle = b"\n" + prefix
            ends = (prefix + b'"op":"put"', prefix + b'"op":"del"')
            lines: list[bytes] = []
            at = data.rfind(needle, 0, complete)
            while at >= 0:
                line = data[at + 1 : data.find(b"\n", at + 1, complete)]
                lines.append(line)
                if line.startswith(ends) or _ends_history(line):
                    break
                at = data.rfind(needle, 0, at)
            if lines:
                found[run_id] = lines[::-1]
    return found


def _ends_history(line: bytes) -> bool:
    """Is this line a put or a delete, written otherwise than ours (keys in another order)?"""
    if b'"op":"patch"' in line[:200]:
        return False
    entry, _ = _parse(line)
    return entry is not None and entry["op"] in ("put", "del")


def final_record(run_id: str, lines: list[bytes]) -> dict[str, Any] | None:
    """One run's record after its journal lines (from ``lines_by_run``); None if deleted."""
    records: dict[str, dict[str, Any]] = {}
    for raw in lines:
        entry, _ = _parse(raw)
        if entry is not None and entry["id"] == run_id:
            apply(records, entry)
    return records.get(run_id)


def stored_record_text(run_id: str, lines: list[bytes]) -> str | None:
    """The JSON text of a run's record as it stands, copied from its journal line instead of
    parsed and encoded again (two thirds of the CPU of ``history export --jsonl`` at 10,000
    runs), or None when it cannot be. It can when the run is one ``put`` line as ``put_line``
    writes it (ASCII, our prefix, one object after it, compact), which is then ``json.dumps(record,
    separators=(",", ":"), default=str)`` of the record ``final_record`` reads, byte for byte;
    and when its status is not ``running`` (a reader may settle that). The record is still
    checked as JSON: damage is never copied."""
    if len(lines) != 1:
        return None
    raw = lines[0]
    prefix = id_prefix(run_id) + b'"op":"put","record":'
    if not (raw.startswith(prefix) and raw.endswith(b"}") and raw.isascii()):
        return None
    if b'": ' in raw:  # a separator put_line never writes (a record moved from schema 1 as is)
        return None
    text = raw[len(prefix) : -1]
    record = checked_object(text)
    if record is None or record.get("id") != run_id or record.get("status") == "running":
        return None
    return text.decode("ascii")


def apply(
    records: dict[str, dict[str, Any]],
    entry: dict[str, Any],
    shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """One journal entry applied to ``records``: full records, or with ``shape`` what it keeps
    of a record or a patch (``summary_cache.summarize``)."""
    run_id = entry["id"]
    op = entry["op"]
    if op == "put":
        record = entry["record"]  # the entry is parsed for this replay alone: no copy needed
        record["id"] = run_id
        records[run_id] = shape(record) if shape is not None else record
    elif op == "patch":
        current = records.get(run_id)
        if current is not None:  # a patch to a deleted run stays deleted
            fields = {k: v for k, v in entry["fields"].items() if k != "id"}
            if shape is not None:  # a new dict: summaries handed out earlier stay as they were read
                records[run_id] = {**current, **shape(fields)}
            else:
                current.update(fields)
    else:
        records.pop(run_id, None)


def replay(entries: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    records: dict[str, dict[str, Any]] = {}
    for _, entry in entries:
        apply(records, entry)
    return records


# -- writing --------------------------------------------------------------------------------------
def append(journal: Path, lines: list[bytes]) -> None:
    """Append whole lines; the caller holds the history lock. A failed write (disk full) is cut
    back to where it began, so no half line is left for the next writer to glue onto."""
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        prefix = b""
        if size == 0:
            prefix = header_line()
        else:
            with open(journal, "rb") as handle:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    prefix = b"\n"  # a torn line from a crash: ours starts on a line of its own
        data = prefix + b"".join(lines)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | str | Iterable[bytes]) -> None:
    """Write aside, fsync, rename over: a crash leaves the old file or the new, never half.
    ``data`` may come in pieces (a whole journal need not be in memory twice)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # no debris after a full disk
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def rewrite(
    journal: Path,
    records: list[dict[str, Any]],
    keep_as: str | None = None,
    texts: dict[int, bytes] | None = None,
) -> Path | None:
    """Replace the journal by one ``put`` per record, atomically. ``keep_as``: first keep the
    current file under that name (a damaged original is never thrown away). ``texts``: the
    JSON text of some of the records, by ``id(record)``, written as it is."""
    kept = None
    if keep_as is not None and journal.exists():
        kept = journal.with_name(keep_as)
        try:
            os.link(journal, kept)
        except OSError:
            kept.write_bytes(journal.read_bytes())
    atomic_write(journal, _put_lines(records, texts or {}))
    return kept


def _put_lines(records: list[dict[str, Any]], texts: dict[int, bytes]) -> Iterator[bytes]:
    yield header_line()
    for record in records:
        text = texts.get(id(record))
        if text is None:
            yield put_line(record)
        else:  # what put_line writes around it
            yield id_prefix(record["id"]) + b'"op":"put","record":' + text + b"}\n"


def aside_name(stem: str, suffix: str) -> str:
    return f"{stem}-{dt.datetime.now():%Y%m%d-%H%M%S-%f}{suffix}"
