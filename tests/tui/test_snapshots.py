"""SVG snapshots at 80×24 and 120×40, drawn from the seeded fake event source (tests/tui/fakes.py).

Machine facts (cores, RAM) are pinned so the fixed graph ranges do not depend on the host.
Update the baseline with: python -m pytest tests/tui/test_snapshots.py --snapshot-update"""

from __future__ import annotations

import pytest

from tests.tui.fakes import fake_events, fake_inference_events, write_fake_history
from tests.tui.helpers import wait_for
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp

MACHINE = {"logical_cores": 4, "ram_mib": 16384.0}
SPEC = RunSpec(threads=2, epochs=3, batch_size=64)


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """The Setup screen's machine line reads this box's load: pinned, like the machine facts."""
    from tui_bench.engine.machine import doctor

    monkeypatch.setattr(doctor, "check", lambda: doctor.Report([]))


def make_app(start_mode: str | None = None) -> TuiBenchApp:
    return TuiBenchApp(start_mode=start_mode, machine=MACHINE)


def feed_fake_run(app: TuiBenchApp, spec: RunSpec, **kwargs) -> None:
    """Through the same path as the follower thread: BatchView.push, then the timer's redraw."""
    app.live = view = BatchView(spec=spec)
    for event in fake_events(spec, "20260102-030405-f00d", **kwargs):
        view.push(event)
    if kwargs.get("finish", True):
        view.push({"type": "batch_done"})


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_live_running(snap_compare, tui_home, size):
    app = make_app()

    async def run_before(pilot):
        feed_fake_run(app, SPEC, finish=False, stop_after_epoch=2)
        app.switch_mode("live")
        await pilot.pause()
        app.redraw_live(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_live_inference_running(snap_compare, tui_home):
    """An inference run half way: the latency histogram (p50/p90/p99 marked) and requests/s
    where a training run has its loss and epoch bars."""
    app = make_app()
    spec = RunSpec(mode="inference", batch_size=1, threads=1, requests=600)

    async def run_before(pilot):
        app.live = view = BatchView(spec=spec)
        for event in fake_inference_events(
            spec, "20260102-030405-1f0d", finish=False, stop_after=400
        ):
            view.push(event)
        app.switch_mode("live")
        await pilot.pause()
        app.redraw_live(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_live_finished_gpu(snap_compare, tui_home):
    app = make_app()

    async def run_before(pilot):
        feed_fake_run(app, SPEC.with_changes(device="gpu:0"), gpu=True)
        app.switch_mode("live")
        await pilot.pause()
        app.redraw_live(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def _history(home) -> list[str]:
    runs = [
        ("20260102-030405-aaaa", RunSpec(threads=1, epochs=1), 0.068),
        ("20260102-030406-bbbb", RunSpec(threads=2, epochs=1), 0.039),
        ("20260102-030407-cccc", RunSpec(threads=4, epochs=1), 0.031),
    ]
    return write_fake_history(home, runs)


def test_compare_thread_scaling(snap_compare, tui_home):
    ids = _history(tui_home)
    app = make_app()

    async def run_before(pilot):
        from textual.widgets import DataTable

        app.open_compare(ids)
        await wait_for(pilot, lambda: len(app.screen.query("#table-scaling")) == 1, 10, "screen")
        table = app.screen.query_one("#table-scaling", DataTable)
        await wait_for(pilot, lambda: table.row_count == 3, 10, "compare")
        # engine.results.tables' thread-scaling table (speed-up, efficiency), over the bar/line plots.
        app.screen.query_one("#compare-tabs").active = "tab-scaling"
        # DataTable sizes its columns on a later refresh: wait for that too.
        await wait_for(pilot, lambda: table.virtual_size.width > 60, 10, "column widths")
        await pilot.wait_for_animation()  # the tab underline slides to the chosen tab
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


@pytest.mark.needs_runtime("torch")
def test_setup_impossible_combination(snap_compare, tui_home):
    app = make_app()

    async def run_before(pilot):
        from textual.widgets import Select

        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        banner = setup.query_one("#machine-banner")
        await wait_for(pilot, lambda: "checking" not in str(banner.render()), 30, "the check")
        setup.query_one("#model", Select).value = "lstm"
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help(snap_compare, tui_home):
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["f1"])
