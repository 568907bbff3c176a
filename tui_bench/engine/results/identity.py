"""Configuration identity: which runs measure the same thing, and what may change under them.

A number is decided by the spec fields that shape the work (framework, API, model, batch, threads,
precision, …), by the host and by the device. Runs that agree on all of these are one
*configuration*; a series over time, a trend and a regression check are taken per configuration.

Beside the key sit the things that may change while the configuration stays the same: framework
and runtime versions, Python and numpy, the GPU driver and CUDA, tui-bench's own version, and a
fingerprint of the machine's hardware facts. A change point in a series is explained by them.

This module is the one place that says what belongs to which side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tui_bench.engine.spec import declared_fields

# Spec fields that do not decide a number: a replicate's seed (repeat r trains with seed + r),
# how many repeats were asked for, and where the dataset files happen to live.
NOT_IDENTITY = frozenset({"seed", "repeats", "data_dir"})

# Host facts that make up the machine fingerprint (a change of any is a different box under the
# same host name: new RAM, a new CPU, a reinstalled OS).
MACHINE_FACTS = ("cpu_model", "physical_cores", "logical_cores", "ram_gib", "os")


@dataclass(frozen=True)
class Identity:
    """A configuration: a stable key, a human label and the facts the key was made from."""

    key: str  # 12 hex digits of a hash over ``facts``; equal facts give an equal key anywhere
    label: str
    facts: dict[str, Any]


def _spec_defaults() -> dict[str, Any]:
    # Records written before a spec field existed ran with its default: fill it in so they keep
    # the same key as new records that use the default. threads has no fixed default (cores).
    return {f.name: f.default for f in declared_fields() if f.name not in NOT_IDENTITY}


def device_of(record: dict[str, Any]) -> str:
    """The device the number was measured on: the GPU's or the CPU's model name."""
    spec = record.get("spec") or {}
    env = record.get("env") or {}
    worker = record.get("worker") or {}
    if str(spec.get("device", "cpu")).startswith("gpu"):
        return str(worker.get("device_name") or env.get("gpu_model") or spec.get("device"))
    return str(env.get("cpu_model") or "cpu")


def identity(record: dict[str, Any]) -> Identity:
    """The configuration a history record belongs to."""
    spec = record.get("spec") or {}
    facts: dict[str, Any] = {
        name: spec.get(name, default) for name, default in _spec_defaults().items()
    }
    facts["host"] = (record.get("env") or {}).get("host")
    facts["device_model"] = device_of(record)
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str)
    key = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return Identity(key, label_of(record), facts)


def label_of(record: dict[str, Any]) -> str:
    """'torch/eager cnn synthetic-mnist cpu×2 @host': the spec's label and the host."""
    label = record.get("label") or ""
    if not label:
        spec = record.get("spec") or {}
        label = f"{spec.get('framework', '?')}/{spec.get('api', '?')} {spec.get('model', '?')}"
    host = (record.get("env") or {}).get("host")
    return f"{label} @{host}" if host else label


def versions(record: dict[str, Any]) -> dict[str, Any]:
    """What may change under a configuration, by name; a value of None was not recorded."""
    env = record.get("env") or {}
    worker = record.get("worker") or {}
    metrics = record.get("metrics") or {}
    spec = record.get("spec") or {}
    framework = str(spec.get("framework") or worker.get("framework") or "framework")
    extra = worker.get("extra") or {}
    machine = {k: env.get(k) for k in MACHINE_FACTS}
    fingerprint = (
        hashlib.sha256(json.dumps(machine, sort_keys=True, default=str).encode()).hexdigest()[:8]
        if any(v is not None for v in machine.values())
        else None
    )
    return {
        framework: worker.get("framework_version") or metrics.get("framework_version"),
        "backend": extra.get("backend_version") if isinstance(extra, dict) else None,
        "python": worker.get("python") or env.get("python"),
        "numpy": worker.get("numpy_version"),
        "GPU driver": env.get("gpu_driver"),
        "CUDA": env.get("cuda_driver"),
        "tui-bench": env.get("tui_bench"),
        "machine": fingerprint,
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """'torch 2.12.1 → 2.13.0' for each version that differs between two runs' ``versions``."""
    out = []
    for name in dict.fromkeys([*before, *after]):
        old, new = before.get(name), after.get(name)
        if old != new:
            out.append(
                f"{name} {old if old is not None else '?'} → {new if new is not None else '?'}"
            )
    return out


def group_by_configuration(
    records: Iterable[dict[str, Any]],
) -> dict[str, tuple[Identity, list[dict[str, Any]]]]:
    """Records per configuration key, each list in the order given (History gives time order)."""
    groups: dict[str, tuple[Identity, list[dict[str, Any]]]] = {}
    for record in records:
        ident = identity(record)
        groups.setdefault(ident.key, (ident, []))[1].append(record)
    return groups
