"""The history as CSV (``history export --csv``, the TUI's export): one row per run, one column
per field a run has (nested dicts as dotted names: spec.threads, metrics.step_median_s), in the
order runs first have them; numbers kept as they are, text that starts like a formula made safe
(``export_safety``). The history is read through ``History`` (its order, its journal lines, its
settled records); this module only turns records into the file.
"""

from __future__ import annotations

import csv
import json
import operator
import os
import pickle
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_bench.engine.results import jsonlines
from tui_bench.engine.results.export_safety import FORMULA_FIRST, FORMULA_STARTS, csv_cell
from tui_bench.engine.results.history import records_of

if TYPE_CHECKING:
    from tui_bench.engine.results.history import History
    from tui_bench.engine.results.record import Run

__all__ = ["export_csv"]


def export_csv(history: History, path: Path, records: Sequence[Run] | None = None) -> int:
    """One row per run of ``history`` (``records``: only those runs; summaries are fine, full
    records are read by their ids); the number of rows. Rows are kept as lists against a
    growing column index while the runs stream past (the header needs every column first): at
    10,000 runs that is a third of the memory of one dict per row. Many runs are split between
    this process and a forked one (``_csv_rows_in_two``): the same file, in about two thirds of
    the time on 2 cores."""
    ids = None if records is None else [r.id for r in records]
    with jsonlines.collector_paused():  # 10,000 rows of lists: nothing for it to find
        order = history.run_order(ids)
        if len(order) >= _CSV_FORK_RUNS and _may_fork():
            return _csv_rows_in_two(history.lines_of_runs, order, path)
        runs = history.lines_of_runs(order)
        table = _CsvTable()
        rows = [table.row(record) for record in records_of(runs)]
    _write_csv(path, list(table.columns), rows)
    return len(rows)


def _write_csv(path: Path, columns: list[str], rows: list[list[Any]]) -> None:
    """The header and the rows (a run that lacks later columns gets empty cells for them)."""
    width = len(columns)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([csv_cell(c) for c in columns])
        writer.writerows(row + [""] * (width - len(row)) for row in rows)


# From this many runs the CSV export forks a second process for the later half.
_CSV_FORK_RUNS = 2000


