"""Entry point of the worker process: ``python -I adapters/worker.py --spec-json J --events-fd N``.

Runs one benchmark and reports it as events on file descriptor N (see ``protocol.py``). Anything the
framework prints goes to stdout/stderr, which the runner sends to the run's log file, so chatter
can never corrupt the event stream.

Data-parallel runs (spec ``workers`` > 1, docs/scaling.md): every rank runs this file. Rank 0
reports the run; the other ranks train silently and hand their step times to rank 0 through the
framework's collective. Under ``torch.distributed.run`` the launcher does not pass extra file
descriptors to its children, so rank 0 writes to the named pipe ``--events-path`` instead.
With ``--spawn-peers`` (TensorFlow: ``MultiWorkerMirroredStrategy`` has no launcher of its own)
rank 0 starts ranks 1..N-1 as its own children, each with its ``TF_CONFIG``, before any import.

Order matters: the runner has already put the thread variables in the environment; this process
pins CPU affinity if asked, then imports the framework (through its adapter), then calls the
framework's own thread setter. ``-I`` keeps the user's site-packages and PYTHON* variables out.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path


def _load_adapters_package() -> None:
    """Register this directory as the package ``adapters`` without putting its parent (maybe the
    app's site-packages) on sys.path: the worker must see only its own runtime's packages."""
    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(
        "adapters", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["adapters"] = module
    spec.loader.exec_module(module)


def _keep_adapters_off_path(root: Path) -> None:
    """Drop the adapters tree from sys.path. A plain ``python adapters/worker.py`` (no ``-I``) puts
    the script's directory first on it, where ``adapters/torch/`` would stand in for the real
    ``torch`` (tests/test_framework_packages.py)."""

    def inside(entry: str) -> bool:
        where = Path(entry or ".").resolve()
        return where == root or root in where.parents

    sys.path[:] = [entry for entry in sys.path if not inside(entry)]


if __name__ == "__main__":
    _keep_adapters_off_path(Path(__file__).resolve().parent)
    if "adapters" not in sys.modules:
        _load_adapters_package()
    # Run as a script, this file imports itself as ``adapters.worker`` and calls its main here,
    # near the top, not after the definitions below: this frame stays under every frame of the
    # run, and TensorFlow captures the Python stack on every eager op, reading each frame's line
    # by scanning its line table from the start to where the frame stands (see ``_Progress``).
    from adapters.process_end import leave
    from adapters.worker import main

    leave(main())

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

from adapters import protocol  # noqa: E402

HEARTBEAT_S = 2.0


class EventChannel:
    """Writes events to the dedicated pipe; shared by the main thread and the heartbeat."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def emit(self, event_type: str, **fields) -> None:
        line = protocol.encode(event_type, time.perf_counter() - self._t0, **fields)
        with self._lock:
            try:
                self._file.write(line)
            except BrokenPipeError:
                # The app is gone (killed UI): nobody will read the result, stop now.
                os._exit(3)

    def raw(self, data: bytes) -> None:
        with self._lock:
            self._file.write(data)

    @classmethod
    def open_path(cls, path: str) -> EventChannel:
        return cls(os.open(path, os.O_WRONLY))


class SilentChannel:
    """A data-parallel rank other than 0: rank 0 reports the run; an error goes to the log."""

    def emit(self, event_type: str, **fields) -> None:
        if event_type == "error":
            print(
                f"[tui-bench rank {os.environ.get('RANK')}] {fields.get('traceback')}",
                file=sys.stderr,
                flush=True,
            )

    def raw(self, data: bytes) -> None:
        pass


def _heartbeat(channel: EventChannel | SilentChannel, parent: int) -> None:
    while True:
        time.sleep(HEARTBEAT_S)
        if os.getppid() != parent:
            os._exit(3)  # orphaned: the app (or the launcher) died without cancelling us
        channel.emit("heartbeat")


def spawn_peers(spec: dict, argv: list[str]) -> list:
    """Rank 0 of a TensorFlow multi-worker run starts ranks 1..N-1 (same command, own
    ``TF_CONFIG``) and sets its own; all listen on the loopback ports the runner chose."""
    import subprocess

    hosts = [f"127.0.0.1:{port}" for port in spec["dp_ports"]]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else [str(i) for i in range(spec["workers"])]
    peers = []
    for rank in range(1, spec["workers"]):
        env = {**os.environ, "RANK": str(rank), "TF_CONFIG": tf_config(hosts, rank)}
        env[PEER_RELEASE] = "stdin"  # see release_peers
        if spec["device"].startswith("gpu"):
            env["CUDA_VISIBLE_DEVICES"] = gpus[rank]  # one GPU per worker process, seen as gpu:0
        peers.append(
            subprocess.Popen(
                [sys.executable, "-I", "-u", __file__, *argv],
                env=env,
                stdin=subprocess.PIPE,
                pass_fds=(),
            )
        )
    if spec["device"].startswith("gpu"):
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0]
    os.environ["RANK"] = "0"
    os.environ["TF_CONFIG"] = tf_config(hosts, 0)
    return peers


