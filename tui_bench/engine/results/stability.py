"""Can a run's number be trusted? A verdict — ``stable``, ``noisy`` or ``unreliable`` — with reasons.

Pure stdlib and no Textual: the CLI, the TUI, the runner and ``history recheck`` all call
:func:`assess`. Each rule's source is in docs/stability.md. Inputs are the run's steady-state step
times (kept compact in the record, see :func:`compact_times`), the sampler's summary of the steady
windows (CPU taken by other processes, steal, GPU clock events) and how the steps were timed.

A reason is ``{rule, value, threshold, message, level}``; the verdict is the worst level found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_bench.engine.machine.peaks import Peak
from tui_bench.engine.results import changepoints
from tui_bench.engine.results.record import Reason, Run
from tui_bench.engine.results.stats import (
    block_means,
    mean_std,
    modality,
    quantile,
    repeat_spread,
    steps_needed,
    window_means,
)

STABLE, NOISY, UNRELIABLE = "stable", "noisy", "unreliable"
_RANK = {STABLE: 0, NOISY: 1, UNRELIABLE: 2}

# -- thresholds (sources in docs/stability.md) -------------------------------------------------
CV_UNRELIABLE = 0.10  # pyperf check: std dev > 10 % of the mean
RANGE_UNRELIABLE = 0.50  # pyperf check: min or max 50 % away from the mean
MVALUE_MULTIMODAL = 3.2  # BenchmarkDotNet MValue: > 3.2 is a multimodal distribution
MVALUE_MIN_SAMPLES = 15  # BenchmarkDotNet only judges modality with 15 samples or more
PAUSE_FACTOR = 10.0  # a step ten times the median is a pause (hyperfine's "outlier" warning)
CPU_STOLEN_FRACTION = 0.10  # other work took >= 10 % of the cores the run needs (see docs)
GPU_EVENT_FRACTION = 0.10  # nvbench: throttled samples; > 10 % of steady samples
GPU_CLOCK_FRACTION = 0.75  # nvbench's throttle threshold: SM clock < 75 % of the default clock
REPEAT_SPREAD_NOISY = 0.07  # TorchBench: (max - min) / min of repeats under 7 % is stable
TUKEY_K = 3.0  # Tukey's "far out" fences: beyond Q1 - 3 IQR or Q3 + 3 IQR
CI_TARGET = 0.01  # resolve +-1 % at 95 %
SHORT_STEP_S = 0.001  # steps under 1 ms timed one at a time are mostly clock and sync overhead
MIN_OBSERVED_SAMPLES = 3  # fewer sampler windows inside the steady phase: observation unknown
MIN_CLASSIFY_STEPS = 10  # change points need at least this many steps
SHIFT_FRACTION = 0.05  # a change point that moves the mean by less than 5 % is not a phase
LAST_SEGMENT_FRACTION = 0.25  # Krun: steady state is the last segment; shorter than this: none

# Which kinds of rule ran, for the "stable: checked ..." sentence.
RULES = (
    "cv",
    "range",
    "multimodal",
    "steady_state",
    "pause",
    "cpu_stolen",
    "gpu_clocks",
    "repeat_spread",
    "outliers",
    "sample_size",
    "short_steps",
    "observed",
)


@dataclass
class Verdict:
    verdict: str
    reasons: list[Reason] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    steady_state: str | None = None  # flat / warm-up / slowdown / no steady state

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reasons": [r.as_dict() for r in self.reasons],
            "checked": list(self.checked),
            "steady_state": self.steady_state,
        }


def change_points(series: Sequence[float], min_size: int | None = None) -> list[int]:
    """Indices where the mean level of a run's step times changes: ``changepoints`` binary
    segmentation (ruptures' ``Binseg(model="l2")`` with ``pen``), σ floored at 0.1 % of the
    mean so that a perfectly flat series gets no free splits."""
    n = len(series)
    min_size = min_size or max(3, n // 20)
    mean = sum(series) / n if n else 0.0
    sigma = changepoints.noise_sigma(series, floor=max(1e-3 * abs(mean), 1e-12))
    return changepoints.binary_segmentation(series, changepoints.penalty(n, sigma), min_size)


def classify_steady_state(series: Sequence[float]) -> tuple[str, list[int]]:
    """Krun's classes for a per-step series: ``flat`` (one level), ``warm-up`` (the last level is
    the fastest), ``slowdown`` (a later level is slower than an earlier one), ``no steady state``
    (the last level is too short to be one). Shifts under 5 % of the mean are merged."""
    if len(series) < MIN_CLASSIFY_STEPS:
        return "flat", []
    # neighbours whose levels are within SHIFT_FRACTION are one level: equivalent segments (Krun)
    kept_points = changepoints.merge_small_steps(series, change_points(series), SHIFT_FRACTION)
    kept_levels = changepoints.levels(series, kept_points)
    if not kept_points:
        return "flat", []
    last_start = kept_points[-1]
    if len(series) - last_start < LAST_SEGMENT_FRACTION * len(series):
        return "no steady state", kept_points
    last = kept_levels[-1]
    if any(level < last * (1 - SHIFT_FRACTION) for level in kept_levels[:-1]):
        return "slowdown", kept_points
    return "warm-up", kept_points


# -- the rules --------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if x >= 0.1 else f"{100 * x:.1f} %"


# An inference run's timing as its worker records it (adapters/serve.py, run_inference): each
# timed value is a request, and the verdict's sentences say so.
INFERENCE_TIMING = "per request"


def _step_rules(times: Sequence[float], unit: str = "step") -> tuple[list[Reason], str | None]:
    # ``unit``: what one timed value is, "step" or (an inference run's) "request"
    reasons: list[Reason] = []
    n = len(times)
    mean, std = mean_std(times)
    med = quantile(times, 0.5)
    cv = std / mean if mean > 0 else 0.0
    # CV and range are pyperf check's rules, judged on values of >= 100 ms as pyperf's are:
    # single 20 ms steps jitter by 14 % on this project's VMs in a bare torch loop (measured in
    # docs/stability.md), which says nothing about the run's median; a slow phase or a stolen
    # core moves the blocks too.
    values, k = block_means(times)
    v_mean, v_std = mean_std(values)
    v_cv = v_std / v_mean if v_mean > 0 else 0.0
    of = f"{unit} times" if k == 1 else f"{k}-{unit} blocks"
    if v_cv >= CV_UNRELIABLE:
        reasons.append(
            Reason(
                "cv",
                v_cv,
                CV_UNRELIABLE,
                f"{of} vary {_pct(v_cv)} (CV); 10 % or more is unreliable",
            )
        )
    low, high = min(values), max(values)
    far = max(v_mean - low, high - v_mean) / v_mean if v_mean > 0 else 0.0
    if far >= RANGE_UNRELIABLE:
        which = "max" if high - v_mean >= v_mean - low else "min"
        what = unit if k == 1 else f"{k}-{unit} block"
        reasons.append(
            Reason(
                "range",
                far,
                RANGE_UNRELIABLE,
                f"the {which} {what} is {_pct(far)} from the mean; 50 % or more is unreliable",
            )
        )
    if n >= MVALUE_MIN_SAMPLES:
        m = modality(times)
        if m > MVALUE_MULTIMODAL:
            reasons.append(
                Reason(
                    "multimodal",
                    m,
                    MVALUE_MULTIMODAL,
                    f"{unit} times have several modes (mValue {m:.1f}); above 3.2 is unreliable",
                )
            )
    state, points = classify_steady_state(times)
    if state in ("slowdown", "no steady state"):
        at = f" (level changes at {unit} {', '.join(map(str, points[:3]))})" if points else ""
        reasons.append(
            Reason(
                "steady_state",
                float(len(points)),
                None,
                f"{state}: the {unit} time never settles{at}"
                if state == "no steady state"
                else f"slowdown: {unit}s got slower during the run{at}",
            )
        )
    elif state == "warm-up":
        reasons.append(
            Reason(
                "steady_state",
                float(points[-1]),
                None,
                f"still warming up: {unit}s settle only at steady {unit} {points[-1]}; "
                "raise --warmup-steps",
                NOISY,
            )
        )
    if med > 0 and max(times) > PAUSE_FACTOR * med:
        ratio = max(times) / med
        reasons.append(
            Reason(
                "pause",
                ratio,
                PAUSE_FACTOR,
                f"one {unit} took {ratio:.0f}x the median (a pause); 10x or more is unreliable",
            )
        )
    if n >= 4:
        q1, q3 = quantile(times, 0.25), quantile(times, 0.75)
        iqr = q3 - q1
        outliers = [t for t in times if t < q1 - TUKEY_K * iqr or t > q3 + TUKEY_K * iqr]
        if outliers and iqr > 0:
            reasons.append(
                Reason(
                    "outliers",
                    float(len(outliers)),
                    TUKEY_K,
                    f"{len(outliers)} {unit}(s) beyond Tukey's 3xIQR fences (outliers)",
                    NOISY,
                )
            )
    need = steps_needed(cv, CI_TARGET)
    if n < need:
        reasons.append(
            Reason(
                "sample_size",
                float(n),
                float(need),
                f"{n} steady {unit}s at {_pct(cv)} spread resolve less than +-1 % at 95 %; "
                f"{need} needed",
                NOISY,
            )
        )
    return reasons, state


@dataclass(frozen=True)
class Stolen:
    """Cores' worth of CPU other work took from the ``need`` cores a run (or a peak's probe)
    asked for: other processes and steal beyond the ``spare`` cores it did not need."""

    other: float
    steal: float
    need: float
    spare: float

    @property
    def cores(self) -> float:
        return max(0.0, self.other + self.steal - self.spare)

    @property
    def fraction(self) -> float:
        return self.cores / self.need if self.need else 0.0


def stolen(resources: Mapping[str, Any], threads: int | None) -> Stolen | None:
    """What other work took, from the sampler's steady-window summary; None where unknown."""
    other = resources.get("steady_other_cores")
    steal = resources.get("steady_steal_cores") or 0.0
    cores = resources.get("logical_cores")
    if not (isinstance(other, (int, float)) and isinstance(cores, (int, float)) and threads):
        return None
    need = min(float(threads), float(cores))
    return Stolen(float(other), float(steal), need, max(0.0, float(cores) - need))


