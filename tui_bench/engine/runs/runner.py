"""Starts a worker, reads its events, samples its resources, cancels it, and turns every ending
into a result. The runner never raises into a front end: a crash, a hang, a missing runtime or a
cancel all come back as a ``RunResult`` with a status and a one-line reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tui_bench.engine import catalog, datasets, protocol
from tui_bench.engine.kinds import RunStatus, SeriesEvent, WorkerEvent
from tui_bench.engine.machine import doctor, peaks, procs, runtimes
from tui_bench.engine.machine.energy import run_energy
from tui_bench.engine.machine.sampler import ResourceSampler
from tui_bench.engine.machine.sysinfo import machine_fingerprint
from tui_bench.engine.paths import adapters_dir, cache_home
from tui_bench.engine.results import loc
from tui_bench.engine.results.history import History, now_iso
from tui_bench.engine.runs.lifecycle import RunRecord
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec

EventCallback = Callable[[dict[str, Any]], None]

DEFAULT_STALL_TIMEOUT_S = 300.0  # no event at all (heartbeats included) for this long: hung
KILL_GRACE_S = 3.0
LOG_TAIL_LINES = 25


@dataclass
class RunResult:
    run_id: str
    spec: RunSpec
    status: str  # finished, failed, cancelled
    reason: str | None = None
    started: dict[str, Any] | None = None  # the run_started event
    epochs: list[dict[str, Any]] = field(default_factory=list)
    test: dict[str, Any] | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    log_tail: str = ""
    returncode: int | None = None
    wall_s: float = 0.0
    malformed_lines: int = 0

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.FINISHED

    def metrics(self) -> dict[str, Any]:
        """Flat figures for history and tables. Every name says what was timed."""
        m: dict[str, Any] = dict(self.summary)
        if self.started:
            for key in (
                "import_s",
                "data_s",
                "build_s",
                "param_count",
                "initial_loss",
                "threads_effective",
                "interop_threads",
                "framework_version",
                "device",
                "device_name",
                "steps_per_epoch",
                "train_samples",
                "test_samples",
                "comm_setup_s",
                "threads_per_worker",
                "threads_total",
            ):
                if key in self.started:
                    m[key] = self.started[key]
        m.update({f"res_{k}": v for k, v in self.resources.items() if k != "samples"})
        # Energy of the steady-state windows only (NVML counter read at their bounds): warm-up,
        # compilation, validation and process start-up are not in it.
        energy = self.resources.get("steady_energy_j")
        global_batch = self.summary.get("global_batch") or self.spec.batch_size
        trained = (self.summary.get("steady_steps") or 0) * global_batch
        if energy and trained:
            m["samples_per_joule"] = trained / energy
        # How good the number is: FLOPs, achieved FLOP/s and MFU against the named peaks,
        # joules per step per device (docs/limits.md).
        m.update(
            peaks.run_figures(
                self.spec.model,
                self.spec.dataset,
                global_batch,
                self.summary.get("step_median_s"),
                self.spec.device,
                (self.started or {}).get("device_name"),
                self.spec.threads,
                self.spec.precision,
                self.spec.workers,
            )
        )
        m.update(run_energy(self.resources, self.summary.get("steady_steps") or 0, global_batch))
        m.update(thread_observation(self.spec.threads * self.spec.workers, self.resources))
        m.update(worker_threads(self.spec.workers, self.spec.threads))
        if self.started and isinstance(self.started.get("settings"), dict):
            m.update({f"setting_{k}": v for k, v in self.started["settings"].items()})
        m["process_wall_s"] = self.wall_s
        # Ease of coding: lines that define this model and the step for this API (the model's
        # own lines, never the adapter's other models: comparable with a study's count).
        try:
            m.update(loc.lines_of_code(self.spec.framework, self.spec.api, self.spec.model))
        except (OSError, KeyError, loc.MarkerError):
            pass  # an adapter without markers has no figure; the run's numbers still stand
        return m


def thread_observation(configured: int, resources: dict[str, Any]) -> dict[str, Any]:
    """Threads configured beside what the worker was seen to use (steady-state CPU % from the
    sampler, where it marked a steady window, else the whole run; and busy OS threads), and a
    flag when the run used clearly more cores than it was given."""
    cpu = resources.get("steady_mean_cpu_pct")
    if cpu is None:
        cpu = resources.get("mean_cpu_pct")
    cores = cpu / 100.0 if isinstance(cpu, (int, float)) else None
    busy = resources.get("steady_busy_threads")
    if busy is None:
        busy = resources.get("mean_busy_threads")
    out: dict[str, Any] = {
        "threads_configured": configured,
        "cores_observed": cores,
        "busy_threads_observed": busy,
        "threads_flag": None,
    }
    if cores is not None and cores > configured + 0.5 and cores > 1.5 * configured:
        out["threads_flag"] = (
            f"used {cores:.1f} cores with {configured} thread(s) configured: the framework "
            "ran more threads than it was told"
        )
    return out


def worker_threads(workers: int, threads: int, cores: int | None = None) -> dict[str, Any]:
    """Threads per worker and in all; a run asking for more threads than the machine has cores
    is flagged, not refused: oversubscription is a setting someone may want to measure, but its
    figures must not be read as a fair scaling point."""
    cores = cores or os.cpu_count() or 1
    total = workers * threads
    return {
        "workers": workers,
        "threads_per_worker": threads,
        "threads_total": total,
        "oversubscribed": (
            f"{workers} worker(s) x {threads} thread(s) = {total} > {cores} cores"
            if total > cores
            else None
        ),
    }


# How each framework's data-parallel engine is launched for workers > 1 (docs/scaling.md):
# torch.distributed.run starts the ranks; TensorFlow has no launcher, so rank 0 starts its peers
# with their TF_CONFIG (adapters/worker.py --spawn-peers); Keras on JAX and MXNet Gluon drive N
# devices from one process (on a CPU: N XLA host devices; N MXNet CPU contexts).
DATA_PARALLEL_LAUNCH = {
    "torch": "torchrun",
    "tensorflow": "peers",
    "keras": "devices",
    "mxnet": "devices",
}


def loopback_ports(count: int) -> list[int]:
    """Free TCP ports on 127.0.0.1 (asked of the kernel, then released for the workers)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


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


