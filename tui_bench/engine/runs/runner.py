"""Starts a worker, reads its events, samples its resources, cancels it, and turns every ending
into a result. The runner never raises into a front end: a crash, a hang, a missing runtime or a
cancel all come back as a ``RunResult`` with a status and a one-line reason.

The worker's environment and command line are ``worker_launch``'s; what the result and the
record say (figures, the starting fields), ``run_result``'s; a build-only worker, ``dry_run``'s.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from tui_bench.engine import catalog, protocol
from tui_bench.engine.kinds import RunStatus, SeriesEvent, WorkerEvent
from tui_bench.engine.machine import procs, runtimes
from tui_bench.engine.machine.sampler import ResourceSampler
from tui_bench.engine.results.history import History
from tui_bench.engine.runs.lifecycle import RunRecord
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.runs.run_result import RunResult, start_fields, worker_facts
from tui_bench.engine.runs.worker_launch import (
    worker_command,
    worker_environment,
)
from tui_bench.engine.spec import RunSpec

__all__ = ["EventCallback", "RunResult", "WorkerRun", "execute"]

EventCallback = Callable[[dict[str, Any]], None]

DEFAULT_STALL_TIMEOUT_S = 300.0  # no event at all (heartbeats included) for this long: hung
KILL_GRACE_S = 3.0
LOG_TAIL_LINES = 25


def _nvml_indices(device: str) -> list[int]:
    """NVML numbers GPUs by PCI bus; the worker sees them through CUDA_VISIBLE_DEVICES."""
    if not device.startswith("gpu"):
        return []
    index = int(device.split(":")[1]) if ":" in device else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if index < len(ids) and ids[index].isdigit():
            return [int(ids[index])]
        return []
    return [index]


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return ""


class WorkerRun:
    """One worker process, from start to a RunResult."""

    def __init__(
        self,
        spec: RunSpec,
        run_id: str,
        log_path: Path,
        on_event: EventCallback | None = None,
        runtime: runtimes.Runtime | None = None,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT_S,
        sample_interval: float = 1.0,
        fault: str | None = None,
    ) -> None:
        self.spec = spec
        self.run_id = run_id
        self.log_path = log_path
        self.on_event = on_event or (lambda event: None)
        self.runtime = runtime
        self.stall_timeout = stall_timeout
        self.sample_interval = sample_interval
        self.fault = fault
        self.process: subprocess.Popen | None = None
        self._cancel = threading.Event()
        self._last_event = time.monotonic()
        self.view = BatchView(spec=spec)  # the worker's events, folded as every viewer folds them
        self._sampler: ResourceSampler | None = None
        self.result = RunResult(run_id=run_id, spec=spec, status=RunStatus.FAILED)

    def cancel(self) -> None:
        """Thread-safe: ask for the run to stop; ``wait`` kills the process group."""
        self._cancel.set()

    # -- events ---------------------------------------------------------------------------------
    def _handle(self, event: dict[str, Any]) -> None:
        self._last_event = time.monotonic()
        kind = event.get("type")
        if kind == WorkerEvent.HEARTBEAT:
            return  # proof of life only: it resets the stall clock and goes no further
        self.view.apply(event)
        if kind == WorkerEvent.STEADY and self._sampler is not None:
            self._sampler.mark(event.get("edge", ""))  # energy counter at the window's bounds
        self.on_event(event)

    def collect(self) -> RunResult:
        """The result so far, with what the worker reported (its start, epochs, test)."""
        r, view = self.result, self.view
        r.started, r.epochs, r.test = view.started, view.epoch_records, view.test
        return r

    def _read_events(self, source: int | str) -> None:
        splitter = protocol.LineSplitter()
        if isinstance(source, str):  # a named pipe: blocks until rank 0 opens it (or we do)
            source = os.open(source, os.O_RDONLY)
        with os.fdopen(source, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                for line in splitter.feed(chunk):
                    self._decode(line)
        rest = splitter.flush()
        if rest.strip():
            self._decode(rest)

    def _decode(self, line: bytes) -> None:
        try:
            event = protocol.decode(line)
        except protocol.DecodeError as exc:
            self.result.malformed_lines += 1
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(f"[tui-bench] ignored a malformed event line ({exc})\n")
            return
        self._handle(event)

    # -- process --------------------------------------------------------------------------------
    def _kill_group(self) -> None:
        assert self.process is not None
        # torch.distributed.run starts each rank in a session of its own: end them by pid too.
        ranks = _descendants(self.process.pid)
        for rank in ranks:
            _signal(rank, signal.SIGTERM)
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            for rank in ranks:
                _signal(rank, signal.SIGKILL)
            return
        try:
            self.process.wait(KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # the group: compile workers too
        except ProcessLookupError:
            pass
        for rank in ranks:
            _signal(rank, signal.SIGKILL)
        self.process.wait()

    def run(self) -> RunResult:
        started = time.monotonic()
        r = self.result
        try:
            runtime = self.runtime or runtimes.resolve(self.spec.framework, self.spec.api)
        except Exception as exc:  # RuntimeUnavailable, or a broken config file
            r.reason = str(exc)
            return r
        read_fd, write_fd = os.pipe()
        events_path = None
        if (
            catalog.framework(self.spec.framework).data_parallel.launch == "launcher"
            and self.spec.workers > 1
        ):
            os.close(read_fd)
            os.close(write_fd)
            read_fd = write_fd = -1
            fifo_dir = procs.owned_temp_dir("events")  # removed at a later start if we die
            events_path = os.path.join(fifo_dir, "rank0")
            os.mkfifo(events_path, 0o600)
        env = worker_environment(self.spec)
        if self.fault:
            env["TUI_BENCH_FAULT"] = self.fault
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(
                    worker_command(self.spec, runtime.python, write_fd, events_path),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,) if write_fd >= 0 else (),
                    start_new_session=True,  # own process group: Ctrl-C in the app is ours to relay
                    env=env,
                )
            except OSError as exc:
                if write_fd >= 0:
                    os.close(read_fd)
                    os.close(write_fd)
                elif events_path:
                    shutil.rmtree(os.path.dirname(events_path), ignore_errors=True)
                r.reason = f"could not start the worker with {runtime.python}: {exc.strerror}"
                return r
        if write_fd >= 0:
            os.close(write_fd)
        # Named in the series so a later look can end a worker whose supervisor died.
        self.on_event({"type": SeriesEvent.WORKER, **procs.identity(self.process.pid)})
        source = events_path if events_path else read_fd
        reader = threading.Thread(target=self._read_events, args=(source,), daemon=True)
        reader.start()
        sampler = ResourceSampler(
            self.process.pid,
            gpu_indices=_nvml_indices(self.spec.device),
            interval=self.sample_interval,
            on_sample=lambda s: self.on_event({"type": SeriesEvent.SAMPLE, **s}),
        )
        self._sampler = sampler
        sampler.start()
        stalled = False
        self._last_event = time.monotonic()
        while self.process.poll() is None:
            if self._cancel.wait(0.1):
                self._kill_group()
                break
            if time.monotonic() - self._last_event > self.stall_timeout:
                stalled = True
                self._kill_group()
                break
        r.returncode = self.process.wait()
        if events_path:
            _release_fifo_reader(events_path)
        reader.join(timeout=5)
        if reader.is_alive():  # a grandchild kept the pipe open: end the whole group
            self._kill_group()
            reader.join(timeout=5)
        r.resources = sampler.stop().as_dict()
        if events_path:
            shutil.rmtree(os.path.dirname(events_path), ignore_errors=True)
        r.wall_s = time.monotonic() - started
        r.log_tail = tail(self.log_path)
        self._conclude(stalled)
        return r

    def _conclude(self, stalled: bool) -> None:
        r = self.collect()
        final = self.view.final
        if self._cancel.is_set():
            r.status, r.reason = RunStatus.CANCELLED, "cancelled by the user"
        elif stalled:
            r.status = RunStatus.FAILED
            r.reason = f"worker sent nothing for {self.stall_timeout:g} s and was killed (hung)"
        elif final is not None and final["type"] == WorkerEvent.FINISHED:
            r.status = RunStatus.FINISHED
            r.summary = final.get("summary", {})
            if r.returncode != 0:
                # The result was whole when it was sent (every rank's step times gathered, the
                # test set evaluated); a crash while shutting down after it changes no figure.
                # Said, with the log, never hidden.
                r.reason = (
                    f"the result is complete; the worker then {_exit_words(r.returncode)} "
                    "while shutting down (see the log)"
                )
        elif final is not None and final["type"] == WorkerEvent.ERROR:
            r.status = RunStatus.FAILED
            r.error = final
            r.reason = f"{final.get('error_type')}: {final.get('message', '').splitlines()[0] if final.get('message') else ''}"
            if final.get("phase") == "import" and final.get("error_type") == "ModuleNotFoundError":
                # The runtime lacks a package the API needs (e.g. a Keras backend): say how to fix.
                name = catalog.runtime_for(self.spec.framework, self.spec.api)
                r.reason += f"; runtime '{name}' lacks it: {runtimes.fix_command(name)}"
        elif r.returncode is not None and r.returncode < 0:
            r.status, r.reason = RunStatus.FAILED, f"worker {_exit_words(r.returncode)}"
        else:
            r.status = RunStatus.FAILED
            r.reason = f"worker {_exit_words(r.returncode)} before reporting a result"


def _exit_words(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _signal(process: psutil.Process, signum: int) -> None:
    try:
        process.send_signal(signum)  # psutil checks the pid is still that process
    except psutil.Error:
        pass


def _release_fifo_reader(path: str) -> None:
    """Rank 0 never opened the named pipe (it died first): open and close its write end so the
    reader's blocked open returns and it sees the end of the stream."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waiting: it has already seen the end


