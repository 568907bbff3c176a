"""Fleet sweeps: each run of a batch becomes a Ray task on whichever node of a Ray cluster has the
resources it asks for, and comes back as if it had run here.

The batch runner (``engine.batch``) and the sweep loop (``engine.sweep``) are the ones every batch
uses; this module only supplies ``FleetExecutor``, a drop-in for ``runner.execute``. On the node,
the task runs the ordinary runner and worker (``runner.execute``) against a node-local history and
streams every event back (a Ray streaming generator). Here, the supervisor writes those events into
this machine's series file and the record into this machine's history, so Live, ``ps``,
``attach``, ``history`` and ``compare`` read remote runs exactly like local ones. Each record
names the node it ran on (``host``, ``node``) and carries that node's own fingerprint (``env``).

Ray is an optional extra and is imported lazily, only here: nothing else in tui-bench needs it.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from tui_bench import __version__
from tui_bench.engine.errors import FleetError
from tui_bench.engine.kinds import RelayEvent, RunStatus, SeriesEvent
from tui_bench.engine.machine import procs
from tui_bench.engine.paths import data_home
from tui_bench.engine.protocol import WorkerEvent
from tui_bench.engine.results.history import History, now_iso
from tui_bench.engine.runs.lifecycle import RunRecord
from tui_bench.engine.spec import RunSpec

INSTALL_HINT = "pip install 'tui-bench[ray]'"
CANCEL_GRACE_S = 30.0  # a cancelled task gets this long to stop its worker and say so
CANCEL_POLL_S = 5.0  # a node's watch for the head's cancel asks again this often (a long poll)
# Ray Client's relay: the node merges step events while the head reads and keeps at most this
# many step losses waiting; with the batch in the relay actor (RELAY_BATCHES) and the one in
# transit, at most 3 x RELAY_MAX_STEPS = 3000 steps' losses lie between a node and the head.
RELAY_MAX_STEPS = 1000
RELAY_BATCHES = 1
CLIENT_CONNECT_TRIES = 3  # Ray Client's per-connection server can fail to start once under load
_ITEM, _END, _FAILED = "item", "end", "failed"  # what the relay thread hands the head's loop


def require_ray(address: str | None = None) -> None:
    """Raise the one-line error, with the install command, when Ray is not installed, or when
    ``address`` is a ray:// one and Ray Client's own dependency (grpcio) is missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise FleetError(f"--cluster needs Ray, which is not installed: {INSTALL_HINT}") from None
    if address and address.startswith("ray://"):
        try:
            import grpc  # noqa: F401
        except ImportError:
            raise FleetError(
                f"--cluster {address} uses Ray Client, which needs grpcio: {INSTALL_HINT}"
            ) from None


def resources_for(spec: RunSpec) -> dict[str, float]:
    """What a run holds exclusively while it runs: the CPU threads it will use (per worker), and
    one GPU per worker for a GPU run. Nothing else Ray schedules can share them."""
    workers = max(int(getattr(spec, "workers", 1) or 1), 1)
    wanted = {"num_cpus": float(spec.threads * workers)}
    if spec.device != "cpu":
        wanted["num_gpus"] = float(workers)
    return wanted


RAY_RESOURCE = {
    "num_cpus": "CPU",
    "num_gpus": "GPU",
}  # ray.remote's arguments → ray.nodes()'s names


def _fits(wanted: dict[str, float], nodes: list[dict[str, Any]]) -> bool:
    for node in nodes:
        if not node.get("Alive"):
            continue
        total = node.get("Resources") or {}
        if all(total.get(RAY_RESOURCE[key], 0.0) >= amount for key, amount in wanted.items()):
            return True
    return False


def _describe(wanted: dict[str, float]) -> str:
    return ", ".join(f"{amount:g} {RAY_RESOURCE[key]}" for key, amount in wanted.items())


def node_name(node: dict[str, Any]) -> str:
    """How a record names a node: its host, address and the head of its Ray node id."""
    return f"{node.get('host')} ({node.get('ip')}, node {str(node.get('id', ''))[:12]})"


