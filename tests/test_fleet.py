"""Fleet sweeps on a real Ray cluster: a head and a second node on this machine, on 127.0.0.1.

The sweep is started through the CLI (``run --preset FILE --cluster ADDRESS``), so the flag, the
supervisor, the fleet executor, the Ray tasks and the ordinary torch workers all run for real;
the second node is removed while one of the runs trains on it."""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

import psutil
import pytest
from conftest import require_module
from test_cli import cli as cli_process

from tui_bench import cli
from tui_bench.engine.machine import procs
from tui_bench.engine.results import tables
from tui_bench.engine.results.history import History, read_jsonl
from tui_bench.engine.results.record import Run
from tui_bench.engine.runs import fleet, follow, supervisor
from tui_bench.engine.spec import RunSpec

FLEET_PRESET = """
name = "fleet"
model = "mlp"
threads = 1
epochs = 4
steps_per_epoch = 30
batch_size = [16, 32, 64]
train_samples = 2400
test_samples = 128
warmup_steps = 1
"""
NODE_MEMORY = 80 * 2**20  # object store per node: events are small, the default is GBs
LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1")

# Ray heads take machine-wide ports and a GB of memory: one test process starts them, in turn.
pytestmark = pytest.mark.xdist_group("ray")


def test_cluster_flag_without_ray_is_one_line_with_the_install_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    code = cli.main(["run", "--preset", "nayak-jain-2019-quick", "--cluster", "auto"])
    assert code == 2
    assert capsys.readouterr().err == (
        "tui-bench: error: --cluster needs Ray, which is not installed: "
        "pip install 'tui-bench[ray]'\n"
    )
    assert not (History().home / "sweeps").exists()  # nothing was planned
    assert History().all() == []


def test_a_run_holds_the_threads_or_gpus_it_uses():
    assert fleet.resources_for(RunSpec(threads=2)) == {"num_cpus": 2.0}
    assert fleet.resources_for(RunSpec(device="gpu:1", threads=4)) == {
        "num_cpus": 4.0,
        "num_gpus": 1.0,
    }


def test_compare_splits_configurations_by_host_when_runs_came_from_several():
    def run(host: str, step: float) -> Run:
        spec = RunSpec(threads=1).to_dict()
        metrics = {"step_median_s": step}
        return Run.from_record(
            {"status": "finished", "spec": spec, "host": host, "metrics": metrics}
        )

    one_host = [run("a", 0.1), run("a", 0.11)]
    groups, varying = tables.group(one_host)
    assert len(groups) == 1 and "host" not in varying
    two_hosts = [*one_host, run("b", 0.2), run("b", 0.21)]
    groups, varying = tables.group(two_hosts)
    assert [g.label for g in groups] == ["@a", "@b"]
    assert [len(g.runs) for g in groups] == [2, 2]
    comparisons = tables.compute(two_hosts).comparisons
    assert comparisons.rows[0].cells[:4] == ("host", "—", "@b", "@a")
    assert comparisons.rows[0].cells[4] == pytest.approx(0.205 / 0.105)


def _listening(pids: set[int]) -> list[tuple[str, int, str]]:
    found = []
    for conn in psutil.net_connections(kind="inet"):
        bound = conn.status == psutil.CONN_LISTEN or (conn.type == socket.SOCK_DGRAM)
        if bound and conn.pid in pids and conn.laddr:
            found.append((conn.laddr.ip, conn.laddr.port, psutil.Process(conn.pid).name()))
    return found


def _tree(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            process = psutil.Process(pid)
            out |= {pid, *(c.pid for c in process.children(recursive=True))}
        except psutil.NoSuchProcess:
            continue
    return out


@dataclass
class LocalCluster:
    cluster: Any
    second: Any
    address: str
    head_id: str
    second_id: str


@pytest.fixture(scope="module")
def ray_cluster():
    """A head and a second node, one CPU each, on 127.0.0.1; shared by this module's tests (a
    start costs seconds). The node removed by one test is not needed by the next."""
    require_module("torch")
    # Ray turns a loopback address into the machine's outward address unless it runs as a
    # one-machine cluster; with this, every node and the driver stay on 127.0.0.1. Read when
    # Ray is imported, and inherited by the supervisors the tests start.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        yield from _two_node_cluster()


def _two_node_cluster():
    from ray.cluster_utils import Cluster

    started = time.monotonic()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "object_store_memory": NODE_MEMORY,
            # A lost node is noticed in about a second, not the default fifteen.
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 500,
                "health_check_failure_threshold": 2,
            },
        },
    )
    try:
        second = cluster.add_node(
            num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=NODE_MEMORY
        )
        cluster.wait_for_nodes()
        print(f"ray cluster of 2 nodes up in {time.monotonic() - started:.1f} s")
        yield LocalCluster(
            cluster, second, cluster.address, cluster.head_node.node_id, second.node_id
        )
    finally:
        cluster.shutdown()


