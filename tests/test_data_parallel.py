"""Data-parallel runs (spec ``workers`` > 1): torch DDP under torch.distributed.run and TensorFlow's
MultiWorkerMirroredStrategy, each through the ordinary worker path with real training; the same
global batch bytes whatever the framework and the worker count; refusals in one line."""

from __future__ import annotations

import threading

import psutil
import pytest

# Imported here, before any test moves the data home: it reads where the runtimes are installed.
from tests.test_frameworks import runtime_for
from tui_bench.engine import catalog
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import run_result, runner, worker_launch
from tui_bench.engine.runs.runner import RunResult, execute
from tui_bench.engine.spec import RunSpec, SpecError

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


# -- fast: the spec, the launch, the sharding ------------------------------------------------------
@pytest.mark.parametrize(
    ("framework", "api"),
    [
        ("tensorflow", "estimator"),
        ("tensorflow", "keras"),
        ("keras", "torch"),
        ("theano", "theano"),
        ("theano", "keras2"),
        ("mxnet", "module"),
    ],
)
def test_api_without_data_parallel_engine_refuses_in_one_line(framework, api) -> None:
    with pytest.raises(SpecError) as caught:
        RunSpec(framework=framework, api=api, workers=2).validate()
    assert caught.value.field == "workers"
    message = str(caught.value)
    assert "\n" not in message
    assert catalog.framework(framework).capabilities_for(api).why_not["workers"] in message


def test_apis_with_an_engine_accept_workers() -> None:
    for framework, api in (
        ("torch", "eager"),
        ("torch", "compile"),
        ("tensorflow", "graph"),
        ("tensorflow", "eager"),
        ("keras", "jax"),
        ("mxnet", "gluon"),
        ("mxnet", "hybrid"),
    ):
        spec = RunSpec(framework=framework, api=api, workers=2).validate()
        assert catalog.framework(framework).capabilities_for(api).data_parallel
        assert spec.workers == 2


def test_shards_are_contiguous_slices_of_the_global_batch(adapters_on_path) -> None:
    import numpy as np

    from adapters.backend import Parallel

    global_indices = np.arange(100, 132)
    weak = [Parallel(rank, 2, "weak") for rank in range(2)]
    assert weak[0].worker_batch(16) == 16 and weak[0].global_batch(16) == 32
    assert np.array_equal(np.concatenate([p.shard(global_indices) for p in weak]), global_indices)
    strong = Parallel(1, 4, "strong")
    assert strong.worker_batch(32) == 8 and strong.global_batch(32) == 32
    assert list(strong.shard(global_indices)) == list(range(108, 116))


def test_torch_launch_is_torch_distributed_run_on_loopback() -> None:
    spec = RunSpec(framework="torch", api="eager", workers=2).validate()
    command = worker_launch.worker_command(spec, "/runtime/python", -1, "/tmp/x/rank0")
    text = " ".join(command)
    assert "torch/launch.py" in text and "--nproc-per-node=2" in text
    assert "--rdzv-backend=loopback-static" in text and "--rdzv-endpoint=127.0.0.1:" in text
    assert "--events-path /tmp/x/rank0" in text and "--events-fd" not in text
    # The ranks run the worker with the runtime's interpreter, isolated like a single run.
    assert command[command.index("--no-python") + 1 :][:3] == ["/runtime/python", "-I", "-u"]


def test_tensorflow_launch_is_rank0_starting_peers_on_loopback_ports() -> None:
    import json

    spec = RunSpec(framework="tensorflow", api="graph", workers=3).validate()
    command = worker_launch.worker_command(spec, "/runtime/python", 9, None)
    assert "--spawn-peers" in command and command[command.index("--events-fd") + 1] == "9"
    payload = json.loads(command[command.index("--spec-json") + 1])
    assert len(set(payload["dp_ports"])) == 3


def test_threads_over_cores_are_flagged_not_refused() -> None:
    fits = run_result.worker_threads(2, 1, cores=2)
    assert fits["threads_total"] == 2 and fits["oversubscribed"] is None
    over = run_result.worker_threads(2, 2, cores=2)
    assert over["threads_total"] == 4 and "4 > 2 cores" in over["oversubscribed"]


