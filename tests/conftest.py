"""Every test gets its own data home, cache and config: tests never touch the user's files.
The managed framework runtimes (GBs, made by `tui-bench runtime setup all`) are shared, read-only."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tui_bench.engine.paths import runtimes_home

REPO = Path(__file__).resolve().parents[1]
# The suite's own processes (test processes, CLIs, supervisors) write bytecode, as Python does by
# default: a machine that sets PYTHONDONTWRITEBYTECODE (this project's shared VM does) made every
# one of them compile tui_bench from source again (0.41 against 0.25 CPU-s a CLI start; ~7 % of
# the CPU of tests/test_cli.py + test_supervisor.py). Runtimes' workers run -I and write it anyway.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# Read before any test moves the data home: where this machine's runtimes really are.
INSTALLED_RUNTIMES = runtimes_home()
_RUNTIME_PROBLEMS: dict[tuple[str, str], str | None] = {}
_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG.append(config)
    config.addinivalue_line(
        "markers",
        "needs_runtime(framework, api='eager'): skip, with the command that sets it up, where "
        "that framework/API cannot run (a failure with TUI_BENCH_REQUIRE_RUNTIMES=1)",
    )
    config.addinivalue_line(
        "markers",
        "fresh_caches: a slow test that measures the machine facts the session shares "
        "(SHARED_FACTS) starts without them",
    )
    config.addinivalue_line(
        "markers",
        "after_its_group: a slow test that runs after the other slow tests of its xdist group "
        "(it reuses what they compiled)",
    )


def runtime_problem(framework: str, api: str = "eager") -> str | None:
    """Why this framework/API cannot run here, with the command that fixes it; None when it can.
    Asked once a session (a probe imports the framework in a subprocess: seconds)."""
    key = (framework, api)
    if key not in _RUNTIME_PROBLEMS:
        from filelock import FileLock

        from tui_bench.engine.machine import runtimes

        # The probes go to the session's machine facts (never the user's cache), which every
        # test process and every slow test's runs read: each runtime is imported once a session,
        # not once per test process and again by the first run (~25 CPU-s a round, cold).
        facts = _machine_facts_dir(_CONFIG[0]._tmp_path_factory)  # type: ignore[attr-defined]
        with FileLock(str(facts / ".lock")), pytest.MonkeyPatch.context() as env:
            env.setenv("TUI_BENCH_CACHE", str(facts))
            env.setenv("TUI_BENCH_CONFIG", str(facts / "no-config.toml"))
            env.setenv("TUI_BENCH_RUNTIMES_DIR", str(INSTALLED_RUNTIMES))
            found = runtimes.availability(framework, api)
        problem = f"{framework}/{api}: {found.problem}"
        if found.fix and found.fix not in problem:
            problem += f" (set up: {found.fix})"
        _RUNTIME_PROBLEMS[key] = None if found.ok else problem
    return _RUNTIME_PROBLEMS[key]


def require_runtime(framework: str, api: str = "eager") -> None:
    """Skip the calling test where the runtime is missing; CI, which sets every runtime up,
    says TUI_BENCH_REQUIRE_RUNTIMES=1 so that a missing one fails instead of hiding."""
    problem = runtime_problem(framework, api)
    if problem is None:
        return
    if os.environ.get("TUI_BENCH_REQUIRE_RUNTIMES") == "1":
        pytest.fail(f"runtime required (TUI_BENCH_REQUIRE_RUNTIMES=1): {problem}")
    pytest.skip(problem)


# What installs each optional package the suite uses (the README's test command installs all).
EXTRAS = {
    "torch": "pip install -e '.[torch]'",
    "ray": "pip install -e '.[ray]'",
    "mlflow": "pip install -e '.[mlflow]'",
    "matplotlib": "pip install -e '.[figures]'",
    "ruptures": "pip install -e '.[dev]' (or: pip install ruptures)",
}


def require_module(name: str) -> Any:
    """The module, or a skip that says which install brings it (a failure in CI, where
    TUI_BENCH_REQUIRE_RUNTIMES=1 says everything is installed). Works at module level too."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        problem = f"{name} is not installed ({exc}): {EXTRAS.get(name, f'pip install {name}')}"
    if os.environ.get("TUI_BENCH_REQUIRE_RUNTIMES") == "1":
        pytest.fail(f"required (TUI_BENCH_REQUIRE_RUNTIMES=1): {problem}", pytrace=False)
    pytest.skip(problem, allow_module_level=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_runtime"):
        require_runtime(*mark.args)


@pytest.fixture(scope="session")
def shared_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the session (Theano's generated C, keyed by the code's hash): a
    cold cache costs minutes of g++ per run on a 2-core machine, and compiling the same ops
    again in every test checks nothing more. Each test's cache still has its own path to it."""
    return _session_dir(tmp_path_factory, "compiled")


def _session_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A directory for the whole session, one for every test process too (Theano locks its
    compile dir): the xdist workers' temp dirs share a parent."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    shared.mkdir(exist_ok=True)
    return shared


# Machine facts the app caches (this machine's measured matmul peaks; what each runtime's
# interpreter imports): every CLI run measured the peak again in each slow test's empty cache (a
# torch subprocess, ~3 CPU-s) and every preset expansion probed the runtimes again (3-5 CPU-s
# each). Their entries are keyed by host, interpreter and install, so one session's are every
# test's. A test that measures them itself says @pytest.mark.fresh_caches.
SHARED_FACTS = ("peaks.json", "runtime-probes.json")


def _machine_facts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session keeps SHARED_FACTS, one place for every test process."""
    return _session_dir(tmp_path_factory, "machine-facts")


@pytest.fixture(scope="session")
def shared_machine_facts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _machine_facts_dir(tmp_path_factory)


def lend_machine_facts(shared: Path, cache: Path) -> None:
    for name in SHARED_FACTS:
        if (shared / name).is_file():
            shutil.copyfile(shared / name, cache / name)


def keep_machine_facts(shared: Path, cache: Path) -> None:
    """Add what the test measured to the session's copy (entries are per machine fact, so a
    merge; a file the test damaged on purpose is left out)."""
    from filelock import FileLock

    with FileLock(str(shared / ".lock")):
        for name in SHARED_FACTS:
            try:
                found = json.loads((cache / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            try:
                kept = json.loads((shared / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                kept = {}
            if not isinstance(found, dict) or not isinstance(kept, dict):
                continue
            if any(kept.get(key) != value for key, value in found.items()):
                partial = shared / f".{name}.{os.getpid()}"
                partial.write_text(json.dumps({**kept, **found}), encoding="utf-8")
                os.replace(partial, shared / name)


@pytest.fixture(autouse=True)
def isolated_home(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path / "home"
    facts = None
    if request.node.get_closest_marker("slow"):
        # Real training only: fast tests keep a cache directory that does not exist yet.
        shared = request.getfixturevalue("shared_compile_cache")
        (tmp_path / "cache").mkdir()
        (tmp_path / "cache" / "compiled").symlink_to(shared, target_is_directory=True)
        if not request.node.get_closest_marker("fresh_caches"):
            facts = request.getfixturevalue("shared_machine_facts")
            lend_machine_facts(facts, tmp_path / "cache")
    monkeypatch.setenv("TUI_BENCH_HOME", str(home))
    monkeypatch.setenv("TUI_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_BENCH_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("TUI_BENCH_RUNTIMES_DIR", str(INSTALLED_RUNTIMES))
    monkeypatch.delenv("TUI_BENCH_FAULT", raising=False)
    # Fault injection (TUI_BENCH_FAULT) only works where the test-suite says so.
    monkeypatch.setenv("TUI_BENCH_TESTING", "1")
    yield home
    _stop_batches_left_running(home)
    if facts is not None:
        keep_machine_facts(facts, tmp_path / "cache")


def _stop_batches_left_running(home: Path) -> None:
    """Runs outlive the process that started them, a test's too: a test that fails (or a
    suite that is killed) must not leave supervisors and workers training behind it."""
    import os
    import signal

    from tui_bench.engine.results.history import read_jsonl
    from tui_bench.engine.runs import supervisor

    if not (home / "batches").is_dir():
        return
    for state in supervisor.all_batches():
        if not state.in_progress:
            continue
        os.kill(state.supervisor["pid"], signal.SIGKILL)
        for run_id in state.run_ids or []:
            for event in read_jsonl(home / "runs" / f"{run_id}.jsonl"):
                if event.get("type") == "worker":
                    from tui_bench.engine.machine.procs import kill_group

                    kill_group(event.get("pid"), event.get("started"))


# -- a framework whose worker starts in a fraction of a second ----------------------------------
PLUGIN = REPO / "tests" / "plugins" / "numpy_mlp"
NUMPY_FRAMEWORK = "numpy-mlp"


def site_with_plugin(root: Path, manifest: str | None = None) -> Path:
    """A directory laid out as pip lays out an installed plugin (tests/plugins/numpy_mlp): its
    package and its dist-info with the entry point; ``manifest`` replaces its manifest.toml."""
    site = root / "site"
    shutil.copytree(PLUGIN / "numpy_mlp", site / "numpy_mlp")
    if manifest is not None:
        (site / "numpy_mlp" / "manifest.toml").write_text(manifest, encoding="utf-8")
    info = site / "tui_bench_numpy_mlp-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tui-bench-numpy-mlp\nVersion: 0.1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[tui_bench.frameworks]\n{NUMPY_FRAMEWORK} = numpy_mlp\n", encoding="utf-8"
    )
    return site


@pytest.fixture(scope="session")
def numpy_plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return site_with_plugin(tmp_path_factory.mktemp("numpy-plugin"))


@pytest.fixture
def numpy_framework(numpy_plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The example numpy plugin, installed for this test: registered in this process's catalog
    and on the path of every process the test starts (a CLI's supervisor reads the entry points
    itself). Its worker is tui-bench's own worker and starts in ~0.3 s, against ~4 s for torch
    (importing it, then torch._dynamo, which its optimizers import): for tests of what every
    worker does (faults, hangs, cancels, sweeps, records), not of what a framework does."""
    from tui_bench.engine import catalog, frameworks, spec

    monkeypatch.syspath_prepend(str(numpy_plugin_site))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(numpy_plugin_site), path])))
    found = frameworks.load()
    assert found.problems == (), found.problems
    # A process reads its plugins once, at import, and the spec's declared choices from the
    # catalog once too (spec._declarations): both learn of the plugin, then forget it.
    catalog.FRAMEWORKS[NUMPY_FRAMEWORK] = found.frameworks[NUMPY_FRAMEWORK]
    spec._declarations.cache_clear()
    yield NUMPY_FRAMEWORK
    del catalog.FRAMEWORKS[NUMPY_FRAMEWORK]
    spec._declarations.cache_clear()