@pytest.mark.slow
def test_fleet_sweep_names_nodes_and_survives_a_lost_node(isolated_home, ray_cluster):
    cluster, second = ray_cluster.cluster, ray_cluster.second
    address, head_id, second_id = ray_cluster.address, ray_cluster.head_id, ray_cluster.second_id
    batch_id = None
    try:
        preset = isolated_home.parent / "fleet.toml"
        preset.write_text(FLEET_PRESET)

        sweep_started = time.monotonic()
        out = cli_process(
            "run", "--preset", str(preset),
            "--cluster", address, "--detach",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        batch_id = out.stdout.strip()
        history = History()

        def on_second_node() -> Run | None:
            for record in history.all():
                node = record.raw.get("node") or {}  # where the fleet placed it, as stored
                if node.get("id") == second_id and record.status == "running":
                    return record
            return None

        deadline = time.monotonic() + 120
        while (doomed := on_second_node()) is None:
            state = supervisor.BatchState.read(batch_id)
            assert state.done is None, (
                f"the sweep ended before a run reached the second node: {state.done}"
            )
            assert time.monotonic() < deadline, "no run was placed on the second node"
            time.sleep(0.1)
        # History holds the running record a moment before its series does (lifecycle.start
        # writes history first, so that a crash between the two still leaves a record): ps,
        # which reads the series, names the node once that line lands.
        while (shown := follow.progress(batch_id).host) is None:
            assert time.monotonic() < deadline, "ps never named the node the run is on"
            time.sleep(0.05)
        assert shown == socket.gethostname()  # what ps shows

        # Mid-sweep, every Ray process, the supervisor (the driver) and the worker it trains
        # with listen on the loopback only.
        ray_pids = {
            info.process.pid
            for node in (cluster.head_node, second)
            for infos in node.all_processes.values()
            for info in infos
        }
        driver = supervisor.BatchState.read(batch_id).supervisor["pid"]
        bound = _listening(_tree(ray_pids | {driver}))
        assert any(name == "gcs_server" for _ip, _port, name in bound), bound
        assert [b for b in bound if b[0] not in LOOPBACK] == []

        cluster.remove_node(second)
        state = supervisor.wait_done(batch_id, 180)
        assert state.done is not None, "the sweep did not end after its node was lost"
        print(f"fleet sweep of 3 runs, one node lost: {time.monotonic() - sweep_started:.1f} s")
    finally:
        if batch_id is not None:
            _kill_orphaned_workers(batch_id)

    records = {r.id: r for r in History().all()}
    assert len(records) == 3
    lost = records[doomed.id]
    assert lost.status == "failed"
    assert f"node {socket.gethostname()} (127.0.0.1, node {second_id[:12]})" in str(lost.reason)
    assert "lost mid-run" in str(lost.reason)
    others = [r for r in records.values() if r.id != lost.id]
    assert [r.status for r in others] == ["finished", "finished"], [r.reason for r in others]
    assert state.run_ids[-1] != lost.id  # the sweep went on after the node was lost
    for record in records.values():
        assert record.raw["cluster"] == address
        assert record.host == socket.gethostname()
        assert record.env["host"] == socket.gethostname()  # fingerprint taken on the node
        assert record.label.endswith(f" @ {socket.gethostname()}")
    assert {r.raw["node"]["id"] for r in others} == {head_id}
    assert lost.raw["node"]["id"] == second_id
    for record in others:  # every event of a remote run reached this machine's series file
        events = list(read_jsonl(History().series_path(record.id)))
        assert [e["type"] for e in events][:1] == ["record"]
        assert [e["epoch"] for e in events if e["type"] == "epoch_finished"] == [1, 2, 3, 4]
        assert events[-1]["type"] == "result" and events[-1]["record"]["status"] == "finished"
        assert record.metrics["step_median_s"] > 0


def _kill_orphaned_workers(batch_id: str) -> None:
    """A worker on the removed node was started by a Ray process that died with the node: on a
    real cluster it dies with the machine; here it would train on alone."""
    for run_id in supervisor.BatchState.read(batch_id).run_ids or []:
        for event in read_jsonl(History().series_path(run_id)):
            if event.get("type") == "remote_worker":
                procs.kill_group(event.get("pid"), event.get("started"))


@pytest.mark.slow
def test_stopping_a_fleet_run_cancels_it_on_its_node(ray_cluster):
    out = cli_process(
        "run", "--model", "mlp", "--threads", "1", "--epochs", "200", "--steps-per-epoch", "30",
        "--batch-size", "32", "--train-samples", "1200", "--test-samples", "128",
        "--cluster", ray_cluster.address, "--detach",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    batch_id = out.stdout.strip()
    deadline = time.monotonic() + 90
    while follow.progress(batch_id).step == 0:
        assert time.monotonic() < deadline, "the fleet run did not start training"
        time.sleep(0.2)
    stopped = cli_process("stop", batch_id)
    assert stopped.returncode == 0, stopped.stderr
    (record,) = History().all()
    assert record.status == "cancelled" and record.reason == "cancelled by the user"
    (worker,) = [
        e for e in read_jsonl(History().series_path(record.id)) if e["type"] == "remote_worker"
    ]
    deadline = time.monotonic() + 10  # the node stops its worker when Ray cancels the task
    while procs.alive(worker["pid"], worker["started"]):
        assert time.monotonic() < deadline, "the cancelled run's worker still runs on its node"
        time.sleep(0.2)


def test_an_address_where_nothing_listens_is_one_line_not_a_long_wait():
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(fleet.FleetError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        fleet.reachable(f"127.0.0.1:{port}")


def _steps(epoch: int, first: int, n: int, t: float) -> dict:
    losses = [float(first + i) for i in range(n)]
    return {"type": "steps", "epoch": epoch, "first_step": first, "losses": losses, "t": t}


def test_the_relay_merges_steps_keeps_every_other_event_and_holds_a_bounded_number_of_losses():
    """A head that reads nothing while the node trains 10,000 steps: what waits for it stays
    within RelayBuffer's bound, the step count it will show is exact, and no other event of the
    run is lost or reordered."""
    buffer = fleet.RelayBuffer(max_steps=100)
    record = {"type": "record", "record": {"id": "r"}}
    buffer.put(record)
    buffer.put({"type": "epoch_started", "epoch": 1})
    for chunk in range(1000):  # ten steps per event, as a worker sends them
        buffer.put(_steps(1, chunk * 10, 10, t=float(chunk)))
        if chunk == 500:
            buffer.put({"type": "sample", "t": 500.5})
    buffer.put({"type": "epoch_finished", "epoch": 1})
    buffer.put({"type": "result", "record": {"id": "r", "status": "finished"}})
    buffer.put(None)
    items, ended = buffer.take(timeout=0)
    assert ended
    assert sum(len(e["losses"]) for e in items if e["type"] == "steps") <= 100
    assert [e["type"] for e in items if e["type"] != "steps"] == [
        "record", "epoch_started", "sample", "epoch_finished", "result",
    ]  # fmt: skip
    last = [e for e in items if e["type"] == "steps"][-1]
    assert last["first_step"] + len(last["losses"]) == 10_000  # the count a viewer shows
    assert last["losses"][-1] == 9999.0 and last["t"] == 999.0  # the newest losses are kept
    assert buffer.take(timeout=0) == ([], True)


def test_the_relay_merges_consecutive_steps_of_an_epoch_without_losing_any():
    buffer = fleet.RelayBuffer(max_steps=1000)
    buffer.put(_steps(1, 0, 3, t=1.0) | {"step_times": [0.1, 0.2]})
    buffer.put(_steps(1, 3, 2, t=2.0) | {"step_times": [0.3]})
    buffer.put(_steps(2, 0, 2, t=3.0))  # a new epoch starts a new event
    items, ended = buffer.take(timeout=0)
    assert not ended
    assert items == [
        {"type": "steps", "epoch": 1, "first_step": 0, "losses": [0.0, 1.0, 2.0, 3.0, 4.0],
         "t": 2.0, "step_times": [0.1, 0.2, 0.3]},
        _steps(2, 0, 2, t=3.0),
    ]  # fmt: skip


def test_a_ray_client_cancel_reaches_the_node_while_its_put_waits_for_the_head():
    """The head's cancel does not queue behind events: with the relay full (a head that reads
    nothing), the node's watch still hears it at once, and its next put says so too."""
    import asyncio

    async def scenario() -> tuple[bool, bool, bool]:
        relay = fleet.ClientRelay()
        await relay.put([{"type": "steps"}])  # fills it: RELAY_BATCHES == 1
        waiting_put = asyncio.ensure_future(relay.put([{"type": "steps"}]))
        watch = asyncio.ensure_future(relay.cancelled(timeout=30))
        await asyncio.sleep(0)
        relay.cancel()
        heard = await asyncio.wait_for(watch, timeout=5)
        blocked = not waiting_put.done()
        assert await relay.get(timeout=1) == [{"type": "steps"}]
        said = await asyncio.wait_for(waiting_put, timeout=5)
        return heard, blocked, said

    assert fleet.RELAY_BATCHES == 1
    assert asyncio.run(scenario()) == (True, True, True)
