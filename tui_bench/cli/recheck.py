"""``tui-bench history recheck [IDS]``: judge recorded runs again from the step times they keep
(after the stability rules change, or to take repeats recorded later into account)."""

from __future__ import annotations

import argparse
import json

from tui_bench.cli import common
from tui_bench.engine.results import stability
from tui_bench.engine.results.history import History


def cmd_recheck(args: argparse.Namespace) -> int:
    history = History()
    records = history.all()
    chosen = [history.get(i) for i in args.run_ids] if args.run_ids else records
    out, changed, skipped = [], 0, 0
    for record in chosen:
        if record.get("status") != "finished":
            continue
        verdict = stability.assess_record(
            record, repeat_medians=stability.repeat_medians_for(record, records)
        )
        if verdict is None:
            skipped += 1  # recorded before step times were kept: nothing to judge again
            continue
        before = stability.verdict_of(record)
        stored = verdict.as_dict()
        history.update(record["id"], stability=stored)
        changed += before != verdict.verdict
        out.append({"id": record["id"], "before": before, "stability": stored})
        if not args.json:
            line = stability.verdict_line({"id": record["id"], "stability": stored})
            was = f" (was {before})" if before != verdict.verdict else ""
            print(f"{line}{was}")
    if args.json:
        print(json.dumps(out, indent=2))
    common.console(stderr=True).print(
        f"rechecked {len(out)} run(s), {changed} verdict(s) changed"
        + (f"; {skipped} recorded without step times" if skipped else "")
    )
    return 0


def register(history_actions: argparse._SubParsersAction) -> None:
    """Adds ``recheck`` to ``tui-bench history``'s actions."""
    recheck = history_actions.add_parser(
        "recheck", help="judge runs' stability again from their stored step times"
    )
    recheck.add_argument("run_ids", nargs="*", metavar="ID", help="ids or prefixes (default: all)")
    recheck.add_argument("--json", action="store_true")
    recheck.set_defaults(func=cmd_recheck)