# The worker's environment is an allow-list (docs/gpu.md): what a framework needs to find its
# libraries and what the user may set on purpose to change its behaviour. Everything else in the
# app's environment stays out, so a stray variable cannot change a figure unseen; the
# performance-relevant ones that do reach the worker are recorded with the run (``perf_env``).
ENV_ALLOWED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "XDG_CACHE_HOME",
    "KERAS_HOME",
    "TORCH_HOME",
    "TUI_BENCH_TESTING",
)
ENV_ALLOWED_PREFIXES = (
    "LC_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "XLA_",
    "TF_",
    "TORCHINDUCTOR_",
    "TORCH_",
    "TRITON_",
    "OMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "MXNET_",
    "JAX_",
)


def _allowed(name: str) -> bool:
    return name in ENV_ALLOWED or name.startswith(ENV_ALLOWED_PREFIXES)


def gpu_rule_environment(spec: RunSpec, inherited: dict[str, str]) -> dict[str, str]:
    """Variables that put the spec's GPU rules in place before the framework is imported: no
    preallocation, strict fp32 (TF32 off in cuBLAS/cuDNN for every framework), one autotune
    choice. In-process settings (torch flags, TF config) are applied by the adapters."""
    if spec.device == "cpu":
        return {}
    env = {
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",  # TF: grow, do not take nearly all memory
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",  # JAX: no 75 % up front
        "TF_CUDNN_USE_AUTOTUNE": "1" if spec.autotune == "on" else "0",
        "MXNET_CUDNN_AUTOTUNE_DEFAULT": "1" if spec.autotune == "on" else "0",
    }
    if spec.autotune == "off":
        flags = inherited.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_gpu_autotune_level=0".strip()
    if spec.precision == "fp32":
        env["NVIDIA_TF32_OVERRIDE"] = "0"
        env["JAX_DEFAULT_MATMUL_PRECISION"] = "float32"
    elif spec.precision == "tf32":
        env["JAX_DEFAULT_MATMUL_PRECISION"] = "tensorfloat32"
    return env


