"""The one timed training loop. Frameworks plug in through ``adapters.backend.Backend``; nothing
here is per-framework.

- ``input="host"`` (default): a *step* is: gather the batch from the epoch's order, hand it to the
  framework (layout/dtype conversion and host→device copy included), forward, backward, optimizer
  update, read the loss. ``input="device"``: the whole training split is put on the device once,
  before timing (``input_upload_s``); batches are gathered there, inside the step.
- Each step is timed by ``adapters.clock.StepClock`` (synced or pipelined, warm-up apart).
- Validation after each epoch and the final test pass are timed separately from training.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from adapters import data as data_module
from adapters.backend import Backend, Hyper, Parallel, Settings, optional_hooks
from adapters.clock import StepClock, compact, percentile, step_stats


def run_training(
    backend: Backend,
    dataset: data_module.Dataset,
    hyper: Hyper,
    epochs: int,
    steps_per_epoch: int | None,
    warmup_steps: int,
    emit: Callable[..., None],
    target_accuracy: float | None = None,
    fault: Callable[[str, int], None] | None = None,
    settings: Settings | None = None,
    parallel: Parallel | None = None,
) -> dict[str, Any]:
    """Train, validate each epoch, test once; emit events; return the run summary.

    ``backend`` may be any object with the required ``Backend`` methods; the optional hooks
    fall back to ``Backend``'s defaults. With ``parallel``, ``hyper.batch_size`` is this
    worker's batch; steps walk the global batches and throughput counts global samples."""
    settings = settings or Settings()
    parallel = parallel or Parallel()
    global_batch = hyper.batch_size * parallel.workers
    now = time.perf_counter
    hook = optional_hooks(backend)
    clock = StepClock(
        backend.sync,
        emit,
        warmup_steps,
        global_batch,
        loss_value=hook("loss_value"),
        timing=settings.timing,
        window=settings.timing_window,
        device_timer=hook("device_timer")() if settings.timing == "pipelined" else None,
    )
    n_train = len(dataset.x_train)
    x_train, y_train = dataset.x_train, dataset.y_train
    input_upload_s = None
    if settings.input == "device":
        backend.sync()
        t0 = now()
        x_train, y_train = hook("to_device")(x_train, y_train)
        backend.sync()
        input_upload_s = now() - t0
    epoch_records: list[dict[str, Any]] = []
    reached: dict[str, Any] | None = None
    train_wall = 0.0
    for epoch in range(1, epochs + 1):
        batch_indices = [
            parallel.shard(idx)
            for idx in data_module.batches(
                n_train, global_batch, hyper.seed, epoch, steps_per_epoch
            )
        ]
        emit("epoch_started", epoch=epoch, epochs=epochs, steps=len(batch_indices))
        clock.new_epoch(epoch)
        if fault:
            fault("epoch", epoch)
        backend.sync()
        epoch_start = now()
        backend.train_epoch(x_train, y_train, batch_indices, clock)
        clock.end_epoch()
        backend.sync()
        wall = now() - epoch_start
        clock.flush()
        train_wall += wall
        val_loss = val_acc = None
        val_s = 0.0
        if len(dataset.x_val):
            backend.sync()
            t0 = now()
            val_loss, val_acc = backend.evaluate(dataset.x_val, dataset.y_val, hyper.batch_size)
            backend.sync()
            val_s = now() - t0
        losses = clock.epoch_losses
        record = {
            "epoch": epoch,
            "wall_s": wall,
            "warmup_s": clock.epoch_warmup_s,
            "steps": len(batch_indices),
            "steady_steps": len(clock.epoch_steady),
            **step_stats(clock.epoch_steady, global_batch),
            "loss": sum(losses) / len(losses) if losses else None,
            "val_loss": val_loss,
            "val_accuracy": val_acc,
            "val_s": val_s,
        }
        epoch_records.append(record)
        emit("epoch_finished", **record)
        if (
            reached is None
            and target_accuracy is not None
            and val_acc is not None
            and val_acc >= target_accuracy
        ):
            reached = {"epoch": epoch, "train_wall_s": train_wall}
            break
    backend.sync()
    t0 = now()
    test_loss, test_acc = backend.evaluate(dataset.x_test, dataset.y_test, hyper.batch_size)
    backend.sync()
    test_s = now() - t0
    emit(
        "test_finished",
        test_s=test_s,
        test_loss=test_loss,
        test_accuracy=test_acc,
        test_samples=len(dataset.x_test),
    )
    overall = step_stats(clock.steady_times, global_batch)
    return {
        **parallel_summary(hook("gather_step_times")(clock.steady_times), parallel, hyper),
        "timing": settings.timing,
        "timing_window": settings.timing_window if settings.timing == "pipelined" else None,
        "step_source": clock.step_source,
        "pipelined_windows": clock.windows if settings.timing == "pipelined" else None,
        "input": settings.input,
        "input_upload_s": input_upload_s,
        **(
            hook("memory_stats")()
            or {
                "allocator_peak_mib": None,
                "allocator": "n/a: no allocator peak from the framework here (n/a on CPU)",
            }
        ),
        **hook("run_facts")(),
        "epochs_run": len(epoch_records),
        "train_wall_s": train_wall,
        "warmup_s": clock.warmup_s,
        "first_step_s": clock.first_step_s,
        "steady_steps": len(clock.steady_times),
        **overall,
        # Every steady step in order, so the app can judge the run's stability (and re-judge it
        # when the rules change); 4 significant digits are plenty for 1 % rules and keep it short.
        "steady_step_times": compact(clock.steady_times),
        "final_loss": epoch_records[-1]["loss"] if epoch_records else None,
        "val_accuracy": epoch_records[-1]["val_accuracy"] if epoch_records else None,
        "test_s": test_s,
        "test_loss": test_loss,
        "test_accuracy": test_acc,
        "target_accuracy": target_accuracy,
        "target_reached_epoch": reached["epoch"] if reached else None,
        "target_reached_s": reached["train_wall_s"] if reached else None,
    }


def parallel_summary(
    rank_times: list[list[float]], parallel: Parallel, hyper: Hyper
) -> dict[str, Any]:
    """Workers, batches and every rank's steady step median: a straggler shows as one rank's
    median above the others (rank 0's own steps wait for it at every gradient all-reduce)."""
    medians = [percentile(sorted(times), 0.5) if times else None for times in rank_times]
    known = [m for m in medians if m]
    return {
        "workers": parallel.workers,
        "scaling": parallel.scaling,
        "worker_batch": hyper.batch_size,
        "global_batch": hyper.batch_size * parallel.workers,
        "rank_step_median_s": medians,
        "rank_straggler_ratio": max(known) / min(known) if known else None,
    }
