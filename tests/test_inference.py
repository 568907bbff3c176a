"""Inference runs (spec mode "inference", docs/inference.md): the spec field and its refusals,
the percentile and tail-note rule, the request draw, the reducer's fold of ``requests`` events,
the registry's figures, and one real torch worker serving a few dozen requests."""

from __future__ import annotations

import numpy as np
import pytest

from adapters import serve as serving
from tests.histories import as_runs, record
from tui_bench.engine.errors import SpecError
from tui_bench.engine.results import identity, latency, metrics
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec


def _record(index: int, metrics: dict, **spec: object) -> dict:
    """A finished torch record with this spec and these metrics (tests/histories.py's shape)."""
    made = RunSpec(threads=2, seed=index, **spec)  # type: ignore[arg-type]
    return record(index, 10.0, spec=made.to_dict(), label=made.label(), metrics=metrics)


# -- the spec field ---------------------------------------------------------------------------
def test_the_short_label_says_inference_where_modes_differ():
    assert "mode" in identity.deciding_fields() and "requests" in identity.deciding_fields()
    runs = as_runs(
        [
            _record(1, {"step_median_s": 0.01}),
            _record(2, {"latency_p50_s": 1e-3}, mode="inference"),
        ]
    )
    labels = [c.label for c in identity.group_by_configuration(runs)]
    assert labels == ["train", "inference"]
    assert "inference" in RunSpec(mode="inference").label()


@pytest.mark.parametrize("change", [{"workers": 2}, {"timing": "pipelined"}, {"input": "device"}])
def test_what_an_inference_run_does_not_do_is_refused(change):
    with pytest.raises(SpecError, match="not available with mode 'inference'"):
        RunSpec(mode="inference", threads=1, **change).validate()


# -- the percentiles and the note ---------------------------------------------------------------
def test_the_fewest_requests_that_bound_each_percentile():
    assert [serving.tail_requests(q) for _, q in serving.LATENCY_QUANTILES] == [8, 53, 563]
    assert not serving.tail_bounded(562, 0.99) and serving.tail_bounded(563, 0.99)
    assert not serving.tail_bounded(0, 0.5)


def test_latency_stats_percentiles_rate_and_the_note():
    times = [0.001 * i for i in range(1, 101)]  # 1..100 ms
    stats = serving.latency_stats(times, batch_size=4)
    assert stats["latency_requests"] == 100
    assert stats["latency_p50_s"] == pytest.approx(np.percentile(times, 50))
    assert stats["latency_p90_s"] == pytest.approx(np.percentile(times, 90))
    assert stats["latency_p99_s"] == pytest.approx(np.percentile(times, 99))
    assert stats["latency_max_s"] == 0.1 and stats["latency_mean_s"] == pytest.approx(0.0505)
    assert stats["inference_samples_per_s"] == pytest.approx(400 / sum(times))
    note = stats["latency_note"]
    assert note.startswith("p99 rests on 100 requests") and "563" in note and "p90" not in note
    assert serving.latency_stats([0.001] * 600, 1)["latency_note"] is None
    few = serving.latency_stats([0.002, 0.001], 1)["latency_note"]
    assert few.count("rests on 2 requests") == 3
    empty = serving.latency_stats([], 1)
    assert empty["latency_p50_s"] is None and empty["inference_samples_per_s"] is None


def test_requests_are_drawn_from_one_seeded_order_and_wrap_round():
    batches = serving.request_batches(10, 4, seed=3, count=5)
    assert [len(b) for b in batches] == [4] * 5
    walked = np.concatenate(batches)
    assert sorted(walked[:10]) == list(range(10))  # the whole split before any repeat
    assert list(walked[10:20]) == list(walked[:10])
    assert np.array_equal(np.concatenate(serving.request_batches(10, 4, 3, 5)), walked)
    assert not np.array_equal(np.concatenate(serving.request_batches(10, 4, 4, 5)), walked)


