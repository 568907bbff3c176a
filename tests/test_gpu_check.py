"""benchmarks/gpu_check.py, as CI can run it: the CPU dry run goes through every step (device,
runtimes, `pytest -m gpu`, figures through tui-bench's own CLI) and reports the GPU parts as
skipped with the reason; the report is written step by step, so a check cut short leaves one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, keep_machine_facts, lend_machine_facts

CHECK = REPO / "benchmarks" / "gpu_check.py"


def gpu_check(*args: str, timeout: float = 540) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECK), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def steps_of(out: Path) -> dict[str, dict]:
    report = json.loads((out / "report.json").read_text())
    return {step["step"]: step for step in report["steps"]}


@pytest.mark.slow
@pytest.mark.needs_runtime("torch")
def test_cpu_dry_run_runs_every_step_and_skips_the_gpu_parts_with_reasons(
    tmp_path, shared_machine_facts
):
    out = tmp_path / "report"
    # The check keeps its own cache (out/cache: on a GPU machine its report measures its own
    # peaks): here it starts from the session's measured peaks and runtime probes instead of
    # measuring every framework's matmul peak again (~15 s), and gives back what it measured.
    (out / "cache").mkdir(parents=True)
    lend_machine_facts(shared_machine_facts, out / "cache")
    done = gpu_check("--out", str(out), "--cpu-dry-run", "--only", "torch/eager")
    keep_machine_facts(shared_machine_facts, out / "cache")
    assert done.returncode == 0, done.stdout + done.stderr
    steps = steps_of(out)
    assert list(steps) == ["device", "runtimes", "pytest", "figures"]
    assert steps["device"]["details"]["cuda_seen"] is False
    probed = steps["runtimes"]["details"]["runtimes"]
    assert list(probed) == ["torch/eager"]  # --only: the other runtimes are not probed
    assert not probed["torch/eager"].startswith("unavailable")
    # pytest -m gpu ran, with its JUnit XML: on a CPU every GPU test skips, none fails.
    tested = steps["pytest"]["details"]
    assert (out / "pytest-gpu.xml").is_file() and tested["tests"] > 0
    assert tested["failures"] == tested["errors"] == 0 and tested["skipped"] == tested["tests"]
    figures = {f["name"]: f for f in steps["figures"]["figures"]}
    ran = figures["torch/eager cnn fp32"]
    assert ran["status"] == "ok" and ran["metrics"]["step_median_s"] > 0
    assert ran["metrics"]["setting_precision"] == "fp32" and ran["run_id"]
    transformer = figures["torch/eager transformer fp32"]
    assert transformer["status"] == "ok"
    assert transformer["metrics"]["setting_attention"].startswith("SDPA ")
    for gpu_only in (
        "torch/eager cnn amp-fp16",
        "torch/eager cnn fp32 device",
        "torch/eager transformer bf16",
    ):
        assert (
            figures[gpu_only]["status"] == "skipped" and "GPU mode" in figures[gpu_only]["reason"]
        )
    assert figures["torch/eager vgg16 fp32"]["status"] == "skipped"  # the CNN proves the wiring
    # The serving rows (issue 43): batch 1 and the large batch (8 on the CPU) served on the CPU,
    # each request timed alone; bf16 skipped as a GPU mode; their own table in the report.
    for name, batch in (
        ("torch/eager cnn fp32 inference b1", 1),
        ("torch/eager cnn fp32 inference b256", 256),
    ):
        served = figures[name]
        assert served["status"] == "ok", served
        m = served["metrics"]
        assert m["latency_requests"] == 20 and 0 < m["latency_p50_s"] <= m["latency_p99_s"]
        assert m["inference_samples_per_s"] > 0 and served["batch"] == batch
        assert "p99 rests on 20 requests" in m["latency_note"]  # 20 cannot bound it: said so
    bf16 = figures["torch/eager cnn bf16 inference b256"]
    assert bf16["status"] == "skipped" and "GPU mode" in bf16["reason"]
    assert all(name.startswith("torch/eager") for name in figures)  # --only
    markdown = (out / "report.md").read_text()
    assert "| torch/eager cnn fp32 | precision | ok |" in markdown
    assert "| torch/eager cnn fp32 inference b1 | serving, eager | ok | 1 | 20 |" in markdown
    # The runs went to the check's own history, not the test's data home.
    assert (out / "home").is_dir()


@pytest.mark.slow  # the device probes import torch and JAX
def test_a_spent_budget_still_leaves_a_report_with_what_was_skipped(tmp_path):
    out = tmp_path / "report"
    done = gpu_check("--out", str(out), "--cpu-dry-run", "--budget-s", "0.1", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    steps = steps_of(out)
    for skipped in ("runtimes", "pytest"):
        assert steps[skipped]["status"] == "skipped"
        assert steps[skipped]["reason"] == "out of time budget"
    figures = steps["figures"]["figures"]
    assert figures and all(f["status"] == "skipped" and f["reason"] for f in figures)
    assert "## pytest: skipped" in (out / "report.md").read_text()


def test_without_a_gpu_the_real_check_stops_after_the_device_step_and_says_so(tmp_path):
    out = tmp_path / "report"
    done = gpu_check("--out", str(out), timeout=180)
    if json.loads((out / "report.json").read_text())["steps"][0]["details"]["cuda_seen"]:
        pytest.skip("this machine has a CUDA device")
    assert done.returncode == 1
    assert "no CUDA device seen" in done.stderr
    assert list(steps_of(out)) == ["device"]


@pytest.mark.parametrize("args", [["--budget-s", "0"], []])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, args):
    done = gpu_check(*(["--out", str(tmp_path)] if args else []), *args, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gpu_check.py: error:")


def _load_check():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def test_a_runtime_venv_sees_what_its_parent_venv_sees(tmp_path):
    """The lent H200's python3 is a venv (/opt/torch/.venv): a venv made over it with
    --system-site-packages saw the base Python's packages only, not its torch or JAX. This
    test's interpreter is such a venv too, and tinydb is in its site-packages alone."""
    check = _load_check()
    venv = tmp_path / "keras-jax"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    probe = [str(venv / "bin" / "python"), "-c", "import tinydb"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        pytest.skip("this interpreter's base Python has tinydb too: nothing to tell apart")
    check._see_our_sites(venv)
    assert subprocess.run(probe, capture_output=True).returncode == 0


def test_the_bundle_leaves_out_what_the_gpu_image_brings(tmp_path, monkeypatch):
    check = _load_check()
    names = ["scipy-1.16.3-cp312.whl", "ml_dtypes-0.5.1-cp312.whl", "numpy-2.3-cp312.whl"]
    names += ["keras-3.15.1-py3-none-any.whl", "textual-8.2.8-py3-none-any.whl"]

    def fake_download(cmd, timeout, env=None):
        for name in names:
            (tmp_path / name).write_bytes(b"wheel")
        return 0, ""

    monkeypatch.setattr(check, "_run", fake_download)
    assert check.make_bundle(tmp_path, "3.12") == 0
    kept = sorted(p.name.split("-")[0] for p in tmp_path.glob("*.whl"))
    assert kept == ["keras", "textual"]


def test_gpu_alone_tests_run_after_the_rest_in_one_process(tmp_path, monkeypatch):
    check = _load_check()
    commands = []

    def fake_pytest(cmd, timeout, env=None):
        commands.append(cmd)
        return 0, "1 passed"

    monkeypatch.setattr(check, "_run", fake_pytest)
    step = check.step_pytest(tmp_path, {}, check.Budget(500), 180)
    assert step["status"] == "ok"
    first, alone = commands
    assert "gpu and not gpu_alone" in first and first[first.index("-n") + 1] == "4"
    assert "gpu and gpu_alone" in alone and alone[alone.index("-n") + 1] == "0"


GPT_ROWS = ("torch/compile gpt gpt2-small bf16", "keras/jax gpt gpt2-small bf16")


def test_the_gpt2_small_rows_are_runs_tui_bench_accepts_and_fit_an_h100():
    """The rows the GPU check adds for issue 42, checked without a GPU: their arguments go
    through tui-bench's own parser to a valid spec (gpt2-small, bf16, on the GPU), the batch
    fits the training-memory estimate well inside an 80 GB H100, and the CPU dry run would take
    them at size tiny but skips them as GPU modes (bf16), with the reason."""
    from tui_bench.cli import build_parser, spec_flags
    from tui_bench.engine import model_memory

    check = _load_check()
    rows = {c.name: c for c in check.planned_configs() if c.model == "gpt" and c.mode == "train"}
    assert tuple(rows) == GPT_ROWS
    for config in rows.values():
        args = build_parser().parse_args(["run", *check.figure_args(config, "gpu", False)])
        spec = spec_flags.spec_from_args(args)
        assert (spec.model, spec.size, spec.precision, spec.device) == (
            "gpt",
            "gpt2-small",
            "bf16",
            "gpu",
        )
        assert spec.dataset == "synthetic-tokens" and spec.batch_size == check.GPT_BATCH
        # the steps asked for are there: train samples past the 20 % validation split
        assert spec.train_samples * 0.8 >= spec.batch_size * spec.steps_per_epoch
        assert model_memory.estimate(spec).total_bytes < 0.7 * 80e9
        dry = build_parser().parse_args(["run", *check.figure_args(config, "cpu", True)])
        assert spec_flags.spec_from_args(dry).size == "tiny"
        why = check.plan_figure(config, "cpu", dry_run=True)
        if not why.startswith("runtime:"):  # a runtime not installed here says that first
            assert "GPU mode" in why


def test_a_gpt_figure_reports_tokens_per_s_and_mfu_with_its_peak_named(tmp_path, monkeypatch):
    """A gpt run's record, as tui-bench's engine computes it for an H100 step of 40 ms, read
    back by the check: tokens/s and MFU against the nominal bf16 peak land in report.md."""
    from tui_bench.engine.runs.run_result import RunResult
    from tui_bench.engine.spec import RunSpec

    check = _load_check()
    config = next(c for c in check.planned_configs() if c.name == GPT_ROWS[0])
    spec = RunSpec.from_dict(
        {"model": "gpt", "size": "gpt2-small", "precision": "bf16", "device": "gpu",
         "batch_size": 16, "threads": 4}
    )  # fmt: skip
    step_s = 0.04
    result = RunResult(
        "r1",
        spec,
        "finished",
        started={"device_name": "NVIDIA H100 80GB HBM3"},
        summary={"samples_per_s": 16 / step_s, "step_median_s": step_s, "global_batch": 16},
    )
    record = {"id": "r1", "status": "finished", "metrics": result.metrics()}
    monkeypatch.setattr(
        check, "_run", lambda cmd, timeout, env=None: (0, json.dumps([record], indent=2))
    )
    entry = check.run_figure(config, "gpu", False, {}, 60)
    m = entry["metrics"]
    assert entry["status"] == "ok" and m["tokens_per_s"] == 16 * 1024 / step_s
    # 16,384 tokens × 854,438,400 FLOPs in 40 ms against 989.4 TFLOP/s
    assert m["mfu_nominal"] == pytest.approx(16384 * 854_438_400 / step_s / 989.4e12)
    figure = {"name": config.name, "shows": config.shows, **entry}
    markdown = check.render_markdown(
        {"steps": [{"step": "figures", "status": "ok", "figures": [figure]}]}
    )
    assert f"| {config.name} | {config.shows} | ok | 40.00 | 400.0 | 409600 | 35.4 |" in markdown
    assert "nominal peak 989.4 TFLOP/s (H100 SXM dense bfloat16" in markdown


INFERENCE_ROWS = {
    f"{api} cnn {precision} inference b{batch}"
    for api in ("torch/eager", "torch/compile", "keras/jax")
    for precision, batch in (("fp32", 1), ("fp32", 256), ("bf16", 256))
}


def test_the_inference_rows_are_runs_tui_bench_accepts_with_requests_for_p99():
    """The serving rows (issue 43), checked without a GPU: torch eager, torch.compile and
    Keras on JAX at batch 1 and 256 in fp32, and 256 in bf16; their arguments go through
    tui-bench's own parser to a valid inference spec on the GPU with enough requests to bound
    p99; the CPU dry run takes them at batch 1 and 8 with 20 requests; an API the catalog does
    not let serve is skipped with the catalog's reason, on the GPU and in the dry run."""
    from adapters.serve import tail_bounded
    from tui_bench.cli import build_parser, spec_flags
    from tui_bench.engine import catalog
    from tui_bench.engine.spec import SpecError

    check = _load_check()
    rows = {c.name: c for c in check.planned_configs() if c.mode == "inference"}
    assert set(rows) == INFERENCE_ROWS
    for config in rows.values():
        refused = catalog.setting_problem(
            config.framework, config.api, "gpu", "fp32", "host", "synced", mode="inference"
        )
        why = check.plan_figure(config, "cpu", dry_run=True)
        args = build_parser().parse_args(["run", *check.figure_args(config, "gpu", False)])
        if refused:  # Keras on JAX until its adapter serves: skipped, with the catalog's reason
            with pytest.raises(SpecError, match="not offered"):
                spec_flags.spec_from_args(args)
            if not (why or "").startswith("runtime:"):  # no runtime here says that first
                assert why == refused[1]  # before any GPU-mode reason
            continue
        spec = spec_flags.spec_from_args(args)
        assert (spec.mode, spec.device, spec.model) == ("inference", "gpu", "cnn")
        assert (spec.batch_size, spec.precision) == (config.batch, config.precision)
        assert tail_bounded(spec.requests, 0.99), spec.requests
        assert spec.test_samples >= spec.batch_size
        dry = spec_flags.spec_from_args(
            build_parser().parse_args(["run", *check.figure_args(config, "cpu", True)])
        )
        assert dry.batch_size == min(config.batch, 8) and dry.requests == 20
    assert any(c.framework == "torch" for c in rows.values())


def test_an_inference_figure_reports_p50_p99_and_samples_per_s_in_its_own_table(monkeypatch):
    """A served row's record read back by the check: the percentiles, the requests behind them
    and samples/s land in report.md's inference table; the training table keeps its rows."""
    check = _load_check()
    config = next(
        c for c in check.planned_configs() if c.name == "torch/eager cnn fp32 inference b1"
    )
    metrics = {
        "latency_requests": 1000,
        "latency_p50_s": 0.000212,
        "latency_p90_s": 0.000254,
        "latency_p99_s": 0.000464,
        "latency_max_s": 0.004328,
        "inference_samples_per_s": 4073.0,
        "first_request_s": 0.009,
        "latency_note": None,
    }
    record = {"id": "r2", "status": "finished", "metrics": metrics}
    monkeypatch.setattr(
        check, "_run", lambda cmd, timeout, env=None: (0, json.dumps([record], indent=2))
    )
    entry = check.run_figure(config, "gpu", False, {}, 60)
    assert entry["status"] == "ok" and entry["metrics"]["latency_p99_s"] == 0.000464
    figure = {"name": config.name, "shows": config.shows, "mode": "inference", "batch": 1, **entry}
    trained = {"name": "torch/eager cnn fp32", "shows": "precision", "status": "ok", "metrics": {}}
    markdown = check.render_markdown(
        {"steps": [{"step": "figures", "status": "ok", "figures": [trained, figure]}]}
    )
    assert (
        "| torch/eager cnn fp32 inference b1 | serving, eager | ok | 1 | 1000 | 0.212 | 0.254 "
        "| 0.464 | 4073.0 | 9.000 |  |" in markdown
    )
    assert "| torch/eager cnn fp32 | precision | ok |" in markdown
    # the serving row is not in the training table (its step median column means nothing)
    training = markdown.split("Inference (each request")[0]
    assert "inference b1" not in training


def test_the_generation_rows_are_runs_tui_bench_accepts(monkeypatch):
    """The generation rows (issue 49), checked without a GPU: gpt2-small, P 512 + N 128, bf16 at
    batch 1 and 32 for every API of GENERATE_APIS; their arguments go through tui-bench's own
    parser to a valid generate spec on the GPU (or the catalog's refusal for an API that does not
    generate yet); a generated record's figures land in report.md's generation table."""
    from tui_bench.cli import build_parser, spec_flags
    from tui_bench.engine import catalog
    from tui_bench.engine.spec import SpecError

    check = _load_check()
    rows = [c for c in check.planned_configs() if c.mode == "generate"]
    assert {(c.framework, c.api) for c in rows} == {(f, a) for f, a, _ in check.GENERATE_APIS}
    for config in rows:
        if config.framework not in catalog.FRAMEWORKS:
            assert "catalog" in check.plan_figure(config, "cpu", dry_run=True)
            continue
        args = build_parser().parse_args(["run", *check.figure_args(config, "gpu", False)])
        if (config.framework, config.api) not in catalog.generating_apis():
            with pytest.raises(SpecError, match="not offered"):
                spec_flags.spec_from_args(args)
            continue
        spec = spec_flags.spec_from_args(args)
        assert (spec.mode, spec.size, spec.precision) == ("generate", "gpt2-small", "bf16")
        assert (spec.prompt_tokens, spec.new_tokens) == (512, 128)
        assert spec.batch_size == config.batch and spec.test_samples >= spec.batch_size
        dry = spec_flags.spec_from_args(
            build_parser().parse_args(["run", *check.figure_args(config, "cpu", True)])
        )
        assert (dry.size, dry.precision, dry.device) == ("tiny", "fp32", "cpu")
    figure = {
        "name": rows[0].name,
        "shows": rows[0].shows,
        "mode": "generate",
        "batch": 1,
        "status": "ok",
        "metrics": {
            "generate_requests": 100,
            "ttft_p50_s": 0.012,
            "tpot_p50_s": 0.0021,
            "tpot_p99_s": 0.0025,
            "decode_tokens_per_s": 476.0,
            "decode_gbps": 120.5,
            "mbu_nominal": 0.025,
            "first_request_s": 31.5,
        },
    }
    markdown = check.render_markdown(
        {"steps": [{"step": "figures", "status": "ok", "figures": [figure]}]}
    )
    assert (
        f"| {rows[0].name} | {rows[0].shows} | ok | 1 | 100 | 12.000 | 2.100 | 2.500 | 476 "
        "| 120.5 | 2.5 | 31.50 |" in markdown
    )
