"""Sweeps: run a preset's configurations × repeats, interleaved, each repeat in its own worker.

A sweep has an id (its history *group*) and a manifest under ``<data home>/sweeps/<id>.json``
holding the plan: the expanded configurations, written once when the sweep starts. What has run
is never stored beside it: it is read back from the history records of the group, the one source
of truth. Resuming an interrupted sweep (Ctrl-C, a killed terminal) therefore runs exactly the
(configuration, repeat) pairs that have no finished record yet.

The manifest also keeps the figures the preset's study published (``[[published]]``), as they
were when the sweep started, for ``compare`` to print beside this sweep's own.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import PresetError
from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.paths import data_home
from tui_bench.engine.results import auto_repeats
from tui_bench.engine.results.history import (
    History,
    HistoryError,
    atomic_write,
    new_run_id,
    now_iso,
)
from tui_bench.engine.results.published import Figure, parse_figures
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.regress import newest_per_configuration
from tui_bench.engine.runs import presets as presets_module
from tui_bench.engine.runs import runner
from tui_bench.engine.runs.presets import SPEC_KEYS, Preset, SweepConfig
from tui_bench.engine.spec import RunSpec


def sweeps_dir() -> Path:
    return data_home() / "sweeps"


MAX_AUTO_REPEATS = 1000


def check_auto_repeats(value: Any) -> dict[str, Any]:
    """``--repeats auto``'s settings, ``{"max": N, "target_ci": fraction}``, as read back from a
    file (a batch request, a sweep manifest) that may say anything: the settings, checked, or a
    one-line ValueError."""
    if not isinstance(value, dict):
        raise ValueError(
            f"auto repeats: expected a table of max and target_ci, got {_shown(value)}"
        )
    most = value.get("max")
    if isinstance(most, bool) or not isinstance(most, int) or not 2 <= most <= MAX_AUTO_REPEATS:
        raise ValueError(
            f"auto repeats: max must be a whole number from 2 to {MAX_AUTO_REPEATS}, "
            f"got {_shown(most)}"
        )
    target = value.get("target_ci", auto_repeats.DEFAULT_TARGET_CI)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < 1:
        raise ValueError(
            f"auto repeats: target_ci must be a fraction between 0 and 1, got {_shown(target)}"
        )
    return {"max": most, "target_ci": float(target)}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Sweep:
    id: str
    preset: str
    preset_path: str
    description: str
    study: str
    repeats: int
    configs: list[SweepConfig]
    overrides: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    # ``--repeats auto``: {"max": N, "target_ci": 0.02}; ``repeats`` is then the maximum, and a
    # configuration stops early once its median's 95 % CI is within the target.
    auto_repeats: dict[str, Any] | None = None
    # configuration key -> why its repeats stopped (auto repeats), kept in the manifest
    stopped: dict[str, str] = field(default_factory=dict)
    # the study's published figures; None in a manifest written before sweeps kept them
    published: list[Figure] | None = None

    @property
    def manifest_path(self) -> Path:
        return sweeps_dir() / f"{self.id}.json"

    def save(self) -> None:
        sweeps_dir().mkdir(parents=True, exist_ok=True)
        data = {
            "id": self.id,
            "preset": self.preset,
            "preset_path": self.preset_path,
            "description": self.description,
            "study": self.study,
            "repeats": self.repeats,
            "overrides": self.overrides,
            "created_at": self.created_at,
            "auto_repeats": self.auto_repeats,
            "stopped": self.stopped,
            "configs": [c.as_dict() for c in self.configs],
        }
        if self.published is not None:
            data["published"] = [f.as_dict() for f in self.published]
        atomic_write(self.manifest_path, json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: Path) -> Sweep:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            configs = [
                SweepConfig(
                    key=c["key"],
                    spec=RunSpec.from_dict(c["spec"], validate=False),
                    skip_reason=c.get("skip_reason"),
                    oversubscribed=bool(c.get("oversubscribed")),
                )
                for c in data["configs"]
            ]
            return cls(
                id=data["id"],
                preset=data["preset"],
                preset_path=data.get("preset_path", ""),
                description=data.get("description", ""),
                study=data.get("study", ""),
                repeats=int(data["repeats"]),
                configs=configs,
                overrides=data.get("overrides", {}),
                created_at=data.get("created_at", ""),
                auto_repeats=(
                    None
                    if data.get("auto_repeats") is None
                    else check_auto_repeats(data["auto_repeats"])
                ),
                stopped=dict(data.get("stopped") or {}),
                published=(
                    parse_figures(data["published"], SPEC_KEYS) if "published" in data else None
                ),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HistoryError(f"sweep manifest {path} is unreadable: {exc}") from None

    def figures(self) -> list[Figure]:
        """The study's published figures: the manifest's, or for a sweep started before
        manifests kept them, its preset's as the file reads now (none if it no longer loads)."""
        if self.published is not None:
            return list(self.published)
        if not self.preset:
            return []
        try:
            path = Path(self.preset_path)
            preset = presets_module.load(
                path if path.is_file() else presets_module.find(self.preset)
            )
        except (PresetError, OSError):
            return []
        return list(preset.published)

    def skipped(self) -> list[tuple[str, str]]:
        """(configuration key, reason) for each configuration that cannot run here."""
        return [(c.key, f"skipped: {c.skip_reason}") for c in self.configs if c.skip_reason]

    def refresh(self, probe=presets_module.availability_problem) -> None:
        """Re-check what this machine can run now (a runtime installed since, a GPU added)."""
        fresh = []
        for c in self.configs:
            reason = presets_module.catalog_problem(c.spec)
            if reason is None and probe is not None:
                reason = probe(c.spec)
            fresh.append(SweepConfig(c.key, c.spec, reason, c.oversubscribed))
        self.configs = fresh


