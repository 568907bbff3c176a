"""plotext plots (through textual-plotext). Data is downsampled to the widget's width before
plotting: plotext's cost grows with the number of points (~89 ms at 10k), the screen's does not."""

from __future__ import annotations

import math
from dataclasses import dataclass

from textual_plotext import PlotextPlot

from tui_bench.engine.results.stats import quantile


def downsample(values: list[float | None], width: int) -> tuple[list[float], list[float]]:
    """At most ``width`` points: bucket means, x at each bucket's centre (1-based step numbers).

    Missing values (a diverged loss travels as null) are skipped."""
    points = [(i + 1, v) for i, v in enumerate(values) if v is not None]
    if width <= 0 or not points:
        return [], []
    if len(points) <= width:
        return [float(x) for x, _ in points], [float(y) for _, y in points]
    xs: list[float] = []
    ys: list[float] = []
    size = len(points) / width
    for bucket in range(width):
        chunk = points[int(bucket * size) : max(int((bucket + 1) * size), int(bucket * size) + 1)]
        xs.append(sum(x for x, _ in chunk) / len(chunk))
        ys.append(sum(y for _, y in chunk) / len(chunk))
    return xs, ys


class LossPlot(PlotextPlot):
    """Training loss per step, all epochs of the run."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.losses: list[float | None] = []

    def set_losses(self, losses: list[float | None]) -> None:
        self.losses = losses
        self.replot()

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("training loss per step")
        plt.xlabel("step")
        width = max(self.size.width - 10, 10)  # minus the y-axis labels
        xs, ys = downsample(self.losses, width)
        if xs:
            plt.plot(xs, ys, marker="braille")
        self.refresh()


class BarPlot(PlotextPlot):
    """Labelled bars: epoch times on Live, run times on Compare."""

    def __init__(self, title: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.labels: list[str] = []
        self.values: list[float] = []

    def set_bars(self, labels: list[str], values: list[float], title: str | None = None) -> None:
        self.labels, self.values = labels, values
        if title is not None:
            self.title = title
        self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.title)
        if self.values:
            # More bars than columns cannot be drawn: keep the newest that fit.
            keep = max((self.size.width or 80) // 4, 1)
            plt.bar(self.labels[-keep:], self.values[-keep:], width=0.6)
        self.refresh()


class LinePlot(PlotextPlot):
    """y against x with points marked: thread scaling on Compare."""

    def __init__(self, title: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title

    def set_line(self, xs: list[float], ys: list[float], xlabel: str, ylabel: str) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.title)
        plt.xlabel(xlabel)
        plt.ylabel(ylabel)
        if xs:
            plt.plot(xs, ys, marker="dot")
            plt.scatter(xs, ys, marker="●")
            plt.xticks(xs)
        self.refresh()


# -- an inference run: its latency distribution and its request rate -------------------------
PERCENTILES = (("p50", 0.5, "green"), ("p90", 0.9, "orange"), ("p99", 0.99, "red"))


@dataclass(frozen=True)
class LatencyBins:
    """A histogram of latencies (milliseconds) on a log scale, and the percentiles on it.

    Bin i spans low·ratio^i to low·ratio^(i+1); x positions are in bins (0 = the fastest
    request, ``len(counts)`` = the slowest), so a tail ten times the median takes its share of
    the width instead of squeezing the body into one column, as HdrHistogram-style latency
    plots do."""

    counts: list[int]
    low: float  # ms, the fastest request
    high: float  # ms, the slowest
    marks: list[tuple[str, float]]  # ("p50", ms), ...
    n: int

    def position(self, ms: float) -> float:
        """Where ``ms`` falls on the x axis (in bins)."""
        if self.high <= self.low:
            return 0.5
        return len(self.counts) * math.log(ms / self.low) / math.log(self.high / self.low)


def latency_bins(latencies_s: list[float], bins: int) -> LatencyBins | None:
    """``bins`` log-spaced bins from the fastest request to the slowest; the percentiles
    interpolate linearly (``stats.quantile``, numpy's default, as the worker's do)."""
    ordered = sorted(v * 1000 for v in latencies_s if v > 0)
    if not ordered or bins <= 0:
        return None
    marks = [(name, quantile(ordered, q)) for name, q, _ in PERCENTILES]
    found = LatencyBins([0] * bins, ordered[0], ordered[-1], marks, len(ordered))
    for value in ordered:
        found.counts[min(int(found.position(value)), bins - 1)] += 1
    return found


def request_rates(latencies_s: list[float], width: int) -> tuple[list[float], list[float]]:
    """Requests/s along the run: the timed requests in at most ``width`` consecutive buckets,
    each bucket's rate 1 ÷ its mean latency (the summary's rule, requests ÷ their summed
    latency, per bucket)."""
    xs, means = downsample(list(latencies_s), width)
    return xs, [1.0 / m if m > 0 else 0.0 for m in means]


class _ServedPlot(PlotextPlot):
    """A plot of an inference run's timed requests (seconds, in order), drawn again whenever
    they or the widget's size change."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.latencies: list[float] = []

    def set_latencies(self, latencies: list[float]) -> None:
        self.latencies = latencies
        self.replot()

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        raise NotImplementedError


