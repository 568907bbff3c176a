"""Configuration identity: which runs measure the same thing, and what may change under them.

A number is decided by the spec fields that shape the work (framework, API, model, dataset,
batch, threads, precision, …), by the host and by the device. Runs that agree on all of these are
one *configuration*; a table cell in ``compare``, a series in ``trends`` and a row of ``regress``
are each taken per configuration, all three through ``group_by_configuration``.

Spec fields that do NOT decide a number (``NOT_DECIDING``), and why:

- ``seed``: repeat r of a configuration trains with seed + r (``runs/sweep.replicate_spec``), so
  the repeats of one configuration carry different seeds by design; they are replicates of one
  measurement, and a spread over them is what the statistics are for. (Accuracy depends on the
  seed; ``report`` reads the seed per run where that matters.)
- ``repeats``: how many replicates were asked for, not how each was run; five runs asked for
  with ``--repeats 5`` and five single runs measure the same thing.
- ``data_dir``: where the dataset's files happen to live. The dataset is named by ``dataset``
  (and verified against its manifest), so the same files in another directory train the same.

Nor does a field the run's mode never reads (``spec_field(modes=…)``): a training run's
``requests``, an inference run's ``epochs``, ``lr``, ``optimizer`` (it serves the initial
weights). Such a field reads as its declared default in the key, whatever the spec says (so
a configuration keeps the id it had before the field existed, or before its mode did).

Everything else the spec declares decides a number; a record written before a field existed ran
with that field's default, which is filled in so it keeps the configuration of newer records.

Beside the key sit the things that may change while the configuration stays the same
(``versions``): framework and runtime versions, Python and numpy, the GPU driver and CUDA,
tui-bench's own version, and a fingerprint of the machine's hardware facts. A change point in a
series is explained by them.

A configuration is a structured value: ``key`` is a tuple of (field, value) pairs, ``label`` a
short name among the configurations it was grouped with (the fewest varying fields that tell
them apart, 'torch · 2 thr'), ``name`` the long one ('torch/eager cnn synthetic-mnist cpu×2
@host'). Nothing here builds a "k=v k=v" string to be parsed back.

(A preset's matrix rows have no names of their own: a sweep's records carry ``config``, its
"k=v …" list of every field the preset varies, which is what makes compare cells long; the short
label is computed here instead.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from itertools import combinations
from typing import Any

from tui_bench.engine.results.record import Run
from tui_bench.engine.spec import DEFAULT_REQUESTS, GPT_SHORT, declared_fields

NOT_DECIDING = frozenset({"seed", "repeats", "data_dir"})

# Facts beside the spec that decide a number: the host and the device it was measured on.
HOST_FIELDS = ("host", "device_model")

# Host facts that make up the machine fingerprint (a change of any is a different box under the
# same host name: new RAM, a new CPU, a reinstalled OS).
MACHINE_FACTS = ("cpu_model", "physical_cores", "logical_cores", "ram_gib", "os")

# How a field's value reads in a short label; a field not listed reads 'field value'.
_SHORT = {
    "framework": "{}",
    "api": "{}",
    "model": "{}",
    "mode": "{}",  # 'inference' beside 'train' when the two are compared
    "requests": "{} req",
    "dataset": "{}",
    "device": "{}",
    "precision": "{}",
    "optimizer": "{}",
    "threads": "{} thr",
    "batch_size": "batch {}",
    "workers": "{} workers",
    "epochs": "{} ep",
    "steps_per_epoch": "{} steps/ep",
    "host": "@{}",
    "device_model": "{}",
    # The gpt's size and its overrides: 'gpt2-small', 'L4', 'd256'.
    "size": "{}",
    **GPT_SHORT,
}
# Exhaustive search for the fewest fields stops at this many; beyond, fields are added greedily.
_EXACT_UP_TO = 3

Key = tuple[tuple[str, Any], ...]


@cache
def _spec_defaults() -> tuple[tuple[str, Any], ...]:
    # Records written before a spec field existed ran with its default: fill it in so they keep
    # the same key as new records that use the default.
    # ``requests`` is declared unset (its default is the mode's, MODE_REQUESTS): its key keeps
    # the 1,000 every record ran with before, so no configuration's id moves.
    return tuple(
        (f.name, DEFAULT_REQUESTS if f.name == "requests" else f.default)
        for f in declared_fields()
        if f.name not in NOT_DECIDING
    )


@cache
def _unused_in(mode: Any) -> frozenset[str]:
    """The spec fields a run of ``mode`` never reads (a training run's ``requests``)."""
    return frozenset(f.name for f in declared_fields() if not f.used_in(str(mode)))


def deciding_fields() -> tuple[str, ...]:
    """The fields that decide a number, in key order: the spec's, then host and device."""
    return (*(name for name, _ in _spec_defaults()), *HOST_FIELDS)


def _hashable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, default=str)  # a damaged record: a list, a dict