# -- the reducer ------------------------------------------------------------------------------
def test_the_reducer_folds_requests_like_steps_and_judges_the_latencies():
    view = BatchView(spec=RunSpec(mode="inference"))
    view.fold(
        [
            {"type": "epoch_started", "epoch": 1, "epochs": 1, "steps": 42},
            {"type": "requests", "t": 1.0, "done": 2},  # warm-up: no latencies
            {"type": "requests", "t": 1.5, "done": 22, "latencies": [1e-3] * 20},
            {"type": "requests", "t": 2.0, "done": 42, "latencies": [1e-3] * 19 + [5e-2]},
        ]
    )
    assert len(view.latencies) == 40 and view.step_times == []
    assert view.step == 42 and view.steps_done == 42
    assert view.timed is view.latencies
    line = view.verdict_line(now=lambda: 100.0)
    # the step rules judge the latencies (no step times here: without them, no verdict at all),
    # and speak of requests
    assert line is not None and line.startswith("so far unreliable: 8-request blocks vary")
    steady = BatchView(spec=RunSpec(mode="inference"))
    steady.apply({"type": "requests", "t": 1.0, "done": 20, "latencies": [1e-3] * 20})
    assert steady.verdict_line(now=lambda: 100.0) == "so far stable (request times)"
    view.apply({"type": "record", "record": {"id": "next"}})
    view.apply({"type": "record", "record": {"id": "again"}})
    assert view.latencies == []  # a new run starts empty


# -- the registry and the sentence --------------------------------------------------------------
def test_latency_figures_are_registered_where_runs_and_comparisons_show_them():
    for key in ("latency_p50_s", "latency_p90_s", "latency_p99_s", "inference_samples_per_s"):
        m = metrics.BY_KEY[key]
        # not a median column of every comparison: a training comparison's would be empty
        assert {metrics.RUN, metrics.CHOICE, metrics.PAGE} <= m.places
        assert metrics.MEDIAN not in m.places
    assert metrics.BY_KEY["latency_p99_s"].lower_is_better
    assert metrics.BY_KEY["inference_samples_per_s"].higher_is_better
    assert {"latency_max_s", "latency_requests"} <= {m.key for m in metrics.placed(metrics.RUN)}


def test_the_latency_line_names_the_requests_and_the_note():
    stats = serving.latency_stats([0.001] * 99 + [0.004], 8)
    (run,) = as_runs([_record(1, stats, mode="inference", batch_size=8)])
    text = latency.line(run)
    assert text.startswith("p50 1.000 ms · p90 1.000 ms · p99 1.030 ms · max 4.000 ms")
    assert "over 100 requests of batch 8" in text
    assert "too few requests: p99 rests on 100 requests" in text
    (trained,) = as_runs([_record(2, {"step_median_s": 0.01})])
    assert latency.line(trained) is None


# -- one real worker ----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_torch_worker_serves_timed_requests():
    from conftest import require_module

    require_module("torch")
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs.runner import execute

    spec = RunSpec(
        model="mlp",
        mode="inference",
        threads=1,
        batch_size=4,
        requests=30,
        warmup_steps=2,
        train_samples=200,
        test_samples=50,
    ).validate()
    events: list[dict] = []
    result = execute(spec, History(), on_event=events.append, sample_interval=0.2)
    assert result.status == "finished", result.reason
    summary = result.summary
    assert summary["mode"] == "inference" and summary["requests"] == 30
    assert summary["serving"]["mode"] == "model.eval(), torch.inference_mode()"
    served = [t for e in events if e["type"] == "requests" for t in e.get("latencies", [])]
    assert len(served) == 30 and served == summary["steady_step_times"]
    assert summary["latency_p50_s"] <= summary["latency_p90_s"] <= summary["latency_max_s"]
    assert summary["first_request_s"] > 0 and "p99 rests on 30" in summary["latency_note"]
    assert "epoch_finished" not in {e["type"] for e in events}  # nothing was trained
    figures = result.metrics()
    assert figures["flops_per_request"] > 0 and figures["achieved_tflops"] > 0
    assert "flops_per_step" not in figures
