"""Each framework is one package under ``adapters/`` (``adapters/torch/``, ``adapters/mxnet/``...),
named like the framework it wraps. So ``adapters/`` itself must never be on a worker's sys.path:
there, ``import torch`` would find ``adapters/torch/`` instead of PyTorch. Python puts a script's
own directory first on sys.path unless it runs isolated (``-I``); the engine starts every script
of ``adapters/`` isolated, and each script also drops the adapters tree from its path itself.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tui_bench.engine.machine import peaks, runtimes
from tui_bench.engine.paths import adapters_dir
from tui_bench.engine.results import cards
from tui_bench.engine.runs import worker_launch
from tui_bench.engine.spec import RunSpec

# Every framework an adapters package is (or will be) named after.
FRAMEWORK_MODULES = ("torch", "tensorflow", "keras", "mxnet", "theano", "jax", "flax")

# Prints where each framework module would be found from here (without importing it), and
# sys.path; run from a copy of adapters/ the way the engine runs a script there.
PROBE = """
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    found[name] = spec.origin if spec else None
print(json.dumps({"found": found, "path": sys.path}))
"""


def engine_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every command line the engine builds to run a script of adapters/: the worker alone and
    under torch's launcher, the hardware probe, the card probe, the runtime probe."""
    python = sys.executable
    commands = [
        worker_launch.worker_command(RunSpec(framework="torch").validate(), python, 3),
        worker_launch.worker_command(
            RunSpec(framework="torch", workers=2).validate(), python, -1, "/tmp/x/rank0"
        ),
    ]
    seen: list[list[str]] = []
    monkeypatch.setattr(
        runtimes, "resolve", lambda *a: runtimes.Runtime("torch", python, "app"), raising=True
    )
    monkeypatch.setattr(
        runtimes, "run_tagged", lambda command, *a, **k: (seen.append(command), (None, "x"))[1]
    )
    peaks.run_probe("cpu", 1)
    monkeypatch.setattr(
        cards, "_run_probe", lambda command, *a, **k: (seen.append(command), {"error": "x"})[1]
    )
    cards.probe_runtime(python, ("torch",), refresh=True)
    runtimes.probe(python, ("torch",), refresh=True)
    return commands + seen


def scripts_started(command: list[str]) -> list[tuple[list[str], Path]]:
    """(interpreter and its flags, script) for each adapters script in a command line (torch's
    launcher runs the worker after ``--no-python``)."""
    root = adapters_dir()
    started = []
    for i, word in enumerate(command):
        path = Path(word)
        if path.suffix == ".py" and path.is_relative_to(root):
            interpreter = i - 1
            while command[interpreter].startswith("-"):
                interpreter -= 1
            started.append((command[interpreter:i], path))
    return started


def test_the_engine_starts_every_adapters_script_isolated(monkeypatch) -> None:
    started = [s for c in engine_commands(monkeypatch) for s in scripts_started(c)]
    names = {path.relative_to(adapters_dir()).as_posix() for _, path in started}
    assert names == {
        "worker.py",
        "torch/launch.py",
        "torch/hardware_probe.py",
        "card_probe.py",
        "runtime_probe.py",
    }
    for prefix, path in started:
        assert "-I" in prefix[1:], (prefix, path)


def _probe(prefix: list[str], where: Path, modules: tuple[str, ...] = ()) -> dict:
    script = where / "_shadow_probe.py"
    script.write_text(PROBE, encoding="utf-8")
    out = subprocess.run(
        [*prefix, str(script), *FRAMEWORK_MODULES, *modules],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def _copy_of_adapters(tmp_path: Path) -> Path:
    copy = tmp_path / "adapters"
    shutil.copytree(adapters_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _shadowed(report: dict, copy: Path) -> dict[str, str]:
    return {
        name: origin
        for name, origin in report["found"].items()
        if origin and Path(origin).resolve().is_relative_to(copy.resolve())
    }


def test_a_framework_import_never_resolves_inside_adapters(monkeypatch, tmp_path) -> None:
    """Beside each script the engine starts (a copy of adapters/, so its framework packages are
    there), with the interpreter flags the engine gives it: torch, tensorflow, mxnet... are
    found where the runtime installed them, never in the adapters tree; and the tree is not on
    sys.path. Without -I the same probe finds adapters/torch/: the check can fail."""
    copy = _copy_of_adapters(tmp_path)
    started = [s for c in engine_commands(monkeypatch) for s in scripts_started(c)]
    for prefix, path in started:
        where = copy / path.relative_to(adapters_dir()).parent
        report = _probe(prefix, where)
        assert not _shadowed(report, copy), (prefix, path, report)
        inside = [p for p in report["path"] if Path(p or ".").resolve().is_relative_to(copy)]
        assert not inside, (prefix, path, inside)
    plain = _probe([sys.executable], copy)
    assert _shadowed(plain, copy).get("torch") == str(copy / "torch" / "__init__.py")


def test_every_managed_runtime_finds_its_frameworks_outside_adapters(tmp_path) -> None:
    """The same check in each framework runtime that is set up (other interpreters, other
    site-packages): each module the runtime is probed for is found in the runtime, not in the
    adapters tree."""
    copy = _copy_of_adapters(tmp_path)
    checked = 0
    for name, managed in runtimes.MANAGED.items():
        python = runtimes.managed_python(name)
        if not python.exists():
            continue
        report = _probe([str(python), "-I", "-u"], copy, managed.modules)
        assert not _shadowed(report, copy), (name, report)
        for module in managed.modules:
            assert report["found"][module], (name, module, report)
        checked += 1
    if not checked:
        pytest.skip("no managed runtime is set up here")


def _guard(script: Path):
    """The script's own ``_keep_adapters_off_path``, compiled alone over a stand-in ``sys``."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    (node,) = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name == "_keep_adapters_off_path"
    ]
    fake_sys = SimpleNamespace(path=[])
    namespace = {"Path": Path, "sys": fake_sys}
    exec(compile(ast.Module([node], []), str(script), "exec"), namespace)
    return namespace["_keep_adapters_off_path"], fake_sys


def test_each_script_drops_the_adapters_tree_from_its_path_before_a_framework_import(
    tmp_path,
) -> None:
    """Defence in depth, for a script started by hand without -I: each one removes the adapters
    tree from sys.path when run as a script, before any import of a framework."""
    root = adapters_dir()
    for script, guarded in (
        ("worker.py", "Path(__file__).resolve().parent"),
        ("torch/hardware_probe.py", "Path(__file__).resolve().parents[1]"),
        ("card_probe.py", "Path(__file__).resolve().parent"),
        ("runtime_probe.py", "Path(__file__).resolve().parent"),
        ("torch/launch.py", "Path(__file__).resolve().parents[1]"),
    ):
        source = (root / script).read_text(encoding="utf-8")
        call = source.index(f"    _keep_adapters_off_path({guarded})")
        assert source.rfind('if __name__ == "__main__":', 0, call) != -1, script
        imports = [source.find(f"\nfrom {m}") for m in FRAMEWORK_MODULES]
        imports += [source.find(f"\nimport {m}") for m in FRAMEWORK_MODULES]
        assert all(at == -1 or call < at for at in imports), script
        guard, fake_sys = _guard(root / script)
        kept = [str(tmp_path), "/usr/lib/python3.11"]
        fake_sys.path[:] = [str(root), str(root / "torch"), kept[0], kept[1]]
        guard(root)
        assert fake_sys.path == kept, script