# -- on the node --------------------------------------------------------------------------------
class RelayHistory(History):
    """The node-local history a remote run is recorded in, under the run id the head reserved;
    every record write is also relayed to the head, in order with the run's events."""

    def __init__(self, home: Any, run_id: str, relay: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(home)
        self._run_id = run_id
        self._relay = relay

    def reserve_run_id(self) -> str:
        self.series_path(self._run_id).touch()
        return self._run_id

    def add(self, record: dict[str, Any]) -> str:
        run_id = super().add(record)
        self._relay({"type": SeriesEvent.RECORD, "record": dict(record)})
        return run_id

    def update(self, run_id: str, **fields: Any) -> None:
        super().update(run_id, **fields)
        self._relay({"type": SeriesEvent.RESULT, "record": {"id": run_id, **fields}})


class RelayBuffer:
    """What the node has for the head and has not handed on yet: the run's events in order, with
    consecutive ``steps`` events of an epoch merged into one (their losses and step times joined,
    nothing lost), and never more than ``max_steps`` step losses. When the head falls further
    behind, the oldest waiting losses are dropped from the head's copy (the node's own series has
    them all) while the step count stays exact: every other event (the record, the result, a node
    error, epochs, samples, the end) is always kept. Producers never wait: the run is timed, and
    a relay that held it back would change what it measures."""

    def __init__(self, max_steps: int = RELAY_MAX_STEPS) -> None:
        self.max_steps = max_steps
        self._items: list[dict[str, Any]] = []
        self._steps = 0  # step losses in _items
        self._ended = False
        self._ready = threading.Condition()

    def put(self, event: dict[str, Any] | None) -> None:
        """One event of the run, or None: the run's last has been put."""
        with self._ready:
            if event is None:
                self._ended = True
            elif event.get("type") == WorkerEvent.STEPS:
                self._add_steps(event)
            else:
                self._items.append(event)
            self._ready.notify()

    def take(self, timeout: float | None = None) -> tuple[list[dict[str, Any]], bool]:
        """Everything waiting (after waiting up to ``timeout`` for something), and whether the
        run's end was reached with it."""
        with self._ready:
            self._ready.wait_for(lambda: self._items or self._ended, timeout)
            items, self._items, self._steps = self._items, [], 0
            return items, self._ended

    def _add_steps(self, event: dict[str, Any]) -> None:
        losses = list(event.get("losses") or [])
        last = self._items[-1] if self._items else None
        if (
            last is not None
            and last.get("type") == WorkerEvent.STEPS
            and last.get("epoch") == event.get("epoch")
            and last.get("first_step", 0) + len(last["losses"]) == event.get("first_step", 0)
        ):
            merged = {**event, "first_step": last.get("first_step", 0)}
            merged["losses"] = last["losses"] + losses
            times = (last.get("step_times") or []) + (event.get("step_times") or [])
            if times:
                merged["step_times"] = times
            self._items[-1] = merged
        else:
            self._items.append({**event, "losses": losses})
        self._steps += len(losses)
        while self._steps > self.max_steps:
            self._drop_oldest_losses(self._steps - self.max_steps)

    def _drop_oldest_losses(self, excess: int) -> None:
        at, oldest = next((i, e) for i, e in enumerate(self._items) if e["type"] == "steps")
        cut = min(excess, len(oldest["losses"]))
        kept = oldest["losses"][cut:]
        self._steps -= cut
        if not kept:
            del self._items[at]
            return
        # The step count a viewer shows is first_step + the losses after it: still exact.
        trimmed = {**oldest, "first_step": oldest.get("first_step", 0) + cut, "losses": kept}
        if oldest.get("step_times"):  # the steady steps' times are the epoch's later steps
            trimmed["step_times"] = oldest["step_times"][-len(kept) :]
        self._items[at] = trimmed


class NodeRun:
    """One run on this node: the ordinary runner in a thread, against a node-local history,
    its events and record writes in order on ``buffer``. ``cancel`` works from any thread,
    before or after the worker has started."""

    def __init__(self, payload: dict[str, Any]) -> None:
        import ray

        self.payload = payload
        self.node = {
            "id": ray.get_runtime_context().get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
        }
        self.placed = {"type": RelayEvent.PLACED, "node": self.node, "tui_bench": __version__}
        # The head refuses the run when the node runs another tui-bench.
        self.refused = payload["tui_bench"] != __version__
        self.buffer = RelayBuffer()
        self._workers: list[Any] = []
        self._cancelled = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import ray

        from tui_bench.engine.runs import runner

        payload, node = self.payload, self.node
        spec = RunSpec.from_dict(payload["spec"], validate=False)
        gpu_ids = ray.get_gpu_ids()
        if spec.device != "cpu":
            # Ray grants the GPUs and makes them the visible ones (CUDA_VISIBLE_DEVICES): the
            # run uses the first of those, whatever index the spec named.
            spec = replace(spec, device="gpu:0")
        # A node-local home per node: the node's own history stays apart, and nodes that share a
        # file system (or, in tests, a machine) never write one tinydb from two places.
        home = data_home() / "fleet" / node["id"][:16]
        history = RelayHistory(home, payload["run_id"], self.buffer.put)

        def relabel(event: dict[str, Any]) -> None:
            if event.get("type") == SeriesEvent.WORKER:
                # A pid on another machine: the head must never signal a local process by it.
                event = {**event, "type": SeriesEvent.REMOTE_WORKER, "node": node["id"]}
            self.buffer.put(event)

        def work() -> None:
            try:
                runner.execute(
                    spec,
                    history,
                    on_event=relabel,
                    on_start=self._on_start,
                    group=payload["group"],
                    repeat=payload["repeat"],
                    extra={
                        **payload["extra"],
                        "host": node["host"],
                        "node": node,
                        "cluster_gpu_ids": [str(g) for g in gpu_ids],
                        "label": f"{spec.label()} @ {node['host']}",
                    },
                    **payload["options"],
                )
            except BaseException as exc:  # execute records its own failures; this is the rest
                self.buffer.put(
                    {"type": RelayEvent.NODE_ERROR, "reason": f"{type(exc).__name__}: {exc}"}
                )
            finally:
                self.buffer.put(None)

        self._thread = threading.Thread(target=work, name=f"run {payload['run_id']}", daemon=True)
        self._thread.start()

    def _on_start(self, worker: Any) -> None:
        self._workers.append(worker)
        if self._cancelled.is_set():  # the cancel came before the worker did
            worker.cancel()

    def cancel(self) -> None:
        """Stop the worker: the runner then records the run as cancelled and relays that."""
        self._cancelled.set()
        for worker in list(self._workers):
            worker.cancel()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)