# -- slow: real training through runner.execute ----------------------------------------------------
# A name lookup talks to the resolver, not to another rank: a fresh-machine run saw a connection
# to 10.255.255.53, this machine's nameserver (/etc/resolv.conf), from the torch run's tree.
DNS_PORT = 53


class ListenWatch:
    """Polls the listening TCP sockets of a run's whole process tree while it trains."""

    def __init__(self) -> None:
        self.listening: set[tuple[str, int, str]] = set()
        self.remote_peers: set[str] = set()
        self._root: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def on_event(self, event: dict) -> None:
        if event.get("type") == "worker" and self._root is None:
            self._root = event["pid"]
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            try:
                root = psutil.Process(self._root)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in tree:
                try:
                    connections = proc.net_connections(kind="inet")
                    name = proc.name()
                except psutil.Error:
                    continue
                for conn in connections:
                    if conn.status == psutil.CONN_LISTEN:
                        self.listening.add((conn.laddr.ip, conn.laddr.port, name))
                    elif conn.raddr and conn.raddr.port != DNS_PORT:
                        self.remote_peers.add(conn.raddr.ip)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)


SMALL = {
    "api": "eager",
    "dataset": "synthetic-mnist",
    "threads": 1,
    "epochs": 2,
    "steps_per_epoch": 4,
    "warmup_steps": 1,
    "train_samples": 320,
    "test_samples": 32,
}


def _run(history: History, watch: ListenWatch | None = None, **fields) -> RunResult:
    spec = RunSpec(**{**SMALL, **fields}).validate()
    result = execute(
        spec,
        history,
        on_event=watch.on_event if watch else None,
        runtime=runtime_for(spec.framework, spec.api),
        stall_timeout=180,
    )
    if watch:
        watch.stop()
    assert result.ok, f"{spec.label()}: {result.reason}\n{result.log_tail}"
    return result


# The two-worker paths the fixture below trains (tests/test_cli_presets.py leaves scaling-quick to it).
TWO_WORKER_PATHS = [("torch", "eager"), ("tensorflow", "graph")]


@pytest.fixture(scope="module")
def data_parallel_runs(tmp_path_factory):
    """One single-process reference (global batch 32) and three 2-worker runs: torch weak
    (16 per worker), TF graph strong (32 split in two), TF eager weak."""
    root = tmp_path_factory.mktemp("data-parallel")
    with pytest.MonkeyPatch.context() as env:  # module scope: the monkeypatch fixture can't
        env.setenv("TUI_BENCH_HOME", str(root / "home"))
        env.setenv("TUI_BENCH_CACHE", str(root / "cache"))
        history = History(root / "home")
        watches = {"torch": ListenWatch(), "tensorflow": ListenWatch()}
        yield {
            "reference": _run(history, framework="torch", batch_size=32),
            "torch": _run(history, watches["torch"], framework="torch", batch_size=16, workers=2),
            "tensorflow": _run(
                history,
                watches["tensorflow"],
                framework="tensorflow",
                api="graph",
                batch_size=32,
                workers=2,
                scaling="strong",
            ),
            "watches": watches,
        }


@pytest.mark.slow
@pytest.mark.xdist_group("data-parallel-runs")  # one process builds the module's runs
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_two_workers_train_the_same_global_batches(data_parallel_runs, framework) -> None:
    result = data_parallel_runs[framework]
    reference = data_parallel_runs["reference"]
    started, metrics = result.started, result.metrics()
    # Same bytes per global step: the first global batch, read back from the framework shard by
    # shard, is the single-process run's first batch of 32, byte for byte.
    assert started["first_batch_sha256"] == reference.started["first_batch_sha256"]
    assert started["param_count"] == reference.started["param_count"]
    assert started["global_batch"] == 32 and started["worker_batch"] == 16
    assert started["workers"] == 2 and started["threads_total"] == 2
    first, second = (epoch["loss"] for epoch in result.epochs)
    assert second < first, f"loss did not fall: {first:.4f} -> {second:.4f}"
    # Set-up of the engine is timed apart; steady state excludes it and the warm-up step.
    assert started["comm_setup_s"] > 0 and started["data_parallel"]["engine"]
    assert metrics["steady_steps"] == 2 * 4 - 1
    # Every rank's steps came back through the framework's collective.
    medians = metrics["rank_step_median_s"]
    assert len(medians) == 2 and all(m > 0 for m in medians)
    assert metrics["rank_straggler_ratio"] >= 1.0
    # Throughput counts global samples: global batch over the step time.
    assert metrics["samples_per_s"] == pytest.approx(32 / metrics["step_mean_s"], rel=1e-6)
    # The sampler saw every worker process (torch: the launcher and two ranks).
    assert metrics["res_peak_processes"] >= (3 if framework == "torch" else 2)