def create(
    preset: Preset,
    overrides: dict[str, Any] | None = None,
    probe=presets_module.availability_problem,
    auto_repeats: dict[str, Any] | None = None,
    only: Sequence[str] = (),
) -> Sweep:
    """Expand a preset into a new sweep and write its manifest. ``auto_repeats``
    (``{"max": N, "target_ci": 0.02}``) repeats each configuration until its median is known
    to the target or N repeats have run. ``only``: the configurations to keep (``expand``): a
    study replayed on the frameworks at hand, or one framework's rows again."""
    configs = presets_module.expand(preset, overrides, probe=probe, only=only)
    repeats = (overrides or {}).get("repeats", preset.repeats)
    if auto_repeats is not None:
        repeats = int(auto_repeats["max"])
    sweep = Sweep(
        id=f"sweep-{new_run_id()}",
        preset=preset.name,
        preset_path=str(preset.path),
        description=preset.description,
        study=preset.study,
        repeats=repeats,
        configs=configs,
        overrides=dict(overrides or {}),
        created_at=now_iso(),
        auto_repeats=auto_repeats,
        published=list(preset.published),
    )
    sweep.save()
    return sweep


# -- lists on the command line (``--batch-size 1,8,64``) ------------------------------------------
COMMAND_LINE = Path("<command line>")


def listed_preset(fields_: dict[str, Any], listed: dict[str, list[Any]]) -> Preset:
    """The preset a command line's flags make when some list values (``tui-bench run --mode
    inference --batch-size 1,8,64``): ``fields_`` fixed, each list an axis, checked like a
    preset file's (``PresetError``, one line). Its sweep is named after what it sweeps."""
    data = {k: v for k, v in fields_.items() if v is not None and k not in listed}
    data.update(listed)
    data["name"] = "-".join(name.replace("_", "-") for name in listed) + "-sweep"
    data.setdefault("description", "from the command line: " + _listed_text(listed))
    return presets_module.parse(data, COMMAND_LINE)


def with_listed(preset: Preset, listed: dict[str, list[Any]]) -> Preset:
    """A preset whose field a command-line list replaces: the list is the field's axis, wherever
    the preset set it (fixed, a list of its own, a matrix entry)."""
    if not listed:
        return preset
    matrices = [
        [{k: v for k, v in entry.items() if k not in listed} for entry in matrix]
        for matrix in preset.matrices
    ]
    return replace(
        preset,
        fixed={k: v for k, v in preset.fixed.items() if k not in listed},
        axes={**{k: v for k, v in preset.axes.items() if k not in listed}, **listed},
        # a matrix left with only empty entries varies nothing: it goes
        matrices=[m for m in matrices if any(m)],
    )


def _listed_text(listed: dict[str, list[Any]]) -> str:
    return "; ".join(f"{k} {', '.join(str(v) for v in values)}" for k, values in listed.items())


def all_sweeps() -> list[Sweep]:
    directory = sweeps_dir()
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("sweep-*.json")):
        try:
            found.append(Sweep.load(path))
        except HistoryError:
            continue
    return sorted(found, key=lambda s: s.id)


