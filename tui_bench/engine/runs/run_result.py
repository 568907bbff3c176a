"""What a run's record says about it, apart from the process that produced it: the ``RunResult``
(what the worker reported, how it ended) and the figures derived for the history (``metrics``:
FLOPs and MFU, energy, threads observed, lines of code), the machine's load when it started,
and the fields a record starts with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.machine import bandwidth, doctor, peaks, procs
from tui_bench.engine.machine.energy import run_energy
from tui_bench.engine.machine.sysinfo import machine_fingerprint
from tui_bench.engine.results import loc, stability
from tui_bench.engine.results.history import now_iso
from tui_bench.engine.spec import RunSpec


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
        # A language model's rate in its own unit: each sample is one sequence of S tokens.
        dims = self.spec.model_dims()
        if dims is not None and isinstance(m.get("samples_per_s"), int | float):
            m["tokens_per_s"] = m["samples_per_s"] * dims.seq_len
        global_batch = self.summary.get("global_batch") or self.spec.batch_size
        # The measured peak is judged as a run is; one that ran emulated, is unreliable or was
        # taken under another load than this run's gives no MFU, and says why.
        spec = self.spec
        peak = peaks.cached(spec.device, spec.threads, spec.precision)
        verdict = stability.assess_peak(peak, spec.device, spec.threads) if peak else None
        problem = (
            stability.peak_problem(
                peak, verdict, spec.device, spec.threads, self.resources, spec.workers
            )
            if peak is not None and verdict is not None
            else None
        )
        # How good the number is: FLOPs, achieved FLOP/s and MFU against the named peaks,
        # joules per step per device (docs/limits.md). A generation run: its prefill's FLOPs and
        # MFU at the p50 TTFT, a decode step's bytes and MBU at the p50 TPOT (docs/generation.md).
        if spec.mode == "generate" and (dims := spec.model_dims()) is not None:
            m.update(
                bandwidth.generation_figures(
                    dims,
                    spec.batch_size,
                    spec.prompt_tokens or 1,
                    spec.new_tokens or 1,
                    spec.precision,
                    self.summary,
                    spec.device,
                    (self.started or {}).get("device_name"),
                    spec.threads,
                    measured_problem=problem,
                )
            )
        m.update(
            peaks.run_figures(
                self.spec.model,
                self.spec.dataset,
                global_batch,
                # an inference run: FLOP/s and MFU at its p50 latency (the typical request)
                self.summary.get(
                    "latency_p50_s" if self.spec.mode == "inference" else "step_median_s"
                ),
                self.spec.device,
                (self.started or {}).get("device_name"),
                self.spec.threads,
                self.spec.precision,
                self.spec.workers,
                self.spec.model_dims(),
                mode=self.spec.mode,
                measured_verdict=verdict.verdict if verdict is not None else None,
                measured_problem=problem,
                # a run faster than the measured peak raises it, judged by these
                step_times=self.summary.get("steady_step_times") or (),
                resources=self.resources,
            )
        )
        # Energy of the steady-state windows only (NVML counter and RAPL read at their bounds):
        # warm-up, compilation, validation and process start-up are not in it. Per device:
        # gpu_samples_per_joule beside cpu_samples_per_joule (``run_energy``).
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


def worker_facts(started: dict[str, Any] | None) -> dict[str, Any]:
    if not started:
        return {}
    return {k: v for k, v in started.items() if k not in ("v", "type", "t")}


def start_fields(
    spec: RunSpec, group: str | None, repeat: int | None, extra: dict[str, Any] | None
) -> dict[str, Any]:
    """A record's fields as its run starts: the spec, the machine and its load, who records it."""
    return {
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
