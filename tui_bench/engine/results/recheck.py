"""``history recheck``: finished runs judged again from what their records store, with their
configuration's repeats, and the new verdicts written back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tui_bench.engine.results.stability import assess_record, repeat_medians_for

if TYPE_CHECKING:  # history reads records through record.Run; only its type is needed here
    from tui_bench.engine.results.history import History


def recheck(history: History, run_ids: Sequence[str] = ()) -> tuple[list[dict[str, Any]], int]:
    """Judge finished runs again from their stored step times (all, or ``run_ids``), with their
    configuration's repeats, and store the new verdicts. Returns ``[{id, before, stability}]``
    and how many runs had no step times to judge (recorded before they were kept)."""
    records = history.all()
    chosen = [history.get(i) for i in run_ids] if run_ids else records
    out, skipped = [], 0
    for run in chosen:
        if not run.finished:
            continue
        verdict = assess_record(run, repeat_medians=repeat_medians_for(run, records))
        if verdict is None:
            skipped += 1
            continue
        stored = verdict.as_dict()
        history.update(run.id, stability=stored)
        out.append({"id": run.id, "before": run.verdict, "stability": stored})
    return out, skipped