def find(sweep_id: str) -> Sweep:
    """A sweep by id or unique id prefix."""
    sweeps = all_sweeps()
    matches = [s for s in sweeps if s.id == sweep_id] or [
        s for s in sweeps if s.id.startswith(sweep_id)
    ]
    if not matches:
        raise HistoryError(f"no sweep with id {sweep_id!r}")
    if len(matches) > 1:
        raise HistoryError(f"sweep id prefix {sweep_id!r} matches {len(matches)} sweeps")
    return matches[0]


def latest_unfinished(preset_name: str, history: History) -> Sweep | None:
    for sweep in reversed(all_sweeps()):
        if sweep.preset == preset_name and pending(sweep, history):
            return sweep
    return None


def records(sweep: Sweep, history: History) -> list[Run]:
    """The sweep's runs, full records, oldest first: found in the summaries, then read alone
    (never every record of the history: a run's start must not cost more at 10,000 runs)."""
    ids = [r.id for r in _summaries(sweep, history)]
    return list(history.records(ids)) if ids else []


def _summaries(sweep: Sweep, history: History) -> list[Run]:
    return history.group_summaries(sweep.id)


def finished_pairs(sweep: Sweep, history: History) -> set[tuple[str | None, int | None]]:
    return {
        (r.config, r.repeat)
        for r in _summaries(sweep, history)  # status, config and repeat are summary fields
        if r.finished
    }


def pending(sweep: Sweep, history: History) -> list[tuple[SweepConfig, int]]:
    """(configuration, repeat) pairs without a finished run, in interleaved order."""
    done = finished_pairs(sweep, history)
    return [
        (config, repeat)
        for config, repeat in presets_module.interleave(sweep.configs, sweep.repeats)
        if (config.key, repeat) not in done and config.key not in sweep.stopped
    ]


def auto_repeats_check(sweep: Sweep, config_key: str, history: History) -> str | None:
    """With ``--repeats auto``: why this configuration's repeats may stop now (its median's
    95 % CI is within the target, or the maximum has run), recorded in ``sweep.stopped`` (and the
    manifest of a preset's sweep; a batch's one configuration reports it when the batch ends);
    else None."""
    if not sweep.auto_repeats:
        return None
    mine = [r for r in _summaries(sweep, history) if r.config == config_key]  # a summary metric
    medians = [
        median
        for run in mine
        if run.finished and (median := run.figure("step_median_s")) is not None
    ]
    stop, why = auto_repeats.enough_repeats(
        medians,
        target=float(sweep.auto_repeats.get("target_ci", auto_repeats.DEFAULT_TARGET_CI)),
        max_repeats=int(sweep.auto_repeats["max"]),
    )
    if stop:
        sweep.stopped[config_key] = why
        if sweep.preset:  # a batch's one-configuration sweep has no manifest
            sweep.save()
        return why
    return None


@dataclass
class SweepOutcome:
    sweep: Sweep
    ran: list[tuple[SweepConfig, int, runner.RunResult]] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)  # config key → why its repeats stopped
    cancelled: bool = False

    @property
    def failed(self) -> list[tuple[SweepConfig, int, runner.RunResult]]:
        return [item for item in self.ran if not item[2].ok]


def replicate_spec(spec: RunSpec, repeat: int) -> RunSpec:
    """Repeat r of a configuration trains with seed + r: repeats are real replicates, so spread
    over them (accuracy above all) is a property of the configuration, not of one seed."""
    return replace(spec, seed=(spec.seed + repeat) % 2**32)


