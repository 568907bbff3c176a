"""A dry run (``tui-bench run --dry-run``): what a user asks before a long run, answered in
seconds and within memory: how many parameters, how many FLOPs a step, how much memory, does it
fit this machine, and if not, the largest batch that does and the memory a device would need.

Two sources, each named in the answer:
- **the shape** (``plan``): a sized model's (the gpt's) parameters, FLOPs (``engine/flops.py``)
  and memory (``model_memory``) follow from its dimensions, with no framework imported and
  nothing allocated. gpt2-small at batch 128 is answered so, never by a forward pass whose
  logits alone are 26 GB.
- **a real build** (``probe``): a worker builds the model and reads its first batch, reports it
  (its ``run_started`` event) and stops, with nothing trained and no training function
  compiled. It runs only when it fits: always for the fixed-shape models (small), and for a
  sized one when its build (the weights and the worker's one forward pass for the first loss)
  fits half the available memory and that forward costs at most ``BUILD_FORWARD_FLOPS``.
  ``probe`` is also what the equity tests of every model's parameter count and first-batch
  bytes use (several models in one worker).
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

from tui_bench.engine import decode_cost, flops, model_memory, protocol
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
# The largest forward pass (the worker's first loss) a dry run's real build may cost: about a
# second at this CPU's ~100 GFLOP/s. Past it the shape answers (gpt2-small's forward at one
# sequence is ~290 GFLOP).
BUILD_FORWARD_FLOPS = 100e9
# The share of available memory a real build may take (the estimate omits the framework).
BUILD_MEMORY_SHARE = 0.5


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
                env=worker_environment(first, build_only=True),
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
class Fit:
    """Whether a spec's run fits this machine's memory, from its shape (``model_memory``).

    ``estimate`` per worker (None: a fixed-shape model, no estimate); ``available`` bytes (None
    on a GPU: its memory is read by the worker, not here); ``fits`` None where either is
    missing; ``largest_batch`` the spec's batch that fits (0: none), ``needs`` the bytes all
    workers need at the spec's batch: the memory a device would need."""

    estimate: model_memory.Estimate | None
    available: int | None
    fits: bool | None
    largest_batch: int | None
    needs: int | None


def fit(spec: RunSpec, available: int | None = None) -> Fit:
    """``spec`` against this machine's available memory (psutil's unless given)."""
    found = model_memory.estimate(spec)
    if found is None:
        return Fit(None, None, None, None, None)
    needs = found.total_bytes * max(1, spec.workers)
    if spec.device != "cpu":
        return Fit(found, None, None, None, needs)
    free = model_memory.available_bytes() if available is None else available
    largest = model_memory.largest_batch(spec, free)
    return Fit(found, free, needs <= free, largest, needs)


def build_problem(spec: RunSpec, found: Fit) -> str | None:
    """Why a real build is left out (the shape answers), or None when it runs: it fits in
    memory and its one forward pass is cheap (module docstring)."""
    dims = spec.model_dims()
    if dims is None:
        return None
    batch = model_memory.worker_batch(spec)
    forward = flops.inference_request_flops(spec.model, spec.dataset, batch, dims) or 0
    if forward > BUILD_FORWARD_FLOPS:
        first = "request" if spec.mode == "inference" else "loss"
        return (
            f"one forward pass at batch {batch} (the run's first {first}) is "
            f"{forward / 1e9:,.0f} GFLOP, over the {BUILD_FORWARD_FLOPS / 1e9:.0f} GFLOP a dry "
            "run's build may cost"
        )
    build = model_memory.gpt_inference_estimate(dims, batch).total_bytes
    if found.available is not None and build > BUILD_MEMORY_SHARE * found.available:
        return (
            f"a build needs about {build / 2**30:.2f} GiB (the weights and one forward pass), "
            f"over half the {found.available / 2**30:.2f} GiB available"
        )
    return None


