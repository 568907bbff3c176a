"""`tui-bench report TARGET --html FILE`: the comparison as one self-contained page. The page
is parsed as HTML5 (html5lib, strict), checked to hold compare's own tables in order, to
escape what comes from files, to load nothing from elsewhere, and to say so when a run was
not stable. The browser's view of it: tests/test_report_browser.py."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import require_module
from histories import as_runs

from tests.histories import fill, record
from tests.test_trends import noisy
from tui_bench.cli import main
from tui_bench.engine.results import html_report, render, tables

STABLE = {"verdict": "stable", "reasons": [], "checked": ["cv", "drift"]}
NOISY = {
    "verdict": "noisy",
    "reasons": [{"rule": "cv", "level": "noisy", "message": "step-time CV 9 % > 5 %"}],
}
CHECK = {"banner": "machine: ok", "fail": [], "warn": []}


def comparison_history(hostile: str = "") -> list[dict]:
    """A sweep-like group g1: torch/eager and keras/tensorflow at 1 and 2 threads, 5 repeats
    each (one noisy run), and an older series of one configuration with a step in it."""
    runs = []
    index = 100
    for framework, api, base in (("torch", "eager", 40.0), ("keras", "tensorflow", 55.0)):
        for threads in (1, 2):
            level = base / (1.7 if threads == 2 else 1.0)
            for k, value in enumerate(noisy(5, level, seed=index)):
                index += 1
                runs.append(
                    record(
                        index,
                        value,
                        framework=framework,
                        api=api,
                        threads=threads,
                        day=30 + index / 100,
                        group="g1",
                        stability=NOISY
                        if (framework == "keras" and threads == 2 and k == 0)
                        else STABLE,
                        machine_check=CHECK,
                        **({"label": hostile} if hostile and index == 101 else {}),
                    )
                )
                runs[-1]["metrics"]["res_peak_rss_mib"] = 300.0 + threads * 10
    history = [record(i, v, threads=2) for i, v in enumerate(noisy(8, 26.0))]
    history += [
        record(8 + i, v, threads=2, version="2.13.0") for i, v in enumerate(noisy(6, 31.0, seed=3))
    ]
    return history + runs


def write_report(tmp_path, *argv: str) -> str:
    path = tmp_path / "report.html"
    assert main(["report", *argv, "--html", str(path)]) == 0
    return path.read_text(encoding="utf-8")


def parse_strict(text: str):
    html5lib = require_module("html5lib")
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    return parser.parse(text)  # raises on the first parse error


def test_report_is_valid_html_with_the_sections_in_order(tmp_path):
    fill(comparison_history())
    text = write_report(tmp_path, "g1")
    doc = parse_strict(text)
    ids = [s.get("id") for s in doc.iter("section")]
    assert ids == [
        "question",
        "verdict",
        "machine",
        "fairness",
        "configurations",
        "ratios",
        "scaling",
        "published",
        "trends",
        "figures",
        "skipped",
    ]
    tables = {t.get("id") for t in doc.iter("table")}
    assert {
        "table-summary",
        "table-comparisons",
        "table-scaling",
        "table-runs",
        "table-trends",
    } <= tables
    assert {"table-machine", "table-versions"} <= tables


def test_report_shows_compares_own_numbers(tmp_path):
    """The page holds the cells compare computes (tables.compute) as the terminal shows them
    (render.shown_rows), each row with the verdict of the runs behind it."""
    fill(comparison_history())
    text = write_report(tmp_path, "g1")
    doc = parse_strict(text)
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs import sweep

    records, skipped, published = sweep.collect(["g1"], History())
    comparison = tables.compute(as_runs(records), skipped=skipped, published=published)
    for t in comparison.tables():
        page_table = next(x for x in doc.iter("table") if x.get("id") == f"table-{t.name}")
        page_rows = [
            ["".join(td.itertext()) for td in tr.iter("td")] for tr in page_table.iter("tr")
        ][1:]
        headers, rows = render.shown_rows(t)
        assert [row[: len(headers)] for row in page_rows] == [[c for c, _ in r] for r in rows]
        if any(r.verdicts for r in t.rows):  # a measurement: its verdict ends the row
            assert all(row[len(headers)] for row in page_rows), t.name


def test_verdict_says_which_is_faster_with_significance_and_stability(tmp_path):
    fill(comparison_history())
    doc = parse_strict(write_report(tmp_path, "g1"))
    verdict = "".join(next(s for s in doc.iter("section") if s.get("id") == "verdict").itertext())
    assert re.search(r"keras is \d\.\d\d× slower than torch \(with 1 thr\)", verdict)
    assert "Mann-Whitney" in verdict and "p=" in verdict
    # one noisy run: said in the verdict, and its row is marked with its reason
    assert "Not every run was stable" in verdict and "1 noisy of 5" in verdict
    runs_table = next(t for t in doc.iter("table") if t.get("id") == "table-runs")
    noisy_rows = [tr for tr in runs_table.iter("tr") if tr.get("class") == "noisy"]
    assert len(noisy_rows) == 1 and "step-time CV 9 %" in "".join(noisy_rows[0].itertext())


def test_machine_check_and_trend_change_point_are_shown(tmp_path):
    fill(comparison_history())
    text = write_report(tmp_path, "g1")
    assert "machine: ok</span> — 20 run(s)" in text
    assert "torch 2.12.1 → 2.13.0" in text  # the older series' change point, in the trends table
    assert "peak RSS MiB" in text  # what the records carry beside the metric


def test_everything_from_files_is_escaped(tmp_path):
    hostile = '<script>alert(1)</script><img src="http://example.invalid/x.png">'
    fill(comparison_history(hostile=hostile))
    text = write_report(tmp_path, "g1")
    parse_strict(text)
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;" in text


def test_nothing_in_the_page_points_outside_it(tmp_path):
    fill(comparison_history())
    text = write_report(tmp_path, "g1")
    assert not re.search(r"(?:src|href)\s*=\s*(?![\"']?#)", text, re.IGNORECASE)
    assert not re.search(r"url\(\s*(?![\"']?#)", text)
    assert "<script" not in text.lower() and "@import" not in text
    assert "default-src 'none'" in text  # and the browser is told to refuse anything that slips in
    assert "@media print" in text and "prefers-color-scheme: dark" in text


def test_figures_are_inline_svg(tmp_path):
    require_module("matplotlib")
    fill(comparison_history())
    doc = parse_strict(write_report(tmp_path, "g1"))
    figures = list(doc.iter("figure"))
    captions = ["".join(f.find("figcaption").itertext()) for f in figures]
    assert len(figures) == 4, captions  # distributions, speed-ups, scaling, trends
    assert all(f.find("{http://www.w3.org/2000/svg}svg") is not None for f in figures)
    assert "speed-ups" in captions[1] and "scaling" in captions[2] and "history" in captions[3]


def test_without_matplotlib_the_page_says_how_to_get_figures(tmp_path, monkeypatch):
    fill(comparison_history())
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    doc = parse_strict(write_report(tmp_path, "g1"))
    figures = "".join(next(s for s in doc.iter("section") if s.get("id") == "figures").itertext())
    assert "pip install 'tui-bench[figures]'" in figures
    assert "table-summary" in {t.get("id") for t in doc.iter("table")}  # tables always there


def test_a_sixty_run_sweep_stays_small(tmp_path):
    records = [
        record(
            i,
            40.0 + (i % 7),
            threads=1 + i % 4,
            framework=("torch", "keras")[i % 2],
            api=("eager", "tensorflow")[i % 2],
            model=("mlp", "cnn", "lstm")[i % 3],
            group="big",
            stability=STABLE,
        )
        for i in range(60)
    ]
    fill(records)
    size = len(write_report(tmp_path, "big").encode())
    assert size < 2 * 1024 * 1024, size


def test_one_configuration_and_unfinished_runs(tmp_path):
    fill(
        [record(i, 30.0 + i, group="one") for i in range(3)]
        + [record(9, 0, status="failed", group="one")]
    )
    doc = parse_strict(write_report(tmp_path, "one"))
    verdict = "".join(next(s for s in doc.iter("section") if s.get("id") == "verdict").itertext())
    assert verdict.startswith("The verdict") and "One configuration" in verdict
    runs_table = next(t for t in doc.iter("table") if t.get("id") == "table-runs")
    assert any(tr.get("class") == "unreliable" for tr in runs_table.iter("tr"))  # the failed one


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "nope", "--html", "{tmp}/r.html"],
        ["report", "g1", "--html", "{tmp}/missing/r.html"],
        ["report", "g1", "--html", "{tmp}"],
        ["report", "g1"],
        ["report", "--last", "0", "--html", "{tmp}/r.html"],
        ["report", "--since", "someday", "--html", "{tmp}/r.html"],
        ["report", "g1", "--metric", "nope", "--html", "{tmp}/r.html"],
        ["report", "--since", "2999-01-01", "--html", "{tmp}/r.html"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv):
    fill(comparison_history())
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_last_and_since_choose_runs_across_history(tmp_path):
    fill(comparison_history())
    text = write_report(tmp_path, "--last", "2")  # of each of the 4 configurations
    assert "over 8 run(s)" in text
    text = write_report(tmp_path, "--since", "2026-11-01")
    assert "over 34 run(s)" in text


def test_compare_writes_the_same_page(tmp_path, capsys):
    fill(comparison_history())
    path = tmp_path / "c.html"
    assert main(["compare", "g1", "--html", str(path)]) == 0
    doc = parse_strict(path.read_text(encoding="utf-8"))
    assert "table-comparisons" in {t.get("id") for t in doc.iter("table")}
    assert f"wrote {path}" in capsys.readouterr().err.replace("\n", "")
    assert main(["compare", "g1", "--html", str(tmp_path / "no" / "c.html")]) == 2


def test_regress_page_leads_with_the_gate(tmp_path):
    fill(comparison_history())
    path = tmp_path / "r.html"
    # the older torch/eager ×2 series stepped from 2.12.1 to 2.13.0 (+20 %)
    assert (
        main(["regress", "--since", "2026-11-09", "--until", "2026-11-20", "--html", str(path)])
        == 1
    )
    doc = parse_strict(path.read_text(encoding="utf-8"))
    ids = [s.get("id") for s in doc.iter("section")]
    assert ids[:4] == ["question", "verdict", "machine", "regress"]
    verdict = "".join(next(s for s in doc.iter("section") if s.get("id") == "verdict").itertext())
    assert "1 regression(s)" in verdict and "worse (+" in verdict
    regress_table = next(t for t in doc.iter("table") if t.get("id") == "table-regress")
    assert [tr.get("class") for tr in regress_table.iter("tr")][1:] == ["unreliable"]
    runs_table = next(t for t in doc.iter("table") if t.get("id") == "table-runs")
    rows = [tr.findall("td") for tr in runs_table.iter("tr") if tr.findall("td")]
    sides = ["".join(cells[1].itertext()) for cells in rows]
    assert sides == ["baseline"] * 8 + ["candidate"] * 6


def test_verdict_spells_out_eight_comparisons_and_counts_the_rest():
    Column = tables.Column
    comparisons = tables.Table(
        "comparisons",
        "comparisons",
        tuple(
            Column(n, k)
            for n, k in [
                ("differs in", "text"),
                ("with", "text"),
                ("configuration", "text"),
                ("baseline", "text"),
                ("ratio", "ratio"),
                ("speed-up", "ratio"),
                ("p", "p"),
                ("significance", "text"),
            ]
        ),
    )
    stable = [("this", tables.Verdicts(stable=5)), ("baseline", tables.Verdicts(stable=5))]
    for i in range(11):
        cells = ["model", "—", f"m{i}", "base", 2.0, 0.5, 0.008, "significant (p=0.008)"]
        comparisons.add(cells, stable if i else [("this", tables.Verdicts(noisy=5))])
    summary = tables.Table(
        "summary",
        "summary",
        (
            Column("configuration"),
            Column("n", "count"),
            Column("median", "number"),
            Column("IQR", "number"),
            Column("stability"),
        ),
    )
    summary.add(["base", 5, 1.0, 0.1, "stable"])
    page = html_report.Page("t", "step_median_s", [summary, comparisons], [], {})
    sentences = html_report.verdict_sentences(page)
    # the answer is stated only where the test found it and the runs were stable
    assert sentences[0].startswith("m0 against base: not established; these runs measured m0 2.00×")
    assert sum("is 2.00× slower than base" in s for s in sentences) == 7
    assert "3 more comparison(s) in the ratios table." in sentences
    parse_strict(html_report.render(page))


@pytest.mark.parametrize(
    "damage",
    [
        {"env": "not a dict"},
        {"env": {"host": ["a"], "cpu_model": 3, "logical_cores": "x", "gpus": "none"}},
        {"machine_check": ["warn"]},
        {"machine_check": {"banner": None, "fail": "cpu.load", "warn": 3}},
        {"stability": "stable"},
        {"stability": {"verdict": 7, "reasons": ["x", None, {"message": None}]}},
        {"load_at_start": "busy"},
        {"worker": "torch"},
        {"started_at": "yesterday"},
        {"label": "x" * 10_000},
        {"id": "\x00\ufffe<b>"},
    ],
)
def test_a_damaged_record_still_gives_a_page(damage):
    """What only the page reads of a record (machine, check, verdict, load, versions, id, label)
    may be damaged in a hand-edited or old history: the page is still made, valid, with what
    can be read. (The tables are computed from the undamaged runs: their own readers are the
    typed run record's concern.)"""
    from tui_bench.engine.results import figures

    clean = comparison_history()
    comparison = tables.compute(as_runs([r for r in clean if r.get("group") == "g1"]))
    damaged = [*clean[:-1], {**clean[-1], **damage}]
    page = html_report.collect(
        as_runs([r for r in damaged if r.get("group") == "g1"]),
        comparison,
        history=as_runs(damaged),
        with_figures="started_at" in damage,  # an undated run in a trend figure; else seconds
    )
    assert figures.INSTALL_HINT in page.figures_note or len(page.figures) == 4
    doc = parse_strict(html_report.render(page))
    assert "table-runs" in {t.get("id") for t in doc.iter("table")}


def threads_only_history() -> list[dict]:
    """Four runs of one configuration, two at 1 thread and two at 2, nothing else different;
    each run's observed cores follow its threads."""
    runs = []
    for index, (threads, ms) in enumerate([(1, 40.0), (1, 41.0), (2, 24.0), (2, 25.0)]):
        runs.append(record(index, ms, threads=threads, group="g1"))
        runs[-1]["metrics"]["cores_observed"] = float(threads)
    return runs


def test_one_thread_against_two_is_answered_and_the_card_is_true(tmp_path, capsys):
    """Observed threads follow configured ones: they never make 1 thread against 2 a second
    difference. The verdict answers it with its ratio and test, the card lists configured and
    observed threads, and its note does not say all runs share threads."""
    fill(threads_only_history())
    target = tmp_path / "r.html"
    assert main(["report", "g1", "--html", str(target)]) == 0
    words = " ".join(re.sub("<[^>]+>", " ", target.read_text()).split())
    assert "differ in a single setting" not in words and "differ in one setting" not in words
    assert "2 thr against 1 thr: not established" in words and "ratio of medians 0.605" in words
    comparison = tables.compute(as_runs(threads_only_history()))
    card = comparison.fairness
    assert card is not None
    assert set(card.values("setting")) == {"threads configured", "threads observed"}
    assert "the same in every run" in card.note and "threads" not in card.note
    assert comparison.comparisons is not None
    assert comparison.comparisons.values("differs in") == ["threads"]
    capsys.readouterr()
    assert main(["compare", "g1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "threads configured" in out and "threads observed" in out
    shared = out.split("the same in every run")[0].rsplit("only settings that differ", 1)[-1]
    assert "threads" not in shared  # the footnote never says the runs share threads


def test_the_page_the_terminal_and_the_compare_screen_state_one_verdict(tmp_path, capsys):
    from tui_bench.engine.results import verdict

    fill(threads_only_history())
    target = tmp_path / "r.html"
    assert main(["report", "g1", "--html", str(target)]) == 0
    comparison = tables.compute(as_runs(threads_only_history()))
    said = verdict.text(comparison.tables(), comparison.metric.key)
    assert "2 thr against 1 thr: not established" in said
    page = " ".join(re.sub("<[^>]+>", " ", target.read_text()).split())
    assert " ".join(said.split()) in page.replace("&gt;", ">").replace("&lt;", "<")
    capsys.readouterr()
    assert main(["compare", "g1"]) == 0
    assert " ".join(said.split()) in " ".join(capsys.readouterr().out.split())
