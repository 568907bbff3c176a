"""Live's figures through the metric registry (issue 47 item 6, issue 48 item 4): a finished
batch hands out ``Run`` values, so the notice that a batch ended states the run's own figure in
its own mode (an inference run's p50 request, once missing); a gpt states tokens/s, live, in the
finished view and in History's columns, where every other run keeps samples/s."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.tui.fakes import fake_events, fake_inference_events
from tests.tui.helpers import wait_for
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.live import outcome
from tui_bench.tui.widgets.run_view import figures_text

MACHINE = {"logical_cores": 4, "ram_mib": 16384.0}
GPT = RunSpec(model="gpt", dataset="synthetic-tinyshakespeare", size="tiny", threads=1)
CNN = RunSpec(threads=1, epochs=2, batch_size=64)


def _folded(events: list[dict], spec: RunSpec) -> BatchView:
    view = BatchView(spec=spec).fold(events)
    view.apply({"type": "batch_done", "statuses": ["finished"]})
    return view


def test_a_finished_batch_hands_out_runs_and_the_notice_states_an_inference_runs_figure():
    spec = RunSpec(mode="inference", batch_size=8, threads=1, requests=600)
    view = _folded(fake_inference_events(spec, "r1"), spec)
    assert all(isinstance(run, Run) for run in view.results)
    assert isinstance(view.runs[-1].result, Run)
    told = outcome(view, "", "F5")
    p50 = view.results[-1].metric("latency_p50_s")
    assert p50 is not None
    # the registry's p50: its label, ms to 3 decimals; and the samples it served
    assert f"inference latency p50 {p50 * 1000:.3f} ms" in told.message, told.message
    assert "samples/s" in told.message


def test_a_finished_training_notice_keeps_its_step_and_samples():
    view = _folded(fake_events(CNN, "r2", step_s=0.04), CNN)
    message = outcome(view, "", "F5").message
    assert "median step time 40.0 ms" in message and "1,600 samples/s" in message, message
    assert "tokens/s" not in message


def test_a_gpt_states_tokens_per_second_as_it_forms_and_once_finished():
    seq_len = GPT.model_dims().seq_len
    events = fake_events(GPT, "g1", step_s=0.04)
    forming = BatchView(spec=GPT).fold([e for e in events if e["type"] != "result"][:-2])
    text = figures_text(forming)
    per_s = GPT.batch_size / 0.04 * seq_len
    assert f"{per_s:,.0f} tokens/s (steady)" in text, text
    assert "samples/s" not in text
    ended = _folded(events, GPT)
    assert f"{per_s:,.0f} tokens/s (steady)" in figures_text(ended)
    assert "samples/s" not in figures_text(ended)
    # and its notice: tokens/s from the record (run_result's figure), not samples/s
    ended.results[-1] = Run.from_record(
        {**ended.results[-1].raw, "metrics": {**ended.metrics, "tokens_per_s": per_s}}
    )
    assert f"{per_s:,.0f} tokens/s" in outcome(ended, "", "F5").message
    # every other run keeps samples/s
    assert "samples/s (steady)" in figures_text(_folded(fake_events(CNN, "c1"), CNN))


async def test_history_columns_state_tokens_for_a_gpt_and_samples_for_the_rest(tui_home):
    from tests.tui.fakes import FAKE_DATE
    from tui_bench.engine.results.history import History

    tokens = GPT.batch_size / 0.04 * GPT.model_dims().seq_len
    history = History(tui_home)
    for run_id, spec, extra in (("gpt-run", GPT, {"tokens_per_s": tokens}), ("cnn-run", CNN, {})):
        history.add(
            {
                "id": run_id,
                "started_at": FAKE_DATE,
                "finished_at": FAKE_DATE,
                "spec": spec.to_dict(),
                "label": spec.label(),
                "status": "finished",
                "metrics": {"step_median_s": 0.04, "samples_per_s": 1600.0, **extra},
            }
        )
    app = TuiBenchApp(start_mode="history", machine=MACHINE)
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, 10, "history rows")
        headers = [str(c.label) for c in table.columns.values()]
        assert "tokens/s" in headers and "samples/s" in headers
        column = headers.index("tokens/s")
        assert str(table.get_row("gpt-run")[column]) == f"{tokens:,.0f}"
        assert str(table.get_row("cnn-run")[column]) == "—"


async def test_live_at_80x24_states_a_gpts_tokens(tui_home):
    app = TuiBenchApp(machine=MACHINE)
    async with app.run_test(size=(80, 24)) as pilot:
        app.live = view = BatchView(spec=GPT)
        for event in fake_events(GPT, "g2", step_s=0.04, finish=False, stop_after_epoch=1):
            view.push(event)
        app.switch_mode("live")
        await pilot.pause()
        app.redraw_live(force=True)
        await pilot.pause()
        figures = str(app.screen.query_one("#figures", Static).render())
        assert "tokens/s (steady)" in figures and "samples/s" not in figures
