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
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import mmap
import os
import pickle
import re
import sys
from collections.abc import Callable, Container, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from tinydb.storages import Storage

SCHEMA = "tui-bench-history"
# 1: history.json, one tinydb JSON document; 2: the journal.
VERSION = 2
JOURNAL_NAME = "history.jsonl"
LEGACY_NAME = "history.json"
CACHE_NAME = "history.cache"

SUMMARY_KEYS = (
    "id",
    "status",
    "started_at",
    "finished_at",
    "reason",
    "label",
    "group",
    "batch",
    "repeat",
    "config",
    "host",
    "spec",
    "recorder_pid",
    "recorder_started",
)
# The spec fields lists show and filter on (the full spec is one get() away).
SUMMARY_SPEC = (
    "framework",
    "api",
    "mode",
    "model",
    "dataset",
    "device",
    "threads",
    "batch_size",
    "epochs",
    "precision",
    "workers",
)
SUMMARY_METRICS = (
    "train_wall_s",
    "step_median_s",
    "step_iqr_s",
    "samples_per_s",
    "latency_p50_s",  # an inference run's figures where a training run's are the two above
    "inference_samples_per_s",
    "test_accuracy",
    "val_accuracy",
    "mfu",
    "mfu_error",
    # A generation run's figures where a training run's step and samples/s are (no version
    # bump: no cache written before the mode existed can hold a generation run).
    "tpot_p50_s",
    "decode_tokens_per_s",
)
# A cache is rewritten once a reader replayed this many bytes past it.
_CACHE_REFRESH_BYTES = 256 * 1024
# 4: summaries carry the stability verdict; 5: a head, then them; 6: and the MFU; 7: the mode
# and an inference run's p50 and samples/s
_CACHE_VERSION = 7


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


