"""The typed table: columns with a kind and a unit, rows of plain values (never a number
formatted as text), the verdicts of the runs behind them, and how a terminal or a page shows the
columns (``Shown``). Nothing here computes a figure; the table families fill these tables and
``results/render.py`` formats them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tui_bench.engine.results import metrics, stability
from tui_bench.engine.results.record import Run

Cell = float | int | str | bool | None

# Column kinds: text; count (int); number (float, in the column's unit); ratio
# (dimensionless, ×); fraction (0..1, shown as a percentage); p (a p-value); flag (bool).
TEXT, COUNT, NUMBER, RATIO, FRACTION, P_VALUE, FLAG = (
    "text",
    "count",
    "number",
    "ratio",
    "fraction",
    "p",
    "flag",
)
NUMERIC_KINDS = frozenset({COUNT, NUMBER, RATIO, FRACTION, P_VALUE})

# How a shown column combines its source cells (``Shown.form``).
VALUE, PLUS_MINUS, RANGE, WITH_N, PAIR = "value", "plus_minus", "range", "with_n", "pair"


# A metric's label, unit and better direction: ``results/metrics.py``, the one registry.
Metric = metrics.Metric
METRICS: dict[str, Metric] = metrics.choices()  # what compare offers to compare on


def metric_info(key: str) -> Metric:
    """A registered metric, or one read off its key's name (``metrics.get``)."""
    return metrics.get(key)


# Metrics whose spread over repeats comes from the seed (initialisation, shuffling, dropout):
# repeats with one seed are not replicates of them.
SEED_DEPENDENT = ("test_accuracy", "val_accuracy", "target_reached_s")


# -- the typed table ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    name: str
    kind: str = TEXT
    unit: str = ""
    terminal: bool = True  # worth a terminal's width; CSV and JSON always get every column

    @property
    def numeric(self) -> bool:
        return self.kind in NUMERIC_KINDS


@dataclass(frozen=True)
class Shown:
    """A column as a terminal or a page shows it: ``header`` over ``sources`` combined by
    ``form``: value (one cell as is), plus_minus (mean ± std), range (min–max), with_n (a
    median and its n), pair (n/n of a ratio's two sides)."""

    header: str
    sources: tuple[str, ...]
    form: str = VALUE


@dataclass(frozen=True)
class Verdicts:
    """The stability verdicts of the finished runs behind a number (``results/stability.py``)."""

    stable: int = 0
    noisy: int = 0
    unreliable: int = 0
    unjudged: int = 0
    note: str = ""  # "" when all are stable (or unjudged), else "not stable: 1 noisy of 3"

    @property
    def n(self) -> int:
        return self.stable + self.noisy + self.unreliable + self.unjudged

    @property
    def state(self) -> str:
        """The worst verdict: unreliable, noisy, stable, "not judged", or "" with no run."""
        if self.unreliable:
            return stability.UNRELIABLE
        if self.noisy:
            return stability.NOISY
        if self.stable and not self.unjudged:
            return stability.STABLE
        return "not judged" if self.n else ""

    @classmethod
    def of(cls, runs: Sequence[Run]) -> Verdicts:
        counts = {stability.STABLE: 0, stability.NOISY: 0, stability.UNRELIABLE: 0}
        unjudged = 0
        for r in runs:
            if not r.finished:
                continue
            verdict = r.verdict
            if verdict in counts:
                counts[verdict] += 1
            else:
                unjudged += 1
        return cls(
            counts[stability.STABLE],
            counts[stability.NOISY],
            counts[stability.UNRELIABLE],
            unjudged,
            stability.stability_note(runs, unjudged=False),
        )


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    # The verdicts of the runs each side of the row's numbers comes from ("this", "baseline",
    # a configuration's label); empty for a row that is not a measurement.
    verdicts: tuple[tuple[str, Verdicts], ...] = ()


@dataclass
class Table:
    name: str  # short id: summary, comparisons, scaling, workers, study, published, fairness…
    title: str
    columns: tuple[Column, ...]
    rows: list[Row] = field(default_factory=list)
    note: str = ""
    layout: tuple[Shown, ...] | None = None  # None: every terminal column as it is

    def add(self, cells: Sequence[Cell], verdicts: Sequence[tuple[str, Verdicts]] = ()) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.name}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(Row(tuple(cells), tuple(verdicts)))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def index(self, name: str | Column) -> int:
        """A column's place, by the column a table family declares (or its name)."""
        return self.names.index(name.name if isinstance(name, Column) else name)

    def column(self, name: str | Column) -> Column:
        return self.columns[self.index(name)]

    def values(self, name: str | Column) -> list[Cell]:
        i = self.index(name)
        return [row.cells[i] for row in self.rows]

    def has(self, column: Column) -> bool:
        return column.name in self.names

    def cell(self, row: Row, column: Column) -> Cell:
        """One row's cell in ``column`` (a column the table family declares: a reader names
        the column, never a header a view shows)."""
        return row.cells[self.index(column)]

    def number(self, row: Row, column: Column) -> float | None:
        """A numeric column's cell as a float, None where it is empty. Asking a text column for
        a number is a programming error (ValueError), not an empty cell."""
        if not self.column(column).numeric:
            raise ValueError(f"{self.name}: column {column.name!r} holds no numbers")
        value = self.cell(row, column)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def text(self, row: Row, column: Column) -> str:
        """A cell as text ("" where it is empty)."""
        value = self.cell(row, column)
        return "" if value is None else str(value)

    def flag(self, row: Row, column: Column) -> bool | None:
        value = self.cell(row, column)
        return value if isinstance(value, bool) else None

    def records(self) -> list[dict[str, Cell]]:
        return [dict(zip(self.names, row.cells, strict=True)) for row in self.rows]

    @property
    def shown(self) -> tuple[Shown, ...]:
        if self.layout is not None:
            return self.layout
        return tuple(Shown(c.name, (c.name,)) for c in self.columns if c.terminal)
