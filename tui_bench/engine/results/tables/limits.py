"""The machine's limits: achieved FLOP/s, MFU of the measured and nominal peaks, energy per
step and memory peaks per configuration."""

from __future__ import annotations

from tui_bench.engine.machine.peaks import MFU_ABOVE_ONE
from tui_bench.engine.results.tables.groups import Group, median_of
from tui_bench.engine.results.tables.model import COUNT, FRACTION, NUMBER, Column, Table


# -- the machine's limits ------------------------------------------------------------------------
def limits_table(configs: list[Group]) -> Table | None:
    """Per configuration: achieved FLOP/s, MFU of the measured and of the nominal peak (each
    named), energy per step per device and the memory peaks (medians over finished runs); the
    note names the configuration that uses the machine best. None when no run has a FLOP count.
    A run whose MFU exceeds 1 has no MFU number (machine/peaks.py): its row says so."""
    if not any(c.values("flops_per_step") for c in configs):
        return None
    table = Table(
        "limits",
        "machine use: per configuration (model FLOPs against this machine's peaks)",
        (
            Column("configuration"),
            Column("n", COUNT),
            Column("GFLOP/s", NUMBER, "GFLOP/s"),
            Column("MFU", FRACTION),
            Column("MFU nominal", FRACTION),
            Column("peak RSS MiB", NUMBER, "MiB"),
            Column("notes"),
            Column("measured peak", terminal=False),
            Column("nominal peak", terminal=False),
            Column("CPU J/step", NUMBER, "J", terminal=False),
            Column("GPU J/step", NUMBER, "J", terminal=False),
            Column("allocator peak MiB", NUMBER, "MiB", terminal=False),
        ),
    )
    for c in configs:
        runs = c.finished()
        achieved = median_of(c.values("achieved_tflops"))
        mfu, nominal = median_of(c.values("mfu")), median_of(c.values("mfu_nominal"))
        wrong = sum(r.metric_text("mfu_error") == MFU_ABOVE_ONE for r in runs)
        why = next((r.metric_text("mfu_error") for r in runs if r.metric_text("mfu_error")), None)
        notes = [f"{wrong} run(s): {MFU_ABOVE_ONE}" if wrong else (why if mfu is None else "")]
        table.add(
            [
                c.label,
                len(runs),
                achieved * 1000 if achieved is not None else None,
                mfu,
                nominal,
                median_of(c.values("res_peak_rss_mib")),
                "; ".join(n for n in notes if n),
                next((r.metric_text("mfu_peak") for r in runs if r.metric_text("mfu_peak")), None),
                next(
                    (t for r in runs if (t := r.metric_text("mfu_nominal_peak"))),
                    None,
                ),
                median_of(c.values("cpu_joules_per_step")),
                median_of(c.values("gpu_joules_per_step")),
                median_of(c.values("allocator_peak_mib")),
            ],
            [(c.label, c.verdicts())],
        )
    # The best by the measured peak where any configuration has one, else by the nominal one.
    for key, kind in (("mfu", "measured"), ("mfu_nominal", "nominal")):
        ranked = [(m, c.label) for c in configs if (m := median_of(c.values(key))) is not None]
        if ranked:
            if len(configs) > 1:
                value, label = max(ranked)
                table.note = f"uses the machine best: {label} (median MFU {value:.1%} of the "
                table.note += f"{kind} peak). "
            break
    for device in ("GPU", "CPU"):
        key = f"{device.lower()}_energy_problem"
        unread = {t for c in configs for r in c.finished() if (t := r.metric_text(key))}
        if unread:
            table.note += f"{device} energy not read: {'; '.join(sorted(unread))}. "
    table.note += (
        "MFU = model FLOPs of a step (engine/flops.py) / steady median step / peak "
        "(engine/machine/peaks.py); energy is device-level (whole CPU package / GPU board)"
    )
    return table