# A TensorFlow collective's receiver pulls each buffer from its sender (RecvBuf), so a peer can
# finish its last collective while rank 0 still pulls from it; a peer that then ended at once
# (os._exit, no teardown) closed its gRPC server under rank 0 ("RingGather ... Socket closed").
# So a spawned peer waits, once trained, until rank 0 has finished too and closes its stdin.
PEER_RELEASE = "TUI_BENCH_PEER_RELEASE"


def release_peers(peers: list) -> None:
    """Rank 0, once its own training (and every collective in it) has finished: let the peers
    end."""
    for peer in peers:
        if peer.stdin is not None and not peer.stdin.closed:
            peer.stdin.close()


def wait_for_release() -> None:
    """A spawned peer, trained: wait for rank 0's word (the end of stdin). If rank 0 dies, the
    heartbeat thread ends this process (orphaned)."""
    if os.environ.get(PEER_RELEASE) == "stdin":
        sys.stdin.buffer.read()


def _watch_peers(peers: list, channel: EventChannel) -> None:
    """A peer that dies leaves rank 0 waiting in a collective for ever (its heartbeat would go
    on): report the peer's end as the run's error and stop."""
    while True:
        time.sleep(0.5)
        for rank, peer in enumerate(peers, start=1):
            code = peer.poll()
            if code is not None and code != 0:
                channel.emit(
                    "error",
                    error_type="WorkerRankFailed",
                    message=f"worker rank {rank} exited with code {code} (see the run log)",
                    traceback="",
                    phase="train",
                )
                for other in peers:
                    if other.poll() is None:
                        other.kill()
                os._exit(1)


def _load_package(name: str, folder: Path) -> None:
    """Register the package in ``folder`` as ``name``, loaded by path (its ``__init__.py``, if
    any, runs); its submodules are found in ``folder``."""
    init = folder / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(folder)]
        )
    else:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if spec.loader is not None:
        spec.loader.exec_module(module)


def load_adapter(module: str, package_dir: str | None = None):
    """The framework's adapter module (``make_backend``), as the engine names it from the
    framework's manifest. A package of ``adapters/`` is imported as ``adapters.<package>``; a
    plugin's package elsewhere (another distribution's) is loaded by path under its own import
    name, so the worker never puts the app's site-packages on its path (it may be another
    interpreter)."""
    package = module.rpartition(".")[0]
    if package_dir and package and not package.startswith("adapters."):
        parts = package.split(".")
        where = Path(package_dir)
        for depth in range(len(parts)):
            name = ".".join(parts[: depth + 1])
            if name not in sys.modules:
                last = depth == len(parts) - 1
                _load_package(name, where if last else where.parents[len(parts) - 2 - depth])
    return importlib.import_module(module)


def tf_config(hosts: list[str], rank: int) -> str:
    return json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": rank}})