def worker_environment(spec: RunSpec) -> dict[str, str]:
    fw = catalog.framework(spec.framework)
    env = {k: v for k, v in os.environ.items() if _allowed(k)}
    if env.get("TUI_BENCH_TESTING") == "1" and "TUI_BENCH_FAULT" in os.environ:
        env["TUI_BENCH_FAULT"] = os.environ["TUI_BENCH_FAULT"]
    for name in fw.thread_env:
        env[name] = str(spec.threads)
    env.update(fw.api_env.get(spec.api, {}))
    if spec.precision != "fp32":
        env.pop("NVIDIA_TF32_OVERRIDE", None)  # a user's override would silently change it
    env.update(gpu_rule_environment(spec, env))
    # Same GPU numbering as NVML, so the sampler watches the GPU the worker uses.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if spec.device == "cpu":
        # TensorFlow and JAX place work on a visible GPU by default; a CPU run must not.
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if spec.workers > 1:
        env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo's pairs connect over the loopback only
        if DATA_PARALLEL_LAUNCH.get(spec.framework) == "devices" and spec.device == "cpu":
            # JAX on a CPU shows one device unless told to split the host into N.
            flags = env.get("XLA_FLAGS", "")
            env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={spec.workers}"
            env["XLA_FLAGS"] = env["XLA_FLAGS"].strip()
    # Where frameworks that compile at run time (Theano) keep their cache: tui-bench's, not ~.
    env["TUI_BENCH_WORKER_CACHE"] = str(cache_home() / "compiled")
    return env


def worker_command(
    spec: RunSpec,
    python: str,
    events_fd: int,
    events_path: str | None = None,
    build_only: bool = False,
    also_build: Sequence[RunSpec] = (),
) -> list[str]:
    """The worker's command line. ``workers`` > 1: torch's ranks under torch.distributed.run
    (rank 0 writes events to the named pipe ``events_path``), TensorFlow's rank 0 starting its
    peers; every address is on 127.0.0.1. ``build_only``, ``also_build``: see ``probe_builds``."""
    fw = catalog.framework(spec.framework)
    payload = {**spec.to_dict(), "adapter": fw.adapter}
    # Real datasets: the verified cache unless the user points the run elsewhere.
    cache = str(datasets.cache_root())
    payload["data_dir"] = spec.data_dir or cache
    if build_only:
        payload["build_only"] = True
        payload["also_build"] = [
            {**other.to_dict(), "data_dir": other.data_dir or cache} for other in also_build
        ]
    launch = DATA_PARALLEL_LAUNCH.get(spec.framework) if spec.workers > 1 else None
    if launch == "peers":
        payload["dp_ports"] = loopback_ports(spec.workers)
    payload["dp_launch"] = launch
    worker = [
        python,
        "-I",
        "-u",
        str(adapters_dir() / "worker.py"),
        "--spec-json",
        json.dumps(payload),
    ]
    if launch == "torchrun":
        (master_port,) = loopback_ports(1)
        command = [
            python,
            "-I",
            "-u",
            str(adapters_dir() / "torch_launch.py"),  # torch.distributed.run, store on loopback
            "--rdzv-backend=loopback-static",
            f"--rdzv-endpoint=127.0.0.1:{master_port}",
            "--nnodes=1",
            f"--nproc-per-node={spec.workers}",
            "--no-python",  # the ranks run the worker with the runtime's own interpreter flags
            *worker,
            "--events-path",
            str(events_path),
        ]
    else:
        command = [*worker, "--events-fd", str(events_fd)]
        if launch == "peers":
            command.append("--spawn-peers")
    if fw.pins_affinity(spec.api):
        # One process driving every worker's device: its pool gets every worker's threads.
        in_process = launch == "devices"
        cpus = sorted(os.sched_getaffinity(0))[: spec.threads * (spec.workers if in_process else 1)]
        command += ["--affinity", ",".join(map(str, cpus))]
    return command