@dataclass(frozen=True)
class Configuration:
    """One configuration. Equal (and hashed) by ``key`` alone: the same configuration found in
    two sets of runs is one, whatever each set's labels say."""

    key: Key
    name: str = field(compare=False)
    label: str = field(default="", compare=False)

    @property
    def facts(self) -> dict[str, Any]:
        return dict(self.key)

    def get(self, name: str) -> Any:
        return self.facts.get(name)

    @property
    def id(self) -> str:
        """12 hex digits of a hash over the key: equal keys give an equal id anywhere."""
        canonical = json.dumps(self.facts, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def configuration_of(run: Run) -> Configuration:
    """The configuration a run belongs to (labelled by its long name until grouped)."""
    spec = run.spec
    unused = _unused_in(run.mode)
    pairs = [
        (name, default if name in unused else _hashable(spec.get(name, default)))
        for name, default in _spec_defaults()
    ]
    pairs += [("host", run.host), ("device_model", run.device_model)]
    name = name_of(run)
    return Configuration(tuple(pairs), name, name)


def name_of(run: Run) -> str:
    """'torch/eager cnn synthetic-mnist cpu×2 @host': the spec's label and the host."""
    label, host = run.label, run.host
    return f"{label} @{host}" if host and not label.rstrip().endswith(host) else label


def short_value(name: str, value: Any) -> str:
    """How one field's value reads in a short label: '2 thr', 'batch 80', '@node1'."""
    return _SHORT.get(name, name + " {}").format("—" if value is None else value)


def varying_fields(runs: Iterable[Run | Configuration]) -> list[str]:
    """The deciding fields whose values differ between the configurations of ``runs``, in key
    order."""
    configs = [r if isinstance(r, Configuration) else configuration_of(r) for r in runs]
    return _varying(configs)


def _varying(configs: Sequence[Configuration]) -> list[str]:
    if len(configs) < 2:
        return []
    facts = [c.facts for c in configs]
    return [f for f in deciding_fields() if len({repr(x.get(f)) for x in facts}) > 1]


def label_fields(configs: Sequence[Configuration]) -> list[str]:
    """The fewest varying fields whose values tell ``configs`` apart, in key order. An API name
    is not read without its framework ('keras' is a framework and a TF API)."""
    unique = list(dict.fromkeys(configs))
    varying = _varying(unique)
    if not varying:
        return []
    facts = [c.facts for c in unique]

    def distinct(chosen: Sequence[str]) -> int:
        return len({tuple(repr(x.get(f)) for f in chosen) for x in facts})

    chosen: list[str] | None = None
    for size in range(1, min(_EXACT_UP_TO, len(varying)) + 1):
        chosen = next(
            (list(c) for c in combinations(varying, size) if distinct(c) == len(unique)), None
        )
        if chosen:
            break
    if not chosen:  # greedy beyond: the field that tells most groups apart, in key order on ties
        chosen = []
        while distinct(chosen) < len(unique) and len(chosen) < len(varying):
            rest = [f for f in varying if f not in chosen]
            chosen.append(max(rest, key=lambda f: (distinct([*chosen, f]), -varying.index(f))))
    if "api" in chosen and "framework" in varying and "framework" not in chosen:
        chosen.append("framework")
    return [f for f in varying if f in chosen]


def labelled(configs: Sequence[Configuration]) -> list[Configuration]:
    """``configs`` with their short labels among each other ('torch · 2 thr'); a lone
    configuration keeps its run label."""
    fields_ = label_fields(configs)
    if not fields_:
        return list(configs)
    return [
        replace(c, label=" · ".join(short_value(f, c.get(f)) for f in fields_)) for c in configs
    ]


def group_by_configuration(
    runs: Iterable[Run],
) -> dict[Configuration, list[Run]]:
    """Runs per configuration in first-seen order, each list in the order given (History gives
    time order), each configuration labelled among the others. Compare, trends and regress all
    group with this."""
    groups: dict[Configuration, list[Run]] = {}
    for run in runs:
        config = configuration_of(run)
        groups.setdefault(config, []).append(run)
    if len(groups) == 1:
        only = next(iter(groups))
        return {replace(only, label=groups[only][0].label): groups[only]}
    return dict(zip(labelled(list(groups)), groups.values(), strict=True))


def versions(run: Run) -> dict[str, Any]:
    """What may change under a configuration, by name; a value of None was not recorded."""
    env = run.env
    framework = str(run.spec.get("framework") or run.worker.get("framework") or "framework")
    machine = {k: env.get(k) for k in MACHINE_FACTS}
    fingerprint = (
        hashlib.sha256(json.dumps(machine, sort_keys=True, default=str).encode()).hexdigest()[:8]
        if any(v is not None for v in machine.values())
        else None
    )
    return {
        framework: run.framework_version,
        "backend": run.backend_version,
        "python": run.worker.get("python") or env.get("python"),
        "numpy": run.worker.get("numpy_version"),
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
