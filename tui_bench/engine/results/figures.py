"""Figures for reports (``--figure FILE.svg|png``): the same data as the terminal tables, drawn
with matplotlib, an optional extra (``pip install 'tui-bench[figures]'``).

matplotlib is imported inside the functions: nothing else in tui-bench needs it, and the
``Figure`` object API draws without a display or a pyplot backend."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import TuiBenchError, UsageError
from tui_bench.engine.results import stats
from tui_bench.engine.results.identity import group_by_configuration, short_value, varying_fields
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.trends import Trend

FORMATS = (".svg", ".png")
INSTALL_HINT = "pip install 'tui-bench[figures]'"


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise TuiBenchError(
            f"figures need matplotlib, which is not installed: {INSTALL_HINT}", title="figure"
        ) from None
    return Figure


def _check_path(path: str | Path) -> Path:
    target = Path(path)
    if target.suffix.lower() not in FORMATS:
        raise UsageError(f"--figure {path}: the file must end in .svg or .png")
    if not target.parent.is_dir():
        raise UsageError(f"--figure {path}: the folder {target.parent} does not exist")
    return target


def _save(fig: Any, target: Path) -> Path:
    fig.tight_layout()
    fig.savefig(target, dpi=150)
    return target


def _scale(metric: str) -> tuple[float, str]:
    return (1000.0, " (ms)") if metric.endswith("_s") else (1.0, "")


def trends_figure(found: Sequence[Trend], path: str | Path) -> Path:
    """One panel per configuration: its per-run values over time, change points as dashed
    lines with the step written beside them."""
    target = _check_path(path)
    figure = _figure_class()
    shown = [t for t in found if t.points]
    if not shown:
        raise UsageError("nothing to draw: no configuration has a run with this metric")
    fig = figure(figsize=(9, 2.6 * len(shown)))
    axes = fig.subplots(len(shown), 1, squeeze=False)[:, 0]
    for ax, item in zip(axes, shown, strict=True):
        scale, unit = _scale(item.metric)
        xs = [p.when if p.when else i for i, p in enumerate(item.points)]
        ys = [p.value * scale for p in item.points]
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1)
        for change in item.change_points:
            x = xs[change.index]
            ax.axvline(x, color="tab:red", linestyle="--", linewidth=1)
            ax.annotate(
                f"{change.change * 100:+.0f} %: "
                + (", ".join(change.what_changed) or "no recorded version changed"),
                (x, max(ys)),
                xytext=(4, -10),
                textcoords="offset points",
                fontsize=7,
                color="tab:red",
            )
        ax.set_title(item.configuration.name, fontsize=9, loc="left")
        ax.set_ylabel(f"{item.metric}{unit}", fontsize=8)
        ax.tick_params(labelsize=7)
    return _save(fig, target)


def compare_figure(records: Sequence[Run | dict[str, Any]], metric: str, path: str | Path) -> Path:
    """Bars per configuration (median of per-run values, IQR as error bars); beside them, when
    the runs vary in threads, the thread-scaling lines (median against threads)."""
    target = _check_path(path)
    figure = _figure_class()
    groups = group_by_configuration(records)
    varying = varying_fields(list(groups))
    rows = []
    for config, runs in groups.items():
        values = [v for r in runs if r.finished and (v := r.metric(metric)) is not None]
        if values:
            rows.append((config, values))
    if not rows:
        raise UsageError(f"nothing to draw: no finished run has {metric}")
    scale, unit = _scale(metric)
    scaling = "threads" in varying
    fig = figure(figsize=(11 if scaling else 8, 4.5))
    axes = fig.subplots(1, 2 if scaling else 1, squeeze=False)[0]
    bars = axes[0]
    summaries = [stats.summarize(v) for _g, v in rows]
    medians = [s.median * scale for s in summaries]
    errors = [
        [(s.median - s.q1) * scale for s in summaries],
        [(s.q3 - s.median) * scale for s in summaries],
    ]
    labels = [f"{g.label}\n(n={len(v)})" for g, v in rows]
    positions = list(range(len(rows)))
    bars.bar(positions, medians, yerr=errors, capsize=3, color="tab:blue")
    bars.set_xticks(positions, labels, rotation=30, ha="right", fontsize=7)
    bars.set_ylabel(f"{metric}{unit}, median of runs (IQR bars)", fontsize=8)
    if scaling:
        lines: dict[str, list[tuple[int, float]]] = {}
        for (config, _values), summary in zip(rows, summaries, strict=True):
            others = [f for f in varying if f != "threads"]
            name = " · ".join(short_value(f, config.get(f)) for f in others) or "all"
            threads = config.get("threads")
            lines.setdefault(name, []).append(
                (threads if isinstance(threads, int) else 0, summary.median * scale)
            )
        ax = axes[1]
        for name, points in lines.items():
            points.sort()
            ax.plot([t for t, _ in points], [m for _, m in points], marker="o", label=name)
        ax.set_xlabel("threads", fontsize=8)
        ax.set_ylabel(f"{metric}{unit}", fontsize=8)
        ax.set_title("thread scaling", fontsize=9)
        ax.legend(fontsize=6)
    return _save(fig, target)