@pytest.mark.slow
@pytest.mark.xdist_group("data-parallel-runs")  # one process builds the module's runs
def test_torch_ranks_listen_on_loopback_only(data_parallel_runs) -> None:
    watch = data_parallel_runs["watches"]["torch"]
    assert watch.listening, "the watch saw no listening socket: it did not look"
    assert {ip for ip, _, _ in watch.listening} <= LOOPBACK, watch.listening
    assert watch.remote_peers <= LOOPBACK


@pytest.mark.slow
@pytest.mark.xdist_group("data-parallel-runs")  # one process builds the module's runs
def test_tensorflow_off_loopback_listeners_are_only_its_grpc_servers(data_parallel_runs) -> None:
    """TensorFlow's gRPC server binds 0.0.0.0 whatever TF_CONFIG says (hard-coded in TF's
    grpc_server_lib.cc): the only listeners beyond the loopback must be the ports tui-bench gave
    TF_CONFIG, and every connection between the workers stays on the loopback."""
    result = data_parallel_runs["tensorflow"]
    watch = data_parallel_runs["watches"]["tensorflow"]
    assert watch.listening, "the watch saw no listening socket: it did not look"
    cluster = result.started["data_parallel"]["cluster"]
    assert all(host.startswith("127.0.0.1:") for host in cluster)
    wildcard = {port for ip, port, _ in watch.listening if ip not in LOOPBACK}
    assert wildcard <= {int(host.rsplit(":", 1)[1]) for host in cluster}, watch.listening
    assert watch.remote_peers <= LOOPBACK


@pytest.mark.slow
def test_cancelling_a_torch_run_ends_every_rank(tmp_path) -> None:
    """torch.distributed.run starts each rank in a session of its own: killing the launcher's
    process group alone would leave the ranks training."""
    spec = RunSpec(
        **{**SMALL, "steps_per_epoch": 500, "epochs": 1},
        framework="torch",
        batch_size=16,
        workers=2,
    ).validate()
    seen: list[psutil.Process] = []

    def on_event(event: dict) -> None:
        if event.get("type") == "steps" and not seen:
            seen.extend(psutil.Process(worker.process.pid).children(recursive=True))
            worker.cancel()

    worker = runner.WorkerRun(
        spec,
        "dp-cancel",
        tmp_path / "run.log",
        on_event=on_event,
        runtime=runtime_for("torch", "eager"),
        stall_timeout=120,
    )
    result = worker.run()
    assert result.status == "cancelled"
    assert len(seen) >= 2, "the ranks were not seen before the cancel"
    assert not [p for p in seen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "api"), [("torch", "eager"), ("tensorflow", "graph")])
def test_a_rank_that_dies_fails_the_run_instead_of_hanging_it(tmp_path, framework, api) -> None:
    """Rank 1 exits in epoch 1; rank 0 would wait in the next all-reduce while its heartbeat
    goes on. The run must end failed, with a reason, long before the stall timeout."""
    spec = RunSpec(
        **{**SMALL, "api": api, "epochs": 2},
        framework=framework,
        batch_size=16,
        workers=2,
    ).validate()
    worker = runner.WorkerRun(
        spec,
        "dp-rank-dies",
        tmp_path / "run.log",
        runtime=runtime_for(framework, api),
        stall_timeout=600,
        fault="exit@epoch:1/rank=1",
    )
    result = worker.run()
    assert result.status == "failed" and result.reason
    assert result.wall_s < 120, f"took {result.wall_s:.0f} s to notice: {result.reason}"


