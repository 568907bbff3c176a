"""Real worker processes: a few PyTorch steps, and every way a worker can go wrong.

What every worker does whatever its framework (faults, hangs, cancels, seeds, records) runs on
the example numpy plugin (conftest's ``numpy_framework``): tui-bench's own worker around a numpy
MLP, started in ~0.3 s against ~4 s for torch; these tests then run with only ``.[dev]``
installed too. What torch does (its versions, devices, autocast, runtime) stays on torch."""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest
from conftest import require_module

from tui_bench.engine.results.history import History
from tui_bench.engine.runs.runner import execute
from tui_bench.engine.spec import RunSpec

TINY = dict(
    threads=1,
    epochs=2,
    steps_per_epoch=6,
    train_samples=1000,
    test_samples=200,
    batch_size=32,
    warmup_steps=2,
)


def tiny_spec(**changes) -> RunSpec:
    require_module("torch")  # the reference runtime: CI installs it with the package
    return RunSpec(**{**TINY, **changes}).validate()


def any_spec(**changes) -> RunSpec:
    """A run whose framework does not matter to the test: the numpy plugin's MLP (the test
    takes the ``numpy_framework`` fixture)."""
    fields = {"framework": "numpy-mlp", "api": "numpy", "model": "mlp", **TINY, **changes}
    return RunSpec(**fields).validate()


def run(spec=None, fault=None, **options):
    history = History()
    events: list[dict] = []
    result = execute(
        spec or tiny_spec(),
        history,
        on_event=events.append,
        fault=fault,
        sample_interval=0.2,
        **options,
    )
    return history, events, result


def test_real_pytorch_training_end_to_end():
    history, events, result = run()
    assert result.status == "finished", result.reason
    started = result.started
    assert started["param_count"] == 1_669_002
    assert started["threads_effective"] == 1 and started["framework_version"].startswith("2.13")
    assert started["steps_per_epoch"] == 6 and started["train_samples"] == 800
    # The runner names the worker process first (a later look can end it if the supervisor dies).
    assert events[0]["type"] == "worker" and events[0]["pid"] and events[0]["started"]
    kinds = [e["type"] for e in events if e["type"] not in ("steps", "sample", "steady", "worker")]
    assert kinds == [
        "run_started",
        "epoch_started",
        "epoch_finished",
        "epoch_started",
        "epoch_finished",
        "test_finished",
        "finished",
    ]
    losses = [x for e in events if e["type"] == "steps" for x in e["losses"]]
    assert len(losses) == 12 and all(x > 0 for x in losses)
    assert result.epochs[-1]["loss"] < result.epochs[0]["loss"]
    summary = result.summary
    assert summary["steady_steps"] == 10  # 12 steps minus 2 warm-up
    assert summary["step_median_s"] > 0 and summary["samples_per_s"] > 0
    assert summary["test_s"] > 0 and 0 <= summary["test_accuracy"] <= 1
    # recorded: summary in tinydb, series and log beside it
    record = history.get(result.run_id)
    assert record.status == "finished" and record.spec["threads"] == 1
    assert record.metrics["param_count"] == 1_669_002
    assert record.env["logical_cores"] >= 1 and record.worker["framework_version"]
    series = history.read_series(result.run_id)
    assert series[0]["type"] == "record" and series[-1]["type"] == "result"
    assert any(e["type"] == "epoch_finished" for e in series)


def test_same_seed_same_losses_different_seed_different(numpy_framework):
    _, _, a = run(any_spec(epochs=1))
    _, _, b = run(any_spec(epochs=1))
    _, _, c = run(any_spec(epochs=1, seed=1))
    assert a.epochs[0]["loss"] == b.epochs[0]["loss"]
    assert a.epochs[0]["loss"] != c.epochs[0]["loss"]


def test_framework_chatter_cannot_corrupt_events(numpy_framework):
    history, _, result = run(any_spec(), fault="chatter@epoch:1")
    assert result.status == "finished"
    assert result.malformed_lines == 0  # fake JSON on stdout never reached the event channel
    assert "absl noise" in history.log_path(result.run_id).read_text()


def test_malformed_event_lines_are_skipped_and_logged(numpy_framework):
    history, _, result = run(any_spec(epochs=1), fault="garbage@import")
    assert result.status == "finished"
    assert result.malformed_lines == 3
    assert "ignored a malformed event line" in history.log_path(result.run_id).read_text()


