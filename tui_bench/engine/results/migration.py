"""Older schemas of the history brought to the current one: schema 1 kept every run in one
``history.json``, tinydb's JSON document (rewritten whole on each write: why the journal, in
``journal.py``). ``History`` moves such a file into the journal on first use and keeps it aside;
``transfer`` migrates an older export record by record.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

LEGACY_NAME = "history.json"


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
