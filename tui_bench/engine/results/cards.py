"""The framework card and the hardware card (after Dai & Berleant), filled from facts of this
machine: probes that run in the frameworks' runtimes (subprocesses; the app never imports a
framework) and the run history. Every cell says where it came from; a fact that is not there
shows as missing, never as a default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine import catalog
from tui_bench.engine.machine import peaks as peaks_module
from tui_bench.engine.machine import runtimes
from tui_bench.engine.machine.energy import Rapl
from tui_bench.engine.paths import adapters_dir, cache_home
from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run

MISSING = "—"
PROBE_TIMEOUT_S = 180.0

FRAMEWORK_METRICS = (
    "license",
    "version",
    "core language",
    "interface languages",
    "compatible hardware",
    "multi-node support",
    "tested networks",
    "tested datasets",
)


@dataclass
class Card:
    """One column of a card: a subject (framework or device) and its metric → value cells."""

    subject: str
    label: str
    cells: dict[str, str] = field(default_factory=dict)


# -- probing runtimes ---------------------------------------------------------------------------
def _cache_path() -> Path:
    return cache_home() / "card-probes.json"


def _run_probe(command: list[str], env: dict[str, str], tag: str, what: str) -> dict[str, Any]:
    """A probe script's tagged JSON line, or ``{"error": ...}`` naming ``what`` failed."""
    payload, problem = runtimes.run_tagged(command, env, tag, PROBE_TIMEOUT_S)
    return payload if payload is not None else {"error": f"{what} failed: {problem}"}


def probe_runtime(python: str, modules: tuple[str, ...], refresh: bool = False) -> dict[str, Any]:
    """Run ``adapters/card_probe.py`` in ``python``; cached by interpreter + site-packages mtimes
    (a pip install changes the key). Returns ``{"error": ...}`` when the probe cannot run."""
    key = f"{runtimes._probe_key(python)}|{','.join(modules)}"
    try:
        cache = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    if not refresh and key in cache:
        return cache[key]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(runtimes.probe_environment(modules))
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    result = _run_probe(
        [python, "-I", str(adapters_dir() / "card_probe.py"), *modules],
        env,
        "TUI_BENCH_CARD ",
        f"card probe in {python}",
    )
    if "error" in result:
        return result
    cache[key] = result
    path = _cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return result


def framework_runtimes(fw: catalog.Framework) -> dict[str, tuple[str, ...]]:
    """Runtime name → modules the framework's APIs need there (e.g. keras: tensorflow runtime
    needs keras + tensorflow, keras-torch needs keras + torch)."""
    found: dict[str, tuple[str, ...]] = {}
    for api in fw.apis:
        name = catalog.runtime_for(fw.name, api)
        modules = found.get(name, ())
        found[name] = modules + tuple(m for m in fw.imports_for(api) if m not in modules)
    return found


# -- history facts ------------------------------------------------------------------------------
def tested(records: Iterable[Run], framework: str, field_name: str) -> str:
    """What finished here for this framework: ``model (devices, n runs, last date)`` per value."""
    seen: dict[Any, dict[str, Any]] = {}
    for run in records:
        spec = run.spec
        if not run.finished or spec.get("framework") != framework:
            continue
        value = spec.get(field_name)
        entry = seen.setdefault(value, {"devices": set(), "runs": 0, "last": ""})
        entry["devices"].add(str(spec.get("device", "?")))
        entry["runs"] += 1
        entry["last"] = max(entry["last"], run.ended_text)
    if not seen:
        return "none finished on this machine"
    parts = []
    for value, entry in sorted(seen.items()):
        devices = ", ".join(sorted(entry["devices"]))
        runs = f"{entry['runs']} run{'s' if entry['runs'] != 1 else ''}"
        parts.append(f"{value} ({devices}; {runs}, last {entry['last'][:10]})")
    return "; ".join(parts)


# -- the framework card -------------------------------------------------------------------------
def _join(values: list[str]) -> str:
    distinct = list(dict.fromkeys(v for v in values if v))
    return "; ".join(distinct) if distinct else MISSING


