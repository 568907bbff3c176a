"""The framework and hardware cards: cells come from real runtimes (probed in subprocesses) and
from the history; each test removes or changes the fact and checks the cell follows."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from histories import as_runs

from tui_bench import cli
from tui_bench.engine import catalog
from tui_bench.engine.machine import runtimes
from tui_bench.engine.paths import runtimes_home
from tui_bench.engine.results import cards
from tui_bench.engine.results.history import History

RUNTIMES_DIR = runtimes_home()  # the machine's runtimes, read before the fixture moves the home


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUI_BENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TUI_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_BENCH_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("TUI_BENCH_RUNTIMES_DIR", str(RUNTIMES_DIR))
    return tmp_path


def record(run_id, framework, api, model, dataset, device, status="finished", **extra):
    return {
        "id": run_id,
        "status": status,
        "started_at": "2026-11-20T10:00:00+00:00",
        "finished_at": extra.pop("finished_at", "2026-11-20T10:05:00+00:00"),
        "spec": {
            "framework": framework,
            "api": api,
            "model": model,
            "dataset": dataset,
            "device": device,
        },
        "env": extra.pop("env", {"cpu_model": "Test CPU 9000", "gpus": []}),
        "metrics": extra.pop("metrics", {}),
        **extra,
    }


def history_with(tmp_path: Path, *records) -> History:
    history = History(tmp_path / "home")
    for rec in records:
        history.add(rec)
    return history


# -- framework card: history facts ----------------------------------------------------------------
def test_tested_networks_and_datasets_come_from_finished_runs_only(tmp_path: Path) -> None:
    history = history_with(
        tmp_path,
        record("a", "theano", "keras2", "cnn", "synthetic-mnist", "cpu"),
        record(
            "b",
            "theano",
            "theano",
            "lstm",
            "synthetic-imdb",
            "cpu",
            finished_at="2026-11-21T09:00:00+00:00",
        ),
        record("c", "theano", "theano", "vgg16", "synthetic-cifar10", "cpu", status="failed"),
        record("d", "torch", "eager", "mlp", "mnist", "gpu:0"),
    )
    records = history.all()
    networks = cards.tested(as_runs(records), "theano", "model")
    assert "cnn (cpu; 1 run, last 2026-11-20)" in networks
    assert "lstm (cpu; 1 run, last 2026-11-21)" in networks
    assert "vgg16" not in networks  # it failed: not tested
    assert "mlp" not in networks  # another framework's
    assert cards.tested(as_runs(records), "theano", "dataset").startswith("synthetic-imdb")
    assert cards.tested(as_runs(records), "torch", "model") == "mlp (gpu:0; 1 run, last 2026-11-20)"
    assert cards.tested(as_runs(records), "mxnet", "model") == "none finished on this machine"


def test_framework_card_cells_follow_the_probe_and_go_missing_without_it(tmp_path: Path) -> None:
    """With the probe's facts the cells show them; without them the cells say missing."""
    history = history_with(tmp_path, record("a", "torch", "eager", "cnn", "mnist", "cpu"))

    def probe_with(license_: str | None):
        def probe(python, modules, refresh):
            info = {"distribution": "torch", "version": "9.9.9", "license": license_}
            info.update(
                build="CPU-only", gpus=0, gpu_names=[], cpu=["BLAS testblas"], multinode=["gloo"]
            )
            return {"modules": {m: dict(info) for m in modules}}

        return probe

    history.add(
        record(
            "elsewhere",
            "torch",
            "eager",
            "vgg16",
            "cifar10",
            "cpu",
            env={"host": "another-box", "cpu_model": "X"},
        )
    )
    found = {c.subject: c for c in cards.framework_card(history, probe=probe_with("BSD-3-Clause"))}
    torch = found["torch"].cells
    if "problems" in torch:
        pytest.skip(f"no torch runtime: {torch['problems']}")
    assert torch["license"] == "BSD-3-Clause (torch)"
    assert torch["version"] == "torch 9.9.9 (torch runtime)"
    assert "BLAS testblas" in torch["compatible hardware"]
    assert torch["multi-node support"] == "torch runtime, torch: gloo"
    assert torch["tested networks"].startswith("cnn (cpu; 1 run")
    assert "vgg16" not in torch["tested networks"]  # recorded on another machine
    gone = {c.subject: c for c in cards.framework_card(history, probe=probe_with(None))}
    assert gone["torch"].cells["license"] == cards.MISSING


def test_cntk_card_says_why_it_has_no_runtime(tmp_path: Path) -> None:
    def probe(python, modules, refresh):
        return {"error": "not needed here"}

    found = {c.subject: c for c in cards.framework_card(History(tmp_path / "home"), probe=probe)}
    cntk = found["cntk"].cells
    assert cntk["unavailable"] == catalog.framework("cntk").unavailable
    assert cntk["license"].startswith("no runtime")


# -- framework card: real runtimes ------------------------------------------------------------------
def _runtime_or_skip(framework: str, api: str) -> str:
    try:
        python = runtimes.resolve(framework, api).python
    except runtimes.RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    return python


@pytest.mark.slow
def test_theano_card_facts_come_from_its_runtime() -> None:
    python = _runtime_or_skip("theano", "keras2")
    facts = cards.probe_runtime(python, ("theano", "keras"))
    theano = facts["modules"]["theano"]
    assert "error" not in theano, theano
    assert (theano["distribution"], theano["version"], theano["license"]) == (
        "Theano",
        "1.0.5",
        "BSD",
    )
    assert theano["build"].startswith("CPU-only") and theano["gpus"] == 0
    assert any("scipy-openblas32" in lib for lib in theano["cpu"])
    assert facts["modules"]["keras"]["version"] == "2.3.1"
    assert facts["modules"]["keras"]["keras_backend"] == "theano"