@pytest.mark.slow
def test_rank_zero_aborting_in_teardown_after_the_result_keeps_the_run(tmp_path) -> None:
    """Seen under load: rank 0 sent its result, then gloo aborted it while the group was torn
    down and torchrun exited 1. Every rank's step times were already gathered."""
    spec = RunSpec(**SMALL, framework="torch", batch_size=16, workers=2).validate()
    worker = runner.WorkerRun(
        spec,
        "dp-teardown-abort",
        tmp_path / "run.log",
        runtime=runtime_for("torch", "eager"),
        fault="abort@teardown/rank=0",
    )
    result = worker.run()
    assert result.returncode != 0
    assert result.status == "finished", result.reason
    assert result.reason.startswith("the result is complete; the worker then exited with code")
    assert len(result.summary["rank_step_median_s"]) == 2


def test_label_names_the_workers_and_the_scaling() -> None:
    assert (
        RunSpec(workers=2, threads=1).label()
        == "torch/eager cnn synthetic-mnist cpu×1 ×2 workers (weak)"
    )
    assert "workers" not in RunSpec().label()


@pytest.mark.slow
@pytest.mark.xdist_group("data-parallel-runs")  # one process builds the module's runs
def test_keras_jax_data_parallel_over_host_devices(data_parallel_runs, tmp_path) -> None:
    """Keras 3's distribution API on JAX: one process, two XLA host devices, the same global
    batch bytes and parameter count as the single-process torch run, loss falls."""
    history = History(tmp_path / "home")
    result = _run(history, framework="keras", api="jax", batch_size=16, workers=2)
    reference = data_parallel_runs["reference"]
    started = result.started
    assert started["first_batch_sha256"] == reference.started["first_batch_sha256"]
    assert started["param_count"] == reference.started["param_count"]
    assert len(started["data_parallel"]["devices"]) == 2
    assert started["global_batch"] == 32 and started["comm_setup_s"] > 0
    assert "--xla_force_host_platform_device_count=2" in started["perf_env"]["XLA_FLAGS"]
    first, second = (epoch["loss"] for epoch in result.epochs)
    assert second < first, f"loss did not fall: {first:.4f} -> {second:.4f}"
    # One process drives both devices; its pool was given both workers' threads.
    assert len(started["affinity"]) == 2 and result.metrics()["res_peak_processes"] == 1


@pytest.mark.slow
@pytest.mark.xdist_group("data-parallel-runs")  # one process builds the module's runs
@pytest.mark.parametrize("api", ["gluon", "hybrid"])
def test_mxnet_kvstore_data_parallel_over_contexts(data_parallel_runs, tmp_path, api) -> None:
    """MXNet Gluon: one process, two CPU contexts, gradients reduced by kvstore 'local'."""
    history = History(tmp_path / "home")
    result = _run(history, framework="mxnet", api=api, batch_size=16, workers=2)
    reference = data_parallel_runs["reference"]
    started = result.started
    assert started["first_batch_sha256"] == reference.started["first_batch_sha256"]
    assert started["param_count"] == reference.started["param_count"]
    assert started["data_parallel"]["contexts"] == ["cpu(0)", "cpu(1)"]
    assert "'local'" in started["data_parallel"]["engine"]
    first, second = (epoch["loss"] for epoch in result.epochs)
    assert second < first, f"loss did not fall: {first:.4f} -> {second:.4f}"


def test_cli_compare_prints_the_workers_table(isolated_home) -> None:
    """`tui-bench compare` over runs that differ in workers prints global throughput and the
    DLBS efficiency (recorded runs, no training)."""
    import os
    import subprocess
    import sys

    history = History(isolated_home)
    ids = []
    for workers, rate in ((1, 100.0), (2, 170.0)):
        spec = RunSpec(workers=workers, threads=1)
        run_id = history.reserve_run_id()
        history.add(
            {
                "id": run_id,
                "status": "finished",
                "spec": spec.to_dict(),
                "label": spec.label(),
                "metrics": {"step_median_s": 0.1, "samples_per_s": rate},
            }
        )
        ids.append(run_id)
    done = subprocess.run(
        [sys.executable, "-m", "tui_bench", "compare", *ids],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "data-parallel scaling" in done.stdout
    assert "85%" in done.stdout  # 170 / (2 x 100)
