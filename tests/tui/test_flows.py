"""Pilot tests driving the real flows with real workers on synthetic data (seconds each). The
first is a new user's: the default form, torch's CNN. The others are about what the app does
with any run (cancel, crash, quit, attach, sweeps): their workers are the example numpy plugin's
(conftest's ``numpy_framework``), which start in ~0.3 s against ~4 s for torch's."""

from __future__ import annotations

import csv

import psutil
import pytest
from textual.widgets import DataTable, Input, Select, Static

from tests.tui.helpers import wait_for
from tui_bench.engine.results.history import History
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.dialogs import ChoiceScreen, ConfirmScreen, MessageScreen, PromptScreen
from tui_bench.tui.screens.history import HistoryScreen
from tui_bench.tui.screens.live import LiveScreen
from tui_bench.tui.screens.setup import SetupScreen

pytestmark = pytest.mark.slow


def notes(app) -> str:
    return " | ".join(f"{n.title}: {n.message}" for n in app._notifications)


async def type_into(pilot, screen, field: str, text: str) -> None:
    widget = screen.query_one(f"#{field}", Input)
    widget.focus()
    widget.value = ""
    await pilot.press(*text)


async def fill_quick_run(
    pilot, setup: SetupScreen, epochs: str = "1", steps: str = "10", numpy: bool = True
) -> None:
    """A small run on the form: the numpy plugin's MLP, or (``numpy=False``) the form's default
    framework and model."""
    await wait_for(pilot, lambda: setup.available is not None, 30, "runtime probe")
    if numpy:
        setup.set_form(RunSpec(framework="numpy-mlp", api="numpy", model="mlp"))
        await pilot.pause()
    setup.query_one("#threads", Select).value = "1"
    await type_into(pilot, setup, "batch_size", "32")
    await type_into(pilot, setup, "epochs", epochs)
    await type_into(pilot, setup, "steps_per_epoch", steps)
    await type_into(pilot, setup, "train_samples", "1000")
    await type_into(pilot, setup, "test_samples", "256")
    await pilot.pause()


async def test_run_progress_result_history_export(tui_home, tmp_path):
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        assert isinstance(setup, SetupScreen)
        await fill_quick_run(pilot, setup, numpy=False)
        # A bad field blocks Start and says why, on screen.
        await type_into(pilot, setup, "batch_size", "abc")
        await pilot.pause()
        problem = str(setup.query_one("#setup-problem", Static).render())
        assert "batch_size must be a whole number, got 'abc'" in problem
        assert setup.query_one("#start").disabled
        await pilot.press("ctrl+r")
        assert app.live is None  # nothing started
        await type_into(pilot, setup, "batch_size", "32")
        await pilot.pause()
        assert not setup.query_one("#start").disabled, notes(app)

        await pilot.press("ctrl+r")
        await pilot.pause()
        assert isinstance(app.screen, LiveScreen)
        await wait_for(pilot, lambda: app.live.done, 180, "the run to end")
        await pilot.pause(0.6)  # one redraw tick
        live = app.live
        assert live.status == "finished", (live.reason, notes(app))
        assert live.steps_done == 10 and len(live.losses) == 10
        figures = str(app.screen.query_one("#figures", Static).render())
        assert "ms (median, steady, synced)" in figures and "samples/s (steady)" in figures
        assert "test acc" in figures
        status = str(app.screen.query_one("#run-status", Static).render())
        assert "finished" in status and live.run_id in status
        assert app.screen.query_one("#overall-progress").percentage == 1.0

        await pilot.press("f4")
        history_screen = app.screen
        assert isinstance(history_screen, HistoryScreen)
        table = history_screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, 10, "history row")
        row = table.get_row(live.run_id)
        # narrow columns at 100 wide: a finished run shows its stability verdict in place of
        # "finished", the verdict its record carries, beside the step time (acc comes last)
        assert row[2] == "torch/eager cnn"
        assert row[-2] in ("stable", "noisy", "unreliable"), row
        assert row[-2] == next(r.verdict for r in history_screen.records if r.id == live.run_id)

        out = tmp_path / "runs.csv"
        await pilot.press("e")
        assert isinstance(app.screen, PromptScreen)
        app.screen.query_one(Input).value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, out.exists, 10, "the CSV file")
        await pilot.pause(0.2)
        rows = list(csv.DictReader(out.open()))
        assert [r["id"] for r in rows] == [live.run_id]
        assert rows[0]["status"] == "finished" and rows[0]["spec.framework"] == "torch"


