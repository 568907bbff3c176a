"""Managed runtimes, subprocess probes and their cache, the runtime CLI, and lines of code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui_bench import cli
from tui_bench.engine import catalog
from tui_bench.engine.machine import runtimes
from tui_bench.engine.results import loc


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUI_BENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TUI_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_BENCH_CONFIG", str(tmp_path / "config.toml"))
    # These tests create and break runtimes: never in the machine's real runtimes directory.
    monkeypatch.setenv("TUI_BENCH_RUNTIMES_DIR", str(tmp_path / "runtimes"))
    return tmp_path


# -- setup ---------------------------------------------------------------------------------------
def test_legacy_runtime_refuses_a_too_new_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "_python_version", lambda python: (3, 12, 4))
    with pytest.raises(runtimes.RuntimeSetupError) as info:
        runtimes.setup_plan("tf-legacy")
    message = str(info.value)
    assert "needs Python <= 3.11" in message and "3.12" in message and "--python" in message
    assert "\n" not in message
    # The other runtimes have wheels for 3.12 and plan normally.
    assert runtimes.setup_plan("tensorflow")[1][-3:] == [
        "tensorflow-cpu==2.21.0",
        "keras==3.15.1",
        "numpy>=1.26",
    ]


def test_unknown_runtime_and_missing_gpu_variant_are_one_line_errors() -> None:
    with pytest.raises(runtimes.RuntimeSetupError, match="no managed runtime named 'caffe'"):
        runtimes.setup_plan("caffe")
    with pytest.raises(runtimes.RuntimeSetupError, match="no managed GPU variant"):
        runtimes.setup_plan("torch", gpu=True)
    assert "mxnet-cu112==1.9.1" in runtimes.setup_plan("mxnet", gpu=True)[1]


def test_every_torch_requirement_is_pinned() -> None:
    # An unpinned torch pulls gigabytes of CUDA packages.
    for spec in runtimes.MANAGED.values():
        for package in spec.packages + (spec.gpu_packages or ()):
            if package.split("[")[0].split("=")[0].strip() == "torch":
                assert package == "torch==2.13.0"


def test_venv_is_created_without_system_site_packages() -> None:
    plan = runtimes.setup_plan("mxnet")
    assert plan[0][1:3] == ["-m", "venv"] and "--system-site-packages" not in plan[0]


def test_setup_creates_an_isolated_env_streams_pip_and_probes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real (small) managed environment: pip's output is streamed, the result is probed, and
    the new interpreter cannot see the app's packages."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    tiny = runtimes.ManagedSpec("tiny", ("numpy",), ("numpy",), "numpy only")
    monkeypatch.setitem(runtimes.MANAGED, "tiny", tiny)
    lines: list[str] = []
    python = runtimes.setup("tiny", on_line=lines.append)
    assert lines[0].startswith("[1/2]") and any(line.startswith("[2/2]") for line in lines)
    assert any("numpy" in line for line in lines[2:])
    probe = runtimes.probe(str(python), "tiny")
    assert probe.ok and probe.numpy
    sees_app = subprocess.run([str(python), "-I", "-c", "import textual"], capture_output=True)
    assert sees_app.returncode != 0
    # pip compiled nothing; the isolated probe wrote the bytecode of what it imported, even where
    # the environment says not to write any (-I ignores PYTHONDONTWRITEBYTECODE).
    site = next(python.parent.parent.glob("lib/python3*/site-packages"))
    assert list((site / "numpy").glob("__pycache__/__init__.*.pyc"))
    assert not list((site / "numpy" / "f2py").glob("__pycache__/*.pyc"))


def test_failed_setup_is_one_line_and_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = runtimes.ManagedSpec("broken", ("tui-bench-no-such-package==0.0.1",), (), "")
    monkeypatch.setitem(runtimes.MANAGED, "broken", broken)
    with pytest.raises(runtimes.RuntimeSetupError) as info:
        runtimes.setup("broken", on_line=lambda line: None)
    assert "setting up runtime 'broken' failed" in str(info.value)
    assert "\n" not in str(info.value)
    assert not runtimes.managed_dir("broken").exists()


# -- probes --------------------------------------------------------------------------------------
def test_probe_runs_in_a_subprocess_and_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    first = runtimes.probe(sys.executable, ("json",))
    assert first.ok and first.python_version == ".".join(map(str, sys.version_info[:3]))
    assert first.modules["json"]["version"]

    def no_subprocess(*args, **kwargs):
        raise AssertionError("probe ran again despite a cache entry")

    monkeypatch.setattr(runtimes.subprocess, "run", no_subprocess)
    again = runtimes.probe(sys.executable, ("json",))
    assert again.modules == first.modules


def test_a_probe_that_writes_the_first_bytecode_is_still_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime installed with --no-compile has no site-packages/__pycache__ until its first
    import (the end-of-setup probe's) makes one: that changes the mtime the cache key holds."""
    venv = tmp_path / "runtime"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "tui_bench_top_module.py").write_text("VALUE = 1\n", encoding="utf-8")
    python = str(venv / "bin" / "python")
    first = runtimes.probe(python, ("tui_bench_top_module",))
    assert (site / "__pycache__").is_dir()  # the probe's import wrote it

    def no_subprocess(*args, **kwargs):
        raise AssertionError("probe ran again: the runtime did not change")

    monkeypatch.setattr(runtimes.subprocess, "run", no_subprocess)
    assert runtimes.probe(python, ("tui_bench_top_module",)).modules == first.modules


