"""Pilot tests of the screens without a real worker: history from a fake store, config, presets."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Select, Static

from tests.tui.fakes import write_fake_history
from tests.tui.helpers import show_in_compare, wait_for
from tui_bench.engine.results.history import History
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.compare import CompareScreen
from tui_bench.tui.screens.dialogs import ConfirmScreen, HelpScreen, PromptScreen
from tui_bench.tui.screens.history import HistoryScreen
from tui_bench.tui.screens.run_detail import RunDetailScreen
from tui_bench.tui.screens.setup import SetupScreen
from tui_bench.tui.widgets.plots import LossPlot

RUNS = [
    ("20260102-030405-aaaa", RunSpec(threads=1, epochs=1), 0.068),
    ("20260102-030406-bbbb", RunSpec(threads=2, epochs=1, model="mlp"), 0.039),
]


def notes(app) -> str:
    return " | ".join(f"{n.title}: {n.message}" for n in app._notifications)


async def history_ready(pilot, app, rows: int) -> DataTable:
    await pilot.press("f4")
    table = app.screen.query_one(DataTable)
    await wait_for(pilot, lambda: table.row_count == rows, 10, f"{rows} rows")
    return table


async def test_keys_remapped_from_config(tui_home, tmp_path):
    (tmp_path / "config.toml").write_text('[keys]\nshow_history = "f10"\nhistory_mark = "m"\n')
    write_fake_history(tui_home, RUNS)
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        from tui_bench.tui.widgets.mode_bar import ModeBar

        assert "F10 History" in str(app.screen.query_one(ModeBar).render())  # shows the remap
        await pilot.press("f10")
        assert isinstance(app.screen, HistoryScreen)
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, 10)
        await pilot.press("m")
        assert len(app.screen.marked) == 1


async def test_bad_config_and_corrupt_history_are_reported_app_stays_up(tui_home, tmp_path):
    (tmp_path / "config.toml").write_text("[keys\n")
    write_fake_history(tui_home, RUNS)
    (tui_home / "history.jsonl").write_text("{not json")
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "rebuilt 2 run(s)" in notes(app), 10, "corrupt-history note")
        assert "not valid TOML" in notes(app)
        await history_ready(pilot, app, 2)  # rebuilt from the series files


async def test_missing_runtime_blocks_start_with_the_fix(tui_home, tmp_path):
    (tmp_path / "config.toml").write_text('[runtimes.torch]\npython = "/nonexistent/python"\n')
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        await pilot.pause()
        problem = str(setup.query_one("#setup-problem", Static).render())
        assert (
            "runtime" in problem
            and "/nonexistent/python" in problem
            and "fix the config file" in problem
        )
        assert setup.query_one("#start").disabled
        assert setup.query_one("#framework", Select).value == "torch"
        assert "✗" in str(setup.query_one("#framework", Select)._options[0][0])


@pytest.mark.needs_runtime("torch")
async def test_impossible_combination_is_on_screen(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        setup.query_one("#model", Select).value = "vgg16"
        await pilot.pause()
        problem = str(setup.query_one("#setup-problem", Static).render())
        assert "vgg16" in problem and "32×32" in problem
        assert setup.query_one("#start").disabled
        setup.query_one("#dataset", Select).value = "synthetic-cifar10"
        await pilot.pause()
        assert not setup.query_one("#start").disabled, notes(app)


@pytest.mark.needs_runtime("torch")
async def test_missing_real_dataset_blocks_start_with_the_download_command(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        await wait_for(pilot, lambda: "mnist" in setup.dataset_checks, 10, "dataset check")
        label = dict((v, str(k)) for k, v in setup.query_one("#dataset", Select)._options)
        assert label["mnist"] == "mnist ↓11.6 MB"
        assert label["synthetic-mnist"] == "synthetic-mnist"
        # the synthetic default needs no files
        await wait_for(pilot, lambda: not setup.query_one("#start").disabled, 5, "ready")
        setup.query_one("#dataset", Select).value = "mnist"
        await wait_for(pilot, lambda: setup.query_one("#start").disabled, 5, "start disabled")
        problem = str(setup.query_one("#setup-problem", Static).render())
        assert "not in the cache" in problem and "tui-bench data download mnist" in problem
        note = str(setup.query_one("#option-notes", Static).render())
        assert "not downloaded: 11.6 MB to download" in note
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, SetupScreen) and app.live is None
        setup.query_one("#dataset", Select).value = "synthetic-mnist"
        await wait_for(pilot, lambda: not setup.query_one("#start").disabled, 5, "start enabled")


async def test_history_open_sort_filter_compare_delete_run_again(tui_home):
    write_fake_history(tui_home, RUNS)
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = await history_ready(pilot, app, 2)
        screen = app.screen
        # "s" moves the sort to the next column; a header click (sort_by) picks one, twice flips it
        await pilot.press("s")
        assert screen.sort_key == "framework"
        screen.sort_by("step_ms")
        assert [r.id for r in screen.shown] == [RUNS[1][0], RUNS[0][0]]  # 39 ms first
        screen.sort_by("step_ms")
        assert [r.id for r in screen.shown] == [RUNS[0][0], RUNS[1][0]]
        # filter
        await pilot.press("slash")
        await pilot.press(*"mlp")
        assert [r.id for r in screen.shown] == [RUNS[1][0]]
        await pilot.press("enter")
        screen.query_one("#history-filter", Input).value = ""
        await pilot.pause()
        # open a run: its plots from the stored series
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        assert isinstance(app.screen, RunDetailScreen)
        plot = app.screen.query_one(LossPlot)
        await wait_for(pilot, lambda: len(plot.losses) == 40, 10, "stored losses")
        await pilot.press("escape")
        # mark both, compare
        table.move_cursor(row=0)
        await pilot.press("space", "space")
        assert len(screen.marked) == 2
        await pilot.press("c")
        assert isinstance(app.screen, CompareScreen)
        compare = app.screen
        await wait_for(
            pilot,
            lambda: compare.query_one("#table-summary", DataTable).row_count,
            10,
            "compare tables",
        )
        summary = compare.query_one("#table-summary", DataTable)
        assert summary.row_count == 2
        rows = [[str(c) for c in summary.get_row_at(i)] for i in range(2)]
        assert [r[1] for r in rows] == ["cnn", "mlp"]  # the fewest fields that tell them apart
        assert [r[2] for r in rows] == ["1", "1"]  # n: one run each
        note = str(compare.query_one("#compare-note", Static).render())
        assert "2 run(s), 2 finished" in note and "step_median_s" in note
        await pilot.press("m")  # next metric: the same runs, another figure
        await wait_for(
            pilot,
            lambda: "train_wall_s" in str(compare.query_one("#compare-note", Static).render()),
            5,
            "metric switch",
        )
        # delete one with confirmation
        await pilot.press("f4")
        screen.marked.clear()
        screen.refill()
        table.move_cursor(row=0)
        doomed = screen.cursor_id()
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: table.row_count == 1, 10, "deletion")
        assert [r.id for r in History().all()] != [doomed] and len(History().all()) == 1
        # run again: the spec goes into Setup
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, SetupScreen), 5)
        await pilot.pause()
        left = History().all()[0].spec
        assert app.screen.query_one("#model", Select).value == left["model"]


async def test_preset_save_then_load(tui_home, tmp_path):
    app = TuiBenchApp()
    path = tmp_path / "p.toml"
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        setup.query_one("#epochs", Input).value = "7"
        await pilot.press("f8")
        assert isinstance(app.screen, PromptScreen)
        app.screen.query_one(Input).value = str(path)
        await pilot.press("enter")
        await wait_for(pilot, path.exists, 5)
        assert RunSpec.from_toml(path.read_text()).epochs == 7
        setup.query_one("#epochs", Input).value = "1"
        path.write_text(path.read_text().replace("epochs = 7", "epochs = 3"))
        await pilot.press("f7")
        app.screen.query_one(Input).value = str(path)
        await pilot.press("enter")
        await wait_for(pilot, lambda: setup.query_one("#epochs", Input).value == "3", 5)
        bad = tmp_path / "bad.toml"
        bad.write_text('framework = "nope"\n')
        await pilot.press("f7")
        app.screen.query_one(Input).value = str(bad)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "framework 'nope' is not available" in notes(app), 5)


async def test_help_lists_binding_ids(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        text = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "start_run" in text and "show_history" in text
        await pilot.press("escape")
        assert isinstance(app.screen, SetupScreen)


async def test_palette_lists_actions_and_loads_a_preset(tui_home):
    presets = tui_home / "presets"
    presets.mkdir()
    preset = RunSpec(model="mlp", epochs=4, warmup_steps=2, optimizer="sgd")
    (presets / "tiny-mlp.toml").write_text(preset.to_toml())
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        await pilot.press("ctrl+p")
        await pilot.press(*"tiny-mlp")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: setup.query_one("#model", Select).value == "mlp", 5, "preset")
        assert setup.query_one("#epochs", Input).value == "4"
        assert setup.query_one("#warmup_steps", Input).value == "2"
        # A field the form does not show is kept (and said), not reset to its default.
        await wait_for(
            pilot,
            lambda: "optimizer = sgd" in str(setup.query_one("#option-notes", Static).render()),
            5,
            "note",
        )
        assert setup.current()[0].warmup_steps == 2 and setup.current()[0].optimizer == "sgd"
        await pilot.press("ctrl+p")
        await pilot.press(*"History: recorded")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(
            pilot, lambda: isinstance(app.screen, HistoryScreen), 5, "history via palette"
        )


async def test_history_refuses_to_delete_a_run_in_progress(tui_home):
    import os

    from tui_bench.engine.machine import procs

    (run_id,) = write_fake_history(tui_home, RUNS[:1])
    # The run is in progress: its recorder (a supervisor) is a live process.
    owner = procs.identity(os.getppid())
    History().update(
        run_id, status="running", recorder_pid=owner["pid"], recorder_started=owner["started"]
    )
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = await history_ready(pilot, app, 1)
        table.move_cursor(row=0)
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: "not deleted" in notes(app), 10, "the refusal")
        assert "in progress: stop it first" in notes(app)
        assert [r.id for r in History().all()] == [run_id]
        assert History().series_path(run_id).exists()


async def test_start_follows_the_newest_run_in_progress_and_the_palette_any_other(tui_home):
    import subprocess
    import time

    from tests.tui.fakes import write_batch_in_progress

    stand_ins = []  # live "supervisors", started a clock tick apart (newest = started last)
    for _ in range(2):
        stand_ins.append(subprocess.Popen(["sleep", "120"]))
        time.sleep(0.1)
    try:
        older, older_run = write_batch_in_progress(tui_home, 400, stand_ins[0].pid)
        newer, newer_run = write_batch_in_progress(tui_home, 200, stand_ins[1].pid)
        app = TuiBenchApp()
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.live is not None, 10, "attach at start")
            assert app.live.batch_id == newer and app.live.run_id == newer_run
            assert len(app.live.losses) == 200  # the whole curve, from step 1
            await wait_for(pilot, lambda: "1 more in progress (ctrl+p: Follow)" in notes(app), 5)
            await pilot.press("ctrl+p")
            await pilot.press(*f"Follow {older[-8:]}")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.live.batch_id == older, 10, "the older run")
            assert app.live.run_id == older_run and len(app.live.losses) == 400
    finally:
        for process in stand_ins:
            process.kill()


async def test_cntk_is_listed_disabled_with_its_reason(tui_home):
    """CNTK has no runtime anywhere reachable: the Setup screen lists it, says why, and its
    option cannot be picked."""
    from textual.widgets import OptionList

    from tui_bench.engine import catalog

    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: setup.available is not None, 30)
        await pilot.pause()
        select = setup.query_one("#framework", Select)
        names = [value for _, value in select._options]
        index = names.index("cntk")
        label = str(select._options[index][0])
        assert label.startswith("CNTK ✗") and "Python 2.7, 3.5 and 3.6" in label
        assert catalog.framework("cntk").unavailable in label
        overlay = select.query_one(OptionList)
        assert overlay.get_option_at_index(index).disabled
        assert not overlay.get_option_at_index(names.index("torch")).disabled


async def test_setup_shows_the_machine_check_in_one_line_and_where_to_read_it(
    tui_home, monkeypatch
):
    from tui_bench.engine.machine import doctor

    checks = [
        doctor.Check("cpu", "load", doctor.FAIL, "3.1 on 2 cores", "wait"),
        doctor.Check("cpu", "governor", doctor.WARN, "powersave", "cpupower …"),
        doctor.Check("memory", "swap", doctor.OK, "0 B"),
    ]
    monkeypatch.setattr(doctor, "check", lambda: doctor.Report(checks))
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        banner = app.screen.query_one("#machine-banner", Static)
        await wait_for(pilot, lambda: "checking" not in str(banner.render()), 30, "the check")
        assert str(banner.render()) == "machine: 1 failure, 1 warning — F6 System"
        assert banner.has_class("failing") and banner.region.width > 0  # on screen at 80×24
        checks[0] = doctor.Check("cpu", "load", doctor.OK, "0.2 on 2 cores")
        await pilot.press("f4")
        await pilot.press("f2")  # back on Setup: checked again
        await wait_for(pilot, lambda: "failure" not in str(banner.render()), 30, "the recheck")
        assert str(banner.render()) == "machine: 1 warning — F6 System"
        assert banner.has_class("warning") and not banner.has_class("failing")


async def test_system_screen_shows_both_cards(tui_home, monkeypatch):
    """The System screen shows the engine's framework card on open and the hardware card on m
    (the cards' contents are tested in tests/test_cards.py; here: that they reach the screen)."""
    from tui_bench.engine.results import cards

    def framework_card(refresh=False):
        return [cards.Card("theano", "Theano", {"license": "BSD (Theano)"})]

    def hardware_card(machine):
        return [cards.Card("cpu", f"cpu: {machine['cpu_model']}", {"latency": "1.23 ms median"})]

    monkeypatch.setattr(cards, "framework_card", framework_card)
    monkeypatch.setattr(cards, "hardware_card", hardware_card)
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f6")
        screen = app.screen
        fw = screen.query_one("#framework-card", Static)
        await wait_for(pilot, lambda: "BSD (Theano)" in str(fw.render()), 30, "framework card")
        hw = screen.query_one("#hardware-card", Static)
        assert "1.23 ms" not in str(hw.render())  # measured only when asked
        await pilot.press("m")
        await wait_for(pilot, lambda: "1.23 ms median" in str(hw.render()), 30, "hardware card")


async def test_compare_shows_the_fairness_card_beside_the_tables(tui_home):
    """Two runs that differ in framework/api and, unseen in their names, in compilation: the
    screen's note says so and the fairness tab lists exactly that."""
    records = []
    for run_id, api, compiles in (("r-eager", "eager", "no (eager)"), ("r-comp", "compile", "yes")):
        records.append(
            {
                "id": run_id,
                "status": "finished",
                "spec": RunSpec(api=api).to_dict(),
                "label": api,
                "worker": {"settings": {"compile": compiles}},
                "metrics": {"step_median_s": 0.05},
            }
        )
    app = TuiBenchApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await show_in_compare(app, pilot, records)
        card = screen.query_one("#table-fairness", DataTable)
        assert card.row_count == 2  # one row per setting and value, naming who has it
        assert [str(c) for c in card.get_row_at(0)] == ["compilation", "no (eager)", "eager"]
        assert [str(c) for c in card.get_row_at(1)] == ["compilation", "yes", "compile"]
        note = str(screen.query_one("#compare-note", Static).render())
        assert "also differs: compilation" in note


async def test_a_remapped_key_shows_in_mode_bar_help_palette_and_buttons(tui_home, tmp_path):
    from textual.command import CommandList
    from textual.widgets import Button

    from tui_bench.tui.widgets.mode_bar import ModeBar

    (tmp_path / "config.toml").write_text(
        '[keys]\nshow_history = "f10"\nstart_run = "ctrl+g"\nhelp = "f12"\n'
    )
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        setup = app.screen
        bar = str(setup.query_one(ModeBar).render())
        assert "F10 History" in bar and "F4" not in bar and "F12 help" in bar
        assert str(setup.query_one("#start", Button).label) == "Start (ctrl+g)"

        await pilot.press("f12")
        assert isinstance(app.screen, HelpScreen)
        text = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "F10 History" in text and "ctrl+g starts" in text
        assert "F4 History" not in text and "ctrl+r" not in text
        await pilot.press("escape")

        await pilot.press("ctrl+p")
        await pilot.press(*"History: recorded")
        commands = app.screen.query_one(CommandList)
        await wait_for(pilot, lambda: commands.option_count > 0, 5, "palette hits")
        hit = commands.get_option_at_index(0)
        shown = " ".join(str(part) for part in getattr(hit.prompt, "renderables", [hit.prompt]))
        assert "History: recorded runs" in shown and "F10" in shown and "F4" not in shown
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen), 5, "history")


