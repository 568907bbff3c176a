"""Frameworks are plugins: found through the entry-point group ``tui_bench.frameworks`` (the
in-tree ones too), each described by its package's manifest. A plugin installed from outside the
tree (``tests/plugins/numpy_mlp``, a numpy MLP written from the adapter contract alone) appears
everywhere and runs end to end; a broken one is one line, and the others still load.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PLUGIN, REPO, site_with_plugin

from tui_bench.engine import catalog, frameworks
from tui_bench.engine.paths import adapters_dir

IN_TREE = ("torch", "tensorflow", "keras", "jax", "mxnet", "theano", "cntk")


def test_in_tree_frameworks_register_through_the_entry_point_group() -> None:
    registered = {ep.name: ep.value for ep in frameworks.entry_points()}
    for name in IN_TREE:
        assert registered.get(name) == f"tui_bench_adapters.{name}", name
        fw = catalog.FRAMEWORKS[name]
        assert fw.package_dir == adapters_dir() / name
        assert fw.adapter == ("" if fw.unavailable else f"adapters.{name}.adapter")
    assert list(catalog.FRAMEWORKS)[: len(IN_TREE)] == list(
        IN_TREE
    )  # the manifests' order, then plugins
    assert frameworks.problems() == ()


def test_an_installed_plugin_is_read_from_its_manifest(tmp_path, monkeypatch) -> None:
    site = site_with_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    registry = frameworks.load()  # the environment's entry points, the plugin's among them
    assert registry.problems == ()
    fw = registry.frameworks["numpy-mlp"]
    assert fw.label == "NumPy MLP (example plugin)" and fw.apis == ("numpy",)
    assert fw.runtime == frameworks.APP_RUNTIME and fw.import_name == "numpy"
    # the worker loads it by path under its own name: not from the app's site-packages
    assert fw.adapter == "numpy_mlp.adapter" and fw.package_dir == site / "numpy_mlp"
    assert fw.capabilities_for("numpy").modes == ("train", "inference")
    assert fw.unsupported[("numpy", "cnn")] == "this example builds the MLP only"
    assert fw.language == ("C (numpy and its BLAS)", "Python")
    assert list(registry.frameworks)[-1] == "numpy-mlp"  # no order: after the in-tree ones


BROKEN = {
    "no manifest": None,
    "not TOML": "name = [",
    "no label": 'name = "numpy-mlp"\n[apis.numpy]\n',
    "no API": 'name = "numpy-mlp"\nlabel = "x"\n',
    "unknown key": 'name = "numpy-mlp"\nlabel = "x"\nlabels = 1\n[apis.numpy]\n',
    "a precision that does not exist": (
        'name = "numpy-mlp"\nlabel = "x"\n[apis.numpy]\nprecisions_cpu = ["fp8"]\n'
    ),
    "an adapter outside the package": (
        'name = "numpy-mlp"\nlabel = "x"\nadapter = "../../x.py"\n[apis.numpy]\n'
    ),
    "a name other than its entry point's": 'name = "other"\nlabel = "x"\n[apis.numpy]\n',
    "the name of an in-tree framework": 'name = "torch"\nlabel = "x"\n[apis.numpy]\n',
    "a runtime another framework declares": (
        'name = "numpy-mlp"\nlabel = "x"\n[apis.numpy]\n[runtimes.torch]\npackages = []\n'
        "modules = []\n"
    ),
    "an order that is not a number": 'name = "numpy-mlp"\nlabel = "x"\norder = "1"\n[apis.numpy]\n',
    "a build environment that is not text": (
        'name = "numpy-mlp"\nlabel = "x"\nbuild_env = { XLA_FLAGS = 0 }\n[apis.numpy]\n'
    ),
    "a peak probe on an API it does not have": (
        'name = "numpy-mlp"\nlabel = "x"\npeak_probe = { api = "jit", kernel = "numpy" }\n'
        "[apis.numpy]\n"
    ),
}


@pytest.mark.parametrize("damage", sorted(BROKEN))
def test_a_broken_plugin_is_one_line_and_the_others_still_load(
    damage, tmp_path, monkeypatch
) -> None:
    site = site_with_plugin(tmp_path, BROKEN[damage] or "")
    if BROKEN[damage] is None:
        (site / "numpy_mlp" / "manifest.toml").unlink()
    if damage == "the name of an in-tree framework":
        (site / "tui_bench_numpy_mlp-0.1.0.dist-info" / "entry_points.txt").write_text(
            "[tui_bench.frameworks]\ntorch = numpy_mlp\n", encoding="utf-8"
        )
    monkeypatch.syspath_prepend(str(site))
    registry = frameworks.load()  # the environment's entry points, the plugin's among them
    assert len(registry.problems) == 1, registry.problems
    line = registry.problems[0]
    assert "\n" not in line and line.startswith("framework plugin tui-bench-numpy-mlp: ")
    assert "numpy-mlp" not in registry.frameworks
    assert list(registry.frameworks)[: len(IN_TREE)] == list(IN_TREE)  # the rest still load
    assert registry.frameworks["torch"].package_dir == adapters_dir() / "torch"


def test_an_entry_point_to_a_missing_package_is_one_line() -> None:
    point = importlib.metadata.EntryPoint("ghost", "tui_bench_no_such_plugin", frameworks.GROUP)
    registry = frameworks.load([*frameworks.entry_points(), point])
    assert registry.problems == (
        "framework plugin ?: ghost = tui_bench_no_such_plugin: 'tui_bench_no_such_plugin' is "
        "not an installed package",
    )
    assert "torch" in registry.frameworks


def test_no_registered_framework_says_how_to_install() -> None:
    registry = frameworks.load([])
    assert registry.frameworks == {}
    assert "is tui-bench installed" in registry.problems[0]


# -- the example plugin, installed and run end to end --------------------------------------------
def _cli(site: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    # No managed runtimes: only what the app's interpreter can import is probed (the plugin's
    # numpy, torch), not every framework's (minutes on a loaded machine).
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "TUI_BENCH_HOME": str(home),
        "TUI_BENCH_RUNTIMES_DIR": str(home / "no-runtimes"),
    }
    return subprocess.run(
        [sys.executable, "-m", "tui_bench", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_a_plugin_installed_from_outside_the_tree_runs_end_to_end(tmp_path) -> None:
    """pip installs tests/plugins/numpy_mlp (offline: no dependencies, no build isolation) into
    a directory of its own; with it on the path, the CLI offers it, lists it, shows its card,
    runs it (training and serving) and keeps the runs in the history."""
    site = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(PLUGIN),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    assert not list(site.glob("adapters*")), "a plugin never installs the worker's package"
    home = tmp_path / "home"
    assert "numpy-mlp" in _cli(site, home, "run", "--help").stdout
    listing = _cli(site, home, "runtime", "list")
    assert listing.returncode == 0 and "numpy-mlp" in listing.stdout, listing.stderr
    card = _cli(site, home, "frameworks")
    assert card.returncode == 0 and "C (numpy and its BLAS)" in card.stdout, card.stderr
    tiny = ["--framework", "numpy-mlp", "--api", "numpy", "--model", "mlp", "--threads", "1"]
    tiny += ["--epochs", "1", "--steps-per-epoch", "6", "--train-samples", "600"]
    tiny += ["--test-samples", "100", "--batch-size", "32", "--json"]
    trained = _cli(site, home, "run", *tiny)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (record,) = json.loads(trained.stdout)
    assert record["status"] == "finished", record
    widths = [784, 512, 512, 10]
    assert record["metrics"]["param_count"] == sum(
        a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True)
    )
    refused = _cli(site, home, "run", *tiny[:4], "--model", "cnn")
    assert refused.returncode == 2 and "this example builds the MLP only" in refused.stderr
    served = _cli(site, home, "run", *tiny, "--mode", "inference", "--requests", "10")
    assert served.returncode == 0, served.stderr[-3000:]
    assert json.loads(served.stdout)[0]["status"] == "finished"
    history = _cli(site, home, "history", "list")
    assert record["id"] in history.stdout


# Appended to a copy of the plugin: its first training step writes, for every frame under it,
# the frame's file and how far into its code the frame stands (the line-table entries CPython 3.11
# scans to find its line: what TensorFlow pays for each frame on every eager op, adapters/worker.py).
FRAME_PROBE = """