def global_first_batch_digest(backend, dataset, parallel, hyper) -> str | None:
    """sha256 of the first global batch as the framework holds it, shard after shard (each read
    back through ``framework_view``): the same bytes for every framework and worker count."""
    import hashlib

    import numpy

    from adapters import data
    from adapters.backend import Parallel

    first = data.batches(
        len(dataset.x_train), hyper.batch_size * parallel.workers, hyper.seed, 1, 1
    )
    if not first:
        return None
    xs, ys = [], []
    shards = [first[0]]  # one process feeding every device holds the whole global batch
    if not parallel.in_process:
        shards = [Parallel(r, parallel.workers).shard(first[0]) for r in range(parallel.workers)]
    for shard in shards:
        fx, fy = backend.framework_view(dataset.x_train[shard], dataset.y_train[shard])
        xs.append(numpy.ascontiguousarray(fx, dtype=numpy.float32))
        ys.append(numpy.ascontiguousarray(fy, dtype=numpy.int64))
    # Shards are contiguous slices: concatenated, they are the single-process global batch.
    return hashlib.sha256(
        numpy.concatenate(xs).tobytes() + numpy.concatenate(ys).tobytes()
    ).hexdigest()


def initial_loss(backend, dataset, parallel, hyper) -> dict:
    """{"initial_loss": the mean loss on this rank's share of the first training batch, in
    inference mode (no dropout), before any update} for the models whose initial weights every
    framework loads from ``shared_init``: the same function from the same weights on the same
    bytes gives the same number everywhere (tests/test_frameworks.py). Empty for the others,
    whose weights each framework draws itself. Untimed; it is the first forward pass the model
    makes, so a framework's lazy set-up shared with training (allocations, kernel choice) is
    paid here rather than in the first step."""
    from adapters import data, shared_init

    if hyper.model not in shared_init.SHARED_MODELS:
        return {}
    first = data.batches(
        len(dataset.x_train), hyper.batch_size * parallel.workers, hyper.seed, 1, 1
    )
    if not first:
        return {}
    mine = parallel.shard(first[0])
    loss, _ = backend.evaluate(dataset.x_train[mine], dataset.y_train[mine], hyper.batch_size)
    return {"initial_loss": loss}


# Which weights an inference run serves (recorded in its summary): the model as built, before
# any update. For the shared-draw models that is the one initial draw every framework loads.
INFERENCE_WEIGHTS = (
    "initial (untrained): as built from the seed, the shared draw where the model has one"
)


# Environment variables that change performance: recorded with every run when they are set.
PERF_ENV_PREFIXES = (
    "XLA_",
    "TF_XLA_FLAGS",
    "TF_CUDNN",
    "TF_FORCE_GPU",
    "TF_ENABLE_ONEDNN",
    "TORCHINDUCTOR_",
    "OMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "CUDA_",
    "NVIDIA_TF32",
    "MXNET_",
    "JAX_",
)


def performance_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The performance-relevant variables this worker runs with (see docs/gpu.md)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items()) if k.startswith(PERF_ENV_PREFIXES)}


def fault_text(environ: dict[str, str] | None = None) -> str:
    """``TUI_BENCH_FAULT`` only counts where the test-suite also set ``TUI_BENCH_TESTING=1``: a
    stray variable in a user's shell must never break a real run."""
    environ = os.environ if environ is None else environ
    if environ.get("TUI_BENCH_TESTING") != "1":
        return ""
    return environ.get("TUI_BENCH_FAULT", "")