@pytest.mark.usefixtures("numpy_framework")
async def test_cancel_kills_worker_and_records_cancelled(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        await fill_quick_run(pilot, setup, epochs="50", steps="")
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: app.live.worker_pid is not None and app.live.steps_done > 0, 120, "steps"
        )
        pid = app.live.worker_pid
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # keep running
        assert not app.live.cancel_requested
        await pilot.press("x")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.live.done, 30, "the cancel")
        assert app.live.status == "cancelled"
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        record = History().get(app.live.run_id)
        assert record.status == "cancelled"
        await pilot.press("f4")
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, 10, "history row")
        assert table.get_row(app.live.run_id)[-2] == "cancelled"


@pytest.mark.usefixtures("numpy_framework")
async def test_worker_crash_shows_message_and_app_stays_up(tui_home, monkeypatch):
    monkeypatch.setenv("TUI_BENCH_FAULT", "crash@epoch:1")
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await fill_quick_run(pilot, app.screen)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.live.done, 120, "the crash")
        await wait_for(pilot, lambda: isinstance(app.screen, MessageScreen), 5, "the message")
        assert app.live.status == "failed"
        await pilot.press("escape")
        assert isinstance(app.screen, LiveScreen)
        await pilot.press("f2")  # still usable
        assert isinstance(app.screen, SetupScreen)


SWEEP_PRESET = """
name = "tiny-sweep"
study = "a two-configuration test sweep"
repeats = 2
model = "mlp"
batch_size = 32
epochs = 1
steps_per_epoch = 4
warmup_steps = 1
train_samples = 500
test_samples = 128
threads = 1
matrix = [{framework = "numpy-mlp", api = "numpy"}, {framework = "nope", api = "x"}]
"""
# The same sweep with runs that cannot end before a cancel lands: a 4-step run could finish
# between the worker's start and the cancel on a loaded machine (then nothing was cancelled).
LONG_SWEEP_PRESET = SWEEP_PRESET.replace('"tiny-sweep"', '"long-sweep"').replace(
    "epochs = 1\nsteps_per_epoch = 4", "epochs = 10000\nsteps_per_epoch = 16"
)


@pytest.mark.usefixtures("numpy_framework")
async def test_sweep_preset_runs_through_engine_then_cancel_says_how_to_resume(tui_home):
    from tui_bench.engine.runs import sweep as sweep_module

    (tui_home / "presets").mkdir()
    (tui_home / "presets" / "tiny-sweep.toml").write_text(SWEEP_PRESET)
    (tui_home / "presets" / "long-sweep.toml").write_text(LONG_SWEEP_PRESET)
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30, "runtime probe")
        await pilot.press("f7")
        app.screen.query_one(Input).value = "tiny-sweep"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "sweep dialog")
        detail = str(app.screen.query_one(".dialog-detail", Static).render())
        assert "2 configuration(s) × 2 repeat(s): 1 can run here, 2 run(s)" in detail
        assert "skipped 1× framework 'nope' is not available" in detail
        await pilot.press("y")
        await wait_for(pilot, lambda: app.live is not None and app.live.done, 240, "the sweep")
        await pilot.pause(1.2)  # a redraw tick
        live = app.live
        assert [r.status for r in live.results] == ["finished", "finished"], notes(app)
        header = str(app.screen.query_one("#run-header", Static).render())
        assert "run 2 of 2 · framework=numpy-mlp api=numpy · repeat 2/2" in header
        assert "skipped 1× framework 'nope'" in header
        records = [r for r in History().all() if r.group == live.sweep_id]
        assert sorted(r.repeat for r in records) == [0, 1]
        assert "sweep done" in notes(app)
        await pilot.press("f5")  # Compare shows the sweep through engine.results.tables
        summary = app.screen.query_one("#table-summary", DataTable)
        await wait_for(pilot, lambda: summary.row_count == 1, 10, "compare summary")
        assert str(summary.get_row_at(0)[2]) == "2"  # n = 2 repeats
        skipped = app.screen.query_one("#table-skipped", DataTable)
        assert "framework 'nope'" in str(skipped.get_row_at(0)[1])

        # A second sweep, cancelled during its first run: recorded so, resumable from the CLI.
        await pilot.press("f2")
        await pilot.press("f7")
        app.screen.query_one(Input).value = "long-sweep"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "sweep dialog")
        await pilot.press("y")
        await wait_for(
            pilot, lambda: app.live is not live and app.live.worker_pid is not None, 60, "start"
        )
        second = app.live
        await pilot.press("x")
        await pilot.press("y")
        await wait_for(pilot, lambda: second.done, 60, "the cancel")
        assert f"tui-bench run --resume {second.sweep_id}" in notes(app)
        sweep = sweep_module.find(second.sweep_id)
        assert len(sweep_module.pending(sweep, History())) == 2
        assert History().get(second.run_id).status == "cancelled"


