"""Live for an inference run: the latency histogram with p50/p90/p99 marked and the request rate
take the place of the loss plot and the epoch bars, and the figures line says the percentiles,
the requests behind them and requests/s and samples/s, as they form and as the worker ends."""

from __future__ import annotations

import math
import re

from textual.widgets import Label, Static

from tests.tui.fakes import fake_events, fake_inference_events
from tui_bench.engine.results.stats import quantile
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.widgets.plots import (
    BarPlot,
    LatencyPlot,
    LossPlot,
    RatePlot,
    latency_bins,
    request_rates,
)
from tui_bench.tui.widgets.run_view import figures_text

MACHINE = {"logical_cores": 4, "ram_mib": 16384.0}
SPEC = RunSpec(mode="inference", batch_size=1, threads=1, requests=600)
RUN_ID = "20260102-030405-1f0d"


def _view(spec: RunSpec, events: list[dict]) -> BatchView:
    return BatchView(spec=spec).fold(events)


def _latencies(events: list[dict]) -> list[float]:
    return [x for e in events if e["type"] == "requests" for x in e["latencies"]]


def test_bins_hold_every_request_and_mark_the_percentiles_the_engine_computes():
    times = _latencies(fake_inference_events(SPEC, RUN_ID))
    found = latency_bins(times, 40)
    assert found is not None
    assert found.n == len(times) == 600
    assert sum(found.counts) == 600  # the slowest request too: the log axis ends there
    ms = [t * 1000 for t in times]
    for (name, value), q in zip(found.marks, (0.5, 0.9, 0.99), strict=True):
        assert value == quantile(ms, q), name
    assert (found.low, found.high) == (min(ms), max(ms))
    # Log-spaced: a bin's share of the axis is a ratio, so the requests under p50 fill the
    # bins left of p50's position and half of all requests lie there.
    p50 = found.position(found.marks[0][1])
    assert sum(found.counts[: int(p50)]) <= 300 <= sum(found.counts[: int(p50) + 1])
    assert found.position(found.low) == 0 and found.position(found.high) == 40
    assert found.position(2 * found.low) == 40 * math.log(2) / math.log(found.high / found.low)
    assert latency_bins([], 40) is None
    same = latency_bins([0.001] * 5, 10)  # every request took the same time: one bin
    assert same is not None and same.counts[0] == 5


def test_rate_is_requests_over_their_summed_latency_per_bucket():
    xs, ys = request_rates([0.001, 0.001, 0.004, 0.004], 2)
    assert xs == [1.5, 3.5]
    assert ys == [1000.0, 250.0]
    assert request_rates([], 10) == ([], [])


def test_figures_as_they_form_agree_with_the_workers_summary():
    events = fake_inference_events(SPEC.with_changes(batch_size=8), RUN_ID)
    forming = _view(SPEC.with_changes(batch_size=8), events[:-2])  # before finished/result
    ended = _view(SPEC.with_changes(batch_size=8), events)
    live, done = figures_text(forming), figures_text(ended)
    assert "latency so far p50" in live and "over 600 requests of batch 8" in live
    assert "latency p50" in done and "so far" not in done.split("·")[1]

    def numbers(text: str) -> list[str]:
        found = re.search(r"p50 (\S+) · p90 (\S+) · p99 (\S+) ms", text)
        assert found, text
        rate = re.search(r"([\d,]+) requests/s · ([\d,]+) samples/s", text)
        assert rate, text
        return [*found.groups(), *rate.groups()]

    assert numbers(live) == numbers(done)  # the live rule is the worker's rule
    requests_s, samples_s = (float(x.replace(",", "")) for x in numbers(done)[3:])
    assert abs(samples_s - 8 * requests_s) <= 8  # samples/s is batch × requests/s (rounded)
    assert "first request 0.004 s (apart)" in done  # as the registry shows it


def test_too_few_requests_for_p99_say_so_at_the_end():
    spec = SPEC.with_changes(requests=200)
    text = figures_text(_view(spec, fake_inference_events(spec, RUN_ID, requests=200)))
    assert "too few requests: p99 rests on 200 requests, fewer than the 563" in text


async def test_live_shows_the_histogram_and_rate_for_inference_and_the_loss_for_training(
    tui_home,
):
    app = TuiBenchApp(machine=MACHINE)
    async with app.run_test(size=(80, 24)) as pilot:
        app.live = view = BatchView(spec=SPEC)
        for event in fake_inference_events(SPEC, RUN_ID, finish=False, stop_after=300):
            view.push(event)
        app.switch_mode("live")
        await pilot.pause()
        app.redraw_live(force=True)
        await pilot.pause()
        screen = app.screen
        latency, rate = screen.query_one(LatencyPlot), screen.query_one(RatePlot)
        assert latency.display and rate.display
        assert not screen.query_one(LossPlot).display and not screen.query_one(BarPlot).display
        assert latency.size.width > 30 and latency.size.height >= 7  # drawn, at 80×24
        assert latency.binned is not None and latency.binned.n == 300
        assert "req 305/605" in str(screen.query_one("#epoch-label", Label).render())
        figures = str(screen.query_one("#figures", Static).render())
        assert "latency so far p50" in figures and "requests/s" in figures

        # More requests arrive: the histogram is drawn again from all of them.
        for event in fake_inference_events(SPEC, RUN_ID)[2:]:
            if event["type"] == "requests" and event["done"] > 305:
                view.push(event)
        app.redraw_live(force=True)
        await pilot.pause()
        assert latency.binned is not None and latency.binned.n == 600

        # A training run on the same screen gets its loss plot and epoch bars back.
        train = RunSpec(threads=2, epochs=2, batch_size=64)
        app.live = view = BatchView(spec=train)
        for event in fake_events(train, "20260102-030406-2f0d"):
            view.push(event)
        app.redraw_live(force=True)
        await pilot.pause()
        assert screen.query_one(LossPlot).display and screen.query_one(BarPlot).display
        assert not latency.display and not rate.display
        assert "epoch" in str(screen.query_one("#epoch-label", Label).render())


async def test_a_stored_inference_run_shows_its_histogram_in_history(tui_home):
    """A finished inference run opened from History draws the same view from its series file."""
    import json

    from tui_bench.engine.results.history import History
    from tui_bench.tui.screens.run_detail import RunDetailScreen

    events = fake_inference_events(SPEC, RUN_ID)
    record = {**events[-1]["record"], "spec": SPEC.to_dict(), "label": SPEC.label()}
    history = History(tui_home)
    history.add(record)
    with open(history.series_path(RUN_ID), "w", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")
    app = TuiBenchApp(machine=MACHINE)
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(RunDetailScreen(RUN_ID))
        await pilot.pause()
        latency = app.screen.query_one(LatencyPlot)
        for _ in range(50):
            if latency.binned is not None:
                break
            await pilot.pause(0.1)
        assert latency.display and not app.screen.query_one(LossPlot).display
        assert latency.binned is not None and latency.binned.n == 600
        figures = str(app.screen.query_one("#figures", Static).render())
        assert "latency p50" in figures and "over 600 requests of batch 1" in figures