def framework_card(
    history: History | None = None,
    refresh: bool = False,
    probe: Callable[[str, tuple[str, ...], bool], dict[str, Any]] | None = None,
    host: str | None = None,
) -> list[Card]:
    """One card per catalog framework. ``probe(python, modules, refresh)`` reads a runtime
    (default: ``probe_runtime``, a subprocess in that runtime). Tested networks and datasets
    count runs recorded on ``host`` (default: this machine's host name)."""
    probe = probe or probe_runtime
    if host is None:
        import socket

        host = socket.gethostname()
    records = [r for r in (history or History()).all() if (r.host or host) == host]
    cards = []
    for fw in catalog.FRAMEWORKS.values():
        # The languages are properties of the projects, not of a runtime: the manifest states them.
        core, interfaces = fw.language or (MISSING, MISSING)
        card = Card(fw.name, fw.label)
        card.cells["core language"] = core
        card.cells["interface languages"] = interfaces
        card.cells["tested networks"] = tested(records, fw.name, "model")
        card.cells["tested datasets"] = tested(records, fw.name, "dataset")
        if fw.unavailable:
            for metric in ("license", "version", "compatible hardware", "multi-node support"):
                card.cells[metric] = "no runtime to read it from (see unavailable)"
            card.cells["unavailable"] = fw.unavailable
            cards.append(card)
            continue
        licenses, versions, hardware, multinode, problems = [], [], [], [], []
        for runtime_name, modules in framework_runtimes(fw).items():
            api = next(a for a in fw.apis if catalog.runtime_for(fw.name, a) == runtime_name)
            try:
                python = runtimes.resolve(fw.name, api).python
            except runtimes.RuntimeUnavailable as exc:
                problems.append(f"{runtime_name}: {exc}")
                continue
            facts = probe(python, modules, refresh)
            if "error" in facts:
                problems.append(f"{runtime_name}: {facts['error']}")
                continue
            mods = facts.get("modules", {})
            own = mods.get(fw.import_name, {})
            if own.get("license"):
                licenses.append(f"{own['license']} ({own['distribution']})")
            if own.get("version"):
                versions.append(f"{own['distribution']} {own['version']} ({runtime_name} runtime)")
            for name in modules:
                info = mods.get(name, {})
                if "error" in info:
                    problems.append(f"{runtime_name}: {name}: {info['error']}")
                if "build" not in info:
                    continue  # keras itself: its hardware is its backend's
                gpus = info.get("gpus", 0)
                names = f" ({', '.join(info['gpu_names'])})" if info.get("gpu_names") else ""
                cpu = ", ".join(info.get("cpu") or []) or "no CPU math library reported"
                hardware.append(
                    f"{runtime_name} runtime, {name} {info.get('version')}: {info['build']}, "
                    f"{gpus} GPU{'s' if gpus != 1 else ''} seen{names}; CPU: {cpu}"
                )
                backends = ", ".join(info.get("multinode") or []) or "none found"
                multinode.append(f"{runtime_name} runtime, {name}: {backends}")
        card.cells["license"] = _join(licenses)
        card.cells["version"] = _join(versions)
        card.cells["compatible hardware"] = _join(hardware)
        card.cells["multi-node support"] = _join(multinode)
        if problems:
            card.cells["problems"] = "; ".join(problems)
        cards.append(card)
    return cards


# -- the hardware card --------------------------------------------------------------------------
NOT_MEASURABLE = {
    "scalability": "needs several devices or nodes; one machine shows one point",
    "reliability": "needs failure data over a fleet and a long time",
    "upgradability": "a property of the platform's roadmap",
    "ubiquity": "market and cloud availability",
    "chip price": "a market fact",
    "research costs": "vendor-side development cost",
    "research risks": "vendor-side",
    "time-to-market": "vendor-side",
}

HARDWARE_METRICS = (
    "computing performance",
    "latency",
    "energy efficiency",
    "compatibility",
    *NOT_MEASURABLE,
)


def _peak(device_name: str) -> dict[str, float]:
    """The vendor's dense peaks for this GPU (one table: engine/machine/peaks.py)."""
    entry = peaks_module.gpu_table_entry(device_name)
    return entry[1] if entry else {}


def run_hardware_probe(device: str, threads: int, size: int = 1024, repeats: int = 5) -> dict:
    """The hardware probe in its framework's runtime (a subprocess); ``{"error": ...}`` when it cannot run.
    Its matmul rows refresh this machine's measured peaks (what MFU is held against)."""
    return peaks_module.run_probe(device, threads, size, repeats)


def _on_device(run: Run, kind: str, name: str) -> bool:
    """Did this finished run happen on this device (by kind and model name)?"""
    device = str(run.spec.get("device", ""))
    if kind == "cpu":
        return device == "cpu" and run.env.get("cpu_model") == name
    if not device.startswith("gpu"):
        return False
    index = int(device[4:]) if device[4:].isdigit() else 0  # gpu:N
    gpus = run.env.get("gpus")
    gpus = gpus if isinstance(gpus, list) else []
    gpu = gpus[index] if index < len(gpus) else None
    return isinstance(gpu, dict) and gpu.get("name") == name


