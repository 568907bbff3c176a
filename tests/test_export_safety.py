"""Exports never carry a live spreadsheet formula (OWASP CSV injection) nor Markdown that breaks its
table or turns into HTML/links; numbers stay numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tui_bench import cli
from tui_bench.engine.results import render, tables
from tui_bench.engine.results.export_safety import (
    FORMULA_FIRST,
    FORMULA_STARTS,
    csv_cell,
    markdown_cell,
)
from tui_bench.engine.results.history import History
from tui_bench.engine.spec import RunSpec

HOSTILE = [
    '=HYPERLINK("http://evil","x")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
    "=1",
    "-",
]
NUMBERS_AS_TEXT = ["-0.5", "+3", "-1e-3", "12", "-inf", "nan"]


@pytest.mark.parametrize("text", HOSTILE)
def test_formula_like_text_is_neutralised(text: str) -> None:
    assert text.startswith(FORMULA_STARTS)
    assert text[:1] in FORMULA_FIRST  # the history export's pre-test lets it through
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-0.5, 3, 0.0, -(2**40), 1e-9, True, None, *NUMBERS_AS_TEXT])
def test_numbers_stay_numbers(value: object) -> None:
    assert csv_cell(value) == value


@pytest.mark.parametrize("text", ["torch/eager cnn", "", "a=b", "x-1", "'=quoted already"])
def test_plain_text_is_left_alone(text: str) -> None:
    assert csv_cell(text) == text


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_history_export_neutralises_every_text_cell_and_keeps_numbers(tmp_path: Path) -> None:
    history = History()
    history.add(
        {
            "id": "run-1",
            "status": "finished",
            "label": HOSTILE[0],
            "reason": HOSTILE[1],
            "preset": HOSTILE[3],
            "spec": RunSpec(data_dir="-2+3", threads=1).to_dict(),
            "metrics": {"step_median_s": -0.5, "delta": "-0.25"},
        }
    )
    out = tmp_path / "runs.csv"
    assert cli.main(["history", "export", "--csv", str(out)]) == 0
    (row,) = _rows(out)
    assert row["label"] == "'" + HOSTILE[0]
    assert row["reason"] == "'" + HOSTILE[1]
    assert row["preset"] == "'" + HOSTILE[3]
    assert row["spec.data_dir"] == "'-2+3"
    assert row["metrics.step_median_s"] == "-0.5"
    assert row["metrics.delta"] == "-0.25"
    for cell in row.values():
        assert not cell.startswith(FORMULA_STARTS) or float(cell) is not None


def test_report_csv_and_markdown_are_safe() -> None:
    table = tables.Table(
        name="summary",
        title="runs of [x](javascript:alert(1))",
        columns=(tables.Column("configuration"), tables.Column("median", tables.NUMBER)),
    )
    table.add(["=1+1|<script>alert(1)</script>\nnext line", -0.25])
    table.add(["@A1", 2.0])
    rows = list(csv.DictReader(io.StringIO(render.csv_text([table]))))
    assert rows[0]["configuration"].startswith("'=")
    assert rows[0]["median"] == "-0.25"
    assert rows[1]["configuration"] == "'@A1"
    markdown = render.markdown([table])
    lines = markdown.splitlines()
    table_lines = [line for line in lines if line.startswith("|")]
    # Header, rule and two rows, each with exactly the table's 2 cells (3 unescaped pipes).
    assert len(table_lines) == 4
    for line in table_lines:
        assert line.replace("\\|", "").count("|") == 3, line
    assert "<script>" not in markdown
    assert "\\[x\\](javascript:" in markdown  # shown as text, not a link


def test_markdown_cell_escapes_what_breaks_a_table() -> None:
    assert markdown_cell("a|b") == "a\\|b"
    assert markdown_cell("a\nb\r\nc") == "a b c"
    assert markdown_cell("<b>&") == "&lt;b&gt;&amp;"
    assert markdown_cell("[x](y)") == "\\[x\\](y)"
    assert markdown_cell("plain text 1.5 ms") == "plain text 1.5 ms"


def test_json_export_round_trips_hostile_text(capsys: pytest.CaptureFixture) -> None:
    History().add({"id": "run-1", "status": "finished", "label": '"}\n\x1b[31m' + HOSTILE[0]})
    assert cli.main(["history", "list", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["label"] == '"}\n\x1b[31m' + HOSTILE[0]
