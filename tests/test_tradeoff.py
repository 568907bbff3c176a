"""A sweep over batch sizes is asked what it is for (issue 48 item 5): what each larger batch buys
in throughput against the latency (or step time) it pays, per step of the sweep; no batch is
called "slower" as if it regressed. With ``--latency-bound MS`` the verdict's first sentence
names the configuration with the most samples/s inside the bound (or says none fits and names
the lowest latency), in the terminal, in the report and through ``tables.compute`` (which the
Compare screen calls). The pair of figures traded is a parameter (``tradeoff.TRADE_OFFS``).

Also the table registry (issue 47 item 6): one declaration a table, read by the Compare
screen's tabs and the page's sections; the verdict reads cells by column, not by header."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.histories import as_runs, fill, record
from tests.test_inference_flow import served
from tui_bench.cli import main
from tui_bench.engine.errors import UsageError
from tui_bench.engine.results import html_report, metrics, tables, verdict
from tui_bench.engine.results.tables import comparisons, registry, tradeoff
from tui_bench.engine.spec import RunSpec

BATCHES = (1, 8, 64)
# p50 ms at each batch (p99 = 1.5 × p50 in ``served``): 0.375, 1.2 and 7.2 ms at p99
P50_MS = {1: 0.25, 8: 0.8, 64: 4.8}


def batch_sweep(repeats: int = 1) -> list[dict]:
    """Torch eager inference at batch 1, 8 and 64, nothing else differing."""
    out = []
    for k in range(repeats):
        for i, batch in enumerate(BATCHES):
            index = 10 * k + i + 1
            out.append(served(index, "eager", batch, P50_MS[batch]) | {"group": "gb"})
    return out


def trained_sweep() -> list[dict]:
    """Training at batch 32 and 128: 4 ms and 10 ms steps (8000 and 12800 samples/s)."""
    out = []
    for index, (batch, step_ms) in enumerate(((32, 4.0), (128, 10.0)), 1):
        spec = RunSpec(threads=1, seed=index, batch_size=batch)
        made = record(index, step_ms, threads=1, spec=spec.to_dict(), label=spec.label())
        made["metrics"]["samples_per_s"] = batch / (step_ms / 1000)
        out.append(made | {"group": "gt"})
    return out


def said(records: list[dict], bound: tradeoff.LatencyBound | None = None) -> list[str]:
    comparison = tables.compute(as_runs(records), bound=bound)
    return verdict.sentences(comparison.tables(), comparison.metric.key)


# -- the trade-off, stated --------------------------------------------------------------------
def test_a_batch_sweep_states_throughput_bought_against_latency_paid_per_step():
    sentences = said(batch_sweep())
    text = " ".join(sentences)
    # today: "batch 8 against batch 1: … slower"; a larger batch is never a regression
    assert "slower" not in text and "faster" not in text
    steps = [s for s in sentences if s.startswith("batch ")]
    assert steps == [
        "batch 1 → 8: 2.50× the samples/s for 3.20× the p99 latency "
        "(3810 → 9524 samples/s; 0.375 → 1.20 ms).",
        "batch 8 → 64: 1.33× the samples/s for 6.00× the p99 latency "
        "(9524 → 12698 samples/s; 1.20 → 7.20 ms).",
    ]
    # the ratios table leaves batch size to the trade-off table; no "no two configurations"
    comparison = tables.compute(as_runs(batch_sweep()))
    assert comparison.table("comparisons") is None
    assert not any("No two configurations differ" in s for s in sentences)
    traded = comparison.table("tradeoff")
    assert traded is not None
    assert traded.values(tradeoff.BATCH) == [1, 8, 64]
    assert traded.values(tradeoff.FROM_BATCH) == [None, 1, 8]


def test_a_training_batch_sweep_trades_samples_per_s_against_the_step_time():
    sentences = said(trained_sweep())
    assert "slower" not in " ".join(sentences)
    assert (
        "batch 32 → 128: 1.60× the samples/s for 2.50× the step time "
        "(8000 → 12800 samples/s; 4.00 → 10.0 ms)."
    ) in sentences


def test_other_fields_are_still_compared_beside_the_batch():
    """eager against compile at each batch is a ratio like any other; batch against batch not."""
    records = batch_sweep() + [
        served(20 + i, "compile", b, P50_MS[b] * 0.8) for i, b in enumerate(BATCHES)
    ]
    comparison = tables.compute(as_runs(records))
    compared = comparison.table("comparisons")
    assert compared is not None
    assert set(compared.values(comparisons.DIFFERS_IN)) == {"api"}
    assert len(compared.rows) == 3


def test_accuracy_across_batches_is_still_compared():
    """The trade-off answers a time or a rate; an accuracy at two batch sizes is a question the
    ratios table still answers."""
    comparison = tables.compute(as_runs(trained_sweep()), metric="test_accuracy")
    compared = comparison.table("comparisons")
    assert compared is not None and compared.values(comparisons.DIFFERS_IN) == ["batch_size"]


# -- the latency bound -----------------------------------------------------------------------
def test_the_bound_names_the_most_samples_per_s_inside_it_first():
    sentences = said(batch_sweep(), tables.latency_bound("2"))
    assert sentences[0] == (
        "Within p99 latency ≤ 2 ms: batch 8 serves the most samples/s, 9524 samples/s "
        "(p99 latency 1.20 ms, n=1; 2 of 3 configuration(s) fit)."
    )
    wide = said(batch_sweep(), tables.latency_bound("50"))
    assert wide[0].startswith("Within p99 latency ≤ 50 ms: batch 64 serves the most")


def test_a_bound_nothing_fits_says_so_and_names_the_lowest_latency():
    sentences = said(batch_sweep(), tables.latency_bound("0.1"))
    assert sentences[0] == (
        "No configuration keeps its p99 latency ≤ 0.1 ms: the lowest is 0.375 ms (batch 1)."
    )


def test_the_pair_traded_is_a_parameter(monkeypatch):
    """Generation (issue 49) adds a pair (decode tokens/s against p99 TPOT); here the inference
    pair is swapped for samples/s against p50, and the verdict and the table follow it."""
    pair = tradeoff.TradeOff(
        metrics.INFERENCE, "inference_samples_per_s", "latency_p50_s", "samples/s", "p50 latency"
    )
    monkeypatch.setitem(tradeoff.TRADE_OFFS, metrics.INFERENCE, pair)
    sentences = said(batch_sweep(), tables.latency_bound("1"))
    assert sentences[0].startswith("Within p50 latency ≤ 1 ms: batch 8 serves the most")
    assert any(
        "3.20× the p50 latency (3810 → 9524 samples/s; 0.250 → 0.800 ms)" in s for s in sentences
    )


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "nan", "inf", ""])
def test_a_bad_bound_is_one_line_and_exit_2(bad, capsys):
    with pytest.raises(UsageError):
        tables.latency_bound(bad)
    for command in (["compare"], ["report", "--html", "unused.html"]):
        assert main([*command, "--latency-bound", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert "--latency-bound" in err and len(err.splitlines()) == 1, err


def test_compare_and_report_state_the_bound_first(tmp_path, capsys, monkeypatch):
    fill(batch_sweep())
    monkeypatch.setenv("COLUMNS", "2000")
    assert main(["compare", "gb", "--latency-bound", "2"]) == 0
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("verdict"))
    assert first.startswith("verdict: Within p99 latency ≤ 2 ms: batch 8 serves the most")
    assert main(["compare", "gb", "--latency-bound", "2", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    traded = next(t for t in shown if t["name"] == "tradeoff")
    rows = [dict(zip(traded["columns"], row, strict=True)) for row in traded["rows"]]
    assert [r["within bound"] for r in rows] == [True, True, False]
    assert [r["bound"] for r in rows] == [0.002] * 3

    path = tmp_path / "r.html"
    assert main(["report", "gb", "--latency-bound", "2", "--html", str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    verdict_html = text.split('<p class="verdict">', 1)[1]
    assert verdict_html.startswith("<strong>Within p99 latency ≤ 2 ms: batch 8 serves the most")
    assert "Which configuration serves the most samples/s with its p99 latency within" in text
    assert "--latency-bound 2" in text  # the command that made the page
    assert 'id="tradeoff"' in text and "slower" not in verdict_html.split("</p>", 1)[0]


# -- the registry: one declaration a table ---------------------------------------------------
def test_every_table_is_declared_once_with_its_tab_and_section():
    names = [kind.name for kind in tables.TABLES]
    assert len(names) == len(set(names))
    sections = {s.id for s in tables.SECTIONS}
    assert all(kind.section in sections for kind in tables.TABLES)
    assert {kind.name: kind.tab for kind in tables.TABLES} == tables.TABS


def test_the_compare_screen_and_the_page_read_the_registry():
    from tui_bench.tui.screens import compare as screen

    assert screen.TAB_NAMES is tables.TABS  # not a copy of the list kept by hand


def test_a_table_declared_once_reaches_the_comparison_and_the_page(monkeypatch):
    """What a generation table (issue 49) will do: one TableKind, and compute() builds it and the
    page shows it in its section, with no edit to either."""

    def build(inputs: registry.Inputs) -> tables.Table:
        made = tables.Table("extra", "an extra table", (tables.Column("configuration"),))
        for group in inputs.configs:
            made.add([group.label])
        return made

    extra = tables.TableKind("extra", build, "extra", "limits")
    monkeypatch.setattr(registry, "TABLES", (*registry.TABLES, extra))
    runs = as_runs(batch_sweep())
    comparison = tables.compute(runs)
    assert comparison.table("extra") is not None and comparison.extra is not None
    page = html_report.render(html_report.collect(runs, comparison, with_figures=False))
    assert 'id="limits"' in page and 'id="table-extra"' in page


def test_the_verdict_reads_cells_by_column_not_by_header(monkeypatch):
    """Rename the ratios table's columns (what a page or a CSV shows): the verdict still reads
    the same cells. Reading records() by header text, it would say nothing of them."""
    before = said(batch_sweep() + [served(30, "compile", 1, 0.5)])
    for name in ("SPEEDUP", "RATIO_OF_MEDIANS", "CONFIGURATION", "BASELINE", "P", "SIGNIFICANCE"):
        column = getattr(comparisons, name)
        monkeypatch.setattr(comparisons, name, dataclasses.replace(column, name=f"x {column.name}"))
    after = said(batch_sweep() + [served(30, "compile", 1, 0.5)])
    assert after == before
    assert any("compile" in s and "eager" in s for s in after)


def test_a_number_read_from_a_text_column_is_an_error_not_an_empty_cell():
    comparison = tables.compute(as_runs(batch_sweep()))
    traded = comparison.table("tradeoff")
    assert traded is not None
    with pytest.raises(ValueError, match="holds no numbers"):
        traded.number(traded.rows[0], tradeoff.WITH)
