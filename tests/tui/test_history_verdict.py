"""The History screen shows each run's stability verdict from the fast summaries: a column of its
own in the wide table, and in place of "finished" at 80 columns, where both don't fit."""

from __future__ import annotations

from tui_bench.engine.results.history import History
from tui_bench.tui.screens.history import COLUMNS, COLUMNS_NARROW, matches, row_values


def _record(status: str, verdict: str | None) -> dict:
    record = {
        "status": status,
        "started_at": "2026-11-25T09:00:00+00:00",
        "spec": {"framework": "torch", "api": "eager", "device": "cpu", "threads": 1},
        "metrics": {"step_median_s": 0.08},
    }
    if verdict:
        record["stability"] = {"verdict": verdict, "reasons": [{"rule": "cv", "message": "x"}]}
    return record


def test_summaries_carry_the_verdict_and_the_table_shows_it(isolated_home):
    history = History()
    history.add(_record("finished", "unreliable"))
    history.add(_record("failed", None))
    history.add(_record("finished", None))
    unreliable, failed, unjudged = History().summaries()
    assert unreliable.stability == {"verdict": "unreliable"}  # reasons stay in the record
    row = row_values(unreliable)
    assert (row["verdict"], row["status"], row["state"]) == ("unreliable", "finished", "unreliable")
    assert matches(unreliable, "unreliable") and not matches(failed, "unreliable")
    assert row_values(failed)["state"] == "failed"  # a run that did not finish says so
    assert row_values(unjudged)["state"] == "finished"
    assert ("verdict", "verdict") in COLUMNS and ("status", "status") in COLUMNS
    narrow = [key for key, _ in COLUMNS_NARROW]
    assert narrow.index("state") == narrow.index("step_ms") + 1  # the verdict beside its number
