"""A generation sweep over batch sizes in compare and report (issue 49's follow-up): the
generation table (TTFT p50/p99, TPOT p50/p99, decode tokens/s per batch per framework × API)
through the registry, and the batch trade-off of decode tokens/s against p99 TPOT, with
``--latency-bound`` holding p99 TPOT ("the most decode tokens/s whose p99 TPOT stays under X ms").
Records are built as tests/histories.py builds them: no run."""

from __future__ import annotations

import json

import pytest

from tests.histories import as_runs, fill, record
from tui_bench.cli import main
from tui_bench.engine.results import html_report, tables, verdict
from tui_bench.engine.results.tables import generation, tradeoff
from tui_bench.engine.spec import RunSpec

# p99 TPOT ms at each batch; p50 = p99 / 1.25, decode tokens/s = batch / p50
TPOT_P99_MS = {1: 5.0, 8: 12.0, 32: 40.0}


def generated(index: int, batch: int, tpot_p99_ms: float, api: str = "eager") -> dict:
    """A finished gpt generation record at this batch (P 64 + N 64 tokens, 60 requests)."""
    made = RunSpec(model="gpt", mode="generate", api=api, threads=1, seed=index, batch_size=batch)  # type: ignore[arg-type]
    p99 = tpot_p99_ms / 1000
    p50 = p99 / 1.25
    figures = {
        "ttft_p50_s": 0.002 * batch,
        "ttft_p90_s": 0.0025 * batch,
        "ttft_p99_s": 0.003 * batch,
        "tpot_p50_s": p50,
        "tpot_p90_s": p50 * 1.1,
        "tpot_p99_s": p99,
        "decode_tokens_per_s": batch / p50,
        "generate_requests": 60,
    }
    return record(
        index, 10.0, api=api, threads=1, spec=made.to_dict(), label=made.label(), metrics=figures
    ) | {"group": "gg"}


def sweep() -> list[dict]:
    return [generated(i, b, ms) for i, (b, ms) in enumerate(TPOT_P99_MS.items(), 1)]


def said(records: list[dict], bound: str | None = None) -> list[str]:
    comparison = tables.compute(
        as_runs(records), bound=tables.latency_bound(bound) if bound else None
    )
    return verdict.sentences(comparison.tables(), comparison.metric.key)


def test_generation_trades_decode_tokens_per_s_against_p99_tpot():
    pair = tradeoff.trade_off_of("generate")
    assert pair is not None
    assert (pair.throughput, pair.latency) == ("decode_tokens_per_s", "tpot_p99_s")
    sentences = said(sweep())
    assert "slower" not in " ".join(sentences)
    assert (
        "batch 1 → 8: 3.33× the decode tokens/s for 2.40× the p99 TPOT "
        "(250 → 833 tokens/s; 5.00 → 12.0 ms)."
    ) in sentences


def test_the_bound_holds_p99_tpot_and_names_the_most_decode_tokens_per_s():
    sentences = said(sweep(), "30")
    assert sentences[0].startswith(
        "Within p99 TPOT ≤ 30 ms: batch 8 serves the most decode tokens/s, 833 tokens/s "
        "(p99 TPOT 12.0 ms, n=1; 2 of 3 configuration(s) fit)"
    ), sentences[0]
    none = said(sweep(), "1")
    assert none[0] == "No configuration keeps its p99 TPOT ≤ 1 ms: the lowest is 5.00 ms (batch 1)."


def test_the_generation_table_has_ttft_tpot_and_decode_rate_per_batch_per_api():
    records = sweep() + [
        generated(10 + i, b, ms * 0.5, api="compile")
        for i, (b, ms) in enumerate(TPOT_P99_MS.items())
    ]
    comparison = tables.compute(as_runs(records))
    shown = comparison.table("generation")
    assert shown is not None and comparison.generation is shown
    assert [c.name for c in shown.columns[3:8]] == [
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "decode tokens/s",
    ]
    assert shown.values(generation.BATCH) == [1, 8, 32, 1, 8, 32]
    assert len(set(shown.values(generation.WITH))) == 2  # one curve per API
    tpot = shown.columns[6]
    assert shown.values(tpot) == pytest.approx([0.005, 0.012, 0.04, 0.0025, 0.006, 0.02])
    assert shown.values(generation.REQUESTS) == [60] * 6
    assert tables.TABS["generation"] == "generation"
    # inference's curve is not drawn for generation runs, nor generation's for inference runs
    assert comparison.table("batches") is None


def test_one_batch_has_no_generation_curve():
    assert tables.compute(as_runs(sweep()[:1])).table("generation") is None


def test_compare_and_report_state_the_tpot_bound(tmp_path, capsys, monkeypatch):
    fill(sweep())
    monkeypatch.setenv("COLUMNS", "2000")
    assert main(["compare", "gg", "--latency-bound", "30"]) == 0
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("verdict"))
    assert first.startswith("verdict: Within p99 TPOT ≤ 30 ms: batch 8 serves the most decode")
    assert main(["compare", "gg", "--json"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert "generation" in names and "tradeoff" in names

    path = tmp_path / "r.html"
    assert main(["report", "gg", "--latency-bound", "30", "--html", str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    verdict_html = text.split('<p class="verdict">', 1)[1]
    assert verdict_html.startswith("<strong>Within p99 TPOT ≤ 30 ms: batch 8 serves the most")
    assert "Which configuration serves the most decode tokens/s with its p99 TPOT within" in text
    assert 'id="generation"' in text and 'id="table-generation"' in text


def test_latency_bound_help_says_generation_holds_tpot(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "generation: p99 TPOT" in text and "30" in text


def test_the_page_renders_a_generation_sweep():
    runs = as_runs(sweep())
    page = html_report.render(html_report.collect(runs, tables.compute(runs), with_figures=False))
    assert "Generation over batch sizes" in page


def test_a_generate_run_has_its_own_default_request_count_recorded_and_in_help(capsys):
    """1,000 requests of N decode steps each is long: generation's default is the mode's own,
    declared once in engine/spec.py, recorded in the spec and said in --help."""
    from tui_bench.engine import spec as spec_module

    made = RunSpec(model="gpt", mode="generate")
    assert made.requests == spec_module.MODE_REQUESTS["generate"] == 100
    assert made.to_dict()["requests"] == 100  # the record holds the number that ran
    assert RunSpec(mode="inference").requests == spec_module.DEFAULT_REQUESTS == 1000
    assert RunSpec(model="gpt", mode="generate", requests=600).requests == 600
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default 1000, generate 100" in text
    assert spec_module.model_default_text("requests") == "1000, generate 100"