def _machine_rules(resources: dict[str, Any], threads: int | None) -> list[Reason]:
    """CPU stolen and GPU clock events, from the sampler's steady-window summary."""
    reasons: list[Reason] = []
    taken = stolen(resources, threads)
    if taken is not None:
        other, steal, need, spare = taken.other, taken.steal, taken.need, taken.spare
        stolen_cores, fraction = taken.cores, taken.fraction
        if fraction >= CPU_STOLEN_FRACTION:
            reasons.append(
                Reason(
                    "cpu_stolen",
                    fraction,
                    CPU_STOLEN_FRACTION,
                    f"other work took {stolen_cores:.2f} of the {need:g} core(s) the run needed "
                    f"({_pct(fraction)}; other processes {other:.2f}, steal {steal:.2f}, "
                    f"spare {spare:g}); 10 % or more is unreliable",
                )
            )
    events = resources.get("steady_gpu_throttle_fraction")
    if isinstance(events, (int, float)) and events > GPU_EVENT_FRACTION:
        names = resources.get("steady_gpu_throttle_reasons") or []
        reasons.append(
            Reason(
                "gpu_clocks",
                events,
                GPU_EVENT_FRACTION,
                f"the GPU was slowed ({', '.join(names) or 'clocks events'}) in "
                f"{_pct(events)} of steady samples; over 10 % is unreliable",
            )
        )
    low = resources.get("steady_gpu_low_clock_fraction")
    if isinstance(low, (int, float)) and low > GPU_EVENT_FRACTION:
        reasons.append(
            Reason(
                "gpu_clocks",
                low,
                GPU_EVENT_FRACTION,
                f"SM clock under 0.75x its default in {_pct(low)} of steady samples; "
                "over 10 % is unreliable",
            )
        )
    return reasons