def test_a_worker_that_raises_becomes_a_failed_record_with_its_traceback(numpy_framework):
    history, _, result = run(any_spec(), fault="crash@epoch:2")
    assert result.status == "failed"
    assert result.reason == "RuntimeError: injected crash at epoch"
    assert len(result.epochs) == 1  # what finished before the crash is kept
    assert "Traceback" in result.error["traceback"]
    record = history.get(result.run_id)
    assert record.status == "failed" and record.reason == result.reason


def test_a_worker_that_exits_without_a_final_event(numpy_framework):
    _, _, result = run(any_spec(), fault="exit@import")
    assert result.status == "failed"
    assert result.reason == "worker exited with code 7 before reporting a result"


def test_a_worker_killed_by_a_signal(numpy_framework):
    _, _, result = run(any_spec(), fault="segv@epoch:1")
    assert result.status == "failed" and result.reason == "worker was killed by SIGSEGV"


def test_a_crash_while_shutting_down_after_the_result_keeps_the_result_and_says_so(
    numpy_framework,
):
    """The result event carries every figure; a C++ abort in teardown after it (torch's gloo
    did this under load) must not throw the run away, nor pass unsaid."""
    history, _, result = run(any_spec(epochs=1), fault="abort@teardown")
    assert result.returncode == -6
    assert result.status == "finished" and result.summary["steady_steps"] == 4
    assert result.reason == (
        "the result is complete; the worker then was killed by SIGABRT while shutting down "
        "(see the log)"
    )
    record = history.get(result.run_id)
    assert record.status == "finished" and record.reason == result.reason
    assert record.metrics["step_median_s"] > 0


def test_a_crash_before_the_result_still_fails_the_run(numpy_framework):
    _, _, result = run(any_spec(epochs=1), fault="abort@epoch:1")
    assert result.status == "failed" and result.reason == "worker was killed by SIGABRT"


def test_a_hanging_worker_is_killed_after_the_stall_timeout(numpy_framework):
    started = time.monotonic()
    _, _, result = run(any_spec(), fault="hang@epoch:1", stall_timeout=3.0)
    assert result.status == "failed"
    assert result.reason == "worker sent nothing for 3 s and was killed (hung)"
    assert time.monotonic() - started < 60


def test_cancel_kills_the_whole_process_group_and_records_cancelled(numpy_framework):
    holder = {}
    seen_epoch = threading.Event()

    def on_event(event):
        if event["type"] == "epoch_started":
            seen_epoch.set()

    def cancel_soon():
        seen_epoch.wait(60)
        holder["pid"] = holder["worker"].process.pid
        holder["worker"].cancel()

    threading.Thread(target=cancel_soon, daemon=True).start()
    history = History()
    result = execute(
        any_spec(epochs=50, steps_per_epoch=None),
        history,
        on_event=on_event,
        on_start=lambda w: holder.__setitem__("worker", w),
    )
    assert result.status == "cancelled" and result.reason == "cancelled by the user"
    assert (
        not psutil.pid_exists(holder["pid"]) or psutil.Process(holder["pid"]).status() == "zombie"
    )
    with pytest.raises(ProcessLookupError):
        os.killpg(holder["pid"], 0)
    assert history.get(result.run_id).status == "cancelled"


def test_a_gpu_that_does_not_exist_is_a_clear_error_before_training():
    _, events, result = run(tiny_spec(device="gpu:0"))
    assert result.status == "failed"
    assert result.reason.startswith("DeviceError: torch runtime sees 0 GPUs")
    assert not [e for e in events if e["type"] == "epoch_started"]