class Faults:
    """Test-only failure injection, from ``TUI_BENCH_FAULT`` (e.g. ``crash@epoch:2``,
    ``hang@epoch:1``, ``exit@import``, ``garbage@import``, ``chatter@epoch:1``, ``segv@epoch:1``,
    ``abort@teardown`` (after the result, as a C++ teardown abort does);
    ``/rank=N`` limits a rule to one rank of a data-parallel run: ``exit@epoch:1/rank=1``).
    Used by the test-suite to prove that crashes, hangs and noise become honest results; only
    active with ``TUI_BENCH_TESTING=1`` (``fault_text``)."""

    def __init__(self, text: str, channel: EventChannel | SilentChannel) -> None:
        self.rules = []
        self.channel = channel
        rank = os.environ.get("RANK", "0")
        for rule in filter(None, text.split(",")):
            rule, _, only = rule.partition("/rank=")
            if only and only != rank:
                continue
            action, _, where = rule.partition("@")
            phase, _, number = where.partition(":")
            self.rules.append((action, phase, int(number) if number else None))

    def __call__(self, phase: str, number: int | None = None) -> None:
        for action, rule_phase, rule_number in self.rules:
            if rule_phase != phase or (rule_number is not None and rule_number != number):
                continue
            if action == "crash":
                raise RuntimeError(f"injected crash at {phase}")
            if action == "exit":
                os._exit(7)
            if action == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if action == "abort":
                os.abort()
            if action == "hang":
                os.kill(os.getpid(), signal.SIGSTOP)  # stops every thread, heartbeat included
            if action == "garbage":
                self.channel.raw(
                    b'{"v": 1, "type": "steps", "losses": [1, 2\n\xff\xfe not json\n{"v": 99}\n'
                )
            if action == "chatter":
                for i in range(2000):
                    print(f'{{"v": 1, "type": "finished", "fake": {i}}}', flush=True)
                    print("W0000 absl noise on stderr", file=sys.stderr, flush=True)


# The functions from here on are short, and each calls the next early in its body, on purpose:
# TensorFlow captures the Python stack on every eager op, and CPython 3.11 finds each captured
# frame's line by scanning that frame's line table from its start to where it stands. One
# 200-line main() above the timed loop cost every eager op ~10 ns per line-table entry before
# its call: eager TensorFlow generated 5-12 % fewer tokens/s in this worker than in a bare loop
# (docs/generation.md, "The harness's cost"; tests/test_plugins.py keeps these frames short).
@dataclasses.dataclass
class _Progress:
    """How far the run got (the error event's phase) and the backend to close at the end."""

    phase: str = "import"
    backend: Any = None


@dataclasses.dataclass
class _Built:
    """One model built and reported (run_started): what its serving or training loop needs."""

    spec: dict
    backend: Any
    dataset: Any
    hyper: Any
    parallel: Any
    settings: Any


def main(argv: list[str] | None = None) -> int:
    spec, args, rank, channel, faults, peers = _start(sys.argv[1:] if argv is None else argv)
    progress = _Progress()
    try:
        return _run(spec, args.affinity, rank, channel, faults, peers, progress)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the app as an event
        channel.emit(
            "error",
            error_type=type(exc).__name__,
            message=str(exc) or type(exc).__name__,
            traceback=traceback.format_exc(),
            phase=progress.phase,
        )
        return 1
    finally:
        _end(faults, progress.backend, peers)


def _start(argv: list[str]) -> tuple:
    """The spec, the arguments, this process's rank, its event channel (a heartbeat on it), its
    faults and the peers it started (rank 0 of a spawned multi-worker run)."""
    args = _parse_args(argv)
    spec = json.loads(args.spec_json)
    workers = spec.get("workers", 1)
    peers = []
    if args.spawn_peers and "RANK" not in os.environ:
        peers = spawn_peers(spec, [a for a in argv if a != "--spawn-peers"])
    rank = int(os.environ.get("RANK", "0")) if workers > 1 else 0
    channel = _open_channel(rank, args)
    faults = Faults(fault_text(), channel)
    threading.Thread(target=_heartbeat, args=(channel, os.getppid()), daemon=True).start()
    if peers:
        threading.Thread(target=_watch_peers, args=(peers, channel), daemon=True).start()
    return spec, args, rank, channel, faults, peers


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tui-bench-worker")
    parser.add_argument("--spec-json", required=True)
    parser.add_argument("--events-fd", type=int, default=None)
    parser.add_argument("--events-path", default=None, help="named pipe (torch.distributed.run)")
    parser.add_argument("--spawn-peers", action="store_true", help="rank 0 starts ranks 1..N-1")
    parser.add_argument("--affinity", default="", help="comma-separated CPU ids to pin to")
    return parser.parse_args(argv)


def _open_channel(rank: int, args: argparse.Namespace) -> EventChannel | SilentChannel:
    if rank != 0:
        return SilentChannel()
    if args.events_path:
        return EventChannel.open_path(args.events_path)
    return EventChannel(args.events_fd)