def test_probe_reports_a_module_that_fails_to_import() -> None:
    probe = runtimes.probe(sys.executable, ("tui_bench_no_such_module",))
    assert not probe.ok
    assert "tui_bench_no_such_module: ModuleNotFoundError" in probe.problem


def test_corrupt_probe_cache_costs_only_a_reprobe(isolated: Path) -> None:
    cache = isolated / "cache" / "runtime-probes.json"
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json", encoding="utf-8")
    assert runtimes.probe(sys.executable, ("json",)).ok
    assert json.loads(cache.read_text(encoding="utf-8"))


def test_missing_runtime_is_unavailable_with_the_fix_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtimes.importlib.util, "find_spec", lambda name: None)
    found = runtimes.availability("keras", "jax")
    assert not found.ok
    assert found.runtime == "keras-jax"
    assert found.fix == "tui-bench runtime setup keras-jax"


def test_configured_interpreter_that_lacks_the_framework(isolated: Path) -> None:
    (isolated / "config.toml").write_text(
        f'[runtimes.mxnet]\npython = "{sys.executable}"\n', encoding="utf-8"
    )
    found = runtimes.availability("mxnet", "module")
    assert found.source == "config"
    if found.ok:
        pytest.skip("the app environment has mxnet")
    assert "mxnet" in found.problem and "runtime setup mxnet" in found.fix