def test_a_missing_runtime_is_a_failed_record_not_an_exception(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('[runtimes.torch]\npython = "/nonexistent/python"\n')
    monkeypatch.setenv("TUI_BENCH_CONFIG", str(config))
    history, _, result = run()
    assert result.status == "failed"
    assert "/nonexistent/python, which does not exist" in result.reason
    assert history.get(result.run_id).status == "failed"


def test_machine_load_is_recorded_with_every_run(numpy_framework):
    history, _, result = run(any_spec(epochs=1), fault="exit@import")
    load = history.get(result.run_id).load
    assert load["logical_cores"] == os.cpu_count()
    assert load["loadavg_1m"] >= 0 and isinstance(load["busy"], bool)


# -- environment, faults, steady energy, threads observed -------------------------------------------
from tui_bench.engine.runs.run_result import RunResult, thread_observation  # noqa: E402
from tui_bench.engine.runs.worker_launch import worker_environment  # noqa: E402


def test_worker_environment_is_an_allow_list(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")
    monkeypatch.setenv("KMP_BLOCKTIME", "0")
    env = worker_environment(tiny_spec())
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PYTHONPATH" not in env
    assert env["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=true"
    assert env["TORCHINDUCTOR_MAX_AUTOTUNE"] == "1" and env["KMP_BLOCKTIME"] == "0"
    assert env["OMP_NUM_THREADS"] == "1" and env["PATH"] == os.environ["PATH"]


def test_a_worker_that_only_builds_gets_the_manifests_build_env(monkeypatch):
    """A dry run or an equity probe times nothing: its worker gets the framework's build_env
    (JAX's: XLA without optimisation passes), appended to what the user set; a run never."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    spec = RunSpec(framework="jax", api="flax", threads=1).validate()
    built = worker_environment(spec, build_only=True)
    assert built["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_backend_optimization_level=0"
    assert worker_environment(spec)["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    torch = RunSpec(threads=1).validate()
    assert worker_environment(torch, build_only=True) == worker_environment(torch)


def test_gpu_rules_reach_the_environment_before_import(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    strict = worker_environment(tiny_spec(device="gpu", autotune="off"))
    assert strict["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert strict["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert strict["NVIDIA_TF32_OVERRIDE"] == "0" and strict["TF_CUDNN_USE_AUTOTUNE"] == "0"
    assert strict["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_gpu_autotune_level=0"
    assert strict["MXNET_CUDNN_AUTOTUNE_DEFAULT"] == "0"
    tf32 = worker_environment(tiny_spec(device="gpu", precision="tf32"))
    assert "NVIDIA_TF32_OVERRIDE" not in tf32  # the user's override would undo the choice
    assert tf32["JAX_DEFAULT_MATMUL_PRECISION"] == "tensorfloat32"
    assert tf32["TF_CUDNN_USE_AUTOTUNE"] == "1"
    cpu = worker_environment(tiny_spec())
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in cpu and cpu["CUDA_VISIBLE_DEVICES"] == ""


def test_fault_injection_needs_the_test_switch(monkeypatch, numpy_framework):
    monkeypatch.delenv("TUI_BENCH_TESTING")
    _, _, result = run(any_spec(epochs=1, steps_per_epoch=2), fault="exit@import")
    assert result.status == "finished", result.reason  # the fault was ignored


def test_the_run_records_settings_and_performance_environment(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    history, _, result = run(tiny_spec(epochs=1, steps_per_epoch=4, timing="pipelined"))
    assert result.status == "finished", result.reason
    settings = result.started["settings"]
    assert settings["precision"] == "fp32" and settings["timing"] == "pipelined"
    assert settings["input"] == "host" and settings["compile"] == "no (eager)"
    perf = result.started["perf_env"]
    assert perf["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=true" and perf["OMP_NUM_THREADS"] == "1"
    metrics = history.get(result.run_id).metrics
    assert metrics["setting_precision"] == "fp32" and metrics["threads_configured"] == 1
    assert result.summary["timing"] == "pipelined" and result.summary["pipelined_windows"] >= 1


def test_samples_per_joule_uses_steady_window_energy_only():
    result = RunResult("r", tiny_spec(batch_size=32), "finished")
    result.summary = {"steady_steps": 10}
    result.resources = {"energy_j": 5000.0, "steady_energy_j": 40.0}
    figures = result.metrics()
    assert figures["gpu_samples_per_joule"] == pytest.approx(320 / 40.0)
    assert "samples_per_joule" not in figures  # one key per energy figure: the device in its name
    result.resources = {"energy_j": 5000.0}  # no steady marks: no figure rather than a wrong one
    assert "gpu_samples_per_joule" not in result.metrics()


def test_a_one_thread_run_that_used_two_cores_is_flagged():
    flagged = thread_observation(1, {"mean_cpu_pct": 60.0, "steady_mean_cpu_pct": 195.0})
    assert flagged["cores_observed"] == pytest.approx(1.95)
    assert "used 1.9 cores with 1 thread(s) configured" in flagged["threads_flag"]
    assert thread_observation(1, {"steady_mean_cpu_pct": 98.0})["threads_flag"] is None
    assert thread_observation(2, {"steady_mean_cpu_pct": 199.0})["threads_flag"] is None
    result = RunResult("r", tiny_spec(), "finished")
    result.resources = {"steady_mean_cpu_pct": 190.0, "steady_busy_threads": 2.0}
    metrics = result.metrics()
    assert metrics["threads_flag"] and metrics["busy_threads_observed"] == 2.0


def test_bf16_with_device_input_trains_on_cpu():
    _, _, result = run(tiny_spec(epochs=1, precision="bf16", input="device"))
    assert result.status == "finished", result.reason
    assert result.started["settings"]["autocast"] == "bfloat16"
    assert result.summary["input"] == "device" and result.summary["input_upload_s"] >= 0
    assert result.summary["steady_steps"] == 4


def test_synced_and_pipelined_time_the_same_steps_on_a_cpu(numpy_framework):
    """No device queue on a CPU: both timing modes time every steady step, pipelined in windows
    (the worker's clock, whatever the framework; torch.compile's pipelined settings are read
    back in tests/test_frameworks.py). How close their figures come is a measurement, not a
    test (two runs one after the other on a shared machine differed by more than 1.5x under
    load): benchmarks/harness_overhead.py."""
    spec = dict(epochs=1, steps_per_epoch=30, train_samples=1500, warmup_steps=3)
    _, _, synced = run(any_spec(**spec))
    _, _, pipelined = run(any_spec(**spec, timing="pipelined", timing_window=9))
    assert synced.ok and pipelined.ok
    assert pipelined.summary["pipelined_windows"] == 3
    assert synced.summary["steady_steps"] == pipelined.summary["steady_steps"] == 27
    assert all(s.summary["samples_per_s"] > 0 for s in (synced, pipelined))


# -- build probes: one worker builds several models, nothing trained ------------------------------
@pytest.mark.needs_runtime("torch")
def test_one_build_probe_reports_each_model_in_order_and_trains_nothing(tmp_path):
    from tui_bench.engine.runs import dry_run

    probe = {"threads": 1, "batch_size": 8, "epochs": 1, "steps_per_epoch": 1}
    samples = {"train_samples": 80, "test_samples": 8}
    specs = [
        RunSpec(model="mlp", **probe, **samples).validate(),
        RunSpec(model="lstm", dataset="synthetic-imdb", **probe, **samples).validate(),
    ]
    reports = dry_run.probe(specs).reports
    assert [r["model"] for r in reports] == ["mlp", "lstm"]
    assert reports[0]["param_count"] == 669_706 != reports[1]["param_count"]
    assert reports[0]["first_batch_sha256"] != reports[1]["first_batch_sha256"]
    assert History().all() == []  # a probe is not a run
    # The second model's data cannot be read: the error names how far the worker got.
    broken = RunSpec(model="mlp", dataset="mnist", data_dir=str(tmp_path), **probe).validate()
    with pytest.raises(RuntimeError, match=r"torch/eager build probe \(1 of 2 built\)"):
        dry_run.probe([specs[0], broken])
    with pytest.raises(ValueError, match="one build probe builds for one framework/api"):
        dry_run.probe(
            [specs[0], RunSpec(model="mlp", **{**probe, "threads": 2}, **samples).validate()]
        )


def test_every_model_of_a_build_probe_reads_real_data_where_a_run_would(tmp_path):
    import json

    from tui_bench.engine import datasets
    from tui_bench.engine.runs.worker_launch import worker_command

    first = RunSpec(model="mlp").validate()
    cached = RunSpec(model="lstm", dataset="imdb").validate()
    own = RunSpec(model="vgg16", dataset="cifar10", data_dir=str(tmp_path)).validate()
    command = worker_command(first, "python", 3, build_only=True, also_build=[cached, own])
    payload = json.loads(command[command.index("--spec-json") + 1])
    cache = str(datasets.cache_root())
    assert payload["data_dir"] == cache
    assert [(m["model"], m["data_dir"]) for m in payload["also_build"]] == [
        ("lstm", cache),
        ("vgg16", str(tmp_path)),
    ]


LEAVE = r"""
import atexit, ctypes, sys
sys.path.insert(0, sys.argv[1])
from adapters.process_end import leave
class Finalised:
    def __del__(self):
        print("torn down", flush=True)
kept_until_teardown = Finalised()
atexit.register(lambda: print(", exit handlers", end=""))
print("python's buffer, ", end="")
ctypes.CDLL(None).printf(b"C's buffer")
leave(5)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="libc's printf through ctypes: POSIX")
def test_a_worker_leaves_without_the_teardown_and_loses_no_output(tmp_path):
    """The worker ends by os._exit (adapters.process_end.leave), skipping the interpreter's
    teardown of modules and objects (about a second after a framework import), after the exit
    handlers and with what Python and C code buffered flushed: a log file is fully buffered,
    and the last lines a framework prints are kept."""
    import subprocess
    import sys

    from conftest import REPO

    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        done = subprocess.run([sys.executable, "-I", "-c", LEAVE, str(REPO)], stdout=out)
    assert done.returncode == 5
    # C's buffer is written by fflush, after Python's: the handler's text lands behind it.
    assert log.read_text() == "python's buffer, , exit handlersC's buffer"  # not "torn down"
