"""What a sweep did not run, with the reason it was skipped."""

from __future__ import annotations

from collections.abc import Sequence

from tui_bench.engine.results.tables.model import Column, Table


def skipped_table(skipped: Sequence[tuple[str, str]]) -> Table | None:
    if not skipped:
        return None
    table = Table("skipped", "configurations not run", (Column("configuration"), Column("reason")))
    for key, reason in skipped:
        table.add([key, reason])
    return table
