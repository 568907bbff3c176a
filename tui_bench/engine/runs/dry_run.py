"""A build-only run (``tui-bench run --dry-run``): a worker builds the model and reads its first
batch, reports it (its ``run_started`` event) and stops, with nothing trained and no training
function compiled. What a user asks before a long run: does this model build here, how many
parameters, how many FLOPs a training step, how much memory. Also what the equity tests of every
model's parameter count and first-batch bytes use (``probe``: several models in one worker).
A dry run is not a run: nothing is recorded in the history.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui_bench.engine import flops, model_memory, protocol
from tui_bench.engine.errors import EXIT_FAILED, TuiBenchError
from tui_bench.engine.kinds import WorkerEvent
from tui_bench.engine.machine import runtimes
from tui_bench.engine.runs.worker_launch import worker_command, worker_environment
from tui_bench.engine.spec import RunSpec

# Bytes of one parameter's training state kept in fp32 (weights, gradients, optimizer slots):
# mixed precision computes in 16 bits but keeps fp32 master weights in every adapter's framework.
_STATE_BYTES = 4
# Optimizer slots per parameter: Adam's two moments; plain SGD (no momentum, as the adapters
# build it) keeps none.
_OPTIMIZER_SLOTS = {"adam": 2, "sgd": 0}


class BuildFailed(TuiBenchError, RuntimeError):
    """The worker did not build every model: ``str()`` is one line (how far it got and why);
    ``log_tail`` is the end of what the worker printed."""

    title = "Dry run"
    exit_code = EXIT_FAILED

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass(frozen=True)
class Probe:
    """What a build-only worker said: one ``run_started`` event per model, in order; the worker
    process's peak resident memory (the kernel's ru_maxrss of the process at its largest: the
    framework, the data and the models; with several models, the largest moment of all), and
    the wall time from start to exit."""

    reports: list[dict[str, Any]]
    peak_rss_mib: float | None
    wall_s: float


def probe(
    specs: Sequence[RunSpec], runtime: runtimes.Runtime | None = None, timeout: float = 600.0
) -> Probe:
    """Build each spec's model in one worker (one framework import, not one per model), so the
    specs must share framework, API, device, threads and workers, on one worker. Raises
    ``BuildFailed`` with the worker's reason and log tail, ``ValueError`` for specs that
    cannot share a worker, ``RuntimeUnavailable`` without a runtime."""
    first, *others = specs
    same = ("framework", "api", "device", "threads", "workers")
    for other in others:
        if any(getattr(other, name) != getattr(first, name) for name in same):
            raise ValueError(f"one build probe builds for one {'/'.join(same)}: {other.label()}")
    if others and first.workers > 1:
        raise ValueError(f"one build probe builds several models on one worker: {first.label()}")
    runtime = runtime or runtimes.resolve(first.framework, first.api)
    started = time.monotonic()
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
        except OSError as exc:
            os.close(read_fd)
            raise BuildFailed(
                f"could not start the worker with {runtime.python}: {exc.strerror}", ""
            ) from None
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
        returncode, peak_kib = _wait(process, started + timeout)
        wall_s = time.monotonic() - started
        if len(reports) == len(specs) and returncode == 0:
            return Probe(reports, peak_kib / 1024 if peak_kib else None, wall_s)
        log.seek(0)
        said = log.read().decode("utf-8", "replace")[-3000:]
    why = final.get("message", f"exit status {returncode}").strip().splitlines() or [""]
    raise BuildFailed(
        f"{first.framework}/{first.api} build probe ({len(reports)} of {len(specs)} built): "
        f"{final.get('error_type', 'no report')}: {why[0]}",
        said,
    )


def _wait(process: subprocess.Popen, deadline: float) -> tuple[int, int]:
    """The worker's exit status and its peak RSS in KiB (wait4's ru_maxrss: the largest of the
    process and the children it waited for); killed, with its group, past ``deadline``."""
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            _, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.02)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return process.returncode, usage.ru_maxrss


@dataclass(frozen=True)
class DryRun:
    """A dry run's figures for one spec."""

    spec: RunSpec
    report: dict[str, Any]  # the worker's run_started event
    peak_rss_mib: float | None
    wall_s: float

    @property
    def param_count(self) -> int | None:
        count = self.report.get("param_count")
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    @property
    def global_batch(self) -> int:
        batch = self.report.get("global_batch")
        return batch if isinstance(batch, int) and batch > 0 else self.spec.batch_size

    @property
    def flops_per_step(self) -> int | None:
        """FLOPs of one training step over the global batch (forward and backward, from the
        architecture: ``engine/flops.py``), or None for a model without a count."""
        return flops.train_step_flops(
            self.spec.model, self.spec.dataset, self.global_batch, self.spec.model_dims()
        )

    @property
    def flops_per_token(self) -> dict[str, int] | None:
        """A language model's training FLOPs per token two ways: the exact matmul count and
        the 6N + 12·L·H·Q·T rule (``flops.gpt_rule``), side by side."""
        dims = self.spec.model_dims()
        if dims is None:
            return None
        exact = flops.gpt_count(dims).train_per_sample // dims.seq_len
        return {"exact": exact, "6N+12LHQT": flops.gpt_rule(dims)}

    @property
    def memory_estimate(self) -> str | None:
        """A sized model's training memory (``model_memory``: parameters, optimizer state and
        activations, the formula stated) against this machine's available memory on CPU."""
        found = model_memory.estimate(self.spec)
        if found is None:
            return None
        text = f"{found.text()}; {model_memory.FORMULA}"
        if self.spec.device == "cpu":
            free = model_memory.available_bytes()
            verdict = "fits" if found.total_bytes <= free else "does NOT fit"
            text += f"; {verdict} in the {free / 2**30:.2f} GiB available here"
        return text

    @property
    def state_mib(self) -> float | None:
        """Training state of the parameters (fp32 weights, gradients and the optimizer's
        slots): a lower bound of what training adds to the built model, since activations,
        the framework's workspace and its allocator's caching are not in it."""
        if self.param_count is None:
            return None
        copies = 2 + _OPTIMIZER_SLOTS.get(self.spec.optimizer, 0)
        return self.param_count * _STATE_BYTES * copies / 2**20

    def as_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_dict(),
            "label": self.spec.label(),
            "param_count": self.param_count,
            "global_batch": self.global_batch,
            "flops_per_step": self.flops_per_step,
            "peak_rss_mib": self.peak_rss_mib,
            "state_mib": self.state_mib,
            "state_counts": f"weights + gradients + {self.spec.optimizer} slots, fp32",
            "memory_estimate": self.memory_estimate,
            "flops_per_token": self.flops_per_token,
            "import_s": self.report.get("import_s"),
            "data_s": self.report.get("data_s"),
            "build_s": self.report.get("build_s"),
            "wall_s": self.wall_s,
        }


def dry_run(
    spec: RunSpec, runtime: runtimes.Runtime | None = None, timeout: float = 600.0
) -> DryRun:
    """Build ``spec``'s model in a worker, train nothing, and say what it is (``DryRun``)."""
    found = probe([spec], runtime, timeout)
    return DryRun(spec, found.reports[0], found.peak_rss_mib, found.wall_s)
