"""Figures for reports (``--figure FILE.svg|png``): the same data as the terminal tables, drawn
with matplotlib, an optional extra (``pip install 'tui-bench[figures]'``).

matplotlib is imported inside the functions: nothing else in tui-bench needs it, and the
``Figure`` object API draws without a display or a pyplot backend."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import TuiBenchError, UsageError
from tui_bench.engine.results import metrics, stats, verdict
from tui_bench.engine.results.identity import group_by_configuration, short_value, varying_fields
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.tables import CURVE
from tui_bench.engine.results.tables import comparisons as C
from tui_bench.engine.results.tables import scaling as SC
from tui_bench.engine.results.tables import serving as SV
from tui_bench.engine.results.tables import summary as S
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
    # times in ms (a step's 0.05 s reads 50 ms); the unit is the registry's
    return (1000.0, " (ms)") if metrics.get(metric).unit == "s" else (1.0, "")


def trends_figure(found: Sequence[Trend], path: str | Path) -> Path:
    """One panel per configuration: its per-run values over time, change points as dashed
    lines with the step written beside them."""
    target = _check_path(path)
    shown = [t for t in found if t.points]
    if not shown:
        raise UsageError("nothing to draw: no configuration has a run with this metric")
    return _save(_draw_trends(_figure_class(), shown), target)


def _draw_trends(figure: Any, shown: Sequence[Trend]) -> Any:
    fig = figure(figsize=(9, 2.6 * len(shown)))
    axes = fig.subplots(len(shown), 1, squeeze=False)[:, 0]
    for ax, item in zip(axes, shown, strict=True):
        scale, unit = _scale(item.metric)
        dated = all(p.when for p in item.points)  # one run without a date: run numbers
        xs = [p.when for p in item.points] if dated else list(range(len(item.points)))
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
        if dated:
            from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

            locator = AutoDateLocator(maxticks=8)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
            ax.xaxis.get_offset_text().set_fontsize(7)
        ax.set_title(item.configuration.name, fontsize=9, loc="left")
        ax.set_ylabel(f"{item.metric}{unit}", fontsize=8)
        ax.tick_params(labelsize=7)
    return fig


def compare_figure(records: Sequence[Run], metric: str, path: str | Path) -> Path:
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


# -- the HTML report's figures: drawn from the computed tables, returned as SVG text -----------------
MAX_TREND_PANELS = 12  # the report's trend figure: the configurations with the most runs
VERDICT_COLOURS = {"stable": "tab:blue", "noisy": "tab:orange", "unreliable": "tab:red"}
MIN_TREND_POINTS = 3  # fewer runs make no trend worth a panel (the table still lists them)


def _svg_text(fig: Any) -> str:
    """The figure as SVG text that follows the page's colours: text and axes are drawn in
    ``currentColor`` (black in a light page, light grey in a dark one) on a transparent
    background; text stays text (``svg.fonttype: none``), which keeps a report small."""
    import io

    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "tui-bench"}):
        fig.tight_layout()
        fig.savefig(buffer, format="svg", transparent=True, metadata={"Date": None})
    return buffer.getvalue().replace("#000000", "currentColor")


def _table(found: Sequence[Any], name: str) -> Any:
    return next((t for t in found if t.name == name), None)


def _distributions(figure: Any, page: Any) -> tuple[str, Any] | None:
    """Per configuration: the summary's median, quartiles and range as a box, each run's own
    value as a dot (the run is the unit of repetition)."""
    summary = _table(page.tables, "summary")
    rows = [r for r in summary.rows if summary.number(r, S.MEDIAN) is not None] if summary else []
    if not rows:
        return None
    scale, unit = _scale(page.metric)
    values: dict[str, list[tuple[float, str | None]]] = {}  # each run: value, its verdict
    for run in page.records:
        value = run.metric(page.metric)
        name = page.labels.get(run.id)
        if value is not None and name is not None and run.finished:
            values.setdefault(name, []).append((value * scale, run.verdict))

    def at(r: Any, column: Any) -> float:  # a spread's end, or the median where it has none
        found = summary.number(r, column)
        if found is None:
            found = summary.number(r, S.MEDIAN) or 0.0
        return found * scale

    boxes: list[dict[str, Any]] = [
        {
            "label": f"{summary.text(r, S.CONFIGURATION)} (n={summary.cell(r, S.N)})",
            "med": at(r, S.MEDIAN),
            "q1": at(r, S.Q1),
            "q3": at(r, S.Q3),
            "whislo": at(r, S.MIN),
            "whishi": at(r, S.MAX),
            "fliers": [],
        }
        for r in rows
    ]
    fig = figure(figsize=(9, 0.9 + 0.45 * len(rows)))
    ax = fig.subplots()
    ax.bxp(boxes, orientation="horizontal", showfliers=False, medianprops={"color": "black"})
    for y, r in enumerate(rows, 1):
        for x, judged in values.get(summary.text(r, S.CONFIGURATION), []):
            colour = VERDICT_COLOURS.get(judged or "", "tab:gray")
            ax.plot([x], [y], "o", color=colour, markersize=4, alpha=0.8)
    ax.invert_yaxis()
    low = min(b["whislo"] for b in boxes)
    if low > 0 and max(b["whishi"] for b in boxes) / low > 20:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")  # 26 ms beside 11 s: on a linear axis the small ones vanish
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_xlabel(
        f"{page.metric}{unit}: box = IQR, line = median, whiskers = min–max; dot = a run: "
        "blue stable, orange noisy, red unreliable, grey not judged",
        fontsize=8,
    )
    ax.tick_params(labelsize=7)
    return f"{page.metric} per configuration: each run and the summary's median, IQR and range", fig


def _speedups(figure: Any, page: Any) -> tuple[str, Any] | None:
    """The ratios table's speed-ups against each baseline; a difference inside the noise (no
    speed-up in the table) is a hollow mark at 1."""
    compared = _table(page.tables, "comparisons")
    # each row with whether its answer is established: the verdict's one rule (``verdict``),
    # so a bar is solid exactly where the verdict's sentence states the answer
    answered = [
        (r, verdict.established(compared.number(r, C.P), verdict.row_state(r.verdicts)))
        for r in (compared.rows if compared is not None else [])
        if compared.number(r, C.RATIO_OF_MEDIANS) is not None
    ]
    if not answered:
        return None
    rows = [r for r, _ in answered]
    speedups = [compared.number(r, C.SPEEDUP) for r in rows]
    fig = figure(figsize=(9, 0.9 + 0.4 * len(rows)))
    ax = fig.subplots()
    labels = []
    for y, ((r, established), speedup) in enumerate(zip(answered, speedups, strict=True)):
        where = compared.text(r, C.WITH)
        context = f" ({where})" if where not in ("", "—") else ""
        labels.append(
            f"{compared.text(r, C.CONFIGURATION)} vs {compared.text(r, C.BASELINE)}{context}"
        )
        if speedup is None:
            ax.plot([1.0], [y], "o", markerfacecolor="none", color="tab:gray")
            continue
        # a ratio: on a log axis from 1, so 2× faster and 2× slower are bars of one length
        ax.barh(
            [y],
            [speedup - 1],
            left=1,
            color="tab:green" if speedup >= 1 else "tab:red",
            alpha=1.0 if established else 0.45,
            hatch=None if established else "//",
        )
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    reach = max([abs(math.log(v)) for v in speedups if v] + [math.log(2)])
    ax.set_xlim(math.exp(-reach) / 1.2, math.exp(reach) * 1.2)  # 1 in the middle
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(
        "speed-up against the baseline (log scale; right of 1: faster)\nhatched: not "
        "established (no test, not significant, or runs not all judged stable); hollow: within "
        "the noise",
        fontsize=8,
    )
    ax.tick_params(axis="x", labelsize=7)
    return "speed-ups from the ratios table (1 = as fast as the baseline)", fig


def _scaling(figure: Any, page: Any) -> tuple[str, Any] | None:
    """Speed-up against threads (and workers) per family, with the ideal line."""
    panels = [
        (found, x_column)
        for name, x_column in (("scaling", SC.THREADS), ("workers", SC.WORKERS))
        if (found := _table(page.tables, name)) is not None and found.rows
    ]
    if not panels:
        return None
    fig = figure(figsize=(9, 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (found, x_column) in zip(axes, panels, strict=True):
        lines: dict[str, list[tuple[float, float]]] = {}
        for r in found.rows:
            x, y = found.number(r, x_column), found.number(r, SC.SPEEDUP)
            if y is None and found.has(SC.VS_FEWEST) and found.text(r, SC.VS_FEWEST) == "baseline":
                y = 1.0
            if x is not None and y is not None:
                kind = found.text(r, SC.SCALING) if found.has(SC.SCALING) else ""
                key = (found.text(r, SC.WITH) or "—") + (f" {kind}" if kind else "")
                lines.setdefault(key, []).append((x, y))
        top = 1.0
        for key, points in lines.items():
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=key)
            top = max(top, max(p[0] / points[0][0] for p in points))
        ax.plot([1, top], [1, top], linestyle=":", color="tab:gray", label="ideal")
        ax.set_xlabel(x_column.name, fontsize=8)
        ax.set_ylabel("speed-up over the fewest", fontsize=8)
        ax.legend(fontsize=7, frameon=False)  # no white box: the page may be dark
        ax.tick_params(labelsize=7)
    return "scaling from the scaling tables (dotted: perfect scaling)", fig


def _two_and_five(value: float, _pos: object = None) -> str:
    """A log axis's minor tick labelled at 2 and 5 of its decade (0.2, 5, 2000), else blank:
    every minor tick labelled overlaps."""
    if value <= 0:
        return ""
    lead = round(value / 10 ** math.floor(math.log10(value)))
    return f"{value:g}" if lead in (2, 5) else ""


_TAB20 = [
    f"tab:{c}"
    for c in ("blue", "orange", "green", "red", "purple", "brown", "pink", "gray", "olive", "cyan")
] + [
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
]  # matplotlib's tab20 in two rounds of ten: the strong ten, then their light partners
_MARKERS = ("o", "s", "^", "D", "v", "P")


def _batch_curves(figure: Any, page: Any) -> tuple[str, Any] | None:
    """From the batch-size table: latency against batch (p50 a line, p90 and p99 dashed and
    dotted in the same colour) and inference samples/s against batch, one colour per family
    (framework × API and whatever else differs), both axes logarithmic."""
    curve = _table(page.tables, "batches")
    lines: dict[str, list[Any]] = {}
    for r in curve.rows if curve is not None else []:
        if curve.number(r, SV.BATCH) is not None:
            lines.setdefault(curve.text(r, SV.WITH) or "—", []).append(r)
    if not any(len(points) > 1 for points in lines.values()):
        return None
    from matplotlib.ticker import FuncFormatter

    p50, p90, p99, rate = (metrics.get(key) for key in CURVE)
    # One legend under both panels, three names a row: a sweep of every framework × API and two
    # models is 30 curves, which a legend inside a panel would cover. Twenty colours, then a
    # marker per round of them, so no two curves look alike.
    rows = math.ceil(len(lines) / 3)
    fig = figure(figsize=(9, 3.4 + 0.17 * rows))
    grid = fig.add_gridspec(2, 2, height_ratios=[3.2, 0.17 * rows + 0.1])
    latency, throughput = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    key = fig.add_subplot(grid[1, :])  # the legend's own room, which tight_layout keeps clear
    palette = [f"C{i}" for i in range(10)] if len(lines) <= 10 else _TAB20
    for index, (name, points) in enumerate(lines.items()):
        colour = palette[index % len(palette)]
        marker = _MARKERS[(index // len(palette)) % len(_MARKERS)]

        def ys(key: str, scale: float, points: list = points) -> tuple[list, list]:
            column = SV.curve_column(key)
            kept = [
                (curve.number(r, SV.BATCH), v * scale)
                for r in points
                if (v := curve.number(r, column))
            ]
            return [x for x, _ in kept], [y for _, y in kept]

        latency.plot(*ys(p50.key, p50.scale), marker=marker, color=colour, label=name)
        latency.plot(*ys(p90.key, p90.scale), linestyle="--", color=colour, linewidth=0.9)
        latency.plot(*ys(p99.key, p99.scale), linestyle=":", color=colour, linewidth=0.9)
        throughput.plot(*ys(rate.key, 1.0), marker=marker, color=colour)
    for ax, label in (
        (latency, "latency per request (ms)"),
        (throughput, "inference samples/s (higher is better)"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))  # not 10³
        ax.yaxis.set_minor_formatter(FuncFormatter(_two_and_five))
        ax.set_xlabel("batch size (samples per request)", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(which="both", labelsize=7)
    latency.set_title("p50 solid, p90 dashed, p99 dotted", fontsize=8)
    throughput.set_title("samples/s at each batch", fontsize=8)
    key.axis("off")
    key.legend(
        *latency.get_legend_handles_labels(),
        loc="upper center",
        ncol=3,
        fontsize=7,
        frameon=False,  # no white box: the page may be dark
    )
    return (
        "inference over batch sizes from the batch-size table: latency and samples/s per family "
        "(median over repeats)",
        fig,
    )


def _trends_panels(figure: Any, page: Any) -> tuple[str, Any] | None:
    shown = sorted(
        (t for t in page.trends if len(t.points) >= MIN_TREND_POINTS),
        key=lambda t: -len(t.points),
    )[:MAX_TREND_PANELS]
    if not shown:
        return None
    left = len([t for t in page.trends if len(t.points) >= MIN_TREND_POINTS]) - len(shown)
    more = f"; {left} more configuration(s) in the trends table" if left > 0 else ""
    title = (
        f"each configuration over history, change points dashed (≥ {MIN_TREND_POINTS} runs{more})"
    )
    return title, _draw_trends(figure, shown)


def report_svgs(page: Any) -> list[tuple[str, str]]:
    """The HTML report's figures as (title, SVG text), drawn from ``page``'s computed tables,
    its runs' own values and its trends (``html_report.Page``)."""
    figure = _figure_class()
    out = []
    for draw in (_distributions, _speedups, _scaling, _batch_curves, _trends_panels):
        drawn = draw(figure, page)
        if drawn is not None:
            title, fig = drawn
            out.append((title, _svg_text(fig)))
    return out
