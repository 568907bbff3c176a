"""Every ``--cluster`` address form docs/cluster.md offers, against a real local Ray head:
``HOST:PORT`` (the GCS), ``ray://HOST:PORT`` (Ray Client, which the ``ray`` extra must install)
and ``auto`` (the cluster this machine belongs to). Each starts a short torch run through the CLI
and checks that the record names the head's node and the address it was given."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import require_module
from test_cli import cli as cli_process

from tui_bench import cli
from tui_bench.engine.machine import procs
from tui_bench.engine.results.history import History, read_jsonl
from tui_bench.engine.runs import follow

NODE_MEMORY = 200 * 1024 * 1024

# Ray heads take machine-wide ports and a GB of memory: one test process starts them, in turn.
pytestmark = pytest.mark.xdist_group("ray")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    """One head with one CPU on 127.0.0.1, its Ray Client server on a free port."""
    require_module("ray")
    require_module("torch")
    from ray.cluster_utils import Cluster

    client_port = _free_port()
    with pytest.MonkeyPatch.context() as env:
        # As in test_fleet: keep every node and the driver on 127.0.0.1.
        env.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        env.delenv("RAY_ADDRESS", raising=False)
        started = time.monotonic()
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
                "object_store_memory": NODE_MEMORY,
                "ray_client_server_port": client_port,
            },
        )
        try:
            cluster.wait_for_nodes()
            print(f"ray head up in {time.monotonic() - started:.1f} s")
            yield {
                "gcs": cluster.address,
                "client": f"ray://127.0.0.1:{client_port}",
                "node_id": cluster.head_node.node_id,
            }
        finally:
            cluster.shutdown()


def _run_on(address: str, home: Path, capsys: pytest.CaptureFixture) -> dict[str, Any]:
    argv = [
        "run", "--framework", "torch", "--api", "eager", "--threads", "1", "--epochs", "1",
        "--steps-per-epoch", "2", "--batch-size", "32", "--train-samples", "200",
        "--test-samples", "64", "--warmup-steps", "1", "--cluster", address, "--json",
    ]  # fmt: skip
    code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    (record,) = json.loads(out.out)
    assert record == dict(History().get(record["id"]).raw) | {"id": record["id"]}
    return record


@pytest.mark.slow
@pytest.mark.parametrize("form", ["gcs", "client", "auto"])
def test_each_documented_cluster_address_runs_on_the_head(
    ray_head: dict[str, str], form: str, isolated_home: Path, capsys: pytest.CaptureFixture
) -> None:
    if form == "auto":
        from ray._private.services import find_gcs_addresses

        found = find_gcs_addresses()
        if len(found) != 1:  # auto picks one of them: only a lone cluster makes this a test
            pytest.skip(f"{len(found)} Ray clusters run on this machine; auto would be ambiguous")
        address = "auto"
    else:
        address = ray_head[form]
    record = _run_on(address, isolated_home, capsys)
    assert record["status"] == "finished", record.get("reason")
    assert record["cluster"] == address
    assert record["node"]["id"] == ray_head["node_id"]
    assert record["metrics"]["step_median_s"] > 0


@pytest.mark.slow
def test_stopping_a_ray_client_run_cancels_it_on_its_node(
    ray_head: dict[str, str], isolated_home: Path
) -> None:
    """Ray Client's path has its own cancel (the queue relay): stop must reach the node too."""
    # A run that cannot end on its own while the test waits: under a loaded suite Ray's worker
    # starts alone took 20-70 s before the first step (measured: connect 8 s, the task's worker
    # 19-71 s), and a 200-epoch run once finished on its node before the stop got there.
    out = cli_process(
        "run", "--model", "mlp", "--threads", "1", "--epochs", "10000", "--steps-per-epoch", "200",
        "--batch-size", "32", "--train-samples", "8000", "--test-samples", "128",
        "--cluster", ray_head["client"], "--detach",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    batch_id = out.stdout.strip()
    deadline = time.monotonic() + 240
    while follow.progress(batch_id).step == 0:
        assert time.monotonic() < deadline, "the ray:// run did not start training"
        time.sleep(0.2)
    # The cancel travels beside the relayed events (ClientRelay), not behind them: two CPU hogs
    # beside this test, stop returned in 2-3 s; the limit is stop's own default.
    asked = time.monotonic()
    stopped = cli_process("stop", batch_id, "--wait", "30", timeout=60)
    took = time.monotonic() - asked
    print(f"ray:// stop returned in {took:.1f} s")
    assert stopped.returncode == 0, f"stop after {took:.1f} s: {stopped.stderr}"
    assert took < 30, f"stop took {took:.1f} s"
    (record,) = History().all()
    assert record.status == "cancelled" and record.reason == "cancelled by the user"
    # The node's runner recorded the cancel itself (its record has what the worker reported),
    # so the stop reached the node's worker, and the record travelled back after it.
    assert record.metric("param_count") is not None, record.metrics
    (worker,) = [
        e for e in read_jsonl(History().series_path(record.id)) if e["type"] == "remote_worker"
    ]
    deadline = time.monotonic() + 20  # the node stops its worker when Ray cancels the task
    while procs.alive(worker["pid"], worker["started"]):
        assert time.monotonic() < deadline, "the cancelled run's worker still runs on its node"
        time.sleep(0.2)


def test_a_ray_client_address_without_grpcio_is_one_line_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    require_module("ray")
    monkeypatch.setitem(__import__("sys").modules, "grpc", None)  # as if grpcio were missing
    code = cli.main(["run", "--cluster", "ray://127.0.0.1:10001"])
    assert code == 2
    assert capsys.readouterr().err == (
        "tui-bench: error: --cluster ray://127.0.0.1:10001 uses Ray Client, which needs grpcio: "
        "pip install 'tui-bench[ray]'\n"
    )
