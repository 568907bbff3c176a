"""TEST-ONLY seeded fake event source: deterministic events shaped exactly like the runner's.

Used by snapshot tests so the screens can be drawn without a framework, a clock or a date that
changes. Real runs are covered by the Pilot flow tests (test_flows.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tui_bench.engine.results import stability
from tui_bench.engine.results.history import History
from tui_bench.engine.spec import RunSpec

FAKE_DATE = "2026-01-02T03:04:05+00:00"


def fake_events(
    spec: RunSpec,
    run_id: str,
    seed: int = 7,
    steps_per_epoch: int = 40,
    step_s: float = 0.04,
    gpu: bool = False,
    finish: bool = True,
    stop_after_epoch: int | None = None,
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    timing_rng = random.Random(seed + 1)  # its own stream: the losses stay what they were
    t = 1.5
    ev: list[dict[str, Any]] = [
        {"type": "record", "record": {"id": run_id, "spec": spec.to_dict()}},
        {
            "v": 1,
            "type": "run_started",
            "t": t,
            "framework": spec.framework,
            "framework_version": "9.9.9",
            "api": spec.api,
            "device": "cuda:0" if gpu else "cpu",
            "device_name": "Fake GPU" if gpu else "Fake CPU",
            "threads_requested": spec.threads,
            "threads_effective": spec.threads,
            "param_count": 1_669_002,
            "import_s": 0.9,
            "data_s": 0.3,
            "build_s": 0.1,
            "steps_per_epoch": steps_per_epoch,
            "train_samples": steps_per_epoch * spec.batch_size,
        },
    ]
    loss = 2.3
    epochs_to_run = spec.epochs if stop_after_epoch is None else stop_after_epoch
    sample_t = 0.0
    epoch_records = []
    for epoch in range(1, epochs_to_run + 1):
        ev.append(
            {
                "v": 1,
                "type": "epoch_started",
                "t": t,
                "epoch": epoch,
                "epochs": spec.epochs,
                "steps": steps_per_epoch,
            }
        )
        for first in range(0, steps_per_epoch, 8):
            losses, times = [], []
            for step in range(first, min(first + 8, steps_per_epoch)):
                loss = max(0.05, loss * 0.97 + rng.uniform(-0.05, 0.05))
                losses.append(round(loss, 4))
                t += step_s
                if epoch > 1 or step >= 5:  # the first epoch's 5 warm-up steps are not steady
                    times.append(float(f"{step_s * (1 + timing_rng.uniform(-0.02, 0.02)):.4g}"))
            ev.append(
                {
                    "v": 1,
                    "type": "steps",
                    "t": round(t, 4),
                    "epoch": epoch,
                    "first_step": first,
                    "losses": losses,
                    **({"step_times": times} if times else {}),
                }
            )
            sample_t += 1.0
            sample = {
                "type": "sample",
                "t": sample_t,
                "cpu_pct": 150 + rng.uniform(-30, 30),
                "rss_mib": 400 + 5 * epoch,
                "threads": 8,
            }
            if gpu:
                sample.update(
                    gpu_util=60 + rng.uniform(-20, 20), gpu_mem_pct=40.0, gpu_power_w=180.0
                )
            ev.append(sample)
        record = {
            "epoch": epoch,
            "wall_s": steps_per_epoch * step_s + 0.2 * (epoch == 1),
            "warmup_s": 0.2 if epoch == 1 else 0.0,
            "steps": steps_per_epoch,
            "steady_steps": steps_per_epoch - (5 if epoch == 1 else 0),
            "step_median_s": step_s,
            "step_iqr_s": 0.002,
            "samples_per_s": spec.batch_size / step_s,
            "loss": loss,
            "val_loss": loss * 1.1,
            "val_accuracy": round(0.5 + 0.1 * epoch, 4),
            "val_s": 0.3,
        }
        epoch_records.append(record)
        ev.append({"v": 1, "type": "epoch_finished", "t": round(t, 4), **record})
    if finish:
        ev.append(
            {
                "v": 1,
                "type": "test_finished",
                "t": round(t + 0.3, 4),
                "test_s": 0.3,
                "test_loss": loss,
                "test_accuracy": 0.8123,
                "test_samples": 1000,
            }
        )
        summary = {
            "epochs_run": spec.epochs,
            "train_wall_s": sum(r["wall_s"] for r in epoch_records),
            "warmup_s": 0.2,
            "first_step_s": 0.05,
            "steady_steps": 100,
            "step_median_s": step_s,
            "samples_per_s": spec.batch_size / step_s,
            "val_accuracy": epoch_records[-1]["val_accuracy"],
            "test_accuracy": 0.8123,
            "test_s": 0.3,
        }
        ev.append({"v": 1, "type": "finished", "t": round(t + 0.4, 4), "summary": summary})
        metrics = {
            **summary,
            "threads_effective": spec.threads,
            "res_peak_rss_mib": 420.0,
            "res_mean_cpu_pct": 150.0,
        }
        steady = [x for e in ev if e["type"] == "steps" for x in e.get("step_times", [])]
        ev.append(
            {
                "type": "result",
                "record": {
                    "id": run_id,
                    "spec": spec.to_dict(),  # the history record: what the runner writes
                    "status": "finished",
                    "reason": None,
                    "metrics": metrics,
                    # judged as the runner judges a run, from its steady steps
                    "stability": stability.assess(steady).as_dict(),
                },
            }
        )
    return ev


def write_fake_history(home: Path, runs: list[tuple[str, RunSpec, float]]) -> list[str]:
    """Record fake finished runs (id, spec, step seconds) with series files, fixed dates."""
    history = History(home)
    ids = []
    for run_id, spec, step_s in runs:
        events = fake_events(spec, run_id, step_s=step_s)
        result = events[-1]["record"]
        record = {
            "id": run_id,
            "started_at": FAKE_DATE,
            "finished_at": FAKE_DATE,
            "spec": spec.to_dict(),
            "label": spec.label(),
            "status": "finished",
            "reason": None,
            "metrics": result["metrics"],
        }
        history.add(record)
        with open(history.series_path(run_id), "w", encoding="utf-8") as handle:
            for event in events:
                if event["type"] == "record":
                    event = {"type": "record", "record": record}
                elif event["type"] == "result":
                    event = {"type": "result", "record": record}
                handle.write(json.dumps(event) + "\n")
        ids.append(run_id)
    return ids


def write_batch_in_progress(
    home: Path, steps: int, supervisor_pid: int, epochs: int = 20
) -> tuple[str, str]:
    """A batch whose one run has recorded ``steps`` steps (split into ``epochs``) and goes on,
    owned by ``supervisor_pid`` (a live stand-in process): what a viewer finds when it attaches
    late. Steps events carry two steps each, as the worker's 10-per-second limit gives at
    50 ms/step. Returns (batch id, run id)."""
    from tui_bench.engine.machine import procs
    from tui_bench.engine.runs import batch
    from tui_bench.engine.runs.lifecycle import SeriesWriter

    spec = RunSpec(epochs=epochs, threads=1)
    history = History(home)
    run_id = history.reserve_run_id()
    batch_id = batch.create(batch.BatchRequest(spec=spec.to_dict()))
    identity = procs.identity(supervisor_pid)
    record = {
        "id": run_id,
        "status": "running",
        "spec": spec.to_dict(),
        "label": spec.label(),
        "recorder_pid": identity["pid"],
        "recorder_started": identity["started"],
        "batch": batch_id,
    }
    history.add(record)
    series = SeriesWriter(history.series_path(run_id))
    for event in fake_events(spec, run_id, steps_per_epoch=steps // epochs, finish=False):
        if event["type"] == "record":
            event = {"type": "record", "record": record}
        if event["type"] == "steps":
            losses = event["losses"]
            for i in range(0, len(losses), 2):
                first = event["first_step"] + i
                series.write({**event, "first_step": first, "losses": losses[i : i + 2]})
            continue
        series.write(event)
    series.close()
    log = SeriesWriter(batch.events_path(batch_id))
    log.write({"type": "supervisor", **identity})
    log.write({"type": "plan", "total": 1, "sweep_id": None, "skipped": []})
    log.write({"type": "run", "run_id": run_id})
    log.close()
    return batch_id, run_id


def fake_inference_events(
    spec: RunSpec,
    run_id: str,
    seed: int = 7,
    requests: int = 600,
    warmup: int = 5,
    request_s: float = 0.00025,
    finish: bool = True,
    stop_after: int | None = None,
) -> list[dict[str, Any]]:
    """An inference run's events, shaped like ``adapters/serve.py``'s ``run_inference``: one
    epoch of warm-up + timed requests, ``requests`` events of latencies (a lognormal body and a
    few slow requests, as a CPU serves), the finished summary and the result."""
    rng = random.Random(seed)
    t = 1.5
    total = warmup + requests
    ev: list[dict[str, Any]] = [
        {"type": "record", "record": {"id": run_id, "spec": spec.to_dict()}},
        {
            "v": 1,
            "type": "run_started",
            "t": t,
            "framework": spec.framework,
            "framework_version": "9.9.9",
            "api": spec.api,
            "device": "cpu",
            "device_name": "Fake CPU",
            "threads_requested": spec.threads,
            "threads_effective": spec.threads,
            "param_count": 1_669_002,
            "import_s": 0.9,
            "data_s": 0.3,
            "build_s": 0.1,
            "settings": {"precision": "fp32"},
        },
        {"v": 1, "type": "epoch_started", "t": t, "epoch": 1, "epochs": 1, "steps": total},
    ]
    timed: list[float] = []
    served = requests if stop_after is None else min(stop_after, requests)
    for first in range(0, served, 100):
        chunk = []
        for _ in range(first, min(first + 100, served)):
            slow = rng.random() < 0.005  # a preempted request: slower than p99
            value = request_s * (rng.uniform(4, 10) if slow else rng.lognormvariate(0, 0.12))
            chunk.append(float(f"{value:.4g}"))
        timed += chunk
        t += sum(chunk) + 0.01
        done = warmup + first + len(chunk)
        ev.append({"v": 1, "type": "requests", "t": round(t, 4), "done": done, "latencies": chunk})
        ev.append({"type": "sample", "t": t, "cpu_pct": 98.0, "rss_mib": 410.0, "threads": 2})
    if not finish:
        return ev
    ordered = sorted(timed)
    n = len(ordered)

    def pct(q: float) -> float:
        h = (n - 1) * q
        low = int(h)
        high = min(low + 1, n - 1)
        return ordered[low] + (h - low) * (ordered[high] - ordered[low])

    summary = {
        "mode": "inference",
        "latency_requests": n,
        "latency_p50_s": pct(0.5),
        "latency_p90_s": pct(0.9),
        "latency_p99_s": pct(0.99),
        "latency_max_s": ordered[-1],
        "latency_mean_s": sum(ordered) / n,
        "inference_samples_per_s": spec.batch_size * n / sum(ordered),
        "first_request_s": 0.004,
        "warmup_s": 0.006,
        "latency_note": (
            None
            if n >= 563
            else f"p99 rests on {n} requests, fewer than the 563 that bound it "
            "(95 % interval of the quantile)"
        ),
    }
    ev.append({"v": 1, "type": "finished", "t": round(t + 0.01, 4), "summary": summary})
    ev.append(
        {
            "type": "result",
            "record": {
                "id": run_id,
                "spec": spec.to_dict(),  # the history record: what the runner writes
                "status": "finished",
                "reason": None,
                "metrics": {**summary, "threads_effective": spec.threads},
                "stability": stability.assess(timed).as_dict(),
            },
        }
    )
    return ev
