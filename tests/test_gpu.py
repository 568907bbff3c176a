"""GPU runs through tui-bench: torch eager/compile and Keras on torch and on JAX, in
every precision, both timing modes, both input paths; allocator peaks beside NVML; NVML sampling
and steady-window energy; no preallocation. Marked ``gpu``: they skip cleanly where the runtime
sees no CUDA device (this project's CPU machines), and run on a GPU box with
``pytest -m gpu tests/test_gpu.py`` once config.toml points the runtimes at a CUDA python
(docs/gpu.md)."""

from __future__ import annotations

import functools
import subprocess

import pytest

from tui_bench.engine import catalog
from tui_bench.engine.machine import runtimes
from tui_bench.engine.machine.sampler import COUNTER_MIN_WINDOW_S
from tui_bench.engine.results.history import History
from tui_bench.engine.runs.runner import execute
from tui_bench.engine.spec import RunSpec

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

PROBE = {
    "torch": "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)",
    "jax": "import jax; print(len([d for d in jax.devices() if d.platform == 'gpu']))",
}


@functools.cache
def gpus_seen(framework: str, api: str) -> tuple[runtimes.Runtime | None, str]:
    """(runtime, why not) for a framework/API whose runtime sees a CUDA GPU."""
    try:
        runtime = runtimes.resolve(framework, api)
    except runtimes.RuntimeUnavailable as exc:
        return None, str(exc)
    count, why = cuda_devices(runtime.python, "jax" if api == "jax" else "torch")
    if why:
        return None, why
    return (runtime, "") if count > 0 else (None, f"{runtime.python} sees no CUDA GPU")


@functools.cache
def cuda_devices(python: str, library: str) -> tuple[int, str]:
    """(CUDA devices this interpreter's torch or JAX sees, why the probe failed): asked once per
    interpreter, as torch eager and compile share one (the probe imports the library: seconds)."""
    try:
        out = subprocess.run(
            [python, "-I", "-c", PROBE[library]], capture_output=True, text=True, timeout=120
        )
        return int(out.stdout.strip().splitlines()[-1]), ""
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        return 0, f"probe failed: {exc}"


def gpu_run(framework: str, api: str, **changes):
    runtime, why = gpus_seen(framework, api)
    if runtime is None:
        pytest.skip(f"{framework}/{api}: {why}")
    fields = {
        "framework": framework,
        "api": api,
        "device": "gpu",
        "threads": 1,
        "batch_size": 128,
        "epochs": 1,
        "steps_per_epoch": 24,
        "warmup_steps": 4,
        "train_samples": 4000,
        "test_samples": 256,
        "timing_window": 10,
        **changes,
    }
    spec = RunSpec(**fields).validate()
    result = execute(spec, History(), runtime=runtime, stall_timeout=600, sample_interval=0.2)
    assert result.ok, f"{spec.label()} {changes}: {result.reason}\n{result.log_tail}"
    return result


MATRIX = [
    (precision, timing, input_path)
    for precision in catalog.PRECISIONS
    for timing in catalog.TIMINGS
    for input_path in catalog.INPUTS
]


@pytest.mark.parametrize("api", ["eager", "compile"])
@pytest.mark.parametrize(("precision", "timing", "input_path"), MATRIX)
def test_torch_on_gpu_every_precision_timing_and_input(api, precision, timing, input_path):
    result = gpu_run("torch", api, precision=precision, timing=timing, input=input_path)
    settings, summary, metrics = result.started["settings"], result.summary, result.metrics()
    assert result.started["device"].startswith("cuda")
    assert settings["matmul_tf32"] is (precision == "tf32")
    assert settings["cudnn_tf32"] is (precision == "tf32")
    assert settings["autocast"] == {"amp-fp16": "float16", "bf16": "bfloat16"}.get(precision)
    assert settings["loss_scaling"] is (precision == "amp-fp16")
    assert settings["autotune"] == "cudnn.benchmark=True"
    assert summary["input"] == input_path and summary["timing"] == timing
    if timing == "pipelined":
        assert "device events" in summary["step_source"]
    assert summary["allocator_peak_mib"] > 0 and "max_memory_allocated" in summary["allocator"]
    assert metrics["res_peak_gpu_mem_mib"] >= summary["allocator_peak_mib"]  # NVML: device-wide
    assert result.epochs[0]["loss"] > 0


@pytest.mark.parametrize("api", ["torch", "jax"])
@pytest.mark.parametrize(("precision", "timing", "input_path"), MATRIX)
def test_keras_on_gpu_every_precision_timing_and_input(api, precision, timing, input_path):
    result = gpu_run("keras", api, precision=precision, timing=timing, input=input_path)
    settings, summary = result.started["settings"], result.summary
    assert settings["compile"] == f"jit_compile={api == 'jax'}"
    policy = {"amp-fp16": "mixed_float16", "bf16": "mixed_bfloat16"}.get(precision, "float32")
    assert settings["policy"] == policy
    assert summary["input"] == input_path and summary["timing"] == timing
    assert summary["allocator_peak_mib"] > 0 and summary["allocator"]


@pytest.mark.gpu_alone
def test_nvml_sampling_and_steady_window_energy():
    # Steady windows of seconds: the counter moves in ~0.1 s steps and is read only over 1 s or
    # more. VGG16's 312 steps of ~6 ms on an H200 (the CNN's 2 ms steps, 375 at most, are not).
    result = gpu_run(
        "torch", "eager", model="vgg16", dataset="synthetic-cifar10", epochs=2,
        steps_per_epoch=None, train_samples=None,
    )  # fmt: skip
    metrics = result.metrics()
    assert metrics["res_mean_gpu_util"] is not None and metrics["res_peak_gpu_mem_mib"] > 0
    assert metrics["res_steady_windows"] == 2
    window = metrics["res_steady_s"] / 2
    assert window >= COUNTER_MIN_WINDOW_S, f"{window:.2f} s windows: a faster GPU, more steps"
    assert 0 < metrics["res_steady_energy_j"] < metrics["res_energy_j"]
    assert metrics["gpu_samples_per_joule"] > 0 and "samples_per_joule" not in metrics


def test_no_framework_preallocates_the_gpu():
    """JAX takes 75 % of the GPU unless told otherwise; the run must hold far less."""
    result = gpu_run("keras", "jax", steps_per_epoch=10)
    total = None
    from tui_bench.engine.machine.sampler import Nvml

    devices = Nvml().devices()
    if devices:
        total = devices[0]["memory_total_mib"]
    assert total and result.metrics()["res_peak_gpu_mem_mib"] < 0.5 * total


@pytest.mark.gpu_alone
def test_synced_and_pipelined_reference_cnn_on_gpu():
    # 200 steps need 32,000 samples (20 % validate): 4,000 capped the epoch at 25.
    synced = gpu_run("torch", "eager", steps_per_epoch=200, train_samples=33_000)
    pipelined = gpu_run(
        "torch", "eager", steps_per_epoch=200, train_samples=33_000, timing="pipelined"
    )
    ratio = pipelined.summary["samples_per_s"] / synced.summary["samples_per_s"]
    assert ratio > 0.9, ratio  # without per-step syncs a GPU loop is never much slower
