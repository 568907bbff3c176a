"""A run's place against the machine's limits as one typed value, and its one renderer.

The figures themselves are worked out elsewhere (FLOPs in ``engine/flops.py``, peaks and MFU in
``machine/peaks.py``, energy in ``machine/energy.py``) and stored in a run's metrics; this module
reads them back as a ``Limits`` and writes the sentence every view shows: ``line()`` in full
(``tui-bench run``, ``history show``), ``brief()`` where a line is short (Live, a run's view),
and a forming figure (``Limits.forming``) while a run's steady steps arrive."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MFU_ABOVE_ONE = "MFU > 1: count or peak is wrong"
DEVICES = ("gpu", "cpu")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Mfu:
    """MFU against one peak ('measured' or 'nominal'), the peak named, or why there is none."""

    kind: str
    mfu: float | None
    peak: str | None
    error: str | None


@dataclass(frozen=True)
class Energy:
    """One device's energy over the steady windows (device-level), or why it was not read."""

    device: str
    joules_per_step: float | None
    samples_per_joule: float | None
    avg_watts: float | None
    problem: str | None


@dataclass(frozen=True)
class Limits:
    flops_per_step: float | None
    achieved_tflops: float | None
    mfu: tuple[Mfu, ...] = ()
    energy: tuple[Energy, ...] = ()
    rss_mib: float | None = None
    allocator_mib: float | None = None
    allocator: str | None = None
    forming: bool = False  # from the steady steps so far, not a finished run's result

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any]) -> Limits | None:
        """The limits a run's stored metrics hold; None when it has no FLOP count at all (a
        run from before the figures existed). Damaged values read as absent."""
        # An inference run counts per request what a training run counts per step.
        key = "flops_per_step" if "flops_per_step" in metrics else "flops_per_request"
        if key not in metrics:
            return None
        return cls(
            flops_per_step=_number(metrics.get(key)),
            achieved_tflops=_number(metrics.get("achieved_tflops")),
            mfu=tuple(
                Mfu(
                    kind,
                    _number(metrics.get(f"mfu{suffix}")),
                    _text(metrics.get(f"mfu{suffix}_peak")),
                    _text(metrics.get(f"mfu{suffix}_error")),
                )
                for suffix, kind in (("", "measured"), ("_nominal", "nominal"))
            ),
            energy=tuple(
                Energy(
                    device,
                    _number(metrics.get(f"{device}_joules_per_step")),
                    _number(metrics.get(f"{device}_samples_per_joule")),
                    _number(metrics.get(f"{device}_avg_watts")),
                    _text(metrics.get(f"{device}_energy_problem")),
                )
                for device in DEVICES
            ),
            rss_mib=_number(metrics.get("res_peak_rss_mib")),
            allocator_mib=_number(metrics.get("allocator_peak_mib")),
            allocator=_text(metrics.get("allocator")),
        )

    @classmethod
    def so_far(cls, achieved_tflops: float, measured: Mfu) -> Limits:
        """The figures as they form during a run: achieved FLOP/s of the median steady step
        so far, against the cached measured peak."""
        return cls(None, achieved_tflops, (measured,), forming=True)

    def line(self) -> str:
        """Every figure in full, with each peak named and why any is missing."""
        parts = []
        if self.achieved_tflops is not None:
            parts.append(f"{self.achieved_tflops * 1000:.3g} GFLOP/s achieved")
        for used in self.mfu:
            if used.error:
                parts.append(used.error)
            elif used.mfu is not None:
                parts.append(f"MFU {used.mfu:.1%} of {used.peak}")
        for e in self.energy:
            if e.joules_per_step is not None:
                per_joule = f", {e.samples_per_joule:.3g} samples/J" if e.samples_per_joule else ""
                watts = f", {e.avg_watts:.0f} W" if e.avg_watts else ""
                parts.append(
                    f"{e.device.upper()} {e.joules_per_step:.3g} J/step{per_joule}{watts} "
                    "(device-level)"
                )
        for e in self.energy:
            if e.problem:
                parts.append(f"{e.device.upper()} energy not read: {e.problem}")
        memory = (
            f"peak RSS {self.rss_mib:.0f} MiB"
            if self.rss_mib is not None
            else ("peak RSS not sampled")
        )
        memory += (
            f", allocator peak {self.allocator_mib:.0f} MiB"
            if self.allocator_mib is not None
            else f", allocator peak {self.allocator or 'not reported'}"
        )
        parts.append(memory)
        return "; ".join(parts)

    def brief(self) -> str | None:
        """The same figures where a line is short: MFU names only which peak (the full line
        names it), one device's energy, the memory peaks once sampled."""
        parts = []
        if self.achieved_tflops is not None:
            so_far = " so far" if self.forming else ""
            parts.append(f"{self.achieved_tflops * 1000:.3g} GFLOP/s{so_far}")
        for used in self.mfu:
            if used.error == MFU_ABOVE_ONE:
                parts.append(f"{used.kind} {MFU_ABOVE_ONE}")
            elif used.mfu is not None:
                parts.append(f"MFU {used.mfu:.1%} of {used.kind} peak")
        energy = next(
            (
                f"{e.joules_per_step:.3g} J/step ({e.device.upper()})"
                for e in self.energy
                if e.joules_per_step is not None
            ),
            None,
        )
        problem = next((e.problem for e in self.energy if e.problem), None)
        if energy is None and problem:
            energy = f"energy not read: {problem.split(' (')[0]}"
        if energy:
            parts.append(energy)
        if self.rss_mib is not None:
            memory = f"peak RSS {self.rss_mib:.0f} MiB"
            if self.allocator_mib is not None:
                memory += f", allocator {self.allocator_mib:.0f} MiB"
            parts.append(memory)
        return " · ".join(parts) or None
