"""Attributes down: the app tells the Compare screen what to compare (at construction or with
``compare()``); the screen never reads an attribute of the app."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.tui.fakes import write_fake_history
from tests.tui.helpers import wait_for
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.messages import CompareRequested
from tui_bench.tui.screens.compare import CompareScreen


async def test_compare_screen_shows_the_ids_it_is_given_not_an_app_attribute(tui_home):
    ids = write_fake_history(
        tui_home,
        [
            ("20260102-030405-aaaa", RunSpec(threads=1, epochs=1), 0.068),
            ("20260102-030406-bbbb", RunSpec(threads=2, epochs=1), 0.039),
            ("20260102-030407-cccc", RunSpec(threads=4, epochs=1), 0.031),
        ],
    )
    screen = CompareScreen(ids[:2])
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(screen)
        summary = screen.query_one("#table-summary", DataTable)
        await wait_for(pilot, lambda: summary.row_count == 2, 10, "the two runs")
        screen.compare(ids)  # what the app calls on a later CompareRequested
        await wait_for(pilot, lambda: summary.row_count == 3, 10, "the three runs")
        assert screen.run_ids == ids
        note = str(screen.query_one("#compare-note", Static).render())
        assert note.startswith(", ".join(ids))
        assert not hasattr(app, "compare_ids")  # the ids live on the screen only


async def test_app_hands_compare_requests_down_to_the_compare_screen(tui_home):
    ids = write_fake_history(
        tui_home,
        [
            ("20260102-030405-aaaa", RunSpec(threads=1, epochs=1), 0.068),
            ("20260102-030406-bbbb", RunSpec(threads=2, epochs=1), 0.039),
        ],
    )
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        app.screen.post_message(CompareRequested(ids[:1]))
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), 5, "compare")
        compare = app.screen
        summary = compare.query_one("#table-summary", DataTable)
        await wait_for(pilot, lambda: summary.row_count == 1, 10, "one run")
        assert compare.run_ids == ids[:1]
        await pilot.press("f2")
        app.screen.post_message(CompareRequested(ids))  # the same screen, new ids
        await wait_for(pilot, lambda: app.screen is compare, 5, "back to compare")
        await wait_for(pilot, lambda: summary.row_count == 2, 10, "both runs")
        assert compare.run_ids == ids
