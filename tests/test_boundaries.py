"""The two boundaries the design rests on, checked the way Harlequin checks import hygiene:
import in a fresh interpreter and read sys.modules."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

FRAMEWORKS = ("torch", "tensorflow", "keras", "mxnet", "jax", "theano", "cntk")

WALK_ALL = """
import importlib, json, pkgutil, sys
import tui_bench
for info in pkgutil.walk_packages(tui_bench.__path__, "tui_bench."):
    importlib.import_module(info.name)
importlib.import_module("tui_bench.cli")
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_app_process_never_imports_a_framework():
    loaded = _modules_after(WALK_ALL)
    assert "tui_bench.engine.runs.runner" in loaded  # the walk really imported the app
    leaked = sorted(m for m in loaded if m.split(".")[0] in FRAMEWORKS)
    assert leaked == []


def test_engine_never_imports_textual():
    code = """
import importlib, json, pkgutil, sys
import tui_bench.engine
for info in pkgutil.walk_packages(tui_bench.engine.__path__, "tui_bench.engine."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""
    loaded = _modules_after(code)
    assert "tui_bench.engine.results.history" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "textual"]


def test_adapters_never_import_tui_bench():
    offenders = []
    for path in sorted((REPO / "adapters").rglob("*.py")):  # the framework packages too
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] == "tui_bench"
            ]
    assert offenders == []


def test_worker_sees_no_app_package_and_shadows_pypi_adapters(tmp_path):
    """The worker loads `adapters` by path, never from site-packages, and cannot import tui_bench
    (it may run in an interpreter without it)."""
    fake_site = tmp_path / "site"
    (fake_site / "adapters").mkdir(parents=True)
    (fake_site / "adapters" / "__init__.py").write_text("IMPOSTOR = True\n")
    probe = (
        "import runpy, sys; sys.path.insert(0, {!r}); sys.argv = ['worker.py', '--help'];\n"
        "try:\n    runpy.run_path({!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "import adapters; print(getattr(adapters, 'IMPOSTOR', False), 'tui_bench' in sys.modules)"
    ).format(str(fake_site), str(REPO / "adapters" / "worker.py"))
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "False False"


def _lint_imports(root) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--no-cache", "--config", str(root / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def test_layer_contracts_hold():
    out = _lint_imports(REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "BROKEN" not in out.stdout and "KEPT" in out.stdout


def test_layer_contracts_catch_a_lazy_import_across_a_layer(tmp_path):
    # The guard must bite: the same config over a copy where the engine reaches into the TUI
    # inside a function (the kind of import the sys.modules walk can't see).
    for name in ("tui_bench", "adapters"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "tui_bench" / "engine" / "paths.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _leak():\n    from tui_bench.tui import app  # noqa\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0
    assert "tui_bench.engine.paths -> tui_bench.tui.app" in out.stdout


def import_circles(graph) -> list[list[str]]:
    """Every import circle among tui_bench's modules (strongly connected components of the
    import graph, Tarjan's algorithm), each sorted; a lazy import in a function body and an
    import under TYPE_CHECKING count too, as they do for a reader and for grimp."""
    edges = {
        m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n in graph.modules)
        for m in sorted(graph.modules)
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1 or module in edges[module]:
                circles.append(sorted(component))

    for module in edges:
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_import_circle_in_tui_bench():
    # A circle is two modules that each need the other: the TUI's held a pure helper beside
    # the app's handlers that import the screens (issue 40). Lazy imports included.
    import grimp

    graph = grimp.build_graph("tui_bench", cache_dir=None)
    assert "tui_bench.tui.app" in graph.modules  # the graph really read the TUI
    assert import_circles(graph) == []


# The app side of the TUI: the app and what is mixed into it, and the run controller it owns.
APP_SIDE = {"app", "app_runs", "app_presets", "live", "commands"}


def test_screens_and_widgets_never_import_the_app_side():
    # Attributes down, messages up: a screen or widget posts a message from tui/messages.py;
    # it never imports the app, its handler mixins or its run controller (lazily or not).
    import grimp

    graph = grimp.build_graph("tui_bench", cache_dir=None)
    app_side = {f"tui_bench.tui.{name}" for name in APP_SIDE}
    assert app_side <= graph.modules
    views = graph.find_descendants("tui_bench.tui.screens") | graph.find_descendants(
        "tui_bench.tui.widgets"
    )
    assert "tui_bench.tui.screens.live" in views
    upward = sorted(
        f"{view} -> {imported}"
        for view in views
        for imported in graph.find_modules_directly_imported_by(view) & app_side
    )
    assert upward == []


def test_import_circle_finder_finds_a_lazy_circle():
    # The guard must bite: a -> b -> c -> a (as a lazy import would make), beside an acyclic d.
    import grimp

    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_circles(graph) == [["p.a", "p.b", "p.c"]]


def test_app_handlers_type_check_against_what_the_app_gives():
    # LiveRuns and PresetFlow take `self` as a protocol of what they need from the app;
    # app.py's TYPE_CHECKING block is where mypy sees TuiBenchApp really satisfies both.
    from mypy import api

    tui = REPO / "tui_bench" / "tui"
    files = [str(tui / f"{name}.py") for name in ("app", "app_runs", "app_presets")]
    stdout, stderr, status = api.run(["--config-file", str(REPO / "pyproject.toml"), *files])
    assert status == 0, stdout[-4000:] + stderr[-1000:]


def test_engine_type_checks():
    from mypy import api

    stdout, stderr, status = api.run(["--config-file", str(REPO / "pyproject.toml")])
    assert status == 0, stdout[-4000:] + stderr[-1000:]


def test_readers_past_the_store_take_a_run_not_a_dict():
    """A run past the store is a ``record.Run`` (``History`` hands out nothing else): no reader
    takes ``Run | dict`` and converts on its own."""
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "tui_bench").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "Run | dict" in line
    ]
    assert not offenders, offenders