def hardware_card(
    machine: dict[str, Any],
    history: History | None = None,
    measure: Callable[[str, int], dict[str, Any]] | None = None,
) -> list[Card]:
    """One card per device of ``machine`` (a ``sysinfo.machine_fingerprint()``). ``measure(device,
    threads)`` runs the probe (default: in the hardware probe's runtime); pass ``None`` results through."""
    measure = measure or (lambda device, threads: run_hardware_probe(device, threads))
    records = [r for r in (history or History()).all() if r.finished]
    devices = [("cpu", "cpu", machine.get("cpu_model") or MISSING, machine.get("logical_cores"))]
    for gpu in machine.get("gpus") or []:
        devices.append(("gpu", f"gpu:{gpu['index']}", gpu.get("name") or MISSING, None))
    cards = []
    for kind, device, name, cores in devices:
        card = Card(device, f"{device}: {name}")
        threads = int(cores or 1)
        load = os.getloadavg()[0]
        measured = measure(device, threads)
        if "error" in measured:
            card.cells["computing performance"] = f"not measured: {measured['error']}"
            card.cells["latency"] = f"not measured: {measured['error']}"
        else:
            peaks = _peak(name)
            parts = []
            for row in measured["compute"]:
                peak = peaks.get(row["precision"])
                vendor = f" of {peak:g} peak" if peak else ""
                # the peak's other frameworks' rows name theirs (peaks.run_probe)
                who = f"{row['framework']} {row['variant']} " if row.get("variant") else ""
                parts.append(
                    f"{who}{row['kernel']} {row['precision']} {row['tflops'] * 1000:.1f} GFLOP/s"
                    f"{vendor} ({row['shape']})"
                )
            if not peaks:
                parts.append(f"no vendor peak known to tui-bench for {name}")
            where = f"{measured['framework']}, {measured.get('threads') or ''} threads".rstrip(", ")
            card.cells["computing performance"] = (
                "; ".join(parts) + f" — {measured['method']}, {where}"
            )
            lat = measured["latency"]
            card.cells["latency"] = (
                f"{lat['median_s'] * 1000:.2f} ms median — {lat['what']}, {lat['repeats']} runs"
            )
            card.cells["load while measured"] = (
                f"{load:.1f} on {machine.get('logical_cores')} logical cores (1-min load average "
                "before the probe; other work slows every figure above)"
            )
        mine = [r for r in records if _on_device(r, kind, name)]
        joules = [(value, r) for r in mine if (value := r.metric("gpu_samples_per_joule"))]
        if joules:
            best, best_run = max(joules, key=lambda pair: pair[0])
            spec = best_run.spec
            card.cells["energy efficiency"] = (
                f"{best:.1f} samples/J best of {len(joules)} runs with NVML energy "
                f"({spec.get('framework')}/{spec.get('api')} {spec.get('model')} "
                f"{spec.get('dataset')})"
            )
        elif kind == "cpu":
            cpu_joules = [(v, r) for r in mine if (v := r.metric("cpu_samples_per_joule"))]
            if cpu_joules:
                best, best_run = max(cpu_joules, key=lambda pair: pair[0])
                spec = best_run.spec
                card.cells["energy efficiency"] = (
                    f"{best:.1f} samples/J best of {len(cpu_joules)} runs with RAPL package "
                    f"energy ({spec.get('framework')}/{spec.get('api')} {spec.get('model')} "
                    f"{spec.get('dataset')})"
                )
            else:
                why = Rapl().problem or "no finished run with RAPL energy on this CPU yet"
                card.cells["energy efficiency"] = f"not measured: {why}"
        else:
            card.cells["energy efficiency"] = "no finished run with NVML energy on this GPU yet"
        combos: dict[str, int] = {}
        for run in mine:
            key = f"{run.spec.get('framework', '?')}/{run.spec.get('api', '?')}"
            combos[key] = combos.get(key, 0) + 1
        card.cells["compatibility"] = (
            ", ".join(f"{k} ({n} run{'s' if n != 1 else ''})" for k, n in sorted(combos.items()))
            if combos
            else "no finished run on this device yet"
        )
        for metric, why in NOT_MEASURABLE.items():
            card.cells[metric] = f"not measurable on one machine: {why}"
        cards.append(card)
    return cards


# -- rendering ----------------------------------------------------------------------------------
def markdown(cards: list[Card], metrics: tuple[str, ...], title: str) -> str:
    """A markdown table: one row per metric, one column per subject."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    extra = [m for card in cards for m in card.cells if m not in metrics]
    rows = list(metrics) + list(dict.fromkeys(extra))
    lines = [f"## {title}", "", "| metric | " + " | ".join(c.label for c in cards) + " |"]
    lines.append("|---" * (len(cards) + 1) + "|")
    for metric in rows:
        values = [cell(card.cells.get(metric, MISSING)) for card in cards]
        lines.append(f"| {metric} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


def text(cards: list[Card], metrics: tuple[str, ...]) -> str:
    """Plain text, one block per subject (fits a narrow terminal or the System screen)."""
    blocks = []
    for card in cards:
        extra = [m for m in card.cells if m not in metrics]
        lines = [card.label]
        for metric in list(metrics) + extra:
            lines.append(f"  {metric:<22} {card.cells.get(metric, MISSING)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