async def test_worker_failures_become_a_modal_titled_by_the_error(tui_home):
    from tui_bench.engine.errors import SupervisorError
    from tui_bench.tui.screens.dialogs import MessageScreen

    def refused() -> None:
        raise SupervisorError("20260102-030405-aaaa has already ended")

    def bug() -> None:
        raise KeyError("spec")

    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        app.run_worker(refused, thread=True, exit_on_error=False, name="stop the run")
        await wait_for(pilot, lambda: isinstance(app.screen, MessageScreen), 5, "modal")
        assert app.screen.title_text == "Run supervisor"  # the error's own title
        assert app.screen.message == "20260102-030405-aaaa has already ended"
        await pilot.press("escape")
        app.run_worker(bug, thread=True, exit_on_error=False, name="read the backlog")
        await wait_for(pilot, lambda: isinstance(app.screen, MessageScreen), 5, "modal")
        assert app.screen.title_text == "read the backlog failed"
        assert app.screen.message == "KeyError: 'spec'"
        assert app.return_code is None  # still up


async def test_a_run_that_cannot_start_is_a_notice_titled_by_its_error(tui_home, monkeypatch):
    from tui_bench.engine.errors import SupervisorError
    from tui_bench.engine.runs import supervisor
    from tui_bench.tui.messages import StartRequested

    def refuse(request):
        raise SupervisorError("the supervisor did not start: no space left on device")

    monkeypatch.setattr(supervisor, "launch", refuse)
    app = TuiBenchApp()
    async with app.run_test(size=(100, 30)) as pilot:
        app.screen.post_message(StartRequested(RunSpec(steps_per_epoch=2)))
        await wait_for(pilot, lambda: app.live is not None and app.live.done, 10, "the refusal")
        await wait_for(pilot, lambda: "no space left" in notes(app), 5, "the notice")
        assert "Run supervisor: the supervisor did not start" in notes(app)
        assert not app.running  # the next Start is not refused as 'a run is in progress'


