"""The one fold of a batch's events (engine.runs.reducer), its follower, the record lifecycle, and
the CLI's printer over the folded view."""

from __future__ import annotations

import subprocess

import pytest
from rich.console import Console

from tests.tui.fakes import fake_events, write_batch_in_progress
from tui_bench.cli.following import BatchPrinter
from tui_bench.engine.machine import procs
from tui_bench.engine.results.history import History, read_jsonl
from tui_bench.engine.runs import follow, lifecycle
from tui_bench.engine.runs.reducer import BatchView, stored_run
from tui_bench.engine.spec import RunSpec

SPEC = RunSpec(epochs=2, batch_size=64)


def batch_events() -> list[dict]:
    """A batch of two runs, as a viewer reads it: batch events around each run's series."""
    out: list[dict] = [
        {"type": "batch", "id": "b1", "label": "two runs"},
        {"type": "supervisor", "pid": 1, "started": 0.0},
        {"type": "plan", "total": 2, "sweep_id": None, "skipped": []},
    ]
    for run_id, seed in (("r1", 1), ("r2", 2)):
        out.append({"type": "run", "run_id": run_id})
        out += fake_events(SPEC, run_id, seed=seed, steps_per_epoch=20)
    out.append({"type": "batch_done", "statuses": ["finished", "finished"]})
    return out


def comparable(view: BatchView) -> dict:
    return {k: v for k, v in vars(view).items() if not k.startswith("_")}


def test_the_backlog_fold_and_one_event_at_a_time_agree():
    events = batch_events()
    folded = BatchView().fold(events)
    one_by_one = BatchView()
    for event in events:
        one_by_one.apply(event)
    assert comparable(folded) == comparable(one_by_one)
    assert folded.done and folded.run_ids == ["r1", "r2"] and folded.run_index == 1
    assert len(folded.losses) == 40  # the current run's curve only: per-run state resets
    assert [r.run_id for r in folded.runs] == ["r1", "r2"]
    assert [len(r.epoch_records) for r in folded.runs] == [2, 2]
    assert all(r.result and r.result.status == "finished" for r in folded.runs)
    assert folded.header["label"] == "two runs" and folded.supervisor["pid"] == 1