def _run(spec, affinity, rank, channel, faults, peers, progress: _Progress) -> int:
    """Import the framework, build (and report) the model, then serve or train it."""
    built = _build_all(spec, affinity, rank, channel, faults, progress)
    if built is None:
        return 0  # build_only: what the model is and what it reads first: said; nothing is trained
    return _serve_or_train(built, channel, faults, peers, progress)


def _build_all(spec, affinity, rank, channel, faults, progress: _Progress) -> _Built | None:
    """The framework imported and the spec's model built and reported; None for build_only:
    build the model and read the first batch, report them (run_started), and stop there: what
    the equity tests of parameter counts and first-batch bytes need, without the minutes Theano
    spends compiling a training function that would never run. It may name more models
    (``also_build``): one process reports each in turn, so the equity tests' probes import a
    framework once per API, not once per model."""
    if affinity:
        os.sched_setaffinity(0, {int(c) for c in affinity.split(",")})
    faults("import")
    t0 = time.perf_counter()
    adapter = load_adapter(spec["adapter"], spec.get("adapter_package"))
    import_s = time.perf_counter() - t0
    build_only = bool(spec.get("build_only"))
    builds = [spec]
    if build_only:
        builds += [{**spec, **other} for other in spec.get("also_build", ())]
    for one in builds:
        built = _build(adapter, one, rank, import_s, channel, faults, progress)
    return None if build_only else built


def _serve_or_train(built: _Built, channel, faults, peers, progress: _Progress) -> int:
    spec, backend, dataset, hyper = built.spec, built.backend, built.dataset, built.hyper
    if spec.get("mode") == "generate":
        from adapters import generate

        progress.phase = "generate"
        summary = generate.run_generation(
            backend,
            dataset,
            hyper,
            prompt_tokens=spec["prompt_tokens"],
            new_tokens=spec["new_tokens"],
            requests=spec["requests"],
            warmup=spec["warmup_steps"],
            emit=channel.emit,
            weights="initial (untrained): the gpt's shared draw with its kernels and "
            "embeddings × 5 (shared_init.GENERATION_SCALE, docs/generation.md)",
        )
    elif spec.get("mode") == "inference":
        from adapters import serve

        progress.phase = "inference"
        summary = serve.run_inference(
            backend,
            dataset,
            hyper,
            requests=spec["requests"],
            warmup=spec["warmup_steps"],
            emit=channel.emit,
            weights=INFERENCE_WEIGHTS,
        )
    else:
        summary = _train(built, channel, faults, peers, progress)
    channel.emit("finished", summary=summary)
    return 0


def _train(built: _Built, channel, faults, peers, progress: _Progress) -> dict:
    from adapters import train

    spec = built.spec
    progress.phase = "train"
    summary = train.run_training(
        built.backend,
        built.dataset,
        built.hyper,
        epochs=spec["epochs"],
        steps_per_epoch=spec.get("steps_per_epoch"),
        warmup_steps=spec["warmup_steps"],
        emit=channel.emit,
        target_accuracy=spec.get("target_accuracy"),
        fault=faults,
        settings=built.settings,
        parallel=built.parallel,
    )
    release_peers(peers)
    wait_for_release()
    for peer_rank, peer in enumerate(peers, start=1):
        if peer.wait() != 0:
            raise RuntimeError(f"worker rank {peer_rank} exited with code {peer.returncode}")
    return summary


