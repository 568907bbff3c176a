"""The words runs and batches are written in: a run's status, and the kinds of event in a batch's
event file and a run's series file. StrEnums, so they compare equal to (and are stored as) the
plain strings already in history files and series written by earlier versions."""

from __future__ import annotations

from enum import StrEnum

from tui_bench.engine.protocol import WorkerEvent

__all__ = ["BatchEvent", "RelayEvent", "RunStatus", "SeriesEvent", "WorkerEvent"]


class RunStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # its supervisor died; found at the next look


ENDED = (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED)


class BatchEvent(StrEnum):
    """Lines of ``batches/<id>.jsonl``, written by the supervisor, read by every viewer."""

    BATCH = "batch"  # the request, written by whoever launched the batch
    SUPERVISOR = "supervisor"  # the supervisor's identity, once it runs
    PLAN = "plan"  # what will run and what is skipped
    SWEEP_RUN = "sweep_run"  # position in a sweep: run k of N, configuration, repeat
    RUN = "run"  # a run id was reserved: its series file exists from here on
    BATCH_DONE = "batch_done"  # the end, with the statuses; viewers stop here


class SeriesEvent(StrEnum):
    """What the engine writes into a run's series file around the worker's own events."""

    RECORD = "record"  # the history record as the run started
    RESULT = "result"  # the final record
    SAMPLE = "sample"  # one resource sample of the worker's process tree and GPUs
    WORKER = "worker"  # the worker's pid and start time, so a dead supervisor's worker is found
    REMOTE_WORKER = "remote_worker"  # the same on a fleet node: never signalled from here


class RelayEvent(StrEnum):
    """What a fleet node's task streams to the head besides the run's own events."""

    PLACED = "placed"  # the node that took the run, and its tui-bench version
    NODE_ERROR = "node_error"  # the task failed outside the runner, which records its own
