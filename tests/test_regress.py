"""`tui-bench regress`: marks, exit codes and side selection on constructed histories."""

from __future__ import annotations

import json

import pytest

from tests.histories import as_runs, fill, record
from tui_bench.cli import main
from tui_bench.engine.errors import UsageError
from tui_bench.engine.results import regress
from tui_bench.engine.results.identity import configuration_of
from tui_bench.engine.results.record import Run

BASE = [40.0, 40.4, 39.8, 40.2, 40.1, 39.9]
SLOWER = [48.0, 48.3, 47.9, 48.5, 48.1, 47.7]  # +20 %


def runs(values, start=0, **kw):
    """Stored runs as the history hands them over (``Run``); ``.raw`` is the dict to store."""
    return as_runs(record(start + i, v, **kw) for i, v in enumerate(values))


def test_a_real_slowdown_is_marked_plus_and_fails_the_gate():
    report = regress.compare(runs(BASE), runs(SLOWER, start=10, version="2.13.0"))
    (row,) = report.rows
    assert row.mark == "+" and row.note == "torch 2.12.1 → 2.13.0"
    assert row.ratio == pytest.approx(48.05 / 40.05, rel=1e-3)
    assert row.p is not None and row.p < 0.01
    assert (row.baseline.n, row.candidate.n) == (6, 6)
    assert report.exit_code() == 1


def test_a_speedup_is_minus_and_passes():
    report = regress.compare(runs(SLOWER), runs(BASE, start=10))
    assert [r.mark for r in report.rows] == ["-"]
    assert report.exit_code() == 0


def test_a_change_under_the_threshold_is_noise_even_when_significant():
    slightly = [v * 1.05 for v in BASE]
    report = regress.compare(runs(BASE), runs(slightly, start=10))
    assert report.rows[0].mark == "~"
    assert report.rows[0].p < 0.01  # significant, but 5 % is under the 10 % threshold
    assert regress.compare(runs(BASE), runs(slightly, start=10), threshold=0.03).rows[0].mark == "+"


def test_overlapping_samples_beyond_the_threshold_are_not_significant():
    wide_base = [30.0, 50.0, 35.0, 45.0, 40.0]
    wide_cand = [36.0, 56.0, 41.0, 52.0, 46.0]  # median +15 %, but the runs overlap
    row = regress.compare(runs(wide_base), runs(wide_cand, start=10)).rows[0]
    assert row.mark == "~" and row.p >= 0.01


def test_too_few_runs_cannot_be_significant_and_say_so():
    row = regress.compare(runs(BASE[:3]), runs(SLOWER[:3], start=10)).rows[0]
    assert row.mark == "~" and row.p is None
    assert "≥5 runs per side" in row.note


def test_direction_accuracy_down_is_worse():
    base = as_runs(
        record(i, 40, accuracy=a) for i, a in enumerate([0.95, 0.951, 0.949, 0.952, 0.953])
    )
    cand = as_runs(
        record(10 + i, 40, accuracy=a) for i, a in enumerate([0.80, 0.81, 0.79, 0.802, 0.805])
    )
    assert regress.compare(base, cand, metric="test_accuracy").rows[0].mark == "+"
    assert regress.compare(cand, base, metric="test_accuracy").rows[0].mark == "-"
    assert regress.higher_is_better("samples_per_s") and not regress.higher_is_better("test_s")


def test_failed_missing_and_unstable_marks():
    base = runs(BASE) + runs(BASE, start=20, framework="mxnet", api="gluon")
    cand = runs(BASE, start=10, status="failed") + runs(BASE, start=30, threads=1)
    report = regress.compare(base, cand)
    marks = {
        r.configuration.name.split(" ")[0] + str(r.configuration.facts["threads"]): r.mark
        for r in report.rows
    }
    assert marks == {"torch/eager2": "x", "mxnet/gluon2": "?", "torch/eager1": "?"}
    assert report.exit_code() == 1  # the candidate now fails: that is a regression
    unstable = runs(SLOWER, start=10, stability={"verdict": "noisy"})
    report = regress.compare(runs(BASE), unstable)
    assert report.rows[0].mark == "!"
    assert report.exit_code() == 0 and report.exit_code(fail_on_unstable=True) == 3


def test_configurations_are_kept_apart_by_identity():
    a = runs(BASE) + runs(SLOWER, start=0, host="box-b")
    b = runs(BASE, start=10) + runs(SLOWER, start=10, host="box-b")
    report = regress.compare(a, b)
    assert len(report.rows) == 2 and {r.mark for r in report.rows} == {"~"}
    assert (
        configuration_of(Run.from_record(a[0])).key != configuration_of(Run.from_record(a[-1])).key
    )
    assert (
        configuration_of(Run.from_record(a[0])).key == configuration_of(Run.from_record(b[0])).key
    )  # seeds differ; the configuration does not