@pytest.mark.slow
def test_torch_card_version_is_the_installed_distribution() -> None:
    python = _runtime_or_skip("torch", "eager")
    facts = cards.probe_runtime(python, ("torch",))
    torch = facts["modules"]["torch"]
    if Path(python).resolve() == Path(cli.sys.executable).resolve():
        assert torch["version"] == importlib.metadata.version("torch")  # metadata, no import
    assert torch["license"] and torch["build"]
    assert isinstance(torch["gpus"], int) and torch["multinode"] is not None


# -- hardware card ---------------------------------------------------------------------------------
H100 = "NVIDIA H100 80GB HBM3"
MACHINE = {
    "cpu_model": "Test CPU 9000",
    "logical_cores": 2,
    "gpus": [{"index": 0, "name": H100}],
}


def measured(device: str, threads: int) -> dict:
    """A probe result shaped like adapters/torch/hardware_probe.py's (the real one is tested below)."""
    return {
        "device": device,
        "framework": "torch 2.13.0",
        "threads": threads,
        "compute": [
            {"kernel": "matmul", "precision": "float32", "shape": "8×8 @ 8×8", "tflops": 0.05},
        ],
        "latency": {
            "what": "batch-1 inference of the reference CNN",
            "median_s": 0.002,
            "repeats": 20,
        },
        "method": "median of 5 timed calls",
    }


def test_hardware_card_energy_and_compatibility_come_from_history(tmp_path: Path) -> None:
    gpu_env = {"cpu_model": "Test CPU 9000", "gpus": [{"index": 0, "name": H100}]}
    history = history_with(
        tmp_path,
        record(
            "a",
            "torch",
            "eager",
            "cnn",
            "mnist",
            "gpu:0",
            env=gpu_env,
            metrics={"gpu_samples_per_joule": 812.5},
        ),
        record("b", "theano", "keras2", "cnn", "mnist", "cpu"),
        record("c", "mxnet", "gluon", "cnn", "mnist", "cpu", status="failed"),
        record(
            "d", "keras", "jax", "cnn", "mnist", "cpu", env={"cpu_model": "Other CPU", "gpus": []}
        ),
    )
    found = {c.subject: c for c in cards.hardware_card(MACHINE, history, measure=measured)}
    cpu, gpu = found["cpu"].cells, found["gpu:0"].cells
    assert cpu["compatibility"] == "theano/keras2 (1 run)"  # not the failed run, not another CPU
    assert gpu["compatibility"] == "torch/eager (1 run)"
    assert gpu["energy efficiency"].startswith("812.5 samples/J")
    assert cpu["energy efficiency"].startswith("not measured")
    assert "of 67 peak" in gpu["computing performance"]  # the vendor's H100 float32 figure
    assert "no vendor peak" in cpu["computing performance"]
    assert cpu["latency"].startswith("2.00 ms median")
    for metric in cards.NOT_MEASURABLE:
        assert cpu[metric].startswith("not measurable on one machine")
    empty = {
        c.subject: c
        for c in cards.hardware_card(MACHINE, History(tmp_path / "empty"), measure=measured)
    }
    assert empty["gpu:0"].cells["compatibility"] == "no finished run on this device yet"
    assert empty["gpu:0"].cells["energy efficiency"].startswith("no finished run")


def test_hardware_card_says_when_the_probe_could_not_run(tmp_path: Path) -> None:
    def broken(device: str, threads: int) -> dict:
        return {"error": "torch is not installed"}

    found = cards.hardware_card(MACHINE, History(tmp_path / "home"), measure=broken)
    assert found[0].cells["computing performance"] == "not measured: torch is not installed"


@pytest.mark.slow
def test_real_probe_measures_the_cpu_and_says_what_it_timed() -> None:
    _runtime_or_skip("torch", "eager")
    result = cards.run_hardware_probe("cpu", threads=1, size=256, repeats=3)
    assert "error" not in result, result
    kernels = {(row["kernel"], row["precision"]) for row in result["compute"]}
    assert ("matmul", "float32") in kernels and ("conv2d 3×3", "float32") in kernels
    for row in result["compute"]:
        assert row["tflops"] > 0 and row["median_s"] > 0
        assert row["tflops"] == pytest.approx(row["flops"] / row["median_s"] / 1e12)
    assert result["threads"] == 1
    assert "reference CNN" in result["latency"]["what"] and result["latency"]["median_s"] > 0
    assert "median of 3" in result["method"]


# -- the CLI -------------------------------------------------------------------------------------
def test_frameworks_command_markdown_and_json(capsys, monkeypatch, tmp_path: Path) -> None:
    def probe(python, modules, refresh):
        return {"error": "probe skipped in this test"}

    monkeypatch.setattr(cards, "probe_runtime", probe)
    assert cli.main(["frameworks", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## framework card\n")
    header = next(line for line in out.splitlines() if line.startswith("| metric |"))
    for fw in catalog.FRAMEWORKS.values():
        assert fw.label in header
    assert "| tested networks |" in out and "| unavailable |" in out
    assert cli.main(["frameworks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["subject"] for row in rows} == set(catalog.FRAMEWORKS)


def test_hardware_card_cpu_energy_comes_from_rapl_runs(tmp_path: Path) -> None:
    history = history_with(
        tmp_path,
        record(
            "b", "torch", "eager", "cnn", "mnist", "cpu", metrics={"cpu_samples_per_joule": 41.5}
        ),
    )
    cpu = cards.hardware_card(MACHINE, history, measure=measured)[0].cells
    assert cpu["energy efficiency"].startswith("41.5 samples/J best of 1 runs with RAPL")
