"""Summaries of every run and their cache (``history.cache``): the few fields a list shows, so
listing 10,000 runs need not parse 46 MB of records (why, in ``journal.py``). The cache holds
the summaries and the journal offset they cover; a reader replays only the lines appended since.
It is derived data: a cache that is missing, damaged or for another journal is ignored.
"""

from __future__ import annotations

import os
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine.results.journal import Damage, apply, scan
from tui_bench.engine.results.jsonlines import collector_paused

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
    "tokens_per_s",  # a language model's rate (History's tokens/s column)
    "test_accuracy",
    "val_accuracy",
    "mfu",
    "mfu_error",
    "tpot_p50_s",  # a generation run's figures where a training run's step and samples/s are
    "decode_tokens_per_s",
)
# A cache is rewritten once a reader replayed this many bytes past it.
_CACHE_REFRESH_BYTES = 256 * 1024
# 4: summaries carry the stability verdict; 5: a head, then them; 6: and the MFU; 7: the mode
# and an inference run's p50 and samples/s; 8: a gpt's tokens/s; 9: a generation run's TPOT p50
# and decode tokens/s
_CACHE_VERSION = 9


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


def _intern(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) < 64 else value


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
        if name == "Damage" and module in (Damage.__module__, _DAMAGE_BEFORE):
            return Damage
        if module == "builtins" and name in ("set", "frozenset"):
            return getattr(__import__("builtins"), name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in the history cache")


# Where ``Damage`` lived when caches written before the store's split were pickled: they still load.
_DAMAGE_BEFORE = "tui_bench.engine.results.store"
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
        apply(records, entry, summarize)
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
