"""The run supervisor: the process that owns a batch, so a run outlives the terminal that asked.

``launch`` writes the batch's request and starts ``python -m tui_bench.engine.runs.supervisor``
detached from the terminal: its own session (no controlling tty, so no SIGHUP when an SSH link
drops), stdin from /dev/null, its output to the batch's log, and re-parented to init by a fork so
no front end has to reap it. It runs the batch (``engine.batch``), owns the workers, the sampler,
the series files and the history writes, and exits when the batch ends.

Front ends are viewers: they follow the batch's files (``engine.follow``). Stopping is explicit:
``stop`` sends the supervisor SIGTERM, which cancels the current run (recorded as cancelled) and
ends the batch. SIGHUP and SIGINT are ignored: a hangup never cancels.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import SupervisorError
from tui_bench.engine.kinds import BatchEvent
from tui_bench.engine.machine import procs
from tui_bench.engine.paths import data_home
from tui_bench.engine.results.history import History, read_jsonl
from tui_bench.engine.runs import batch as batch_module
from tui_bench.engine.runs.reducer import BatchView

START_TIMEOUT_S = 20.0  # the supervisor imports the engine, then names itself


def launch(request: batch_module.BatchRequest) -> str:
    """Start a supervisor for ``request`` and return the batch id once it runs."""
    batch_id = batch_module.create(request)
    home = data_home()
    log = batch_module.log_path(batch_id)
    with open(log, "ab") as log_handle:
        starter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tui_bench.engine.runs.supervisor",
                "--home",
                str(home),
                batch_id,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no controlling terminal: a hangup never reaches it
            close_fds=True,
            env={**os.environ, "TUI_BENCH_HOME": str(home)},
        )
    starter.wait()  # the starter forks the supervisor and exits at once
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = BatchState.read(batch_id)
        if state.supervisor is not None:
            return batch_id
        if starter.returncode not in (0, None):
            break
        time.sleep(0.05)
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
    raise SupervisorError(
        f"the run supervisor did not start ({tail[0] if tail else 'no output'}); log: {log}"
    )


@dataclass
class BatchState:
    """What a batch's event file says, without following its runs."""

    id: str
    header: dict[str, Any] | None = None
    supervisor: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    run_ids: list[str] = field(default_factory=list)
    position: dict[str, Any] | None = None  # the last sweep_run event
    done: dict[str, Any] | None = None

    @classmethod
    def read(cls, batch_id: str) -> BatchState:
        view = BatchView().fold(read_jsonl(batch_module.events_path(batch_id)))
        return cls(
            batch_id,
            header=view.header,
            supervisor=view.supervisor,
            plan=view.plan,
            run_ids=view.run_ids,
            position=view.position,
            done=view.ending,
        )

    @property
    def alive(self) -> bool:
        s = self.supervisor or {}
        return self.done is None and procs.alive(s.get("pid"), s.get("started"))

    @property
    def in_progress(self) -> bool:
        return self.done is None and self.alive

    @property
    def label(self) -> str:
        return (self.header or {}).get("label", "")

    @property
    def created_at(self) -> str:
        return (self.header or {}).get("created_at", "")


def all_batches() -> list[BatchState]:
    directory = batch_module.batches_dir()
    if not directory.is_dir():
        return []
    return [BatchState.read(p.stem) for p in sorted(directory.glob("batch-*.jsonl"))]


def in_progress() -> list[BatchState]:
    """Batches whose supervisor is alive, oldest first (by the supervisor's start: ids made in
    the same second do not sort by time)."""
    running = [b for b in all_batches() if b.in_progress]
    return sorted(running, key=lambda b: (b.supervisor or {}).get("started") or 0.0)


def find(token: str | None) -> BatchState:
    """A batch by id or unique prefix, or the batch a run id (prefix) belongs to; with no token,
    the newest batch in progress."""
    if not token:
        running = in_progress()
        if not running:
            raise SupervisorError("no run is in progress (tui-bench history list shows past runs)")
        return running[-1]
    batches = all_batches()
    matches = [b for b in batches if b.id == token] or [
        b for b in batches if b.id.startswith(token)
    ]
    if not matches:
        matches = [b for b in batches if any(r.startswith(token) for r in b.run_ids or [])]
    if not matches:
        raise SupervisorError(f"no batch or run with id {token!r} (tui-bench ps lists them)")
    if len(matches) > 1:
        raise SupervisorError(f"id {token!r} matches {len(matches)} batches; give more of it")
    return matches[0]


def stop(batch_id: str) -> BatchState:
    """Ask a batch's supervisor to cancel (SIGTERM to that very process, never a reused pid)."""
    state = BatchState.read(batch_id)
    if state.done is not None:
        raise SupervisorError(f"{batch_id} has already ended")
    s = state.supervisor or {}
    if not state.alive:
        History().mark_interrupted()
        raise SupervisorError(f"{batch_id} has no live supervisor (its runs are interrupted)")
    if not procs.send_signal(s.get("pid"), s.get("started"), signal.SIGTERM):
        raise SupervisorError(f"{batch_id}'s supervisor has just ended")
    return state


def wait_done(batch_id: str, timeout: float) -> BatchState:
    deadline = time.monotonic() + timeout
    state = BatchState.read(batch_id)
    while state.done is None and state.alive and time.monotonic() < deadline:
        time.sleep(0.1)
        state = BatchState.read(batch_id)
    return state


# -- the supervisor process ---------------------------------------------------------------------
def _detach() -> None:
    """Fork once more so the supervisor is re-parented to init: the front end that launched it
    can exit, or live on for days, without reaping anything."""
    if os.fork() > 0:
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui_bench.engine.runs.supervisor")
    parser.add_argument("--home", required=True)
    parser.add_argument("batch_id")
    args = parser.parse_args(argv)
    os.environ["TUI_BENCH_HOME"] = str(Path(args.home))
    # No tty, so no hangup should come; if one does, it is not a cancel: only an explicit stop
    # (SIGTERM) is. Handlers, not SIG_IGN, so the workers started from here get the defaults.
    for signum in (signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: None)
    _detach()
    header = next(iter(read_jsonl(batch_module.events_path(args.batch_id))), None)
    if not header or header.get("type") != BatchEvent.BATCH:
        print(f"batch {args.batch_id} has no request", file=sys.stderr)
        return 2
    control = batch_module.BatchControl()
    signal.signal(signal.SIGTERM, lambda signum, frame: control.cancel())
    from tui_bench.engine.runs.lifecycle import SeriesWriter

    events = SeriesWriter(batch_module.events_path(args.batch_id))
    events.write({"type": BatchEvent.SUPERVISOR, **procs.identity()})
    try:
        try:  # the request is a file: one that cannot be read ends the batch with why
            request = batch_module.BatchRequest.from_dict(header["request"])
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            events.write(
                {
                    "type": BatchEvent.BATCH_DONE,
                    "statuses": [],
                    "error": f"batch {args.batch_id} has an unreadable request: {exc}",
                }
            )
            return 2
        history = History()
        history.mark_interrupted()  # settle runs of supervisors that died before this one
        batch_module.run_batch(args.batch_id, request, history, events.write, control)
    finally:
        events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
