"""Live for a generation run: its TPOT histogram (p50/p90/p99 marked, TTFT p50/p99 in the title)
and decode tokens/s along the run take the place of the loss plot and the epoch bars (an
inference run's latency histogram and request rate stay hidden), at 80×24, as requests arrive."""

from __future__ import annotations

import random
from typing import Any

from textual.widgets import Label

from tests.tui.fakes import fake_events
from tui_bench.engine.results.stats import quantile
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.widgets.plots import (
    BarPlot,
    DecodeRatePlot,
    LatencyPlot,
    LossPlot,
    RatePlot,
    TokenTimesPlot,
    decode_rates,
)

MACHINE = {"logical_cores": 4, "ram_mib": 16384.0}
SPEC = RunSpec(model="gpt", mode="generate", batch_size=4, threads=1, requests=120)
RUN_ID = "20260102-030405-9a0d"
NEW_TOKENS = 64


def generation_events(spec: RunSpec, stop_after: int, warmup: int = 2) -> list[dict[str, Any]]:
    """A generation run's events as ``adapters/generate.py`` emits them: ``requests`` events of
    E2E latencies with each request's TTFT and TPOT, 20 requests an event."""
    rng = random.Random(3)
    ev: list[dict[str, Any]] = [
        {"type": "record", "record": {"id": RUN_ID, "spec": spec.to_dict()}},
        {"v": 1, "type": "run_started", "t": 1.0, "framework": "torch", "api": "eager",
         "device": "cpu", "threads_requested": 1, "threads_effective": 1},
        {"v": 1, "type": "epoch_started", "t": 1.0, "epoch": 1, "epochs": 1,
         "steps": warmup + spec.requests},
    ]  # fmt: skip
    t = 1.0
    for first in range(0, stop_after, 20):
        ttft = [0.002 * rng.lognormvariate(0, 0.1) for _ in range(20)]
        tpot = [0.0035 * rng.lognormvariate(0, 0.1) for _ in range(20)]
        e2e = [a + b * (NEW_TOKENS - 1) for a, b in zip(ttft, tpot, strict=True)]
        t += sum(e2e)
        ev.append({"v": 1, "type": "requests", "t": t, "done": warmup + first + 20,
                   "latencies": e2e, "ttft": ttft, "tpot": tpot})  # fmt: skip
    return ev


def test_decode_rate_is_batch_over_the_mean_tpot_per_bucket():
    xs, ys = decode_rates([0.002, 0.002, 0.008, 0.008], 4, 2)
    assert xs == [1.5, 3.5]
    assert ys == [2000.0, 500.0]
    assert decode_rates([], 4, 10) == ([], [])


async def test_live_draws_tpot_ttft_and_decode_rate_for_a_generation_run(tui_home):
    app = TuiBenchApp(machine=MACHINE)
    async with app.run_test(size=(80, 24)) as pilot:
        app.live = view = BatchView(spec=SPEC)
        events = generation_events(SPEC, stop_after=120)
        for event in events[:6]:  # 60 requests so far
            view.push(event)
        app.switch_mode("live")
        await pilot.pause()
        app.redraw_live(force=True)
        await pilot.pause()
        screen = app.screen
        times, rate = screen.query_one(TokenTimesPlot), screen.query_one(DecodeRatePlot)
        assert times.display and rate.display
        for hidden in (LossPlot, BarPlot, LatencyPlot, RatePlot):
            assert not screen.query_one(hidden).display, hidden
        assert times.size.width > 30 and times.size.height >= 7  # drawn, at 80×24
        assert times.binned is not None and times.binned.n == 60
        tpots_ms = [x * 1000 for x in view.tpots]
        assert dict(times.binned.marks)["p99"] == quantile(sorted(tpots_ms), 0.99)
        assert rate.batch == 4 and len(rate.latencies) == 60
        drawn = times.plt.build()  # the chart as plotext draws it at this size
        assert "ms p50/p99: TPOT" in drawn and "TTFT" in drawn  # the title fits at 80 columns
        assert "req 62/122" in str(screen.query_one("#epoch-label", Label).render())

        # More requests: both drawn again from all of them.
        for event in events[6:]:
            view.push(event)
        app.redraw_live(force=True)
        await pilot.pause()
        assert times.binned is not None and times.binned.n == 120
        assert len(times.ttfts) == 120 and len(rate.latencies) == 120

        # A training run on the same screen gets its loss plot and epoch bars back.
        train = RunSpec(threads=2, epochs=2, batch_size=64)
        app.live = view = BatchView(spec=train)
        for event in fake_events(train, "20260102-030406-2f0d"):
            view.push(event)
        app.redraw_live(force=True)
        await pilot.pause()
        assert screen.query_one(LossPlot).display and not times.display and not rate.display