def _may_fork() -> bool:
    """A fork is safe and useful: a POSIX fork, more than one core, and no other thread in this
    process (the TUI exports from a worker thread: a fork there could copy a held lock)."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) > 1


def _csv_rows_in_two(
    lines_of_runs: Callable[[list[str]], Iterator[tuple[str, list[bytes]]]],
    order: list[str],
    path: Path,
) -> int:
    """The CSV export with the later half of the runs (``order``) made into rows by a forked
    process. Each process reads the journal lines of its own half (``lines_of_runs``), after
    the fork: a child that parsed lines the parent had read would copy, page by page, the
    memory it shares with the parent as it went (it measured half as slow again as the parent).

    The file is the one a single process writes, byte for byte: that one numbers the columns in
    the order runs first have them, so the columns are this half's, then those only the later
    half has, in its order. The child makes its rows and sends its columns; it is sent that
    order back and writes its rows in it to a file beside the export, while this process writes
    the header and its own rows to the export; then this process appends the child's file. If
    the child fails, this process makes the later rows itself and writes the export again, as
    the single-process export does."""
    half = len(order) // 2
    columns_r, columns_w = os.pipe()  # child -> parent: the child's columns and row count
    order_r, order_w = os.pipe()  # parent -> child: every column, in the file's order
    body = path.with_name(f".{path.name}.{os.getpid()}.rows")
    pid = os.fork()
    if pid == 0:  # the child: leaves by os._exit only (no exit handlers, no traceback)
        status = 1
        try:
            os.close(columns_r)
            os.close(order_w)
            table = _CsvTable()
            rows = [table.row(record) for record in records_of(lines_of_runs(order[half:]))]
            mine = list(table.columns)
            with os.fdopen(columns_w, "wb") as out:
                pickle.dump((mine, len(rows)), out)
            with os.fdopen(order_r, "rb") as into:
                columns = pickle.load(into)
            at = {name: index for index, name in enumerate(mine)}
            absent = len(mine)  # an empty cell past the child's own columns
            pick = operator.itemgetter(*(at.get(name, absent) for name in columns))
            with open(body, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerows(pick(row + [""] * (absent + 1 - len(row))) for row in rows)
            status = 0
        finally:
            os._exit(status)
    os.close(columns_w)
    os.close(order_r)
    try:  # the child's file goes whatever happens here (an interrupt included)
        table = _CsvTable()
        rows = [table.row(record) for record in records_of(lines_of_runs(order[:half]))]
        columns = list(table.columns)
        theirs: tuple[list[str], int] | None = None
        # Unbuffered, so that a failed send leaves nothing to flush again at close.
        with os.fdopen(order_w, "wb", buffering=0) as out:  # closed on every path
            try:
                with os.fdopen(columns_r, "rb") as into:
                    theirs = pickle.load(into)
                columns += [name for name in theirs[0] if name not in table.columns]
                pickle.dump(columns, out)
            except (OSError, EOFError, pickle.UnpicklingError):  # it failed before its rows
                theirs = None
        try:
            if theirs is not None:  # written while the child writes its rows
                _write_csv(path, columns, rows)
        finally:  # the child is reaped even when this write fails (a full disk)
            _, status = os.waitpid(pid, 0)
        if theirs is None or status != 0 or not body.is_file():
            rows += [table.row(record) for record in records_of(lines_of_runs(order[half:]))]
            _write_csv(path, list(table.columns), rows)
            return len(rows)
        with open(path, "ab") as handle, open(body, "rb") as rest:
            shutil.copyfileobj(rest, handle, 1 << 20)
        return len(rows) + theirs[1]
    finally:
        body.unlink(missing_ok=True)


_FIRST_COLUMNS = ["id", "started_at", "finished_at", "status", "reason"]


# Not in a cell: the log (in its file), the recorder's process, the verdict's nested form (two
# columns instead), thousands of step times (in JSON).
_NOT_EXPORTED = frozenset(
    ("log_tail", "recorder_pid", "recorder_started", "stability", "metrics.steady_step_times")
)


class _CsvTable:
    """The CSV export's columns, and each run's row placed in them: nested dicts become dotted
    columns (spec.threads, metrics.step_median_s), lists JSON text, the stability verdict two
    columns a spreadsheet can read. A column is the next one the first time a run has it.

    Each dict's keys are resolved to columns once per table, not once per run (a node per
    nested dict: its leaves' columns, its nested dicts' nodes). And runs recorded alike share
    a shape (the same keys holding the same kinds of value, nested alike): the first run of a
    shape is walked cell by cell, which makes a plan of which value goes to which column; the
    others' values are then picked into their row at once (a 10,000-run export has two
    million cells)."""

    def __init__(self) -> None:
        self.columns: dict[str, int] = {c: i for i, c in enumerate(_FIRST_COLUMNS)}
        self._root = _CsvNode("")
        self._plans: dict[tuple[Any, ...], _CsvPlan] = {}

    def row(self, record: dict[str, Any]) -> list[Any]:
        values: list[Any] = []
        shape = _shape(record, values)
        plan = self._plans.get(shape)
        if plan is None:
            row = self._walked_row(record)
            self._plans[shape] = self._plan(record)
            return row
        for at in plan.lists:  # half of them empty (no GPUs, no cluster GPUs)
            values[at] = json.dumps(values[at]) if values[at] else "[]"
        if plan.stability:
            values.extend(_stability_cells(record["stability"]))
        values.append("")  # the cell of every column this shape lacks
        row = list(plan.pick(values))
        # Text that starts like a formula is rare: looked for in all the row's text at once.
        joined = "\0" + "\0".join(plan.pick_texts(row)) if plan.texts else ""
        found = any(start in joined for start in _FORMULA_AFTER_NUL)
        for index in plan.texts + plan.others if found else plan.others:
            value = row[index]
            if value.__class__ is str and value[:1] in FORMULA_FIRST:
                row[index] = csv_cell(value)
        return row

    def _plan(self, record: dict[str, Any]) -> _CsvPlan:
        """Which of ``_shape``'s values goes to which column, for the runs shaped as
        ``record``, whose walk (``_walked_row``) has made every column and node it needs.
        Where two values fall on one column, the later in the walk's order wins, as there."""
        starts: dict[int, int] = {}  # id(dict) -> where its values begin in _shape's list
        values: list[Any] = []

        def place(value: dict[str, Any]) -> None:  # _shape's order
            starts[id(value)] = len(values)
            values.extend(value.values())
            for inner in list(value.values()):
                if inner.__class__ is dict:
                    place(inner)

        place(record)
        source: dict[int, int] = {}  # column -> the position of its value
        lists: list[int] = []

        def walk(node: _CsvNode, value: dict[str, Any]) -> None:  # _fill's order
            start = starts[id(value)]
            for offset, (key, inner) in enumerate(value.items()):
                if inner.__class__ is dict:
                    child = node.children[key]
                    if child is not None:
                        walk(child, inner)
                elif node.leaves[key] >= 0:
                    source[node.leaves[key]] = start + offset
                    if inner.__class__ is list:
                        lists.append(start + offset)

        walk(self._root, record)
        end = len(values)
        stability = isinstance(record.get("stability"), dict)
        if stability:  # two cells after the shape's values, placed after them all
            source[self.columns["stability"]] = end
            source[self.columns["stability_reasons"]] = end + 1
        absent = end + 2 if stability else end
        texts = sorted(c for c, at in source.items() if at < end and values[at].__class__ is str)
        others = sorted(c for c, at in source.items() if at >= end)  # of any kind
        pick = operator.itemgetter(*(source.get(c, absent) for c in range(len(self.columns))))
        return _CsvPlan(pick, lists, texts, _picker(texts), others, stability)

    def _walked_row(self, record: dict[str, Any]) -> list[Any]:
        row: list[Any] = [""] * len(self.columns)
        self._fill(row, self._root, record)
        stab = record.get("stability")
        if isinstance(stab, dict):
            verdict, reasons = _stability_cells(stab)
            self._put(row, self._column("stability"), verdict)
            self._put(row, self._column("stability_reasons"), reasons)
        return row

    def _fill(self, row: list[Any], node: _CsvNode, value: dict[str, Any]) -> None:
        leaves, children = node.leaves, node.children
        for key, inner in value.items():
            kind = inner.__class__
            if kind is dict:
                if key not in children:
                    name = node.prefix + key
                    children[key] = None if name in _NOT_EXPORTED else _CsvNode(name + ".")
                child = children[key]
                if child is not None:
                    self._fill(row, child, inner)
                continue
            index = leaves.get(key)
            if index is None:
                name = node.prefix + key
                index = leaves[key] = -1 if name in _NOT_EXPORTED else self._column(name)
            if index >= 0:
                self._put(row, index, json.dumps(inner) if kind is list else inner)

    def _column(self, name: str) -> int:
        index = self.columns.get(name)
        if index is None:
            index = self.columns[name] = len(self.columns)
        return index

    @staticmethod
    def _put(row: list[Any], index: int, value: Any) -> None:
        # Formulas neutralised (OWASP); only text can be one, and only text that starts like
        # one (csv_cell is called for the few that do).
        if value.__class__ is str and value[:1] in FORMULA_FIRST:
            value = csv_cell(value)
        if index == len(row):  # a column new with this run: the last one, its next cell
            row.append(value)
        else:
            row[index] = value


