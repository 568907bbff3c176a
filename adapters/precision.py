"""What the CPU can do in reduced precision, read in the worker (stdlib only).

bf16 on an x86 CPU without AVX-512-BF16 or AMX runs emulated: the frameworks convert to and from
float32 around float32 arithmetic (or use slow generic kernels), so a bf16 number there measures the
conversion, not bf16 compute. Such a run still runs; its settings carry this note so that it is
shown beside the number (fairness card) instead of passing for a native bf16 figure.
"""

from __future__ import annotations

import platform

# The x86 flags (as /proc/cpuinfo spells them) that give native bf16 arithmetic.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The first CPU's flags, or None where they cannot be read (not Linux, no x86 flags line)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        return None
    return None


def bf16_note(precision: str, device: str, flags: set[str] | None = None) -> str | None:
    """None when bf16 is native here (or not asked for, or on a GPU); else the one line the run
    records beside its number."""
    if precision != "bf16" or not device.startswith("cpu"):
        return None
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        return None  # ARM's bf16 flags differ (bf16, sve-bf16): not judged here
    found = cpu_flags() if flags is None else flags
    if found is None:
        return "bf16 native or emulated: the CPU's flags could not be read"
    if any(flag in found for flag in BF16_FLAGS):
        return None
    return "bf16 emulated: CPU lacks avx512_bf16/amx_bf16"


def bf16_settings(precision: str, device: str) -> dict[str, str]:
    """``{"bf16_note": ...}`` for a run's recorded settings where bf16 runs emulated, else {}."""
    note = bf16_note(precision, device)
    return {"bf16_note": note} if note else {}