async def test_history_reads_runs_once_when_shown_and_again_on_return(tui_home, monkeypatch):
    """Textual resumes a new mode's screen twice, and a resize that keeps the columns changes
    nothing: each read and refill of 10,000 runs cost about half a second."""
    write_fake_history(tui_home, RUNS)
    reads = []
    summaries = History.summaries
    monkeypatch.setattr(History, "summaries", lambda self: reads.append(1) or summaries(self))
    refills = []
    refill = HistoryScreen.refill
    monkeypatch.setattr(HistoryScreen, "refill", lambda self: refills.append(1) or refill(self))
    app = TuiBenchApp()
    async with app.run_test(size=(150, 40)) as pilot:
        await history_ready(pilot, app, 2)
        await pilot.pause(0.3)
        assert (len(reads), len(refills)) == (1, 1)
        await pilot.resize_terminal(170, 40)  # wide columns either way
        await pilot.pause(0.3)
        assert len(refills) == 1
        await pilot.resize_terminal(80, 24)  # narrow columns: drawn again
        await wait_for(pilot, lambda: len(refills) == 2, 10, "a refill for narrow columns")
        await pilot.press("f2")  # away and back: runs may have changed meanwhile
        await history_ready(pilot, app, 2)
        await wait_for(pilot, lambda: len(reads) == 2, 10, "a second read")