def _frame_positions(frame):
    out = []
    while frame is not None:
        code = frame.f_code
        stands = sum(1 for start, _end, _line in code.co_lines() if start <= frame.f_lasti)
        out.append([code.co_filename, code.co_name, stands])
        frame = frame.f_back
    return out


_unprobed_train_step = NumpyMlp.train_step


def _probed_train_step(self, x, y):
    import json
    import sys

    if not os.path.exists({path!r}):
        with open({path!r}, "w") as out:
            json.dump(_frame_positions(sys._getframe(1)), out)
    return _unprobed_train_step(self, x, y)


NumpyMlp.train_step = _probed_train_step
"""


def test_the_worker_keeps_its_frames_under_each_step_short(tmp_path) -> None:
    """TensorFlow captures the Python stack on every eager op; the worker's frames under the
    timed loop once stood 1,100 line-table entries in (its 200-line main) and cost eager
    TensorFlow 5-12 % of its tokens/s (docs/generation.md, "The harness's cost")."""
    site = site_with_plugin(tmp_path)
    frames_file = tmp_path / "frames.json"
    adapter = site / "numpy_mlp" / "adapter.py"
    adapter.write_text(adapter.read_text() + FRAME_PROBE.format(path=str(frames_file)))
    tiny = ["--framework", "numpy-mlp", "--api", "numpy", "--model", "mlp", "--threads", "1"]
    tiny += ["--epochs", "1", "--steps-per-epoch", "2", "--train-samples", "200"]
    tiny += ["--test-samples", "40", "--batch-size", "32", "--json"]
    trained = _cli(site, tmp_path / "home", "run", *tiny)
    assert trained.returncode == 0, trained.stderr[-3000:]
    frames = json.loads(frames_file.read_text())
    worker = [f for f in frames if Path(f[0]) == adapters_dir() / "worker.py"]
    assert {name for _, name, _ in worker} >= {"<module>", "main"}, frames
    assert sum(stands for *_, stands in worker) <= 300, worker