def _shape(value: dict[str, Any], values: list[Any]) -> tuple[Any, ...]:
    """What makes runs alike for the CSV: each dict's keys and the kinds of their values, nested
    dicts after them; ``values`` gets every value in the same order (a dict's, then its nested
    dicts')."""
    start = len(values)
    values.extend(value.values())
    kinds = tuple(map(type, value.values()))
    if dict not in kinds:
        return (tuple(value), kinds)
    nested = tuple(_shape(values[start + i], values) for i, k in enumerate(kinds) if k is dict)
    return (tuple(value), kinds, nested)


def _stability_cells(stab: dict[str, Any]) -> tuple[Any, str]:
    """The verdict's two columns: the verdict, and its reasons' messages."""
    reasons = stab.get("reasons") or []
    return stab.get("verdict"), "; ".join(
        r.get("message", "") for r in reasons if isinstance(r, dict)
    )


@dataclass(frozen=True)
class _CsvPlan:
    """How a shape's values (``_shape``) become a row: ``pick`` takes each column's value from
    them (the last one: an empty cell); ``lists`` are encoded as JSON first; ``texts`` are the
    columns that hold text (``pick_texts`` picks them) and ``others`` those that may (the
    verdict's): a formula there is neutralised; ``stability``: the two verdict cells follow the
    values."""

    pick: Callable[[list[Any]], tuple[Any, ...]]
    lists: list[int]
    texts: list[int]
    pick_texts: Callable[[list[Any]], tuple[str, ...]]
    others: list[int]
    stability: bool


def _picker(indices: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """A tuple of the items at ``indices`` (itemgetter gives a bare item for one index)."""
    if len(indices) == 1:
        return lambda items: (items[indices[0]],)
    return operator.itemgetter(*indices) if indices else lambda items: ()


# A cell that starts like a formula, found in the row's text cells joined by NULs.
_FORMULA_AFTER_NUL = tuple("\0" + start for start in FORMULA_STARTS)


class _CsvNode:
    """One nested dict's place in the CSV: its column-name prefix, the column of each scalar key
    (-1: not exported) and the node of each dict key (None: not exported)."""

    __slots__ = ("children", "leaves", "prefix")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.leaves: dict[str, int] = {}
        self.children: dict[str, _CsvNode | None] = {}
