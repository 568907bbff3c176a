"""The fast export paths write exactly what the plain ones wrote: ``export --jsonl`` copying a
record from its journal line and checking series lines without floats, ``export --csv`` placing
cells by a per-table column tree. The oracles below are the exports as they were written before
(parse every record, encode it again; flatten each record into a dict of dotted names), run on a
history with every kind of line a reader meets."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tui_bench.engine.results import store, transfer
from tui_bench.engine.results.export_safety import FORMULA_FIRST, csv_cell
from tui_bench.engine.results.history import History


def _old_series_texts(path: Path) -> list[str]:
    texts = []
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return texts
    with handle:
        for raw in handle:
            try:
                event = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if not isinstance(event, dict):
                continue
            try:
                texts.append(raw.decode("utf-8-sig").strip())
            except UnicodeDecodeError:
                continue
    return texts


def old_jsonl(history: History, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        header = {"format": transfer.FORMAT, "version": store.VERSION, "fields": ["run", "series"]}
        handle.write(json.dumps(header) + "\n")
        for record in history.records():
            series = ",".join(_old_series_texts(history.series_path(record["id"])))
            run = json.dumps(record, separators=(",", ":"), default=str)
            handle.write(f'{{"run":{run},"series":[{series}]}}\n')


_NOT_EXPORTED = {"log_tail", "recorder_pid", "recorder_started", "stability"}
_NOT_EXPORTED.add("metrics.steady_step_times")


def _old_flatten(record: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}

    def into(prefix: str, value: dict[str, Any]) -> None:
        for key, inner in value.items():
            name = f"{prefix}{key}"
            if name in _NOT_EXPORTED:
                continue
            if isinstance(inner, dict):
                into(name + ".", inner)
            elif isinstance(inner, list):
                row[name] = json.dumps(inner)
            else:
                row[name] = inner

    stab = record.get("stability")
    into("", record)
    if isinstance(stab, dict):
        row["stability"] = stab.get("verdict")
        row["stability_reasons"] = "; ".join(
            r.get("message", "") for r in stab.get("reasons") or [] if isinstance(r, dict)
        )
    return row


def old_csv(history: History, path: Path) -> None:
    columns: dict[str, int] = {c: i for i, c in enumerate(["id", "started_at", "finished_at"])}
    for name in ("status", "reason"):
        columns[name] = len(columns)
    rows = []
    for record in history.records():
        row: list[Any] = [""] * len(columns)
        for key, value in _old_flatten(record).items():
            if key not in columns:
                columns[key] = len(columns)
                row.append("")
            safe = isinstance(value, str) and value[:1] in FORMULA_FIRST
            row[columns[key]] = csv_cell(value) if safe else value
        rows.append(row)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([csv_cell(c) for c in columns])
        writer.writerows(row + [""] * (len(columns) - len(row)) for row in rows)


def _record(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"20261101-1000{n:02d}-{n:08x}",
        "status": "finished",
        "label": f"run {n}",
        "started_at": f"2026-11-01T10:00:{n:02d}+00:00",
        "spec": {"framework": "torch", "threads": n, "device": "cpu"},
        "metrics": {"step_median_s": 0.01 * n, "steady_step_times": [0.01, 0.0125, 1e-7]},
        "stability": {"verdict": "stable", "reasons": [{"message": "ok"}, "odd"]},
        **extra,
    }


def _series(history: History, run_id: str, *extra: bytes) -> None:
    lines = [
        json.dumps({"type": "record", "record": {"id": run_id, "status": "running"}}).encode(),
        b'{"type": "steps", "losses": [2.5, 2.25, NaN]}',
        *extra,
        json.dumps({"type": "result", "record": {"id": run_id, "v": 1.5}}).encode(),
    ]
    history.series_path(run_id).write_bytes(b"\n".join(lines) + b"\n")


def build(home: Path) -> None:
    """Runs as put_line writes them, and every other kind of line a journal can hold."""
    history = History(home)
    plain = [_record(n) for n in range(1, 5)]
    plain[1]["label"] = "=cmd|' /C calc'!A0"  # a formula, neutralised in the CSV
    plain[2]["label"] = 'caf\u00e9 \u00d7 2, ": x'  # escaped, and a separator inside text
    plain[3]["worker"] = {"extra": {"cuda": None, "list": [1, {"a": 2}]}, "ok": True}
    plain[3]["metrics.step_median_s"] = "a literal dotted key"  # one column with the nested
    plain[3]["stability"] = "not a dict"
    odd = _record(5, spec="not a dict", metrics=None)
    odd["note"] = float("inf")
    patched = _record(6)
    deleted = _record(7)
    running = _record(8, status="running", recorder_pid=2**22 + 1, recorder_started=1.0)
    spaced = _record(9)
    lines = [store.put_line(r) for r in (*plain, odd, patched, deleted, running)]
    lines.append(store.patch_line(patched["id"], {"status": "failed", "metrics": {"x": 1}}))
    lines.append(store.delete_line(deleted["id"]))
    # Written by hand (or another tool): our fields, other separators.
    lines.append(
        json.dumps({"id": spaced["id"], "op": "put", "record": spaced}).encode("utf-8") + b"\n"
    )
    store.append(history.journal_path, lines)
    for r in (*plain, odd, patched, running, spaced):
        _series(history, r["id"], b"\x00\xff not json", b"[1, 2]", b'\xef\xbb\xbf{"bom": 1}')


def damage(home: Path) -> None:
    """A binary line and a non-object line in the journal, and a torn last line."""
    journal = home / store.JOURNAL_NAME
    with open(journal, "ab") as handle:
        handle.write(b"\x00\x01binary\xff\n[1, 2]\n" + store.put_line(_record(10))[:40])


@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("repair", [True, False])
def test_exports_write_what_the_plain_paths_wrote(tmp_path, damaged, repair):
    home = tmp_path / "home"
    home.mkdir()
    build(home)
    if damaged:
        damage(home)
    History(home).summaries()  # the cache, then the journal read past it
    os.utime(home / store.JOURNAL_NAME)
    history = History(home, repair=repair)
    assert len(history.summaries()) >= 7
    old_jsonl(history, tmp_path / "old.jsonl")
    transfer.export_jsonl(History(home, repair=repair), tmp_path / "new.jsonl")
    assert (tmp_path / "new.jsonl").read_bytes() == (tmp_path / "old.jsonl").read_bytes()
    old_csv(history, tmp_path / "old.csv")
    History(home, repair=repair).export_csv(tmp_path / "new.csv")
    assert (tmp_path / "new.csv").read_bytes() == (tmp_path / "old.csv").read_bytes()


def test_a_record_is_copied_only_from_a_line_put_line_wrote():
    record = _record(1)
    run_id = record["id"]
    line = store.put_line(record).rstrip(b"\n")
    assert store.stored_record_text(run_id, [line]) == json.dumps(record, separators=(",", ":"))
    assert store.stored_record_text(run_id, [line, line]) is None  # more lines: replayed
    assert store.stored_record_text("other", [line]) is None
    spaced = json.dumps({"id": run_id, "op": "put", "record": record}).encode()
    assert store.stored_record_text(run_id, [spaced]) is None
    assert store.stored_record_text(run_id, [line[:-3] + b"x}}"]) is None  # damaged
    assert store.stored_record_text(run_id, [line[:-1] + b',"op":"del"}']) is None
    running = store.put_line({**record, "status": "running"}).rstrip(b"\n")
    assert store.stored_record_text(run_id, [running]) is None  # a reader may settle it