class LatencyPlot(_ServedPlot):
    """An inference run's latency histogram as it forms, p50/p90/p99 marked."""

    # Shown instead of the loss plot, in its place (RunView shows it for an inference run).
    DEFAULT_CSS = "LatencyPlot { width: 2fr; display: none; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.binned: LatencyBins | None = None

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        bins = max(min((self.size.width or 60) - 8, 60), 8)  # minus the y-axis labels
        self.binned = found = latency_bins(self.latencies, bins)
        if found is None:
            plt.title("latency ms (log scale): waiting for the first timed requests")
            self.refresh()
            return
        # The percentiles' values in the title: three labels do not fit under the axis.
        plt.title("ms, log: " + " ".join(f"{name} {ms:.3g}" for name, ms in found.marks))
        plt.bar([i + 0.5 for i in range(bins)], found.counts, width=1.0, marker="sd")
        for (_name, ms), (_, _, color) in zip(found.marks, PERCENTILES, strict=True):
            plt.vline(found.position(ms), color)
        ticks = [0.0, found.position(found.marks[0][1]), float(bins)]
        labels = [f"{found.low:.3g}", f"{found.marks[0][1]:.3g}", f"{found.high:.3g}"]
        if ticks[1] - ticks[0] < 6 or ticks[2] - ticks[1] < 6:  # p50's label would overlap
            ticks, labels = ticks[::2], labels[::2]
        plt.xticks(ticks, labels)
        plt.yticks(*_count_ticks(max(found.counts)))
        self.refresh()


def _count_ticks(top: int) -> tuple[list[float], list[str]]:
    """Whole-number ticks for a histogram's counts (plotext would label 23.3 requests)."""
    ticks = sorted({0, top // 2, top})
    return [float(t) for t in ticks], [str(t) for t in ticks]


class RatePlot(_ServedPlot):
    """An inference run's request rate along its timed requests."""

    DEFAULT_CSS = "RatePlot { width: 1fr; display: none; }"

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("requests/s")  # per bucket: 1 ÷ its mean latency
        width = max(self.size.width - 10, 10)
        xs, ys = request_rates(self.latencies, width)
        if xs:
            plt.plot(xs, ys, marker="braille")
        self.refresh()


class TokenTimesPlot(LatencyPlot):
    """A generation run's time per output token (TPOT) as a histogram as it forms, p50/p90/p99
    marked, its time to the first token (TTFT) p50 and p99 in the title: the inference
    histogram's rule, over a generation request's own two times (docs/generation.md)."""

    DEFAULT_CSS = "TokenTimesPlot { width: 2fr; display: none; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.ttfts: list[float] = []

    def set_times(self, ttfts: list[float], tpots: list[float]) -> None:
        self.ttfts = ttfts
        self.set_latencies(tpots)

    def replot(self) -> None:
        super().replot()
        found = self.binned
        if found is None:
            self.plt.title("TPOT ms (log scale): waiting for the first timed requests")
            self.refresh()
            return
        # At 80 columns the plot is about 45 wide: p50/p99 of each, in one short title.
        marks = dict(found.marks)
        title = f"ms p50/p99: TPOT {marks['p50']:.3g}/{marks['p99']:.3g}"
        if self.ttfts:
            ordered = sorted(t * 1000 for t in self.ttfts)
            title += f" TTFT {quantile(ordered, 0.5):.3g}/{quantile(ordered, 0.99):.3g}"
        self.plt.title(title)
        self.refresh()


def decode_rates(tpots_s: list[float], batch: int, width: int) -> tuple[list[float], list[float]]:
    """Decode tokens/s along the run: the timed requests' TPOTs in at most ``width`` consecutive
    buckets, each bucket's rate batch ÷ its mean TPOT (the summary's rule, batch × (N − 1) ×
    requests ÷ their summed E2E − TTFT, per bucket: every request has the same N)."""
    xs, means = downsample(list(tpots_s), width)
    return xs, [batch / m if m > 0 else 0.0 for m in means]


class DecodeRatePlot(_ServedPlot):
    """A generation run's decode tokens/s along its timed requests."""

    DEFAULT_CSS = "DecodeRatePlot { width: 1fr; display: none; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.batch = 1

    def set_tpots(self, tpots: list[float], batch: int) -> None:
        self.batch = max(batch, 1)
        self.set_latencies(tpots)

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("decode tokens/s")
        width = max(self.size.width - 10, 10)
        xs, ys = decode_rates(self.latencies, self.batch, width)
        if xs:
            plt.plot(xs, ys, marker="braille")
        self.refresh()
