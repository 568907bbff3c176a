"""Presets as the TUI uses them, all through ``tui_bench.engine.runs.presets`` (one implementation):
list, load and expand a preset, tell a single run (loads into the form) from a sweep (runs through
``engine.sweep``), and save the form as a single-run preset. Plain values and functions, no
Textual: the app's side of opening a preset is ``tui.app_presets.PresetFlow``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tui_bench.engine.runs import presets
from tui_bench.engine.runs.presets import Preset, SweepConfig
from tui_bench.engine.spec import RunSpec


@dataclass
class LoadedPreset:
    preset: Preset
    configs: list[SweepConfig]  # in sweep order, each with its skip reason on this machine

    @property
    def is_single(self) -> bool:
        """One configuration: it goes into the Setup form (its repeats in the form's field)."""
        return len(self.configs) == 1

    @property
    def runnable(self) -> list[SweepConfig]:
        return [c for c in self.configs if c.skip_reason is None]

    def skipped(self) -> list[tuple[str, str]]:
        return [(c.key, c.skip_reason) for c in self.configs if c.skip_reason]

    def summary(self) -> str:
        """What running it means, for the confirmation dialog."""
        p = self.preset
        runs = len(self.runnable) * p.repeats
        lines = [p.study or p.description] if (p.study or p.description) else []
        lines.append(
            f"{len(self.configs)} configuration(s) × {p.repeats} repeat(s): {len(self.runnable)} "
            f"can run here, {runs} run(s), interleaved"
        )
        lines += [f"skipped {n}× {reason}" for reason, n in grouped_reasons(self.skipped())]
        return "\n".join(lines)


def grouped_reasons(skipped: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """(reason, how many configurations) in first-seen order: 8 skips for one missing runtime
    read as one line."""
    counts: dict[str, int] = {}
    for _key, reason in skipped:
        counts[reason] = counts.get(reason, 0) + 1
    return list(counts.items())


def list_presets() -> dict[str, Path]:
    """Preset name → file, shipped and the user's own (user ones shadow shipped ones)."""
    return presets.preset_files()


def preset_summaries() -> list[tuple[str, Path, str]]:
    """(name, file, one line: its study, description, or why it does not load) per preset."""
    out = []
    for name, path in list_presets().items():
        try:
            preset = presets.load(path)
            kind = "sweep" if preset.axes or preset.matrices else "single run"
            line = f"{kind}: {(preset.study or preset.description or preset.shown_path).strip()}"
        except presets.PresetError as exc:
            line = f"does not load: {exc}"
        out.append((name, path, line.splitlines()[0] if line else ""))
    return out


def load(name_or_path: str | Path) -> LoadedPreset:
    """Raises PresetError (one line) for a missing or wrong preset. Single runs are checked
    against the catalog only (the form shows the runtime); sweeps also against this machine."""
    preset = presets.load(presets.find(str(name_or_path)))
    configs = presets.expand(preset, probe=None)
    if len(configs) > 1:
        configs = presets.expand(preset, probe=presets.availability_problem)
    return LoadedPreset(preset, configs)


def threads_sweep(spec: RunSpec, thread_counts: list[int]) -> Preset:
    """The Setup form's 'threads: sweep' as a preset, so it runs (and resumes) like any sweep."""
    fixed = {k: v for k, v in spec.to_dict().items() if v is not None}
    fixed.pop("threads", None)
    repeats = fixed.pop("repeats", 1)
    return Preset(
        name="setup-threads-sweep",
        description=f"{spec.label()} at {', '.join(map(str, thread_counts))} thread(s)",
        study="",
        path=Path("<setup form>"),
        fixed=fixed,
        axes={"threads": list(thread_counts)},
        matrices=[],
        repeats=repeats,
    )


def save_preset(spec: RunSpec, path: Path) -> Path:
    """The form as a single-run preset TOML (plain RunSpec fields: ``engine.presets`` loads it)."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.to_toml(), encoding="utf-8")
    return path


def default_preset_path(spec: RunSpec) -> Path:
    name = re.sub(
        r"[^A-Za-z0-9._-]+", "-", f"{spec.framework}-{spec.api}-{spec.model}-{spec.dataset}"
    )
    return presets.user_dir() / f"{name}.toml"
