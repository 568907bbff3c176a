"""The Compare screen states the verdict in the words of ``verdict.text`` and of `tui-bench
compare`, and its "[!] also differs" note names only what differs besides the compared setting."""

from __future__ import annotations

from textual.widgets import Static

from tests.histories import fill, record
from tests.tui.helpers import show_in_compare, wait_for
from tui_bench.cli import main
from tui_bench.engine.results import tables, verdict
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import sweep as sweep_module
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.compare import CompareScreen

STABLE = {"verdict": "stable", "reasons": []}


def threads_study(compile_differs: bool = False) -> list[dict]:
    """Five stable runs at 1 thread against five at 2 (group "g"), each observed on as many
    cores as it was given; with ``compile_differs`` the 2-thread runs also compiled."""
    runs = []
    for threads, step_ms, start in ((1, 40.0, 0), (2, 25.0, 10)):
        for i in range(5):
            run = record(start + i, step_ms + i % 3, threads=threads, group="g", stability=STABLE)
            run["metrics"]["cores_observed"] = float(threads)
            compiles = "yes" if compile_differs and threads == 2 else "no"
            run["worker"]["settings"] = {"compile": compiles}
            runs.append(run)
    return runs


def note_lines(screen: CompareScreen) -> list[str]:
    return str(screen.query_one("#compare-note", Static).render()).splitlines()


async def test_the_screen_states_the_verdict_the_cli_and_verdict_text_state(
    tui_home, capsys, monkeypatch
):
    fill(threads_study())
    records, skipped, published = sweep_module.collect(["g"], History())
    comparison = tables.compute(records, skipped=skipped, published=published)
    expected = verdict.text(comparison.tables(), comparison.metric.key)
    assert "2 thr is 1.58× faster than 1 thr" in expected  # an answer, not an empty verdict

    monkeypatch.setenv("COLUMNS", "2000")  # the CLI's verdict paragraph on one line
    assert main(["compare", "g"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("verdict")]
    assert printed == [f"verdict: {expected}"]

    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        app.switch_mode("compare")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        screen.compare(["g"])  # through the history, as History's c hands ids over
        await wait_for(pilot, lambda: bool(screen.records), what="the runs of g")
        await pilot.press("v")  # the verdict, folded to a line, opens whole
        await pilot.pause()
        opened = str(screen.query_one("#compare-verdict", Static).render()).splitlines()
        shown = [line for line in opened if line.startswith("verdict")]
        assert shown == printed


async def test_also_differs_leaves_out_the_compared_setting_and_what_is_observed_of_it(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        # only threads differ: the card shows threads configured beside threads observed, and
        # neither is a second difference
        screen = await show_in_compare(app, pilot, threads_study())
        card = screen.comparison.table("fairness") if screen.comparison else None
        assert card is not None
        assert set(card.values("setting")) == {"threads configured", "threads observed"}
        assert "also differs" not in note_lines(screen)[0]
        # compilation differs too: that, and only that, is flagged
        screen = await show_in_compare(app, pilot, threads_study(compile_differs=True))
        assert "[!] also differs: compilation (fairness tab)" in note_lines(screen)[0]