def run(
    sweep: Sweep,
    history: History,
    on_event: runner.EventCallback | None = None,
    on_start: Callable[[runner.WorkerRun], None] | None = None,
    before_run: Callable[[SweepConfig, int, int, int], None] | None = None,
    after_run: Callable[[SweepConfig, int, runner.RunResult], None] | None = None,
    options_for: Callable[[SweepConfig], dict[str, Any]] | None = None,
    should_stop: Callable[[], bool] | None = None,
    extra: dict[str, Any] | None = None,
    executor: Callable[..., runner.RunResult] | None = None,
    **worker_options: Any,
) -> SweepOutcome:
    """Run the sweep's pending (configuration, repeat) pairs; record each run in history.

    A configuration whose run fails is recorded, its remaining repeats are left for a later
    resume, and the sweep goes on. A cancelled run (Ctrl-C) ends the sweep; resume picks it up.
    ``before_run(config, repeat, index, total)`` and ``after_run`` let a front end show progress;
    ``should_stop`` is asked before each run; ``options_for`` gives per-configuration worker
    options (tests inject faults with it); ``extra`` adds fields to every record. ``executor``
    runs and records one run: ``runner.execute`` (a worker here) unless the batch runs on a
    cluster (``engine.fleet``).

    A sweep without a preset is one configuration's repeats (``engine.batch``): its runs are
    grouped by the sweep id when there is more than one, and a single run has no group."""
    outcome = SweepOutcome(sweep)
    todo = pending(sweep, history)
    grouped = bool(sweep.preset) or sweep.repeats > 1
    for index, (config, repeat) in enumerate(todo):
        if config.key in outcome.not_run or config.key in sweep.stopped:
            continue
        if should_stop is not None and should_stop():
            outcome.cancelled = True
            break
        if before_run is not None:
            before_run(config, repeat, index, len(todo))
        options = {**worker_options, **(options_for(config) if options_for else {})}
        fields: dict[str, Any] = dict(extra or {})
        if sweep.preset:
            fields.update(
                preset=sweep.preset, config=config.key, oversubscribed=config.oversubscribed
            )
        else:
            fields["config"] = config.key
        result = (executor or runner.execute)(
            replicate_spec(config.spec, repeat),
            history,
            on_event=on_event,
            on_start=on_start,
            group=sweep.id if grouped else None,
            repeat=repeat if grouped else None,
            extra=fields,
            **options,
        )
        outcome.ran.append((config, repeat, result))
        if after_run is not None:
            after_run(config, repeat, result)
        if result.status == RunStatus.CANCELLED:
            outcome.cancelled = True
            break
        if not result.ok:
            outcome.not_run[config.key] = (
                f"repeat {repeat + 1} failed ({result.reason}); its remaining repeats were not run"
            )
        else:
            auto_repeats_check(sweep, config.key, history)
    return outcome


def collect(
    tokens: list[str],
    history: History,
    *,
    last: int | None = None,
    since: dt.datetime | None = None,
) -> tuple[list[Run], list[tuple[str, str]], list[Figure]]:
    """What ``compare`` (``report``, and the TUI's compare view) works on: the records named by
    run ids, group ids, sweep ids (prefixes ok) or a preset's name (its latest sweep), oldest
    first, the configurations those sweeps skipped, and the figures their studies published.
    No tokens: the latest sweep, or with ``last``/``since`` the whole history. ``since`` keeps
    the runs started then or later, ``last`` the newest N of each configuration of
    what is left. Raises HistoryError
    for an id that matches nothing, or a selection with no run."""
    records: dict[str, Run] = {}
    skipped: list[tuple[str, str]] = []
    figures: list[Figure] = []
    every = history.all()
    if not tokens and last is None and since is None:
        sweeps = all_sweeps()
        if not sweeps:
            raise HistoryError("nothing to compare: give run ids, a group id or a sweep id")
        tokens = [sweeps[-1].id]
    if not tokens:
        records.update((r.id, r) for r in every)
    for token in tokens:
        sweep: Sweep | None
        try:
            sweep = find(token)
        except HistoryError:
            sweep = next((s for s in reversed(all_sweeps()) if s.preset == token), None)
        if sweep is not None:
            records.update((r.id, r) for r in every if r.group == sweep.id)
            skipped += sweep.skipped()
            figures += [f for f in sweep.figures() if f not in figures]
            continue
        grouped = [r for r in every if r.group == token]
        if grouped:
            records.update((r.id, r) for r in grouped)
            continue
        record = history.get(token)
        records[record.id] = record
    ordered = sorted(records.values(), key=lambda r: (r.started_text, r.id))
    if since is not None:
        ordered = [r for r in ordered if (when := r.started) is not None and when >= since]
    if last is not None:  # as `regress --last`: the newest N of each configuration
        newest = newest_per_configuration(ordered, last) if last > 0 else []
        kept = {run.id for run in newest}
        ordered = [r for r in ordered if r.id in kept]
    if not ordered and (since is not None or last is not None):
        raise HistoryError("nothing to compare: no run in that selection")
    return ordered, skipped, figures


def report_title(records: Sequence[Run]) -> tuple[str, str]:
    """(title, study) for a report on these runs: the preset and id of the first sweep they
    belong to, and its study; ("", "") for runs of no known sweep."""
    for group in dict.fromkeys(run.group for run in records if run.group):
        try:
            found = find(str(group))
        except HistoryError:
            continue
        return f"{found.preset}: {found.id}", found.study
    return "", ""
