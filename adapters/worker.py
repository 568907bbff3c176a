"""Entry point of the worker process: ``python -I adapters/worker.py --spec-json J --events-fd N``.

Runs one benchmark and reports it as events on file descriptor N (see ``protocol.py``). Anything the
framework prints goes to stdout/stderr, which the runner sends to the run's log file, so chatter
can never corrupt the event stream.

Order matters: the runner has already put the thread variables in the environment; this process
pins CPU affinity if asked, then imports the framework (through its adapter), then calls the
framework's own thread setter. ``-I`` keeps the user's site-packages and PYTHON* variables out.
"""

from __future__ import annotations

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


if __name__ == "__main__" and "adapters" not in sys.modules:
    _load_adapters_package()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

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


def _heartbeat(channel: EventChannel, parent: int) -> None:
    while True:
        time.sleep(HEARTBEAT_S)
        if os.getppid() != parent:
            os._exit(3)  # orphaned: the app died without cancelling us
        channel.emit("heartbeat")


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
    ``hang@epoch:1``, ``exit@import``, ``garbage@import``, ``chatter@epoch:1``, ``segv@epoch:1``).
    Used by the test-suite to prove that crashes, hangs and noise become honest results; only
    active with ``TUI_BENCH_TESTING=1`` (``fault_text``)."""

    def __init__(self, text: str, channel: EventChannel) -> None:
        self.rules = []
        self.channel = channel
        for rule in filter(None, text.split(",")):
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tui-bench-worker")
    parser.add_argument("--spec-json", required=True)
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--affinity", default="", help="comma-separated CPU ids to pin to")
    args = parser.parse_args(argv)
    channel = EventChannel(args.events_fd)
    faults = Faults(fault_text(), channel)
    threading.Thread(target=_heartbeat, args=(channel, os.getppid()), daemon=True).start()
    spec = json.loads(args.spec_json)
    phase = "import"
    backend = None
    try:
        if args.affinity:
            os.sched_setaffinity(0, {int(c) for c in args.affinity.split(",")})
        faults("import")
        t0 = time.perf_counter()
        adapter = importlib.import_module(f"adapters.{spec['adapter']}")
        import_s = time.perf_counter() - t0
        from adapters import data, loop

        backend = adapter.make_backend(spec["api"], spec["device"], spec["threads"])
        settings = loop.Settings.from_spec(spec)
        apply_settings = getattr(backend, "apply_settings", None)
        if apply_settings is not None:
            applied = apply_settings(settings)
        else:
            applied = loop.default_settings(backend, settings)
        phase = "data"
        faults("data")
        t0 = time.perf_counter()
        dataset = data.load(
            spec["dataset"],
            train_samples=spec.get("train_samples"),
            test_samples=spec.get("test_samples"),
            data_dir=spec.get("data_dir"),
        )
        data_s = time.perf_counter() - t0
        phase = "build"
        hyper = loop.Hyper(
            model=spec["model"],
            batch_size=spec["batch_size"],
            lr=spec["lr"],
            optimizer=spec["optimizer"],
            dropout=spec["dropout"],
            seed=spec["seed"],
        )
        t0 = time.perf_counter()
        backend.build(hyper, dataset)
        backend.sync()
        build_s = time.perf_counter() - t0
        n_train = len(dataset.x_train)
        steps = n_train // hyper.batch_size
        if spec.get("steps_per_epoch"):
            steps = min(steps, spec["steps_per_epoch"])
        import hashlib

        import numpy

        # What the framework will train on first, read back from the framework (equity tests).
        first = data.batches(n_train, hyper.batch_size, hyper.seed, 1, 1)
        digest = None
        if first:
            fx, fy = backend.framework_view(dataset.x_train[first[0]], dataset.y_train[first[0]])
            digest = hashlib.sha256(
                numpy.ascontiguousarray(fx, dtype=numpy.float32).tobytes()
                + numpy.ascontiguousarray(fy, dtype=numpy.int64).tobytes()
            ).hexdigest()
        channel.emit(
            "run_started",
            framework=spec["framework"],
            api=spec["api"],
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
            settings=applied,
            threads_configured=spec["threads"],
            perf_env=performance_environment(),
        )
        phase = "train"
        summary = loop.run_training(
            backend,
            dataset,
            hyper,
            epochs=spec["epochs"],
            steps_per_epoch=spec.get("steps_per_epoch"),
            warmup_steps=spec["warmup_steps"],
            emit=channel.emit,
            target_accuracy=spec.get("target_accuracy"),
            fault=faults,
            settings=settings,
        )
        channel.emit("finished", summary=summary)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the app as an event
        channel.emit(
            "error",
            error_type=type(exc).__name__,
            message=str(exc) or type(exc).__name__,
            traceback=traceback.format_exc(),
            phase=phase,
        )
        return 1
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - cleanup must not hide the run's own outcome
                pass


if __name__ == "__main__":
    sys.exit(main())
