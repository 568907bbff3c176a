"""--figure on `history trends` and `compare`: real files from the same data as the tables."""

from __future__ import annotations

import sys

from conftest import require_module

from tests.histories import as_runs, fill, record
from tests.test_trends import noisy
from tui_bench.cli import main


def stepped():
    runs = [record(i, v) for i, v in enumerate(noisy(10, 40.0))]
    runs += [record(10 + i, v, version="2.13.0") for i, v in enumerate(noisy(5, 48.0, seed=5))]
    return runs


def test_missing_matplotlib_is_one_line_with_the_install_hint(tmp_path, monkeypatch, capsys):
    fill(stepped())
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails as if absent
    assert main(["history", "trends", "--figure", str(tmp_path / "t.svg")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'tui-bench[figures]'" in err and "Traceback" not in err


def test_bad_figure_name_is_refused(tmp_path, capsys):
    fill(stepped())
    assert main(["history", "trends", "--figure", str(tmp_path / "t.pdf")]) == 2
    assert main(["history", "trends", "--figure", str(tmp_path / "no" / "t.svg")]) == 2
    assert capsys.readouterr().err.count("error:") == 2


def test_trends_figure_draws_the_series_and_its_change_point(tmp_path):
    require_module("matplotlib")
    fill(stepped())
    svg, png = tmp_path / "t.svg", tmp_path / "t.png"
    assert main(["history", "trends", "--figure", str(svg)]) == 0
    text = svg.read_text(encoding="utf-8")
    assert "torch 2.12.1 → 2.13.0" in text  # the change point's annotation
    assert main(["history", "trends", "--figure", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_figure_has_bars_and_thread_scaling(tmp_path):
    require_module("matplotlib")
    runs = [record(i, 40 + i % 3, threads=1, group="g") for i in range(5)]
    runs += [record(10 + i, 25 + i % 3, threads=2, group="g") for i in range(5)]
    fill(runs)
    svg = tmp_path / "c.svg"
    assert main(["compare", "g", "--figure", str(svg)]) == 0
    text = svg.read_text(encoding="utf-8")
    # configurations named by their short label (identity): "1 thr", not "threads=1"
    assert "thread scaling" in text and "1 thr" in text and "(n=5)" in text


def _speedup_figure_and_verdict(stability: dict | None) -> tuple[str, str]:
    """The report's speed-up figure (SVG) and the verdict's text for 5 runs at 1 thread against
    5 at 2, each run judged as ``stability`` says (None: recorded without a verdict)."""
    from tui_bench.engine.results import html_report, tables, verdict

    extra = {"stability": stability} if stability is not None else {}
    runs = [record(i, 40 + i % 3, threads=1, **extra) for i in range(5)]
    runs += [record(10 + i, 25 + i % 3, threads=2, **extra) for i in range(5)]
    runs = as_runs(runs)  # as the history hands them out
    comparison = tables.compute(runs)
    page = html_report.collect(runs, comparison)
    (svg,) = [f.svg for f in page.figures if f.title.startswith("speed-ups")]
    return svg, verdict.text(comparison.tables(), comparison.metric.key)


def test_the_speedup_figure_hatches_what_the_verdict_does_not_establish():
    """One rule for "established" (``verdict.established``): runs recorded without a stability
    verdict give p < 0.05 but are not established, and the figure used to draw them solid (it
    read only the 'stability' marks, which say nothing of runs not judged)."""
    require_module("matplotlib")
    svg, said = _speedup_figure_and_verdict(None)
    assert "2 thr against 1 thr: not established" in said
    assert "<pattern" in svg  # the bar is hatched: not established
    svg, said = _speedup_figure_and_verdict({"verdict": "stable", "reasons": []})
    assert "2 thr is 1.58× faster than 1 thr" in said
    assert "<pattern" not in svg  # solid: the verdict states the answer
