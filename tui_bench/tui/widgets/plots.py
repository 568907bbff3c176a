"""plotext plots (through textual-plotext). Data is downsampled to the widget's width before
plotting: plotext's cost grows with the number of points (~89 ms at 10k), the screen's does not."""

from __future__ import annotations

from textual_plotext import PlotextPlot


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