def _observed_rule(resources: dict[str, Any]) -> list[Reason]:
    source = resources.get("steady_observed_source")
    if source == "window bounds":
        return []
    count = resources.get("steady_samples")
    if isinstance(count, int) and count < MIN_OBSERVED_SAMPLES:
        return [
            Reason(
                "observed",
                float(count),
                float(MIN_OBSERVED_SAMPLES),
                f"observed threads/cores rest on {count} sampler window(s) in the steady "
                "phase: unknown",
                NOISY,
            )
        ]
    return []


def assess(
    step_times: Sequence[float] | None,
    resources: dict[str, Any] | None = None,
    *,
    threads: int | None = None,
    timing: str | None = "synced",
    repeat_medians: Sequence[float] | None = None,
) -> Verdict:
    """The verdict for one run. ``step_times`` are its steady steps in order (seconds);
    ``resources`` the sampler's summary (``SamplerSummary.as_dict()``); ``threads`` the cores
    the run was configured to use; ``timing`` how steps were timed; ``repeat_medians`` the
    medians of this configuration's repeats, where there are several."""
    resources = resources or {}
    unit = "request" if timing == INFERENCE_TIMING else "step"
    times = [float(t) for t in (step_times or []) if isinstance(t, (int, float)) and t > 0]
    reasons: list[Reason] = []
    state = None
    if len(times) < 2:
        reasons.append(
            Reason(
                "sample_size",
                float(len(times)),
                2.0,
                f"{len(times)} steady {unit}(s): nothing to judge a spread by",
                UNRELIABLE,
            )
        )
    else:
        step_reasons, state = _step_rules(times, unit)
        reasons += step_reasons
        if timing == "synced" and quantile(times, 0.5) < SHORT_STEP_S:
            med = quantile(times, 0.5)
            reasons.append(
                Reason(
                    "short_steps",
                    med,
                    SHORT_STEP_S,
                    f"steps of {med * 1e6:.0f} us timed one at a time: clock and sync overhead "
                    "weigh; use --timing pipelined",
                    NOISY,
                )
            )
    reasons += _machine_rules(resources, threads)
    reasons += _observed_rule(resources)
    spread = repeat_spread(repeat_medians or [])
    if spread is not None and spread >= REPEAT_SPREAD_NOISY:
        reasons.append(
            Reason(
                "repeat_spread",
                spread,
                REPEAT_SPREAD_NOISY,
                f"repeats differ by {_pct(spread)} (max-min)/min; 7 % or more is noisy",
                NOISY,
            )
        )
    verdict = max((r.level for r in reasons), key=_RANK.__getitem__, default=STABLE)
    return Verdict(verdict, reasons, list(RULES), state)