def run_on_node(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The Ray task: run one spec with the ordinary runner on this node, yielding the run's
    record, its events and its final record as they happen."""
    run = NodeRun(payload)
    yield run.placed
    if run.refused:
        return
    run.start()
    try:
        ended = False
        while not ended:
            items, ended = run.buffer.take()
            for item in items:  # noqa: UP028 (``yield from`` fails in a Ray streaming task)
                yield item
    except BaseException:  # ray.cancel raises KeyboardInterrupt here: stop the worker first
        run.cancel()
        run.join(CANCEL_GRACE_S)
        raise


QUEUE_END = {"type": RelayEvent.QUEUE_END}


class ClientRelay:
    """Ray Client's relay, an async actor the head creates for each run: the node's events for
    the head in batches, at most ``RELAY_BATCHES`` of them waiting, and the head's cancel, which
    travels beside the events, never behind them. Its calls wait on asyncio, so a node's put
    that waits for room does not hold up the cancel or the head's get."""

    def __init__(self) -> None:
        import asyncio

        self._batches: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue(RELAY_BATCHES)
        self._cancel = asyncio.Event()

    async def put(self, batch: list[dict[str, Any]]) -> bool:
        """The node's: wait for room, then say whether the head has asked for a stop."""
        await self._batches.put(batch)
        return self._cancel.is_set()

    async def get(self, timeout: float) -> list[dict[str, Any]] | None:
        """The head's: the next batch, or None after ``timeout`` seconds without one."""
        import asyncio

        try:
            return await asyncio.wait_for(self._batches.get(), timeout)
        except TimeoutError:
            return None

    def get_nowait(self) -> list[dict[str, Any]] | None:
        return None if self._batches.empty() else self._batches.get_nowait()

    def cancel(self) -> None:
        self._cancel.set()

    async def cancelled(self, timeout: float) -> bool:
        """The node's watch: True as soon as the head asks for a stop, False after ``timeout``."""
        import asyncio

        try:
            await asyncio.wait_for(self._cancel.wait(), timeout)
        except TimeoutError:
            return False
        return True


def run_on_node_into(payload: dict[str, Any], relay: Any) -> None:
    """``run_on_node`` for Ray Client, which has no streaming tasks: the same events, put on the
    head's ``ClientRelay`` actor in batches, one actor call per batch. A thread watches the
    relay for the head's cancel and stops the worker at once; the runner's cancelled record and
    the end then follow the events already sent."""
    import ray

    run = NodeRun(payload)
    ray.get(relay.put.remote([run.placed]))
    if run.refused:
        ray.get(relay.put.remote([QUEUE_END]))
        return
    ended = threading.Event()

    def watch() -> None:
        try:
            while not ended.is_set():
                if ray.get(relay.cancelled.remote(CANCEL_POLL_S)):
                    run.cancel()
                    return
        except Exception:  # the relay is gone: nobody reads this run any more
            run.cancel()

    threading.Thread(target=watch, name=f"cancel {payload['run_id']}", daemon=True).start()
    run.start()
    try:
        done = False
        while not done:
            batch, done = run.buffer.take()
            if done:
                batch.append(QUEUE_END)
            if ray.get(relay.put.remote(batch)):
                run.cancel()  # the head's stop, seen on the way (the watch sees it too)
    except BaseException:  # ray.cancel (the head's fallback) raises KeyboardInterrupt here
        run.cancel()
        run.join(CANCEL_GRACE_S)
        raise
    finally:
        ended.set()


class ClientStream:
    """The head's side of ``run_on_node_into``: iterates the task's events as they arrive and
    ends, or raises the task's own error (cancelled, node lost), when the task does."""

    def __init__(self, task: Any, payload: dict[str, Any]) -> None:
        import ray

        # The relay is an actor: it must not take the CPU the run asked for.
        self.relay = ray.remote(ClientRelay).options(num_cpus=0).remote()
        self.ref = task.remote(payload, self.relay)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import ray

        try:
            while True:
                batch = ray.get(self.relay.get.remote(0.5))
                if batch is None:
                    done, _ = ray.wait([self.ref], timeout=0)
                    if not done:
                        continue
                    # The task has returned: what it put last may still wait in the relay.
                    batch = ray.get(self.relay.get_nowait.remote())
                    if batch is None:
                        ray.get(self.ref)  # raises the task's error; a clean end put QUEUE_END
                        return
                for event in batch:
                    if event == QUEUE_END:
                        return
                    yield event
        finally:
            ray.kill(self.relay)

    def cancel(self) -> None:
        """Ask the node to stop its worker, beside the events rather than behind them."""
        self.relay.cancel.remote()

    def force_cancel(self) -> None:
        """The fallback when the node has not answered the cancel: Ray cancels the task."""
        import ray

        ray.cancel(self.ref)


# -- on the head --------------------------------------------------------------------------------
class RemoteRun:
    """What the batch's control holds while a remote run is current: its id, and a cancel that
    is safe from a signal handler (the head's loop asks Ray to cancel the task)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()


def reachable(address: str, timeout: float = 5.0) -> None:
    """A HOST:PORT address must accept a connection before Ray is asked: given a wrong one, Ray
    retries for many minutes, and the batch would sit silent all that time."""
    if address == "auto" or "://" in address or ":" not in address:
        return  # Ray finds (or fails to find) a local cluster itself, quickly
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise FleetError(f"no Ray cluster answers at {address}: {exc}") from None


class FleetExecutor:
    """``runner.execute`` for a Ray cluster: same arguments, same RunResult, same records."""

    def __init__(self, address: str) -> None:
        require_ray()
        import ray

        self.address = address
        reachable(address)
        # ray.init takes SIGTERM for itself (its handler exits the process); the supervisor's
        # own handler is what turns ``tui-bench stop`` into a recorded cancel: put it back.
        on_sigterm = signal.getsignal(signal.SIGTERM)
        try:
            self._connect(ray, address)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise FleetError(f"no Ray cluster at {address}: {first}") from None
        finally:
            if threading.current_thread() is threading.main_thread() and on_sigterm is not None:
                signal.signal(signal.SIGTERM, on_sigterm)
        # One submission: a retried benchmark would run (and be counted) twice, and a run that
        # fails half-way must be recorded as failed, not quietly redone elsewhere.
        # Ray Client (ray://) has no streaming tasks: there the events travel through a relay actor.
        self._client = address.startswith("ray://")
        self._task: Any = (
            ray.remote(max_retries=0)(run_on_node_into)
            if self._client
            else ray.remote(max_retries=0, num_returns="streaming")(run_on_node)
        )

    def close(self) -> None:
        import ray

        ray.shutdown()

    def __call__(
        self,
        spec: RunSpec,
        history: History,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_start: Callable[[Any], None] | None = None,
        group: str | None = None,
        repeat: int | None = None,
        extra: dict[str, Any] | None = None,
        **worker_options: Any,
    ) -> Any:
        import ray

        from tui_bench.engine.runs import runner

        run = RunRecord(history)
        handle = RemoteRun(run.run_id)
        base = {
            "started_at": now_iso(),
            "spec": spec.to_dict(),
            "label": spec.label(),
            "env": None,
            "group": group,
            "repeat": repeat,
            **(extra or {}),
        }
        head = {"recorder_pid": os.getpid(), "recorder_started": procs.identity()["started"]}
        state: dict[str, Any] = {"final": None, "node": None, "error": None}
        started = time.monotonic()

        def write_record(record: dict[str, Any]) -> None:
            run.start({**record, **head, "cluster": self.address})

        wanted = resources_for(spec)
        if not _fits(wanted, ray.nodes()):
            write_record(base)
            state["error"] = f"no live node of the cluster has {_describe(wanted)} for this run"
        else:
            if on_start is not None:
                on_start(handle)
            payload = {
                "spec": spec.to_dict(),
                "run_id": run.run_id,
                "group": group,
                "repeat": repeat,
                "extra": dict(extra or {}),
                "options": worker_options,
                "tui_bench": __version__,
            }
            options = {"scheduling_strategy": "SPREAD", **wanted}
            if self._client:
                generator: Any = ClientStream(self._task.options(**options), payload)
            else:
                generator = self._task.options(**options).remote(payload)
            self._follow(generator, handle, state, write_record, run, on_event)
        if not run.started:  # lost or refused before the node recorded anything
            write_record({**base, "host": (state["node"] or {}).get("host"), "node": state["node"]})
        final = state["final"]
        if final is not None:  # the node's own end of the run
            status = final.get("status", RunStatus.FAILED)
            final = run.finish(status, **{k: v for k, v in final.items() if k != "status"})
        elif handle.cancelled.is_set():
            final = run.finish(
                RunStatus.CANCELLED,
                reason="cancelled by the user",
                metrics={"process_wall_s": time.monotonic() - started},
                log_tail="",
            )
        else:
            final = run.finish(
                RunStatus.FAILED,
                reason=state["error"],
                metrics={"process_wall_s": time.monotonic() - started},
                log_tail="",
            )
        result = runner.RunResult(run_id=run.run_id, spec=spec, status=final["status"])
        result.reason = final.get("reason")
        result.log_tail = final.get("log_tail") or ""
        result.wall_s = time.monotonic() - started
        return result

    def _follow(
        self,
        generator: Any,
        handle: RemoteRun,
        state: dict[str, Any],
        write_record: Callable[[dict[str, Any]], None],
        run: RunRecord,
        on_event: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        """Write the task's events here as they arrive, until it ends, fails or is lost."""
        import ray

        items: queue.Queue[tuple[str, Any]] = queue.Queue()

        def pump() -> None:  # blocking reads off the head's main loop, so a cancel is heard
            try:
                for ref in generator:
                    items.put((_ITEM, ref if self._client else ray.get(ref)))
                items.put((_END, None))
            except Exception as exc:  # the task failed, was cancelled, or its node died
                items.put((_FAILED, exc))

        threading.Thread(target=pump, name=f"relay {handle.run_id}", daemon=True).start()
        cancel_sent_at: float | None = None
        forced = False
        while True:
            if handle.cancelled.is_set() and cancel_sent_at is None:
                if self._client:
                    generator.cancel()  # out of band: the node stops its worker and says so
                else:
                    ray.cancel(generator)
                cancel_sent_at = time.monotonic()
            elif cancel_sent_at is not None:
                waited = time.monotonic() - cancel_sent_at
                if self._client and not forced and waited > CANCEL_GRACE_S:
                    generator.force_cancel()  # the node has not answered: Ray cancels its task
                    forced = True
                if waited > 2 * CANCEL_GRACE_S:
                    return
            try:
                tag, value = items.get(timeout=0.2)
            except queue.Empty:
                continue
            if tag == _END:
                if state["final"] is None and state["error"] is None:
                    state["error"] = "the node's task ended without a result"
                return
            if tag == _FAILED:
                state["error"] = self._lost_reason(value, state["node"])
                return
            event = value
            kind = event.get("type")
            if kind == RelayEvent.PLACED:
                state["node"] = event["node"]
                if event["tui_bench"] != __version__:
                    state["error"] = (
                        f"node {node_name(event['node'])} runs tui-bench {event['tui_bench']}, "
                        f"this machine {__version__}: install the same version on every node"
                    )
            elif kind == SeriesEvent.RECORD:
                write_record(event["record"])
            elif kind == SeriesEvent.RESULT:
                state["final"] = event["record"]
            elif kind == RelayEvent.NODE_ERROR:
                state["error"] = f"on node {node_name(state['node'] or {})}: {event['reason']}"
            else:
                run.write(event)
                if on_event is not None:
                    on_event(event)

    @staticmethod
    def _connect(ray: Any, address: str) -> None:
        """ray.init, with a second and third try for Ray Client: its server starts a driver
        process per connection, and on a busy machine that start can fail once ("Initialization
        failure from server") although the cluster is there. Nothing has run yet, so a retry
        cannot count a benchmark twice."""
        tries = CLIENT_CONNECT_TRIES if address.startswith("ray://") else 1
        for attempt in range(1, tries + 1):
            try:
                ray.init(
                    address=address,
                    namespace="tui-bench",
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                )
                return
            except ConnectionError as exc:
                if attempt == tries or "Initialization failure" not in str(exc):
                    raise
                ray.shutdown()
                time.sleep(2.0 * attempt)

    @staticmethod
    def _lost_reason(exc: Exception, node: dict[str, Any] | None) -> str:
        import ray

        where = node_name(node) if node else "its node"
        if isinstance(exc, ray.exceptions.TaskCancelledError):
            return "cancelled by the user"
        if isinstance(exc, (ray.exceptions.NodeDiedError, ray.exceptions.WorkerCrashedError)):
            return f"node {where} was lost mid-run ({type(exc).__name__}); the run did not finish"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"the Ray task on {where} failed: {type(exc).__name__}: {first}"