def execute(
    spec: RunSpec,
    history: History,
    on_event: EventCallback | None = None,
    on_start: Callable[[WorkerRun], None] | None = None,
    group: str | None = None,
    repeat: int | None = None,
    extra: dict[str, Any] | None = None,
    **worker_options: Any,
) -> RunResult:
    """Run one spec in a worker and record it in history (before it starts, and when it ends).

    ``on_start`` receives the WorkerRun so a front end can cancel it from another thread.
    ``extra`` adds fields to the history record (a sweep's configuration key, for one)."""
    run = RunRecord(history)
    record = run.start(start_fields(spec, group, repeat, extra))

    def forward(event: dict[str, Any]) -> None:
        run.write(event)
        if on_event is not None:
            on_event(event)

    worker = WorkerRun(
        spec, record["id"], history.log_path(record["id"]), on_event=forward, **worker_options
    )
    if on_start is not None:
        on_start(worker)
    try:
        result = worker.run()
    except BaseException as exc:  # the runner must turn even its own failures into a result
        result = worker.collect()
        result.status, result.reason = (
            RunStatus.FAILED,
            f"runner error: {type(exc).__name__}: {exc}",
        )
        if worker.process is not None and worker.process.poll() is None:
            worker._kill_group()
        if isinstance(exc, KeyboardInterrupt):
            result.status, result.reason = RunStatus.CANCELLED, "interrupted"
    final = run.finish(
        result.status,
        reason=result.reason,
        worker=worker_facts(result.started),
        metrics=result.metrics(),
        log_tail=result.log_tail,
    )
    result.status, result.reason = final["status"], final["reason"]  # a full disk fails it
    return result
