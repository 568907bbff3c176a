"""What the command modules share: consoles and error lines, and the tables several commands
print. The rest lives by concern: ``help`` (the examples), ``spec_flags`` (the run flags and
what they make), ``following`` (starting and following a batch, Ctrl-C). Command modules import
these, never each other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tui_bench.engine.errors import PresetError
from tui_bench.engine.errors import UsageError as UsageError  # the commands raise it from here
from tui_bench.engine.results.record import Run, runs_of

if TYPE_CHECKING:  # imported where used: `history list` at 10,000 runs must start in < 0.5 s
    from rich.console import Console
    from rich.table import Table

    from tui_bench.engine.runs import presets


def one_line(message: object) -> str:
    """The message with control characters (a newline or a terminal escape typed into an
    argument) shown escaped: an error stays one line and cannot restyle the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(message))


def error_line(message: object) -> str:
    """What every error looks like on stderr."""
    return f"tui-bench: error: {one_line(message)}"


def load_preset(name_or_path: str) -> presets.Preset:
    """A preset by name or path; a wrong one is a UsageError (one line, exit 2)."""
    from tui_bench.engine.runs import presets  # the whole catalog: only commands that need it

    try:
        return presets.load(presets.find(name_or_path))
    except PresetError as exc:
        raise UsageError(str(exc)) from None


def console(stderr: bool = False) -> Console:
    # NO_COLOR is honoured by rich itself.
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


# -- tables -------------------------------------------------------------------------------------
def fmt(value: Any, scale: float = 1.0, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "—"
    return f"{value * scale:.{digits}f}{suffix}"


SUMMARY_ROWS: list[tuple[str, str, float, int, str]] = [
    # (label, metric key, scale, digits, what it means)
    ("train s", "train_wall_s", 1, 2, "wall time of all training steps, warm-up included"),
    (
        "warm-up s",
        "warmup_s",
        1,
        2,
        "warm-up steps (tracing, compilation), kept out of steady state",
    ),
    ("first step s", "first_step_s", 1, 3, ""),
    ("step ms median", "step_median_s", 1000, 1, "steady state, device-synchronised"),
    ("step ms IQR", "step_iqr_s", 1000, 1, ""),
    ("samples/s", "samples_per_s", 1, 0, "steady state"),
    ("val accuracy", "val_accuracy", 1, 4, "last epoch"),
    ("test s", "test_s", 1, 2, "inference over the test set"),
    ("test accuracy", "test_accuracy", 1, 4, ""),
    ("threads", "threads_effective", 1, 0, "read back from the framework"),
    ("cores observed", "cores_observed", 1, 1, "steady-state CPU use of the worker (sampler)"),
    ("busy threads", "busy_threads_observed", 1, 1, "OS threads busy ≥ half the time (sampler)"),
    ("parameters", "param_count", 1, 0, "trainable"),
    ("peak RSS MiB", "res_peak_rss_mib", 1, 0, "worker process tree"),
    ("CPU %", "res_mean_cpu_pct", 1, 0, "mean; 100 % = one core"),
    ("GPU util %", "res_mean_gpu_util", 1, 0, "mean"),
    ("GPU mem MiB", "res_peak_gpu_mem_mib", 1, 0, "peak, device-wide (NVML)"),
    ("allocator MiB", "allocator_peak_mib", 1, 0, "peak of the framework's own allocator"),
    ("energy J", "res_energy_j", 1, 0, "GPU, whole process"),
    ("steady energy J", "res_steady_energy_j", 1, 0, "GPU, steady-state windows (NVML counter)"),
    ("samples/J", "samples_per_joule", 1, 1, "steady samples / steady energy"),
    ("GFLOP/step", "flops_per_step", 1e-9, 3, "model FLOPs of a training step (engine/flops.py)"),
    ("GFLOP/s", "achieved_tflops", 1000, 2, "steady-state median step"),
    ("MFU %", "mfu", 100, 1, "of the measured matmul peak"),
    ("MFU % nominal", "mfu_nominal", 100, 1, "of the vendor / ISA peak"),
    ("CPU J/step", "cpu_joules_per_step", 1, 3, "CPU package, RAPL, device-level"),
    ("GPU J/step", "gpu_joules_per_step", 1, 3, "GPU board, NVML, device-level"),
]


# The fairness card's settings a single run's table shows above its numbers.
SHOWN_SETTINGS = (
    "precision",
    "compilation",
    "attention kernel",
    "initial weights",
    "input path",
    "timing mode",
)


def summary_table(records: Sequence[Run | dict[str, Any]]) -> Table:
    """Metrics as rows, runs as columns: stays readable at 80 columns."""
    from rich.markup import escape
    from rich.table import Table

    from tui_bench.engine.machine.peaks import MFU_ABOVE_ONE

    runs = runs_of(records)
    table = Table(title="tui-bench results", title_justify="left")
    table.add_column("metric")
    for r in runs:
        spec = r.spec
        table.add_column(f"{r.id}\n{spec.get('framework')}/{spec.get('api')}", justify="right")
    table.add_row("status", *(r.status if r.finished else f"[red]{r.status}[/red]" for r in runs))
    # The settings that decide the numbers below, read as the fairness card reads them.
    from tui_bench.engine.results import tables  # only where a table is shown: a heavy import

    readers = dict(tables.FAIRNESS_SETTINGS)
    for label in SHOWN_SETTINGS:
        values = [readers[label](r) for r in runs]
        if any(v is not None for v in values):
            table.add_row(label, *(escape(tables.setting_text(v)) for v in values))
    # An emulated bf16 number is not a bf16 number: said beside it, not only in a comparison.
    bf16_notes = [r.settings.get("bf16_note") for r in runs]
    if any(bf16_notes):
        table.add_row("bf16", *(f"[yellow]{escape(str(n))}[/]" if n else "—" for n in bf16_notes))
    for label, key, scale, digits, _meaning in SUMMARY_ROWS:
        values = [r.metric(key) for r in runs]
        # an MFU above 1 is a wrong count or peak: its limits line says so, never a number
        wrong = [r.metric_text(f"{key}_error") == MFU_ABOVE_ONE for r in runs]
        if all(v is None for v in values) and not any(wrong):
            continue
        table.add_row(
            label,
            *(
                "[red]error[/red]"
                if bad
                else fmt(v, scale, digits)
                if key != "param_count" or v is None
                else f"{v:,.0f}"
                for v, bad in zip(values, wrong, strict=True)
            ),
        )
    notes = [
        f"{label}: {meaning}"
        for label, key, _s, _d, meaning in SUMMARY_ROWS
        if meaning and any(r.metric(key) is not None for r in runs)
    ]
    table.caption = "; ".join(notes)
    return table