def test_sides_by_since_and_last():
    records = runs(BASE * 2)  # days 0..11
    since = regress.parse_when("2026-11-07T00:00+00:00")
    baseline, candidate = regress.sides(records, since=since)
    assert len(baseline) == 6 and len(candidate) == 6
    baseline, candidate = regress.sides(records, since=since, last=2)
    assert [r.id for r in baseline] == [records[4].id, records[5].id]
    assert [r.id for r in candidate] == [records[10].id, records[11].id]
    baseline, candidate = regress.sides(records, last=3)
    assert baseline == records[6:9]
    assert candidate == records[9:]
    with pytest.raises(UsageError):
        regress.sides(records)
    with pytest.raises(UsageError):
        regress.sides(records, ["x"], [])


def test_sides_by_tokens_preset_group_and_prefix():
    records = runs(BASE, preset="study", group="sweep-1") + runs(SLOWER, start=10, batch="b-2")
    baseline, candidate = regress.sides(records, ["sweep-1"], ["b-2"])
    assert len(baseline) == 6 and len(candidate) == 6
    baseline, candidate = regress.sides(records, ["study"], [records[-1].id[:20]])
    assert len(candidate) == 1
    with pytest.raises(UsageError):
        regress.sides(records, ["study"], ["sweep-1"])  # the same runs on both sides


def test_parse_when():
    now = regress.parse_when("2026-11-25T10:00+00:00")
    assert regress.parse_when("yesterday", now).day == 24
    assert regress.parse_when("3d", now).day == 22
    with pytest.raises(UsageError):
        regress.parse_when("last tuesday")


def test_cli_exit_codes_and_outputs(capsys):
    fill([r.raw for r in runs(BASE) + runs(SLOWER, start=10)])
    assert main(["regress", "--last", "6"]) == 1
    assert "+" in capsys.readouterr().out
    assert main(["regress", "--last", "6", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == 1 and data["rows"][0]["mark"] == "+"
    assert main(["regress", "--last", "6", "--markdown"]) == 1
    assert "| + |" in capsys.readouterr().out  # the shared renderer: a mark is plain text
    assert main(["regress", "--last", "6", "--threshold", "25"]) == 0
    assert main(["regress", "--last", "6", "--metric", "step_medain_s"]) == 2  # a typo
    assert "no run has the metric 'step_medain_s'" in capsys.readouterr().err
    assert main(["regress", "--since", "someday"]) == 2
    assert main(["regress", "nope", "nada"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 2


def test_the_gate_is_a_typed_table_written_by_compares_renderer(tmp_path, capsys):
    """regress prints through results/render.py like compare: numbers stay numbers in the
    typed table and the CSV, the unit is the registry's (seconds, shown in ms in a header), the
    terminal names configurations by their short labels and the CSV keeps the whole name."""
    import csv

    base = runs(BASE) + runs(BASE, start=20, threads=1)
    cand = runs(SLOWER, start=10, version="2.13.0") + runs(BASE, start=30, threads=1)
    report = regress.compare(base, cand)
    table = report.table()
    assert table.column("baseline").unit == "s" and table.column("ratio").kind == "ratio"
    first = table.records()[0]
    assert first["mark"] == "+" and first["configuration"] == "2 thr"
    assert first["baseline"] == pytest.approx(0.04005) and first["n candidate"] == 6
    assert first["name"] == report.rows[0].configuration.name and "@box-a" in first["name"]

    fill([r.raw for r in base + cand])
    path = tmp_path / "gate.csv"
    assert main(["regress", "--last", "6", "--csv", str(path)]) == 1
    out = capsys.readouterr().out
    assert "40.1" in out and "48.1" in out  # 40.05 ms, 48.05 ms: 3 figures, as compare's
    assert "2.12.1 →" in out and "2.13.0" in out and "1 regression(s)" in out  # the note
    (row, _) = list(csv.DictReader(path.open(encoding="utf-8")))
    assert float(row["candidate"]) == pytest.approx(0.04805)  # full precision, base unit
    assert row["mark"] == "'+"  # a cell a spreadsheet would run is neutralised, as compare's
    assert main(["regress", "--last", "6", "--markdown"]) == 1
    assert "| baseline ms | candidate ms |" in capsys.readouterr().out  # the unit in the header
