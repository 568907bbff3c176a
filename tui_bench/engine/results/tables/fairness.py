"""The fairness card: the settings that differ between the compared configurations (precision,
compilation, attention kernel, threads configured and observed, versions, driver, load), each
read from a record by one reader in ``FAIRNESS_SETTINGS``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tui_bench.engine.results import identity
from tui_bench.engine.results.record import Run, number
from tui_bench.engine.results.tables.groups import Group
from tui_bench.engine.results.tables.model import Column, Table


# -- fairness card ---------------------------------------------------------------------------------
def _gpu_driver(run: Run) -> Any:
    gpus = run.env.get("gpus")
    first = gpus[0] if isinstance(gpus, list) and gpus else None
    return first.get("driver") if isinstance(first, dict) else None


def load_text(run: Run) -> Any:
    load = run.load
    if not load:
        return None
    state = "busy" if run.busy else "quiet"
    average = number(load.get("loadavg_1m")) or 0
    return f"{state} (load ≈{round(average)} on {load.get('logical_cores')})"


def _observed(run: Run) -> Any:
    # to the half core: the card is for differences a reader should weigh, not sampling noise
    cores = run.metric("cores_observed")
    return None if cores is None else f"≈{round(cores * 2) / 2:g} cores"


def _versions(run: Run) -> Any:
    version, backend = run.framework_version, run.backend_version
    if version is None:
        return None
    return f"{version} ({backend})" if backend else version


# Card rows that are a spec field: left out when that field is what the comparison varies (the
# configuration names already say it).
CARD_SPEC_FIELD = {
    "precision": "precision",
    "autotune": "autotune",
    "input path": "input",
    "timing mode": "timing",
    "threads configured": "threads",
}
# Card rows that are an observed consequence of another setting, not a setting of their own: the
# cores a run used follow from the threads it was given. Where the comparison varies the
# setting, both rows are shown (configured beside observed), and neither is a second difference.
CONSEQUENCES = {"threads observed": "threads configured"}
# (label, how to read it from a record): what a ratio between runs is made of, beside the
# spec's own fields. Per-configuration values are joined when its repeats disagree.
FAIRNESS_SETTINGS: list[tuple[str, Callable[[Run], Any]]] = [
    ("precision", lambda r: r.spec.get("precision", "fp32")),
    ("compilation", lambda r: r.settings.get("compile")),
    # The kernel a transformer's attention ran in (torch's SDPA backend, Keras' path and XLA).
    ("attention kernel", lambda r: r.settings.get("attention")),
    # Where the initial weights came from: one shared numpy draw from the seed (the transformer,
    # adapters/shared_init.py); absent where each framework drew its own.
    ("initial weights", lambda r: r.settings.get("init")),
    ("autotune", lambda r: r.settings.get("autotune") or r.spec.get("autotune")),
    ("input path", lambda r: r.spec.get("input", "host")),
    ("timing mode", lambda r: r.spec.get("timing", "synced")),
    ("threads configured", lambda r: r.spec.get("threads")),
    ("threads observed", _observed),
    ("framework version", _versions),
    ("GPU driver", _gpu_driver),
    ("machine load", load_text),
]


def setting_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def fairness_card(configs: list[Group]) -> Table | None:
    """Only the settings that differ between the compared configurations: one row per setting
    and value, naming the configurations that have it, so a reader sees at once what a ratio
    is made of besides what their names say, and a sweep of many configurations stays three
    columns wide. A spec field in the names is left out; one that varies along with them (a
    precision that changes with the API) is not. None when nothing else differs (or there is
    one configuration)."""
    if len(configs) < 2:
        return None
    named = identity.label_fields([c.config for c in configs])
    table = Table(
        "fairness",
        "fairness card: settings that differ between the compared runs",
        (Column("setting"), Column("value"), Column("configurations")),
    )
    in_names = []  # settings the configurations' names already say
    for label, read in FAIRNESS_SETTINGS:
        if CARD_SPEC_FIELD.get(label) in named and label not in CONSEQUENCES.values():
            in_names.append(label)
            continue
        cells = []
        for c in configs:
            values = list(dict.fromkeys(setting_text(read(r)) for r in c.runs if r.status))
            cells.append(" / ".join(values) if values else "—")
        if len(set(cells)) > 1:
            for value in dict.fromkeys(cells):
                having = [c.label for c, cell in zip(configs, cells, strict=True) if cell == value]
                table.add([label, value, ", ".join(having)])
    # Shown whenever any run has it, even if all do: an emulated bf16 number is not a bf16 one.
    notes: dict[str, list[str]] = {}
    for c in configs:
        for note in dict.fromkeys(r.settings.get("bf16_note") for r in c.runs if r.status):
            if note:
                notes.setdefault(str(note), []).append(c.label)
    for note, having in notes.items():
        table.add(["bf16", note, ", ".join(having)])
    flagged = [c.label for c in configs if any(r.metric_text("threads_flag") for r in c.runs)]
    if flagged:
        table.add(["thread flag", "used more cores than configured", ", ".join(flagged)])
    shown = set(table.values("setting"))
    shared = [label for label, _ in FAIRNESS_SETTINGS if label not in shown | set(in_names)]
    table.note = "only settings that differ are shown" + (
        f"; {', '.join(shared)}: the same in every run" if shared else ""
    )
    if in_names:
        table.note += f"; {', '.join(in_names)}: in the configurations' names"
    return table if table.rows else None