# -- a measured peak, judged like a run ---------------------------------------------------------
# A run is held against a measured peak only where both saw the same load: the share of the cores
# the run needs that other work took may differ by less than the cpu_stolen rule's 10 %. More, and
# the peak (lowered by the load, or taken on a quiet machine) would make the MFU too high or low.
PEAK_LOAD_DIFFERENCE = CPU_STOLEN_FRACTION


def _peak_resources(peak: Peak) -> dict[str, Any]:
    if peak.load is None:
        return {}
    return {
        "steady_other_cores": peak.load.other_cores,
        "steady_steal_cores": peak.load.steal_cores,
        "logical_cores": peak.load.logical_cores,
        "steady_observed_source": "window bounds",  # the probe's whole wall time, read at its edges
    }


def assess_peak(peak: Peak, device: str, threads: int) -> Verdict:
    """A measured peak's verdict by the rules a run's is: its timed calls as steps, the load
    it was measured under as a run's steady windows (cpu_stolen at its threads on a CPU; a GPU's
    matmul does not wait on the host's cores)."""
    return assess(
        peak.times,
        _peak_resources(peak),
        threads=threads if device == "cpu" else None,
        timing="synced",
    )


def peak_problem(
    peak: Peak,
    verdict: Verdict,
    device: str,
    threads: int,
    run_resources: Mapping[str, Any],
    workers: int = 1,
) -> str | None:
    """Why a run cannot be held against this measured peak, in one line, or None: the peak ran
    emulated, its own verdict is unreliable, or (on a CPU) other work took a share of the cores
    the run needs that differs from the run's own by ``PEAK_LOAD_DIFFERENCE`` or more."""
    if peak.emulated:
        return (
            f"no MFU of the measured peak: it ran emulated ({peak.emulated}), so it is not this "
            "precision's peak; the nominal MFU stands"
        )
    if verdict.verdict == UNRELIABLE:
        why = "; ".join(r.message for r in verdict.reasons if r.level == UNRELIABLE)
        return (
            f"no MFU of the measured peak: the peak is unreliable ({why}); "
            "tui-bench hardware measures it again"
        )
    if device != "cpu":
        return None
    at_peak = stolen(_peak_resources(peak), threads)
    at_run = stolen(run_resources, threads * max(1, workers))
    if at_peak is None or at_run is None:
        return None
    if abs(at_peak.fraction - at_run.fraction) >= PEAK_LOAD_DIFFERENCE:
        return (
            f"no MFU of the measured peak: it was measured under another load (other work took "
            f"{_pct(at_peak.fraction)} of the {at_peak.need:g} core(s) then, "
            f"{_pct(at_run.fraction)} during the run; {_pct(PEAK_LOAD_DIFFERENCE)} or more apart "
            "do not compare); tui-bench hardware measures it again"
        )
    return None


# -- the run record ----------------------------------------------------------------------------
def compact_times(times: Sequence[float]) -> list[float]:
    """Steady step times as a record stores them (the worker sends them so): 4 significant
    digits, 0.01 % resolution for rules about 1 % and more, about 8 bytes a step in JSON."""
    return [float(f"{float(t):.4g}") for t in times]