def test_a_fold_split_anywhere_ends_in_the_same_state():
    events = batch_events()
    whole = BatchView().fold(events)
    for cut in (1, 7, len(events) // 2, len(events) - 1):
        split = BatchView()
        split.push_all(events[:cut])
        assert split.drain()
        split.fold(events[cut:])
        assert comparable(split) == comparable(whole), cut


def test_progress_for_ps_and_unknown_kinds_change_nothing():
    events = fake_events(SPEC, "r1", steps_per_epoch=20, finish=False, stop_after_epoch=1)
    view = BatchView().fold([{"type": "plan", "total": 3}, *events])
    before = comparable(view)
    view.apply({"type": "from_a_newer_version", "x": 1})
    view.apply({"type": "heartbeat", "t": 9.0})
    assert comparable(view) == before
    p = view.progress()
    assert (p.run_index, p.runs_total, p.run_id) == (1, 3, "r1")
    assert (p.epoch, p.epochs, p.step, p.steps) == (1, 2, 20, 20)  # kept after the epoch ends
    assert p.describe().startswith("run 1/3 · epoch 1/2 · step 20/20")


def test_the_verdict_forms_from_the_steady_steps_then_the_result_says_it():
    clock = [100.0]
    view = BatchView()
    events = fake_events(SPEC, "r1", steps_per_epoch=40, finish=False, stop_after_epoch=1)
    view.fold([e for e in events if "step_times" not in e])
    assert view.verdict_line(lambda: clock[0]) is None  # warm-up only: nothing to judge yet
    view.fold([e for e in events if "step_times" in e])
    assert len(view.step_times) == 35  # 40 steps less the 5 of warm-up
    assert view.verdict_line(lambda: clock[0]) == "so far stable (step times)"
    # A pause 20× the median: the next look, a second later, says so with the figure.
    view.apply({"type": "steps", "epoch": 2, "first_step": 0, "losses": [1.0], "step_times": [0.8]})
    assert view.verdict_line(lambda: clock[0]) == "so far stable (step times)"  # judged ≤ 1/s
    clock[0] += 1.0
    line = view.verdict_line(lambda: clock[0])
    assert line.startswith("so far unreliable: ") and " vary " in line and "(CV)" in line, line
    # The result's stored verdict replaces the forming one; a new run starts from nothing.
    view.apply(
        {
            "type": "result",
            "record": {
                "id": "r1",
                "status": "finished",
                "stability": {"verdict": "noisy", "reasons": [{"message": "m", "level": "noisy"}]},
            },
        }
    )
    assert view.verdict_line(lambda: clock[0]) == "noisy: m"
    view.apply({"type": "record", "record": {"id": "r2", "spec": SPEC.to_dict()}})
    assert view.step_times == [] and view.verdict_line(lambda: clock[0]) is None


def test_a_stored_run_without_its_end_reads_interrupted():
    events = fake_events(SPEC, "r1", finish=False, stop_after_epoch=1)
    run = stored_run(events)
    assert run.status == "interrupted" and run.done and run.run_id == "r1"


def test_follower_catches_up_then_follows_what_is_appended(isolated_home):
    stand_in = subprocess.Popen(["sleep", "60"])  # a live "supervisor"
    try:
        batch_id, run_id = write_batch_in_progress(isolated_home, 200, stand_in.pid, epochs=2)
        follower = follow.BatchFollower(batch_id)
        view = follower.catch_up()
        assert view.run_id == run_id and len(view.losses) == 200 and not view.done
        assert follower.poll() is False  # nothing new
        writer = lifecycle.SeriesWriter(History().series_path(run_id))
        writer.write({"type": "steps", "t": 99.0, "epoch": 2, "first_step": 100, "losses": [0.1]})
        writer.close()
        assert follower.poll() is True
        assert len(view.losses) == 200  # queued, not applied, until the reader drains
        assert view.drain() and len(view.losses) == 201
        assert follow.progress(batch_id).run_id == run_id
    finally:
        stand_in.kill()
        stand_in.wait()
    view = follower.catch_up()  # its supervisor is gone: the next look ends the view
    assert view.done and "ended without finishing" in view.lost
    assert History().get(run_id).status == "interrupted"


def test_record_lifecycle_reserve_running_finished(isolated_home):
    history = History()
    run = lifecycle.RunRecord(history)
    assert history.series_path(run.run_id).exists()  # reserved: the id is taken
    me = procs.identity()  # a live recorder: pid and start time (a bare pid proves nothing)
    record = run.start(
        {"id": "ignored", "status": "ignored", "label": "x", "recorder_pid": me["pid"],
         "recorder_started": me["started"]}
    )  # fmt: skip
    assert record["id"] == run.run_id and history.get(run.run_id).status == "running"
    run.write({"type": "steps", "first_step": 0, "losses": [1.0]})
    final = run.finish("finished", reason=None, metrics={"step_median_s": 0.01})
    stored = history.get(run.run_id)
    assert stored.status == "finished" and stored.raw["recorder_pid"] is None
    assert stored.metrics == {"step_median_s": 0.01} and stored.label == "x"
    lines = list(read_jsonl(history.series_path(run.run_id)))
    assert [e["type"] for e in lines] == ["record", "steps", "result"]
    assert lines[-1]["record"] == final
    assert stored_run(lines).status == "finished"


@pytest.mark.parametrize("renders", [1, 3])
def test_cli_printer_prints_each_run_epoch_and_result_once(renders):
    events = batch_events()
    console = Console(record=True, width=200, force_terminal=False)
    view = BatchView()
    with BatchPrinter(console, show=True) as printer:
        step = max(len(events) // renders, 1)
        for start in range(0, len(events), step):
            view.fold(events[start : start + step])
            printer.render(view)
            printer.render(view)  # a look that found nothing new prints nothing
    text = console.export_text()
    assert text.count("run 1/2") == 1 and text.count("run 2/2") == 1
    assert text.count("epoch 1:") == 2 and text.count("epoch 2:") == 2  # one per run
    assert text.count("Fake CPU") == 2