@dataclass(frozen=True)
class DryRun:
    """A dry run's figures for one spec: from the shape (``fit``), and from a real build where
    one ran (``report``: the worker's run_started event; empty with ``not_built`` saying why)."""

    spec: RunSpec
    report: dict[str, Any]
    peak_rss_mib: float | None
    wall_s: float
    fit: Fit = Fit(None, None, None, None, None)
    not_built: str | None = None

    @property
    def built(self) -> bool:
        return self.not_built is None

    @property
    def param_count(self) -> int | None:
        """The built model's count, else the shape's (the gpt's ``GptDims.parameters``)."""
        count = self.report.get("param_count")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        dims = self.spec.model_dims()
        return dims.parameters if dims is not None else None

    @property
    def global_batch(self) -> int:
        batch = self.report.get("global_batch")
        if isinstance(batch, int) and batch > 0:
            return batch
        spec = self.spec
        return spec.batch_size * spec.workers if spec.scaling == "weak" else spec.batch_size

    @property
    def flops_per_step(self) -> int | None:
        """FLOPs of one step over the global batch (training: forward and backward; inference:
        one request's forward), from the architecture (``engine/flops.py``), or None for a
        model without a count."""
        spec = self.spec
        if (generation := self.generation) is not None:
            return generation["prefill_flops_per_request"]
        if spec.mode == "inference":
            return flops.inference_request_flops(
                spec.model, spec.dataset, spec.batch_size, spec.model_dims()
            )
        return flops.train_step_flops(
            spec.model, spec.dataset, self.global_batch, spec.model_dims()
        )

    @property
    def generation(self) -> dict[str, Any] | None:
        """A generation run's cost from its shape (``engine/decode_cost.py``, the figures its
        record will hold): the prefill's matmul FLOPs per prompt token and per request, the
        bytes one decode step reads (weights and the whole static KV cache) and the KV cache's
        size, at the spec's batch, P, N and precision. None for any other run."""
        spec, dims = self.spec, self.spec.model_dims()
        if spec.mode != "generate" or dims is None:
            return None
        batch, prompt, new = spec.batch_size, spec.prompt_tokens or 1, spec.new_tokens or 1
        prefill = decode_cost.prefill_flops(dims, batch, prompt)
        return {
            "prompt_tokens": prompt,
            "new_tokens": new,
            "precision": spec.precision,
            "prefill_flops_per_token": prefill / (batch * prompt),
            "prefill_flops_per_request": prefill,
            "decode_bytes_per_step": decode_cost.decode_step_bytes(
                dims, batch, prompt, new, spec.precision
            ),
            "decode_weight_bytes": decode_cost.weight_bytes(dims, spec.precision),
            "kv_cache_bytes": decode_cost.cache_bytes(dims, batch, prompt, new, spec.precision),
        }

    @property
    def flops_per_token(self) -> dict[str, int] | None:
        """A language model's training FLOPs per token two ways: the exact matmul count and
        the 6N + 12·L·H·Q·T rule (``flops.gpt_rule``), side by side (None for a generation
        run: it trains nothing)."""
        dims = self.spec.model_dims()
        if dims is None or self.spec.mode == "generate":
            return None
        exact = flops.gpt_count(dims).train_per_sample // dims.seq_len
        return {"exact": exact, "6N+12LHQT": flops.gpt_rule(dims)}

    @property
    def memory_estimate(self) -> str | None:
        """A sized model's memory (``model_memory``: parameters, optimizer state and
        activations, the formula stated) against this machine's available memory on CPU."""
        found = self.fit.estimate
        if found is None:
            return None
        text = f"{found.text()} per worker; {model_memory.formula(self.spec)}"
        if self.fit.available is not None:
            verdict = "fits" if self.fit.fits else "does NOT fit"
            text += f"; {verdict} in the {self.fit.available / 2**30:.2f} GiB available here"
        return text

    @property
    def verdict(self) -> str:
        """Whether the run fits this machine, in one line; when it does not, the largest batch
        that does and the memory the device would need."""
        found, spec = self.fit, self.spec
        if found.estimate is None:
            if self.peak_rss_mib is None:
                return "no estimate for a fixed-shape model (it is far below any machine's memory)"
            return (
                f"fits: the build peaked at {self.peak_rss_mib:.0f} MiB (a fixed-shape model, "
                "no estimate from its shape; training adds its activations and optimizer state)"
            )
        needs = f"{found.needs / 2**30:.2f} GiB" if found.needs is not None else "?"
        if found.available is None:
            return (
                f"needs about {needs} of {spec.device} memory at batch {spec.batch_size} "
                "(the worker reads the device's memory when it runs)"
            )
        if found.fits:
            return (
                f"fits: needs about {needs} of the {found.available / 2**30:.2f} GiB available "
                f"(largest batch that fits: {found.largest_batch})"
            )
        largest = (
            f"the largest batch that fits here is {found.largest_batch}"
            if found.largest_batch
            else "no batch fits here (the weights and optimizer state alone do not)"
        )
        return (
            f"does NOT fit: needs about {needs} at batch {spec.batch_size}, "
            f"{found.available / 2**30:.2f} GiB available; {largest}; at batch "
            f"{spec.batch_size} it needs a device with at least {needs} of memory"
        )

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
            "built": self.built,
            "not_built": self.not_built,
            "param_count": self.param_count,
            "param_count_from": "build" if "param_count" in self.report else "shape",
            "global_batch": self.global_batch,
            "flops_per_step": self.flops_per_step,
            "flops_per": {"inference": "request", "generate": "prefill"}.get(
                self.spec.mode, "train step"
            ),
            "generation": self.generation,
            "peak_rss_mib": self.peak_rss_mib,
            "state_mib": self.state_mib,
            "state_counts": f"weights + gradients + {self.spec.optimizer} slots, fp32",
            "memory_estimate": self.memory_estimate,
            "memory_needed_bytes": self.fit.needs,
            "memory_available_bytes": self.fit.available,
            "fits": self.fit.fits,
            "largest_batch": self.fit.largest_batch,
            "verdict": self.verdict,
            "flops_per_token": self.flops_per_token,
            "import_s": self.report.get("import_s"),
            "data_s": self.report.get("data_s"),
            "build_s": self.report.get("build_s"),
            "wall_s": self.wall_s,
        }

    def lines(self) -> list[str]:
        """The dry run as a person reads it."""
        figures = self.as_dict()
        count, step = figures["param_count"], figures["flops_per_step"]
        where = "built" if self.built else "from the shape"
        rss = self.peak_rss_mib
        lines = [
            f"dry run: {figures['label']}",
            "  parameters              "
            + (f"{count:,} ({where})" if count is not None else "not reported"),
        ]
        if (gen := self.generation) is not None:
            mib = 2**20
            lines += [
                f"  prefill FLOPs per token {gen['prefill_flops_per_token'] / 1e6:,.2f} MFLOP "
                f"({_flops_text(gen['prefill_flops_per_request'])} a request: batch "
                f"{self.spec.batch_size} × P {gen['prompt_tokens']}, matmuls, head on the last "
                "position only; engine/decode_cost.py)",
                f"  decode bytes per step   {gen['decode_bytes_per_step'] / mib:,.2f} MiB "
                f"(weights {gen['decode_weight_bytes'] / mib:,.2f} MiB + the whole KV cache, "
                f"{gen['precision']}; a step is memory-bound, held to these bytes)",
                f"  KV cache                {gen['kv_cache_bytes'] / mib:,.2f} MiB "
                f"(2 · L · batch · (P {gen['prompt_tokens']} + N {gen['new_tokens']}) · d values)",
            ]
        else:
            lines.append(
                f"  FLOPs per {figures['flops_per']:<14}"
                + (
                    f"{_flops_text(step)} (global batch {self.global_batch}, "
                    + ("forward only" if self.spec.mode == "inference" else "forward + backward")
                    + ", engine/flops.py)"
                    if step is not None
                    else f"no FLOP count for model '{self.spec.model}' (engine/flops.py)"
                )
            )
        if per_token := figures["flops_per_token"]:
            lines.append(
                f"  FLOPs per token (train) {per_token['exact']:,} exact, "
                f"{per_token['6N+12LHQT']:,} by 6N + 12·L·H·Q·T"
            )
        if (found := self.fit.estimate) is not None:
            lines.append(f"  memory (est.)           {found.text()} per worker")
            lines.append(f"    estimated as          {model_memory.formula(self.spec)}")
        lines.append(f"  fits this machine       {self.verdict}")
        if self.built:
            lines.append(
                "  worker peak RSS         "
                + (
                    f"{rss:.0f} MiB (the built model, its data and the framework; training "
                    "adds activations and optimizer state)"
                    if rss is not None
                    else "not reported by this system"
                )
            )
            lines.append(
                f"  seconds                 import {figures['import_s'] or 0:.2f}, data "
                f"{figures['data_s'] or 0:.2f}, build {figures['build_s'] or 0:.2f}; "
                f"{self.wall_s:.2f} in all"
            )
        else:
            lines.append(f"  not built               {self.not_built}: figures from the shape")
            lines.append(f"  seconds                 {self.wall_s:.2f}")
        return lines


def _flops_text(count: int) -> str:
    return f"{count / 1e12:.4g} TFLOP" if count >= 1e12 else f"{count / 1e9:.4g} GFLOP"


def dry_run(
    spec: RunSpec,
    runtime: runtimes.Runtime | None = None,
    timeout: float = 600.0,
    available: int | None = None,
) -> DryRun:
    """What ``spec`` is and whether it fits (``DryRun``): from its shape, and from a real build
    in a worker where one fits (``build_problem``); nothing trained."""
    started = time.monotonic()
    found = fit(spec, available)
    problem = build_problem(spec, found)
    if problem is not None:
        return DryRun(spec, {}, None, time.monotonic() - started, found, problem)
    built = probe([spec], runtime, timeout)
    return DryRun(spec, built.reports[0], built.peak_rss_mib, built.wall_s, found)
