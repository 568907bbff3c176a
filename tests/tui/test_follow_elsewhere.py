"""The TUI follows every run on its home (issue 48 item 2), at 80×24, with runs started from
outside the app: Live picks up a run another shell or app starts while it is open, within a
redraw; History opens a run in progress live, with Live's view; a run whose series is quiet stays
'running' while its supervisor lives, and reads 'interrupted' only once the supervisor is gone
(the engine's liveness: pid and start time, ``machine.procs``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from textual.widgets import DataTable, Static

from tests.tui.fakes import write_batch_in_progress
from tests.tui.helpers import wait_for
from tui_bench.engine.results.history import History
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.history import HistoryScreen
from tui_bench.tui.screens.live import LiveScreen
from tui_bench.tui.screens.run_detail import RunDetailScreen
from tui_bench.tui.screens.setup import SetupScreen

MACHINE = {"logical_cores": 4, "ram_mib": 16384.0}
SIZE = (80, 24)
REFRESH_HZ = 2.0  # a redraw every 0.5 s; the watch looks as often


def notes(app) -> str:
    return " | ".join(f"{n.title}: {n.message}" for n in app._notifications)


@pytest.fixture
def supervisor_stand_in():
    """A live process standing for a batch's supervisor: the run lives while it does."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def more_steps(run_id: str, epoch: int, first: int, count: int) -> None:
    """The supervisor appends to the run's series: ``count`` more steps."""
    with open(History().series_path(run_id), "a", encoding="utf-8") as handle:
        for step in range(first, first + count, 2):
            event = {
                "v": 1,
                "type": "steps",
                "t": 100.0 + step,
                "epoch": epoch,
                "first_step": step,
                "losses": [0.5, 0.5],
                "step_times": [0.05, 0.05],
            }
            handle.write(json.dumps(event) + "\n")


async def test_live_picks_up_a_run_started_elsewhere_while_the_app_is_open(
    tui_home, supervisor_stand_in
):
    app = TuiBenchApp(refresh_hz=REFRESH_HZ, machine=MACHINE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(1.0)  # open, a few watches in, nothing running
        assert app.live is None
        batch_id, run_id = write_batch_in_progress(tui_home, 200, supervisor_stand_in.pid)
        # within a redraw or two (the attach folds the backlog in a thread)
        await wait_for(
            pilot, lambda: app.live is not None and app.live.run_id == run_id, 5, "the pick-up"
        )
        assert app.live.batch_id == batch_id and len(app.live.losses) == 200  # from step 1
        assert isinstance(app.screen, SetupScreen)  # the user stays where they were
        assert "run started elsewhere" in notes(app)
        await pilot.press("f3")
        assert isinstance(app.screen, LiveScreen)
        await pilot.pause(0.6)
        status = str(app.screen.query_one("#run-status", Static).render())
        assert status.startswith("running") and run_id in status
        # and it goes on following: new steps reach Live
        more_steps(run_id, 20, 10, 6)
        await wait_for(pilot, lambda: len(app.live.losses) == 206, 5, "new steps on Live")


async def test_history_opens_a_running_run_live_and_only_its_supervisor_ends_it(
    tui_home, supervisor_stand_in
):
    batch_id, run_id = write_batch_in_progress(tui_home, 200, supervisor_stand_in.pid)
    app = TuiBenchApp(start_mode="history", refresh_hz=REFRESH_HZ, machine=MACHINE)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, HistoryScreen)
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, 10, "the history row")
        await pilot.press("enter")
        detail = app.screen
        assert isinstance(detail, RunDetailScreen)
        await wait_for(pilot, lambda: detail.view is not None, 10, "the run's view")
        await pilot.pause(0.6)
        # A series that says nothing more is still a running run while its supervisor lives.
        status = str(detail.query_one("#run-status", Static).render())
        assert status.startswith("running"), status
        assert "interrupted" not in status and not detail.view.done
        more_steps(run_id, 20, 10, 6)
        await wait_for(pilot, lambda: len(detail.view.losses) == 206, 5, "followed live")
        # The supervisor goes: now, and only now, the run is settled as interrupted.
        supervisor_stand_in.kill()
        supervisor_stand_in.wait()
        await wait_for(pilot, lambda: detail.view.done, 5, "the settled end")
        assert detail.view.status == "interrupted"
        await pilot.pause(0.6)
        status = str(detail.query_one("#run-status", Static).render())
        assert status.startswith("interrupted"), status
        assert History().get(run_id).status == "interrupted"


@pytest.mark.slow
@pytest.mark.usefixtures("numpy_framework")
async def test_a_real_detached_run_from_the_cli_reaches_live_and_opens_from_history(tui_home):
    """A real run (the example numpy plugin's MLP: its worker starts in ~0.3 s, torch's in ~4 s)
    started by `tui-bench run --detach` from another shell while the app is open at 80×24: Live
    picks it up, History opens it as running and follows it to its end."""
    app = TuiBenchApp(refresh_hz=REFRESH_HZ, machine=MACHINE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        started = subprocess.run(
            [sys.executable, "-m", "tui_bench", "run", "--detach", "--framework", "numpy-mlp"]
            + ["--api", "numpy", "--model", "mlp", "--threads", "1", "--batch-size", "32"]
            + ["--epochs", "4"]
            + ["--steps-per-epoch", "40", "--train-samples", "2000", "--test-samples", "256"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert started.returncode == 0, started.stderr
        batch_id = started.stdout.strip().splitlines()[-1]
        await wait_for(
            pilot,
            lambda: app.live is not None and app.live.batch_id == batch_id,
            10,
            "Live to pick up the detached run",
        )
        await wait_for(pilot, lambda: app.live.run_id is not None, 60, "its run id")
        run_id = app.live.run_id
        await pilot.press("f4")
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, 10, "the history row")
        await pilot.press("enter")
        detail = app.screen
        assert isinstance(detail, RunDetailScreen)
        await wait_for(pilot, lambda: detail.view is not None, 10, "the run's view")
        if not detail.view.done:  # opened while it ran: followed, not settled
            assert detail.view.status in ("running", "starting")
        await wait_for(pilot, lambda: detail.view.done, 180, "the run to end")
        assert detail.view.status == "finished", detail.view.reason
        await wait_for(pilot, lambda: app.live.done, 30, "Live to see the end")
        assert app.live.status == "finished"
        assert History().get(run_id).status == "finished"