def _build(adapter, spec, rank, import_s, channel, faults, progress: _Progress) -> _Built:
    """Make the backend, apply the settings, load the data, build the model; report it all
    (run_started)."""
    import numpy

    from adapters import backend as contract
    from adapters import data, models

    if progress.backend is not None and hasattr(progress.backend, "close"):
        progress.backend.close()  # the previous model's
    backend = progress.backend = adapter.make_backend(spec["api"], spec["device"], spec["threads"])
    workers = spec.get("workers", 1)
    parallel = contract.Parallel(
        rank, workers, spec.get("scaling", "weak"), spec.get("dp_launch") == "devices"
    )
    progress.phase = "connect"
    t0 = time.perf_counter()
    setup_parallel = getattr(backend, "setup_parallel", None)
    if setup_parallel is not None:
        engine = setup_parallel(parallel)
    else:
        engine = contract.Backend.setup_parallel(backend, parallel)
    comm_setup_s = time.perf_counter() - t0 if workers > 1 else None
    progress.phase = "import"
    settings = contract.Settings.from_spec(spec)
    apply_settings = getattr(backend, "apply_settings", None)
    if apply_settings is not None:
        applied = apply_settings(settings)
    else:
        applied = contract.default_settings(backend, settings)
    progress.phase = "data"
    faults("data")
    t0 = time.perf_counter()
    # The gpt's size decides its data's shape: sequences of its S (+1) tokens below its V.
    dims = models.gpt_dims(spec) if spec["model"] == "gpt" else None
    dataset = data.load(
        spec["dataset"],
        train_samples=spec.get("train_samples"),
        test_samples=spec.get("test_samples"),
        data_dir=spec.get("data_dir"),
        tokens=(dims.seq_len, dims.vocab_size) if dims is not None else None,
    )
    data_s = time.perf_counter() - t0
    progress.phase = "build"
    hyper = contract.Hyper(
        model=spec["model"],
        batch_size=parallel.worker_batch(spec["batch_size"]),
        lr=spec["lr"],
        optimizer=spec["optimizer"],
        dropout=spec["dropout"],
        seed=spec["seed"],
        dims=dims,
    )
    t0 = time.perf_counter()
    if spec.get("build_only"):  # adapters that compile a training function at build skip it
        backend.build_only = True
    if spec.get("mode") in ("inference", "generate"):  # the same, for a run that serves
        backend.serve_only = True
    if spec.get("mode") == "generate":  # the gpt's draw, sharpened (docs/generation.md)
        from adapters import shared_init

        shared_init.for_generation()
    backend.build(hyper, dataset)
    backend.sync()
    build_s = time.perf_counter() - t0
    n_train = len(dataset.x_train)
    steps = n_train // (hyper.batch_size * workers)
    if spec.get("steps_per_epoch"):
        steps = min(steps, spec["steps_per_epoch"])
    # What the framework will train on first, read back from the framework (equity tests).
    digest = global_first_batch_digest(backend, dataset, parallel, hyper)
    inference = spec.get("mode") in ("inference", "generate")
    # An inference run's first forward pass is its first request (compilation is
    # reported there): no untimed initial-loss pass before it.
    initial = {} if inference else initial_loss(backend, dataset, parallel, hyper)
    if inference:
        steps = spec["warmup_steps"] + spec["requests"]
    channel.emit(
        "run_started",
        framework=spec["framework"],
        api=spec["api"],
        model=spec["model"],
        **backend.describe(),
        threads_requested=spec["threads"],
        param_count=backend.param_count(),
        python=platform.python_version(),
        numpy_version=numpy.__version__,
        affinity=sorted(os.sched_getaffinity(0)),
        import_s=import_s,
        data_s=data_s,
        build_s=build_s,
        steps_per_epoch=steps,
        train_samples=n_train,
        val_samples=len(dataset.x_val),
        test_samples=len(dataset.x_test),
        dataset_notes=dataset.notes,
        first_batch_sha256=digest,
        **initial,
        settings=applied,
        threads_configured=spec["threads"],
        perf_env=performance_environment(),
        workers=workers,
        scaling=parallel.scaling,
        worker_batch=hyper.batch_size,
        global_batch=hyper.batch_size * workers,
        threads_per_worker=spec["threads"],
        threads_total=spec["threads"] * workers,
        data_parallel=engine or None,
        comm_setup_s=comm_setup_s,
    )
    return _Built(spec, backend, dataset, hyper, parallel, settings)


def _end(faults: Faults, backend: Any, peers: list) -> None:
    faults("teardown")
    close = getattr(backend, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - cleanup must not hide the run's own outcome
            pass
    release_peers(peers)
    for peer in peers:
        if peer.poll() is None:
            peer.kill()  # rank 0 failed: its peers would wait for it in a collective forever