def test_runtime_list_json_covers_every_framework_api(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtimes.importlib.util, "find_spec", lambda name: None)
    assert cli.main(["runtime", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    expected = {(fw.name, api) for fw in catalog.FRAMEWORKS.values() for api in fw.apis}
    assert {(row["framework"], row["api"]) for row in rows} == expected
    estimator = next(row for row in rows if row["api"] == "estimator")
    assert estimator["runtime"] == "tf-legacy" and not estimator["ok"]
    assert estimator["fix"] == "tui-bench runtime setup tf-legacy"
    # CNTK is listed, unavailable with the reason, and no command claims to fix it.
    cntk = next(row for row in rows if row["framework"] == "cntk")
    assert not cntk["ok"] and cntk["fix"] is None and cntk["python"] is None
    assert cntk["problem"] == catalog.framework("cntk").unavailable
    assert "3.6" in cntk["problem"] and "registries" in cntk["problem"]


def test_runtime_list_table_shows_cntk_unavailable_with_its_reason(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per row: the reason is not folded
    assert cli.main(["runtime", "list"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "cntk / keras2" in out and "Python 2.7, 3.5 and 3.6" in out
    assert "runtime setup cntk" not in out


def test_unavailable_framework_never_resolves_and_is_never_set_up() -> None:
    with pytest.raises(runtimes.RuntimeUnavailable, match="CNTK cannot run here: CNTK's last"):
        runtimes.resolve("cntk", "keras2")
    assert "cntk" not in runtimes.needed_runtimes()
    assert "cntk" not in runtimes.MANAGED


def test_theano_runtime_plan_pins_the_stack_and_refuses_python_312(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packages = runtimes.setup_plan("theano")[1]
    for pin in ("theano==1.0.5", "keras==2.3.1", "numpy<1.24"):
        assert pin in packages
    assert any(p.startswith("scipy-openblas32==") for p in packages)
    assert "theano" in runtimes.needed_runtimes() or runtimes.importlib.util.find_spec("theano")
    monkeypatch.setattr(runtimes, "_python_version", lambda python: (3, 12, 1))
    with pytest.raises(runtimes.RuntimeSetupError, match="runtime 'theano' needs Python <= 3.11"):
        runtimes.setup_plan("theano")


def test_runtime_setup_cli_reports_a_refusal_in_one_line(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtimes, "_python_version", lambda python: (3, 13, 0))
    assert cli.main(["runtime", "setup", "tf-legacy"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tui-bench: error: runtime 'tf-legacy' needs Python <= 3.11")
    assert "\n" not in err


def test_runtime_setup_shows_one_line_per_runtime_and_keeps_pip_output_in_a_log(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing install (a fake command, no real runtime built): the terminal gets one line for
    the runtime and one error line naming the log; the installer's output is only in the log."""
    noisy_failure = (
        "import sys\n"
        "for i in range(50): print(f'Collecting package-{i}')\n"
        "print('ERROR: No matching distribution found for tui-bench-nothing')\n"
        "sys.exit(1)\n"
    )
    monkeypatch.setattr(
        runtimes,
        "setup_plan",
        lambda name, gpu=False, python=None: [[sys.executable, "-c", noisy_failure]],
    )
    assert cli.main(["runtime", "setup", "mxnet"]) == 1
    captured = capsys.readouterr()
    out_lines = captured.out.strip().splitlines()
    assert len(out_lines) == 1, captured.out
    assert out_lines[0].startswith("mxnet: installing mxnet==1.9.1, numpy<1.24: failed after")
    assert "Collecting" not in captured.out + captured.err
    err = captured.err.strip()
    assert "\n" not in err
    assert err.startswith(
        "tui-bench: error: setting up runtime 'mxnet' failed: "
        "ERROR: No matching distribution found for tui-bench-nothing (full log: "
    )
    log = Path(err.rsplit("(full log: ", 1)[1].rstrip(")"))
    assert log == runtimes.setup_log_path("mxnet")
    assert str(log).startswith(os.environ["TUI_BENCH_CACHE"])
    logged = log.read_text(encoding="utf-8")
    assert "Collecting package-49" in logged and "ERROR: No matching distribution" in logged
    assert not runtimes.managed_dir("mxnet").exists()


def test_runtime_setup_all_keeps_working_runtimes_and_stops_at_a_failure(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    working = runtimes.managed_python("tensorflow")
    working.parent.mkdir(parents=True)
    working.symlink_to(sys.executable)
    monkeypatch.setattr(runtimes, "needed_runtimes", lambda: ["tensorflow", "theano"])
    monkeypatch.setattr(
        runtimes, "probe", lambda python, name, refresh=False: runtimes.Probe(python, ok=True)
    )
    monkeypatch.setattr(
        runtimes,
        "setup_plan",
        lambda name, gpu=False, python=None: [[sys.executable, "-c", "raise SystemExit(3)"]],
    )
    assert cli.main(["runtime", "setup", "all"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[0] == "runtimes this installation needs: tensorflow, theano"
    assert lines[1].startswith("[1/2] tensorflow: already set up:")
    assert (
        lines[2].startswith("[2/2] theano: installing theano==1.0.5") and "failed after" in lines[2]
    )
    assert captured.err.strip().startswith(
        "tui-bench: error: setting up runtime 'theano' failed: exit code 3 (full log: "
    )


def test_runtime_setup_all_runs_two_at_a_time_and_starts_none_after_a_failure(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    """Two pip installs side by side (each keeps about one core busy); once one has failed, the
    one running beside it finishes and no further setup starts."""
    spans = isolated / "spans"
    spans.mkdir()
    monkeypatch.setattr(runtimes, "needed_runtimes", lambda: ["tensorflow", "theano", "mxnet"])
    monkeypatch.setattr(
        runtimes, "probe", lambda python, name, refresh=False: runtimes.Probe(python, ok=True)
    )
    # tensorflow fails at once; theano, started beside it, works for a while; mxnet must not start
    install = (
        "import pathlib, sys, time\n"
        "name = sys.argv[1]; spans = pathlib.Path(sys.argv[2])\n"
        "(spans / f'{name}.start').write_text(str(time.time()))\n"
        "if name == 'tensorflow': raise SystemExit(3)\n"
        "time.sleep(1.5)\n"
        "(spans / f'{name}.end').write_text(str(time.time()))\n"
    )

    def plan(name: str, gpu: bool = False, python: str | None = None) -> list[list[str]]:
        python_path = runtimes.managed_python(name)
        make = f"import pathlib; p = pathlib.Path({str(python_path)!r}); "
        make += "p.parent.mkdir(parents=True); p.touch()"
        return [
            [sys.executable, "-c", install, name, str(spans)],
            [sys.executable, "-c", make],
        ]

    monkeypatch.setattr(runtimes, "setup_plan", plan)
    assert cli.main(["runtime", "setup", "all", "--jobs", "2"]) == 1
    captured = capsys.readouterr()
    started = sorted(p.stem for p in spans.glob("*.start"))
    assert started == ["tensorflow", "theano"]  # side by side; mxnet never started
    assert (spans / "theano.end").exists()  # the one running beside the failure finished
    assert (
        float((spans / "theano.start").read_text())
        < float((spans / "tensorflow.start").read_text()) + 1.0
    )
    lines = captured.out.strip().splitlines()
    assert any(
        line.startswith("[1/3] tensorflow: installing") and "failed after" in line for line in lines
    )
    assert any(
        line.startswith("[2/3] theano: installing") and ": done in" in line for line in lines
    )
    assert not any("mxnet:" in line for line in lines)
    assert captured.err.strip().startswith(
        "tui-bench: error: setting up runtime 'tensorflow' failed: exit code 3 (full log: "
    )
    assert cli.main(["runtime", "setup", "all", "--jobs", "0"]) == 2
    assert "--jobs must be a whole number of 1 or more" in capsys.readouterr().err


# -- config file ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[runtime.torch]\npython = "/x"\n', "unknown key runtime (known: "),
        ('[runtimes.torch]\npyhton = "/x"\n', "unknown key runtimes.torch.pyhton (known: "),
        ("[runtimes.torch]\npython = 3\n", "runtimes.torch.python must be a path, got int"),
        ('runtimes = "torch"\n', "runtimes must be a table, got str"),
        ("[keys]\ncancel_run = true\n", "keys.cancel_run must be a key name, got bool"),
        ('[ui]\nrefresh_hz = "fast"\n', "ui.refresh_hz must be a number, got str"),
        ('[ui]\ncolour = "red"\n', "unknown key ui.colour (known: "),
        (
            '[runtimes.tensorflw]\npython = "/x"\n',
            "unknown key runtimes.tensorflw (runtimes are: cntk, jax, keras-jax, keras-torch, mxnet, "
            "tensorflow, tf-legacy, theano, torch)",
        ),
    ],
)
def test_config_file_is_checked_against_its_declared_keys(
    isolated: Path, text: str, message: str
) -> None:
    from tui_bench.engine.config import ConfigError, load_config

    path = isolated / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value).startswith(f"{path}: {message}")
    assert "\n" not in str(info.value)


def test_config_file_accepts_every_declared_key(isolated: Path) -> None:
    from tui_bench.engine.config import SETTINGS, load_config

    (isolated / "config.toml").write_text(
        '[runtimes.torch]\npython = "/usr/bin/python3"\n[keys]\ncancel_run = "ctrl+x"\n'
        '[ui]\ntheme = "textual-dark"\nrefresh_hz = 2\n',
        encoding="utf-8",
    )
    config = load_config()
    assert config["ui"]["refresh_hz"] == 2 and config["keys"]["cancel_run"] == "ctrl+x"
    assert {s.key for s in SETTINGS} == {"runtimes.*.python", "keys.*", "ui.theme", "ui.refresh_hz"}
    assert all(s.help for s in SETTINGS)


def test_a_bad_config_file_is_one_cli_error_line(
    isolated: Path, capsys: pytest.CaptureFixture
) -> None:
    (isolated / "config.toml").write_text("[runtimes.torch]\npython = 3\n", encoding="utf-8")
    assert cli.main(["sysinfo", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runtimes.torch.python must be a path" in err


# -- catalog hooks -------------------------------------------------------------------------------
def test_keras_backend_and_affinity_are_per_api() -> None:
    from tui_bench.engine.runs.worker_launch import worker_command, worker_environment
    from tui_bench.engine.spec import RunSpec

    jax_spec = RunSpec(framework="keras", api="jax", threads=1).validate()
    assert worker_environment(jax_spec)["KERAS_BACKEND"] == "jax"
    assert "--affinity" in worker_command(jax_spec, sys.executable, 3)
    torch_spec = RunSpec(framework="keras", api="torch", threads=1).validate()
    assert worker_environment(torch_spec)["KERAS_BACKEND"] == "torch"
    assert "--affinity" not in worker_command(torch_spec, sys.executable, 3)
    mxnet_env = worker_environment(RunSpec(framework="mxnet", api="gluon", threads=2).validate())
    assert mxnet_env["OMP_NUM_THREADS"] == "2"
    tf_env = worker_environment(RunSpec(framework="tensorflow", api="xla", threads=2).validate())
    assert tf_env["TF_NUM_INTRAOP_THREADS"] == tf_env["TF_NUM_INTEROP_THREADS"] == "2"
    theano_env = worker_environment(RunSpec(framework="theano", api="theano", threads=2).validate())
    assert theano_env["OMP_NUM_THREADS"] == theano_env["OPENBLAS_NUM_THREADS"] == "2"
    assert theano_env["KERAS_BACKEND"] == ""  # the plain Theano API does not import Keras
    # Theano's compile cache goes under tui-bench's cache directory.
    assert theano_env["TUI_BENCH_WORKER_CACHE"].startswith(os.environ["TUI_BENCH_CACHE"])
    keras2_env = worker_environment(RunSpec(framework="theano", api="keras2").validate())
    assert keras2_env["KERAS_BACKEND"] == "theano"
    assert catalog.runtime_for("tensorflow", "estimator") == "tf-legacy"


def test_a_users_keras_backend_does_not_leak_into_tensorflow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tui_bench.engine.runs.worker_launch import worker_environment
    from tui_bench.engine.spec import RunSpec

    monkeypatch.setenv("KERAS_BACKEND", "jax")
    for api in catalog.framework("tensorflow").apis:
        spec = RunSpec(framework="tensorflow", api=api).validate()
        assert worker_environment(spec)["KERAS_BACKEND"] == "tensorflow"


# -- lines of code ------------------------------------------------------------------------------
SOURCE = """
# tui-bench:begin model
def build():
    # a comment is not code

    return 1
# tui-bench:end model
x = 1  # outside the markers
# tui-bench:begin step
def step():
    return 2
# tui-bench:end step
# tui-bench:begin step graph
step = compile(step)
# tui-bench:end step
"""


def test_count_lines_between_markers_per_api() -> None:
    assert loc.count_lines(SOURCE, "eager") == {"model": 2, "step": 2}
    assert loc.count_lines(SOURCE, "graph") == {"model": 2, "step": 3}


SCOPED = """
# tui-bench:begin model
def build(model):
# tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model cnn
        a = conv()
        b = pool(a)
        # tui-bench:end model
    elif model == "mlp":
        # tui-bench:begin model mlp
        b = dense()
        # tui-bench:end model
    # tui-bench:begin model graph cnn vgg16
    b = fuse(b)
    # tui-bench:end model
    # tui-bench:begin model
    return b
    # tui-bench:end model
"""


def test_model_scoped_blocks_count_for_their_model_only() -> None:
    def model_lines(api: str, model: str | None) -> int:
        return loc.count_lines(SCOPED, api, model, apis=("eager", "graph"))["model"]

    assert model_lines("eager", "cnn") == 2 + 2  # shared + its own
    assert model_lines("eager", "mlp") == 2 + 1  # the cnn's lines do not leak in
    assert model_lines("graph", "cnn") == 2 + 2 + 1  # scoped to an API and models at once
    assert model_lines("graph", "mlp") == 2 + 1
    assert model_lines("eager", None) == 2 + 2 + 1  # no model: every model's lines


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("# tui-bench:begin model\nx = 1\n", "x.py:1: tui-bench:begin never ended"),
        ("x = 1\n# tui-bench:end step\n", "x.py:2: .*without its begin"),
        ("# tui-bench:begin model\n# tui-bench:begin step\n", "x.py:2: nested"),
        ("# tui-bench:begin weights\n", "unknown marker kind"),
        ("# tui-bench:begin model cnnn\n# tui-bench:end model\n", "x.py:1: 'cnnn' is neither"),
        ("# tui-bench:begin model\n# tui-bench:end model cnn\n", "x.py:2: .*only the kind"),
    ],
)
def test_bad_markers_name_the_line(source: str, problem: str) -> None:
    with pytest.raises(loc.MarkerError, match=problem) as caught:
        loc.count_lines(source, "eager", where="x.py", apis=("eager", "graph"))
    assert "\n" not in str(caught.value)


STEP_LINES_OF_ONE_MODEL = {("mxnet", "module"): {"gpt"}, ("theano", "keras2"): {"gpt"}}


def test_each_adapter_model_counts_its_own_lines_only() -> None:
    """Per framework × API, a model's count is the shared lines plus that model's own: the
    difference between two models is exactly what their own blocks hold, so no model's lines
    leak into another's count, and the count with no model adds every model's lines up."""
    for fw in catalog.FRAMEWORKS.values():
        if fw.unavailable:
            continue
        for api in fw.apis:
            every = loc.lines_of_code(fw.name, api)["loc_model"]
            per_model = {m: loc.lines_of_code(fw.name, api, m)["loc_model"] for m in catalog.MODELS}
            assert len(set(per_model.values())) > 1, (fw.name, api, per_model)
            assert all(n < every for n in per_model.values()), (fw.name, api, per_model)
            steps = {m: loc.lines_of_code(fw.name, api, m)["loc_step"] for m in catalog.MODELS}
            # The step is the API's, whatever the model, but for step lines only one model
            # needs, marked for it: the Module API's gpt rescales its gradient to a mean over
            # every position (one line), Keras 2's compiles its exact next-token loss on integer
            # targets (two).
            own = {m for m in steps if steps[m] != steps["mlp"]}
            assert own <= STEP_LINES_OF_ONE_MODEL.get((fw.name, api), set()), (fw.name, api, steps)


def test_reference_cnn_counts_only_its_layers() -> None:
    """The reference CNN of Nayak & Jain through Keras on TensorFlow: the function's head, the
    eight layers in their list, the Sequential that wraps them; none of the VGG16's 13
    convolutions, the FNN's or the LSTM's layers."""
    # The Keras builders are shared with Keras 3 (adapters/keras_models.py, which the adapter
    # uses): every counted model line of tf.keras sits there.
    source = loc.counted_sources("tensorflow")[-1].read_text(encoding="utf-8")
    cnn = loc.lines_of_code("tensorflow", "keras", "cnn")
    assert cnn["loc_model"] == 4 + 10 + 1
    vgg = loc.lines_of_code("tensorflow", "keras", "vgg16")["loc_model"]
    assert vgg != cnn["loc_model"]
    # Moving one VGG16 line into the CNN's block would change the CNN's count: the count
    # follows the markers, not the file.
    leaked = source.replace(
        '        # tui-bench:end model\n    elif model == "mlp":',
        "        padding = 'same'\n        # tui-bench:end model\n    elif model == \"mlp\":",
    )
    assert leaked != source
    apis = catalog.framework("tensorflow").apis
    assert loc.count_lines(leaked, "keras", "cnn", apis=apis)["model"] == cnn["loc_model"] + 1
    assert (
        loc.count_lines(leaked, "keras", "mlp", apis=apis)["model"]
        == (loc.lines_of_code("tensorflow", "keras", "mlp")["loc_model"])
    )


def test_every_framework_api_has_model_and_step_lines() -> None:
    for fw in catalog.FRAMEWORKS.values():
        if fw.unavailable:
            continue  # listed for the studies, no adapter
        for api in fw.apis:
            counts = loc.lines_of_code(fw.name, api)
            assert counts["loc_model"] > 10, (fw.name, api)
            assert counts["loc_step"] > 3, (fw.name, api)
    # API-specific blocks count only for their API.
    assert loc.lines_of_code("tensorflow", "graph")["loc_step"] == (
        loc.lines_of_code("tensorflow", "eager")["loc_step"] + 1
    )
    assert (
        loc.lines_of_code("mxnet", "module")["loc_model"]
        != (loc.lines_of_code("mxnet", "gluon")["loc_model"])
    )


def test_a_runtime_missing_the_backend_fails_with_the_fix(isolated: Path) -> None:
    """A Keras backend whose package is missing is a one-line failure naming the fix, not a crash."""
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs.runner import execute
    from tui_bench.engine.spec import RunSpec

    if runtimes.importlib.util.find_spec("keras") is not None:
        pytest.skip("the app environment has keras")
    (isolated / "config.toml").write_text(
        f'[runtimes.keras-jax]\npython = "{sys.executable}"\n', encoding="utf-8"
    )
    spec = RunSpec(framework="keras", api="jax", train_samples=640).validate()
    result = execute(spec, History(isolated / "home"))
    assert result.status == "failed"
    assert result.reason.startswith("ModuleNotFoundError: No module named 'keras'")
    assert result.reason.endswith("runtime 'keras-jax' lacks it: tui-bench runtime setup keras-jax")


def test_runtime_setup_all_except_leaves_those_out(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    """The README's test command installs torch into the app while the other runtimes are set
    up beside it: `--except torch` keeps `all` from making a torch runtime of its own."""
    monkeypatch.setattr(runtimes, "needed_runtimes", lambda: ["torch", "mxnet"])
    monkeypatch.setattr(
        runtimes, "probe", lambda python, name, refresh=False: runtimes.Probe(python, ok=True)
    )
    planned = []

    def plan(name: str, gpu: bool = False, python: str | None = None) -> list[list[str]]:
        planned.append(name)
        python_path = runtimes.managed_python(name)
        make = f"import pathlib; p = pathlib.Path({str(python_path)!r}); "
        make += "p.parent.mkdir(parents=True); p.touch()"
        return [[sys.executable, "-c", make]]

    monkeypatch.setattr(runtimes, "setup_plan", plan)
    assert cli.main(["runtime", "setup", "all", "--except", "torch"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "runtimes this installation needs: mxnet (left out: torch)"
    assert planned == ["mxnet"]
    assert cli.main(["runtime", "setup", "all", "--except", "pytorch"]) == 2
    assert "--except takes a managed runtime" in capsys.readouterr().err
    assert cli.main(["runtime", "setup", "mxnet", "--except", "torch"]) == 2
    err = capsys.readouterr().err
    assert "--except goes with `runtime setup all`" in err and "Traceback" not in err