@pytest.fixture
def adapters_on_path(monkeypatch: pytest.MonkeyPatch):
    """Import the worker-side package in the test process, as the worker names it."""
    import importlib.util

    here = REPO / "adapters"
    spec = importlib.util.spec_from_file_location(
        "adapters", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "adapters", module)
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in sys.modules if n.startswith("adapters.")]:
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (it names them in node ids)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Real training first, quick tests after: the test processes take the long tests at the
    start and fill the end with short ones, so no core idles while another finishes a
    minutes-long test (longest first: the classic way to balance jobs on a few machines). The
    order within each kind is kept, so a module's cached runs are still shared in order; a slow
    test marked after_its_group goes after the other slow ones (its group's process reaches it
    once they have compiled what it shares with them).

    Slow tests that run Theano go to one test process (an xdist group): Theano compiles under a
    lock on its compile directory, so a Theano run in the other process waited on it with its
    core idle (seen: a one-step MLP run's 43 s of training wall were lock waits)."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("slow") is None,
            item.get_closest_marker("after_its_group") is not None,
        )
    )
    for item in items:
        if _trains_theano(item) and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(THEANO_GROUP))


THEANO_GROUP = "theano-compiles"


def _trains_theano(item: pytest.Item) -> bool:
    """A slow test parametrized with the Theano framework (its runs compile Theano's C code)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return item.get_closest_marker("slow") is not None and params.get("framework") == "theano"