def probe_builds(
    specs: Sequence[RunSpec], runtime: runtimes.Runtime | None = None, timeout: float = 600.0
) -> list[dict[str, Any]]:
    """What a worker says once it has built each spec's model and read its first batch (its
    ``run_started`` event: parameter count, first-batch digest, settings), in order, with nothing
    trained and no training function compiled: the equity tests of every model's parameter count
    and bytes need that much, and Theano spends minutes compiling an LSTM's training step. One
    worker builds them all (one framework import, not one per model), so the specs must share
    framework, API, device and threads, on one worker. Recorded nowhere (not a run). Raises
    RuntimeError with the worker's reason and log tail."""
    first, *others = specs
    same = ("framework", "api", "device", "threads", "workers")
    for other in others:
        if any(getattr(other, name) != getattr(first, name) for name in same):
            raise ValueError(f"one build probe builds for one {'/'.join(same)}: {other.label()}")
    if others and first.workers > 1:
        raise ValueError(f"one build probe builds several models on one worker: {first.label()}")
    runtime = runtime or runtimes.resolve(first.framework, first.api)
    read_fd, write_fd = os.pipe()
    reports: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    with tempfile.TemporaryFile() as log:
        try:
            process = subprocess.Popen(
                worker_command(first, runtime.python, write_fd, build_only=True, also_build=others),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                start_new_session=True,
                env=worker_environment(first),
            )
        finally:
            os.close(write_fd)
        splitter = protocol.LineSplitter()
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                for line in splitter.feed(chunk):
                    with contextlib.suppress(protocol.DecodeError):
                        event = protocol.decode(line)
                        if event.get("type") == WorkerEvent.RUN_STARTED:
                            reports.append(event)
                        elif event.get("type") == WorkerEvent.ERROR:
                            final = event
        try:
            returncode = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
        if len(reports) == len(specs) and returncode == 0:
            return reports
        log.seek(0)
        said = log.read().decode("utf-8", "replace")[-3000:]
        raise RuntimeError(
            f"{first.framework}/{first.api} build probe ({len(reports)} of {len(specs)} built): "
            f"{final.get('error_type', 'no report')}: "
            f"{final.get('message', f'exit status {returncode}')}\n{said}"
        )


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
        if DATA_PARALLEL_LAUNCH.get(self.spec.framework) == "torchrun" and self.spec.workers > 1:
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
    record = run.start(
        {
            "started_at": now_iso(),
            "spec": spec.to_dict(),
            "label": spec.label(),
            "env": machine_fingerprint(),
            "group": group,
            "repeat": repeat,
            "recorder_pid": os.getpid(),
            "recorder_started": procs.identity()["started"],
            "load_at_start": machine_load(),
            "machine_check": doctor.snapshot(),
            **(extra or {}),
        }
    )

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
        worker=_worker_facts(result.started),
        metrics=result.metrics(),
        log_tail=result.log_tail,
    )
    result.status, result.reason = final["status"], final["reason"]  # a full disk fails it
    return result


def machine_load() -> dict[str, Any]:
    """How busy the machine was when the run started: other work skews timings, and busy-waiting
    OpenMP threads turn thread scaling upside down on a loaded machine."""
    load1, load5, _ = os.getloadavg()
    cores = os.cpu_count() or 1
    return {
        "loadavg_1m": round(load1, 2),
        "loadavg_5m": round(load5, 2),
        "logical_cores": cores,
        "busy": load1 > 0.5 * cores,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }


def _worker_facts(started: dict[str, Any] | None) -> dict[str, Any]:
    if not started:
        return {}
    return {k: v for k, v in started.items() if k not in ("v", "type", "t")}