def summarize(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a record (or of a patch to one) that lists and filters show."""
    out = {k: fields[k] for k in SUMMARY_KEYS if k in fields}
    if "spec" in fields:
        spec = fields["spec"] if isinstance(fields["spec"], dict) else {}
        # Interned: 10,000 summaries share one copy of "torch", "cpu"... in memory and in the cache.
        out["spec"] = {k: _intern(spec[k]) for k in SUMMARY_SPEC if k in spec}
    if "metrics" in fields:
        metrics = fields["metrics"] if isinstance(fields["metrics"], dict) else {}
        out["metrics"] = {k: metrics[k] for k in SUMMARY_METRICS if k in metrics}
    if "env" in fields:
        env = fields["env"] if isinstance(fields["env"], dict) else {}
        out["env"] = {"host": env.get("host")}
    if "stability" in fields:
        # The verdict alone: lists show and filter on it; its reasons are one get() away.
        stab = fields["stability"] if isinstance(fields["stability"], dict) else {}
        out["stability"] = {"verdict": _intern(stab.get("verdict"))}
    return out


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


def _intern(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) < 64 else value


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
            apply(records, entry, summary=False)
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


def apply(records: dict[str, dict[str, Any]], entry: dict[str, Any], summary: bool) -> None:
    """One journal entry applied to ``records`` (full records, or summaries)."""
    run_id = entry["id"]
    op = entry["op"]
    if op == "put":
        record = entry["record"]  # the entry is parsed for this replay alone: no copy needed
        record["id"] = run_id
        records[run_id] = summarize(record) if summary else record
    elif op == "patch":
        current = records.get(run_id)
        if current is not None:  # a patch to a deleted run stays deleted
            fields = {k: v for k, v in entry["fields"].items() if k != "id"}
            if summary:  # a new dict: summaries handed out earlier stay as they were read
                records[run_id] = {**current, **summarize(fields)}
            else:
                current.update(fields)
    else:
        records.pop(run_id, None)


def replay(entries: list[tuple[int, dict[str, Any]]], summary: bool = False) -> dict[str, Any]:
    records: dict[str, dict[str, Any]] = {}
    for _, entry in entries:
        apply(records, entry, summary)
    return records


# -- the summary cache ----------------------------------------------------------------------------
@dataclass
class Summaries:
    """What a read of the history found. A *full* read holds every run's summary in ``records``;
    a light one (``full=False``: what a run's start needs) leaves ``records`` empty and holds only
    the index: which runs exist (``ids``), which are ``running``, and each group's runs."""

    records: dict[str, dict[str, Any]]
    damage: Damage
    lines: int  # journal lines (header included)
    torn: bool  # the journal ends in a partial line
    deleted: set[str]  # runs deleted on purpose: their leftover files are not lost runs
    ids: set[str] = field(default_factory=set)  # every live run
    running: dict[str, dict[str, Any]] = field(default_factory=dict)  # summaries of 'running' runs
    groups: dict[str, set[str]] = field(
        default_factory=dict
    )  # group -> runs put in it (a superset)
    full: bool = True
    state: dict[str, Any] = field(default_factory=dict, repr=False)  # for the next read


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class _CacheUnpickler(pickle.Unpickler):
    """The cache holds plain data and ``Damage``: any other class or callable named in the file
    (a damaged or planted cache) is refused before it could run, and the cache is ignored."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (__name__, "Damage"):
            return Damage
        if module == "builtins" and name in ("set", "frozenset"):
            return getattr(__import__("builtins"), name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in the history cache")


_HEAD_KEYS = frozenset(("damage", "deleted", "lines", "end", "ids", "running", "groups"))


def read_summaries(
    journal: Path, cache: Path, known: Summaries | None = None, full: bool = True
) -> Summaries:
    """Summaries of every run: the cache, plus the journal lines appended since it was written.
    A cache that is missing, damaged or for another journal (compacted, replaced) is ignored.
    ``known``: what this process read before; then only the lines appended since are read
    (the cache file is not loaded again), unless the journal was replaced meanwhile.
    ``full=False``: the index alone (the cache's small first part), not every run's summary:
    what starting a run reads, so its cost does not grow with the history."""
    ident = _identity(journal)
    state: dict[str, Any] | None = None
    if (
        known is not None
        and ident is not None
        and known.state.get("journal") == ident
        and (known.full or not full)
    ):
        try:
            if known.state["end"] <= journal.stat().st_size:
                state = known.state
        except OSError:
            state = None
    if state is None:
        state = _load_cache(cache, journal, ident, full)
    if state is None:  # a cold start reads every line: it is a full read
        state = _fresh_state(ident)
    elif not full and _tail_bytes(journal, state) >= _CACHE_REFRESH_BYTES:
        return read_summaries(journal, cache, full=True)  # a long tail: read it once, cache it
    records: dict[str, dict[str, Any]] | None = state.get("records")
    result = scan(journal, state["end"], state["lines"] + 1, each=lambda e: _index(state, e))
    damage = Damage(state["damage"].lines + result.damage.lines, state["damage"].header)
    if state["end"] == 0:
        damage.header = result.damage.header
    replayed = result.end - state["end"]
    state.update(end=result.end, lines=result.lines, damage=damage)
    if ident is not None and records is not None and replayed >= _CACHE_REFRESH_BYTES:
        _write_cache(cache, state)
    return Summaries(
        records if records is not None else {},
        damage,
        result.lines,
        result.torn,
        state["deleted"],
        state["ids"],
        state["running"],
        state["groups"],
        full=records is not None,
        state=state,
    )


def _fresh_state(ident: tuple[int, int] | None) -> dict[str, Any]:
    state: dict[str, Any] = {"v": _CACHE_VERSION, "journal": ident, "end": 0, "lines": 0}
    state.update(records={}, damage=Damage(), deleted=set(), ids=set(), running={}, groups={})
    return state


def cache_records(journal: Path, cache: Path, records: list[dict[str, Any]]) -> None:
    """The cache of a journal just written as one ``put`` per record (``rewrite``), made from
    the records in hand: the next read loads it instead of parsing every line again."""
    ident = _identity(journal)
    if ident is None:
        return
    state = _fresh_state(ident)
    for record in records:
        _index(state, {"id": record["id"], "op": "put", "record": dict(record)})
    state.update(end=journal.stat().st_size, lines=len(records) + 1)
    _write_cache(cache, state)


def _index(state: dict[str, Any], entry: dict[str, Any]) -> None:
    """One journal entry into the summaries (when the state holds them) and the index: which
    runs exist, which are running, and each group's runs."""
    records = state.get("records")
    ids, running, groups, deleted = (
        state["ids"],
        state["running"],
        state["groups"],
        state["deleted"],
    )
    run_id, op = entry["id"], entry["op"]
    if records is not None:
        apply(records, entry, summary=True)
    if op == "put":
        record = entry["record"]
        record["id"] = run_id
        ids.add(run_id)
        deleted.discard(run_id)
        if record.get("status") == "running":
            running[run_id] = summarize(record)
        else:
            running.pop(run_id, None)
        if isinstance(record.get("group"), str):
            groups.setdefault(record["group"], set()).add(run_id)
    elif op == "patch" and run_id in ids:
        fields = entry["fields"]
        if run_id in running or fields.get("status") == "running":
            merged = {**running.get(run_id, {"id": run_id}), **summarize(fields)}
            merged["id"] = run_id
            running[run_id] = merged
            if merged.get("status") != "running":
                del running[run_id]
        if isinstance(fields.get("group"), str):
            groups.setdefault(fields["group"], set()).add(run_id)
    elif op == "del":
        ids.discard(run_id)
        running.pop(run_id, None)
        deleted.add(run_id)


def _tail_bytes(journal: Path, state: dict[str, Any]) -> int:
    try:
        return journal.stat().st_size - state["end"]
    except OSError:
        return 0


def _load_cache(
    cache: Path, journal: Path, ident: tuple[int, int] | None, full: bool
) -> dict[str, Any] | None:
    """The cache's head (the index), and with ``full`` its second part (every summary)."""
    try:
        with open(cache, "rb") as handle, collector_paused():
            unpickler = _CacheUnpickler(handle)
            loaded = unpickler.load()
            if not (
                isinstance(loaded, dict)
                and loaded.get("v") == _CACHE_VERSION
                and loaded.get("journal") == ident
                and loaded.get("end", 0) <= journal.stat().st_size
                and loaded.keys() >= _HEAD_KEYS
            ):
                return None
            if full:  # a new unpickler: each pickle numbers its shared objects from 0
                records = _CacheUnpickler(handle).load()
                if not isinstance(records, dict):
                    return None
                loaded["records"] = records
            return loaded
    except Exception:  # any unreadable cache is just a cold start: it is derived data
        return None


def _write_cache(cache: Path, state: dict[str, Any]) -> None:
    """Two pickles in one file: the head (everything but the summaries), then the summaries, so
    a light read stops after the first."""
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    head = {k: v for k, v in state.items() if k != "records"}
    try:
        with open(tmp, "wb") as handle:
            pickle.dump(head, handle, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(state.get("records", {}), handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
    except OSError:  # a cache that cannot be written costs speed, never data
        tmp.unlink(missing_ok=True)


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


# -- older versions -------------------------------------------------------------------------------
def migrate_record(record: dict[str, Any], version: int) -> dict[str, Any]:
    """A record as written by schema ``version``, brought to the current one, step by step."""
    if version < 2:
        # Schema 1 kept records in tinydb's document table: an id was not guaranteed to be a
        # string, and records from before started_at was recorded have only their id's date.
        record = dict(record)
        record["id"] = str(record.get("id", ""))
        if not record.get("started_at"):
            record["started_at"] = _date_of_id(record["id"])
    return record


def _date_of_id(run_id: str) -> str | None:
    try:
        when = dt.datetime.strptime(run_id[:15], "%Y%m%d-%H%M%S")
    except ValueError:
        return None
    return when.astimezone().isoformat(timespec="seconds")


def read_legacy(
    path: Path, texts: dict[int, bytes] | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """Records of a schema-1 history.json (tinydb's JSON document), and why it is damaged, if
    it is. Documents of the wrong shape are skipped and counted. ``texts``: filled with the
    JSON text of each record that migrating left as it was, by ``id(record)``, so the move can
    copy it instead of encoding it again (most of moving 10,000 runs)."""
    raw = path.read_bytes() or b"{}"
    try:
        # What json.loads does with bytes; the bytes are let go of (63 MB at 10,000 runs).
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        del raw
        found = _tinydb_documents(text) if texts is not None else None
        data, spans = found if found is not None else (json.JSONDecoder().decode(text), {})
    except (ValueError, UnicodeDecodeError) as exc:
        return [], f"not JSON ({type(exc).__name__})"
    del text
    if not isinstance(data, dict):
        return [], "top level is not an object"
    table = data.get("_default", {})
    if not isinstance(table, dict):
        return [], "its table is not an object"
    records, skipped = [], 0
    for key, doc in table.items():
        if isinstance(doc, dict) and isinstance(doc.get("id"), str | int) and doc.get("id") != "":
            record = migrate_record(doc, 1)
            records.append(record)
            stored = spans.get(key)
            if texts is not None and stored is not None and record == doc:
                texts[id(record)] = stored
        else:
            skipped += 1
    return records, (f"{skipped} document(s) of the wrong shape" if skipped else None)


_TINYDB_START = re.compile(r'\{"_default": \{')
_TINYDB_KEY = re.compile(r'"([0-9]+)": ')
_JSON_SPACE = " \t\n\r"


def _tinydb_documents(text: str) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """A document laid out as tinydb writes it (``{"_default": {"1": {...}, "2": ...}}``),
    read one record at a time so that each record's text is known: what ``json.loads``
    gives, and the text of each entry of the table. None when the file is laid out otherwise
    (another table, other spacing, damage): ``json.loads`` then reads it, and judges it."""
    start = _TINYDB_START.match(text)
    if start is None:
        return None
    decoder = json.JSONDecoder()
    table: dict[str, Any] = {}
    spans: dict[str, bytes] = {}
    at = start.end()
    while not text.startswith("}}", at):  # each entry, then ", " or the table's end
        key = _TINYDB_KEY.match(text, at)
        if key is None:
            return None
        try:
            table[key[1]], end = decoder.raw_decode(text, key.end())
            spans[key[1]] = text[key.end() : end].encode("utf-8")
        except (ValueError, UnicodeEncodeError):  # damage, a lone surrogate
            return None
        if text.startswith(", ", end):
            at = end + 2
        elif text.startswith("}}", end):
            at = end
        else:
            return None
    if text[at + 2 :].strip(_JSON_SPACE):
        return None
    return {"_default": table}, spans


# -- tinydb's view --------------------------------------------------------------------------------
class JournalStorage(Storage):
    """tinydb storage over the journal: ``TinyDB(home / "history.jsonl",
    storage=JournalStorage)`` queries every run. A write appends what changed (tinydb hands
    over the whole database; unchanged runs are not written again). Hold the history's lock
    (``History.lock``) around writes made this way."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._last: dict[str, dict[str, Any]] = {}

    def read(self) -> dict[str, Any] | None:
        records = replay(scan(self.path).entries)
        self._last = {r: dict(rec) for r, rec in records.items()}
        return {"_default": {str(i + 1): rec for i, rec in enumerate(records.values())}}

    def write(self, data: dict[str, Any]) -> None:
        table = data.get("_default", {})
        now = {str(doc["id"]): dict(doc) for doc in table.values() if doc.get("id")}
        lines = [put_line(rec) for run_id, rec in now.items() if self._last.get(run_id) != rec]
        lines += [delete_line(run_id) for run_id in self._last if run_id not in now]
        if lines:
            append(self.path, lines)
        self._last = now


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