def assess_record(run: Run, repeat_medians: Sequence[float] | None = None) -> Verdict | None:
    """The verdict for a history record, from what it stores; None for a run with no figures
    (failed before its steady phase, or recorded before step times were kept)."""
    times = run.step_times
    if times is None:
        return None
    threads, workers = run.spec.get("threads"), run.spec.get("workers")
    threads = threads if isinstance(threads, int) and not isinstance(threads, bool) else None
    workers = workers if isinstance(workers, int) and not isinstance(workers, bool) else 1
    if run.windowed:
        times = tuple(window_means(times))
    resources = run.resources()
    resources.setdefault("logical_cores", run.load.get("logical_cores"))
    return assess(
        times,
        resources,
        threads=threads * workers if threads else None,
        timing=run.timing,
        repeat_medians=repeat_medians,
    )


def forming(
    step_times: Sequence[float], warmed_up: bool = True, timing: str | None = "synced"
) -> Verdict | None:
    """The verdict so far, for a live view: None until warm-up is over and there are steps to
    judge. Only the step-time rules: the sampler's steady summary exists when the run ends.
    ``timing`` as ``assess`` reads it (an inference run's says "request", not "step")."""
    if not warmed_up or len(step_times) < 5:
        return None
    return assess(step_times, timing=timing)


def reasons_text(run: Run) -> str:
    """A run's reasons as one line ("; "-joined messages), for CSV and tables."""
    return "; ".join(r.message for r in run.reasons)


def repeat_medians_for(run: Run, records: Sequence[Run]) -> list[float]:
    """Step medians of the finished repeats of this run's configuration (same group and
    configuration key), the run's own included; empty for a run that has no repeats."""
    group, config = run.group, run.config
    if group is None or config is None:
        return []
    out = []
    for other in records:
        if other.group == group and other.config == config and other.finished:
            value = other.figure("step_median_s")  # an inference run's: its p50
            if value is not None:
                out.append(value)
    return out


EXIT_UNRELIABLE = 3  # `run --require-stable`: the run finished but its verdict is unreliable


def verdict_line(run: Run) -> str | None:
    """``<id>: <verdict>: <first reason>`` for the end of `tui-bench run`; None without one."""
    text = stored_line(run.stability)
    return f"{run.id}: {text}" if text else None


def stored_line(stab: Verdict | Mapping[str, Any] | None) -> str | None:
    """THE verdict sentence: ``<verdict>: <worst reason> (+n more)``, or ``<verdict> (n rules
    checked)`` when no rule was broken; None without a verdict. For a verdict just made, a stored
    one (a record's ``stability``) or a live view's ``verdict`` slot."""
    if isinstance(stab, Verdict):
        stab = stab.as_dict()
    if not isinstance(stab, Mapping) or not stab.get("verdict"):
        return None
    reasons = [r for r in stab.get("reasons") or [] if isinstance(r, dict)]
    reasons.sort(key=lambda r: -_RANK.get(r.get("level", NOISY), 1))
    if not reasons:
        checked = stab.get("checked") or []
        return f"{stab['verdict']} ({len(checked)} rules checked)"
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return f"{stab['verdict']}: {reasons[0].get('message')}{more}"


def relative_noise(records: Sequence[Run], values: Sequence[float]) -> float | None:
    """How far apart numbers of one configuration fall by chance: the repeats' (max-min)/min
    when there are several, else the single run's step-time CV; None when unknown."""
    spread = repeat_spread(values)
    if spread is not None:
        return spread
    for run in records:
        clean = [t for t in run.step_times or () if t > 0]
        if len(clean) >= 2:
            mean, std = mean_std(clean)
            return std / mean if mean else None
    return None


def stability_note(records: Sequence[Run], unjudged: bool = True) -> str:
    """ "" when every finished run is stable, else e.g. "not stable: 1 unreliable, 2 noisy of 4"
    (runs recorded without a verdict count as "not judged")."""
    finished = [r for r in records if r.finished]
    counts: dict[str, int] = {}
    for r in finished:
        key = r.verdict or "not judged"
        counts[key] = counts.get(key, 0) + 1
    not_judged = counts.pop("not judged", 0)
    bad = {k: v for k, v in counts.items() if k != STABLE}
    notes = []
    if bad:
        parts = ", ".join(f"{v} {k}" for k, v in sorted(bad.items()))
        notes.append(f"not stable: {parts} of {len(finished)}")
    if not_judged and unjudged:
        notes.append(f"{not_judged} of {len(finished)} not judged (history recheck)")
    return "; ".join(notes)
