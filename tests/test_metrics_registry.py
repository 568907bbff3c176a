"""One metric registry (``results/metrics.py``): no module under tui_bench/ names a registered
metric's label, unit or direction itself, and one new entry reaches every view that lists
metrics (a run's summary, compare's summary table, its CSV and JSON)."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from tests.histories import as_runs, record
from tui_bench.cli import common
from tui_bench.engine.results import metrics, render, tables

ROOT = Path(__file__).resolve().parents[1] / "tui_bench"
HOME = ROOT / "engine" / "results" / "metrics.py"
# Names a second registry went by; outside metrics.py they may only be read from it.
REGISTRY_NAMES = {"METRICS", "SUMMARY_ROWS", "RUN_EXTRAS", "SUMMARY_EXTRAS", "_HIGHER_IS_BETTER"}
# A study's own metrics (a paper's "training time", summed over run metrics): its vocabulary,
# not a second name for a run's metric.
ALLOWED = {("engine/results/published.py", "METRICS")}


def _strings(node: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def violations(path: Path, source: str) -> list[str]:
    """Where ``source`` names a registered metric's label, unit or direction itself."""
    keys = set(metrics.BY_KEY)
    where = path.relative_to(ROOT).as_posix()
    out = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            for name in names & REGISTRY_NAMES:
                literal = isinstance(node.value, ast.Dict | ast.List | ast.Tuple | ast.DictComp)
                regex = isinstance(node.value, ast.Call) and "compile" in ast.unparse(node.value)
                if (literal or regex) and (where, name) not in ALLOWED:
                    out.append(f"{line}: {name} defined here, not read from metrics.py")
        elif isinstance(node, ast.Dict):
            # {"res_peak_rss_mib": "peak RSS MiB"}: a label for a registered key
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value in keys
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and value.value not in keys  # a column named after its metric
                ):
                    out.append(f"{line}: a label for {key.value}")
        elif isinstance(node, ast.Tuple | ast.List) and len(node.elts) >= 3:
            # ("step ms median", "step_median_s", 1000, 1, "…"): a row of a second registry
            consts = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            named = [c for c in consts if isinstance(c, str) and c in keys]
            others = [c for c in consts if isinstance(c, str) and c not in keys]
            if len(named) == 1 and others:
                out.append(f"{line}: {named[0]} with its own label {others[0]!r}")
        elif isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            first = node.args[0] if node.args else None
            if (
                text.split(".")[-1] == "Metric"
                and isinstance(first, ast.Constant)
                and first.value in keys
            ):
                out.append(f"{line}: a Metric made outside the registry")
            if text.endswith("compile") and any("per_s" in s for s in _strings(node)):
                out.append(f"{line}: a metric's direction read off its name")
            if text.endswith("endswith") and any(s == "_s" for s in _strings(node)):
                out.append(f"{line}: a metric's unit read off its name")
    return out


def test_no_module_names_a_registered_metric_itself():
    found = [
        v
        for path in sorted(ROOT.rglob("*.py"))
        if path != HOME
        for v in violations(path, path.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        # what tables.py, cli/common.py, html_report.py and regress.py held before the registry
        'METRICS = {m.key: m for m in (Metric("test_s", "test time s", True, "s"),)}',
        'SUMMARY_ROWS = [("train s", "train_wall_s", 1, 2, "wall time")]',
        'RUN_EXTRAS = {"res_peak_rss_mib": "peak RSS MiB"}',
        '_HIGHER_IS_BETTER = re.compile(r"accuracy|per_s$")',
        'EXTRAS = (("samples_per_s", "median samples/s", NUMBER, "samples/s"),)',
        'unit = "ms" if metric.endswith("_s") else ""',
    ],
)
def test_the_scan_finds_a_second_registry(source):
    assert violations(ROOT / "cli" / "example.py", source)


NEW = metrics.Metric(
    "widgets_per_s",
    "widgets made per second",
    "widgets/s",
    "widgets/s",
    True,
    digits=1,
    note="made by the test",
    places=frozenset({metrics.RUN, metrics.MEDIAN}),
)


@pytest.fixture
def one_more(monkeypatch):
    monkeypatch.setattr(metrics, "REGISTRY", (*metrics.REGISTRY, NEW))
    monkeypatch.setattr(metrics, "BY_KEY", {**metrics.BY_KEY, NEW.key: NEW})
    runs = []
    for i, threads in enumerate((1, 1, 2, 2)):
        r = record(i, 40.0 / threads, threads=threads)
        r["metrics"]["widgets_per_s"] = 12.5 * threads
        runs.append(r)
    return as_runs(runs)  # as the history hands them out


def test_one_entry_reaches_the_run_summary(one_more):
    console = Console(file=io.StringIO(), width=200)
    console.print(common.summary_table(one_more[:1]))
    text = console.file.getvalue()
    assert "widgets/s" in text and "12.5" in text and "widgets/s: made by the test" in text


def test_one_entry_reaches_compare_and_its_exports(one_more):
    comparison = tables.compute(one_more)
    assert comparison.summary.values("median widgets/s") == [12.5, 25.0]
    header = render.csv_text(comparison.tables()).splitlines()[0]
    assert "median widgets/s" in header.split(",")
    exported = json.loads(render.json_text(comparison.tables()))[0]
    column = exported["columns"].index("median widgets/s")
    assert exported["units"][column] == "widgets/s"
    assert [row[column] for row in exported["rows"]] == [12.5, 25.0]


def test_an_unregistered_key_is_read_by_its_name():
    assert metrics.get("images_per_s").higher_is_better is True
    assert metrics.get("load_s").higher_is_better is False and metrics.get("load_s").unit == "s"
    assert tables.metric_info("samples_per_s").lower_is_better is False