@pytest.mark.usefixtures("numpy_framework")
async def test_quit_mid_run_can_cancel_the_run_and_records_it(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        await fill_quick_run(pilot, setup, epochs="50", steps="")
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: app.live.worker_pid is not None and app.live.steps_done > 0, 120, "steps"
        )
        run_id, pid = app.live.run_id, app.live.worker_pid
        # What history holds when the app leaves: after that, a real process ends at once.
        at_exit, exit_ = [], app.exit
        app.exit = lambda *a, **k: (at_exit.append(History().get(run_id).status), exit_(*a, **k))
        await pilot.press("ctrl+q")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("c")  # cancel it and quit
        await wait_for(pilot, lambda: app.return_code is not None, 20, "the app to exit")
    assert at_exit == ["cancelled"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.usefixtures("numpy_framework")
async def test_quit_leaves_the_run_running_and_a_new_app_attaches_to_it(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        # Long enough (30 epochs of 25 steps, ~6 s) to still be running when the second app
        # starts: a run that ends first is (rightly) not attached to.
        await fill_quick_run(pilot, app.screen, epochs="30", steps="60")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.live.steps_done > 0, 120, "steps")
        run_id, batch_id = app.live.run_id, app.live.batch_id
        await pilot.press("ctrl+q")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("enter")  # the default: leave it running
        await wait_for(pilot, lambda: app.return_code is not None, 10, "the app to exit")
    assert app.left_running == batch_id
    assert History().get(run_id).status == "running"  # the app is gone, the run is not

    again = TuiBenchApp()
    async with again.run_test(size=(100, 30)) as pilot:
        # Start-up finds the run in progress and opens Live on it, with its whole loss curve.
        await wait_for(
            pilot, lambda: again.live is not None and again.live.run_id == run_id, 30, "attach"
        )
        assert isinstance(again.screen, LiveScreen)
        await wait_for(pilot, lambda: again.live.done, 120, "the run to end")
        assert len(again.live.losses) == 30 * 25  # 800 training samples / batch 32, from step 1
        assert len(again.live.epoch_records) == 30
    assert History().get(run_id).status == "finished"


@pytest.mark.usefixtures("numpy_framework")
async def test_setup_threads_sweep_runs_as_an_engine_sweep(tui_home):
    app = TuiBenchApp(machine={"logical_cores": 2, "ram_mib": 16384.0})
    async with app.run_test(size=(80, 24)) as pilot:
        setup = app.screen
        await fill_quick_run(pilot, setup, steps="4")
        setup.query_one("#threads", Select).value = "sweep"
        await pilot.pause()
        assert "sweep: one run per thread count [1, 2]" in str(
            setup.query_one("#option-notes", Static).render()
        )
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.live.done, 240, "the sweep")
        records = [r for r in History().all() if r.group == app.live.sweep_id]
        assert sorted(r.spec["threads"] for r in records) == [1, 2]
        assert {r.status for r in records} == {"finished"}, notes(app)
        assert {r.preset for r in records} == {"setup-threads-sweep"}
