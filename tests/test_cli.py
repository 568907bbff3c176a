"""The headless CLI as a user runs it: a subprocess, exit codes, one-line errors."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, require_runtime

from tui_bench.engine.results.history import History
from tui_bench.engine.results.record import Run

TINY = [
    "--threads",
    "1",
    "--epochs",
    "1",
    "--steps-per-epoch",
    "4",
    "--train-samples",
    "600",
    "--test-samples",
    "100",
    "--batch-size",
    "32",
]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tui_bench", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_help_explains_commands_and_what_is_timed():
    out = cli("--help")
    assert out.returncode == 0
    for word in ("run", "history", "sysinfo", "examples:", "warm-up"):
        assert word in out.stdout
    run_help = cli("run", "--help").stdout
    assert "--threads" in run_help and "eager, compile" in run_help


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--api", "estimator"],
            "tui-bench: error: api 'estimator' is not available for framework 'torch' (choose: eager, compile)",
        ),
        (["run", "--threads", "0"], "tui-bench: error: threads must be between 1 and 64, got 0"),
        (
            ["run", "--preset", "/nonexistent.toml"],
            "tui-bench: error: preset file /nonexistent.toml does not exist",
        ),
        (["history", "show", "nope"], "tui-bench: error: no run with id 'nope'"),
        (
            ["run", "--dry-run", "--preset", "quick"],
            "tui-bench: error: --dry-run builds one spec here; it cannot be combined with --preset",
        ),
        (
            ["run", "--preset", "quick", "--only", "tensorflw"],
            "tui-bench: error: run: argument --only: no framework 'tensorflw' "
            "(known: torch, tensorflow, keras, jax, mxnet, theano, cntk)",
        ),
        (
            ["run", "--preset", "kabakus-2020-quick", "--only", "jax"],
            "tui-bench: error: --only jax: no configuration of kabakus-2020-quick is jax "
            "(it has keras/tensorflow, torch/eager)",
        ),
        (
            ["run", "--only", "torch"],
            "tui-bench: error: --only picks configurations of a sweep: give --preset "
            "(or a flag with a list)",
        ),
        (
            ["run", "--dry-run", "--model", "resnet9000"],
            "tui-bench: error: model 'resnet9000' is not known "
            "(choose: cnn, mlp, vgg16, lstm, transformer, gpt)",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    out = cli(*args)
    assert out.returncode == 2
    assert out.stderr.strip() == message
    assert out.stdout == ""


def test_run_json_then_history_list_show_and_export(tmp_path):
    require_runtime("torch")
    _seed_peak()
    out = cli("run", *TINY, "--json")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert len(records) == 1 and records[0]["status"] == "finished"
    run_id = records[0]["id"]
    assert records[0]["metrics"]["param_count"] == 1_669_002
    # how good the number is: the FLOP count, FLOP/s and MFU with its peak named (or why not)
    metrics = records[0]["metrics"]
    assert metrics["flops_per_step"] == 32 * 22_794_240  # the CNN's count (tests/test_flops.py)
    # 4 steps, all warm-up: no steady step, so no FLOP/s and no MFU rather than a wrong one
    assert metrics["step_median_s"] is None and "achieved_tflops" not in metrics
    assert metrics["allocator"].startswith("n/a")  # a CPU run: no allocator peak, said so
    listing = cli("history", "list")
    # a finished run's line shows its stability verdict
    assert run_id in listing.stdout
    assert any(v in listing.stdout for v in ("stable", "noisy", "unreliable")), listing.stdout
    shown = json.loads(cli("history", "show", run_id[:-1], "--json").stdout)
    assert shown["id"] == run_id
    csv_path = tmp_path / "out.csv"
    exported = cli("history", "export", "--csv", str(csv_path))
    assert exported.returncode == 0 and "wrote 1 run(s)" in exported.stderr
    assert run_id in csv_path.read_text()
    assert "metrics.flops_per_step" in csv_path.read_text().splitlines()[0]


def test_a_dry_run_builds_the_model_and_says_what_it_is_without_a_run():
    """``run --dry-run``: the worker builds the model and stops; parameters, FLOPs of a training
    step and the worker's peak memory come back, and the history gets nothing."""
    from tui_bench.engine import flops

    require_runtime("torch")
    spec = ["--model", "mlp", "--threads", "1", "--batch-size", "32", "--test-samples", "100"]
    out = cli("run", "--dry-run", *spec, "--train-samples", "600", "--json")
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["param_count"] == 669_706  # the MLP's (tests/test_runner.py)
    assert figures["flops_per_step"] == flops.train_step_flops("mlp", "synthetic-mnist", 32) > 0
    assert 100 < figures["peak_rss_mib"] < 8000  # a process that imported torch and built it
    assert figures["state_mib"] == pytest.approx(669_706 * 4 * 4 / 2**20)  # adam: 4 copies
    assert 0 < figures["build_s"] < figures["wall_s"]
    assert History().all() == []  # not a run
    text = cli("run", "--dry", *spec, "--train-samples", "600")  # --dry: an unambiguous prefix
    assert text.returncode == 0, text.stderr
    assert "parameters              669,706" in text.stdout
    assert "worker peak RSS" in text.stdout and "GFLOP (global batch 32" in text.stdout


def test_a_dry_run_that_cannot_build_says_why_and_exits_1(monkeypatch):
    require_runtime("torch")
    monkeypatch.setenv("TUI_BENCH_FAULT", "crash@data")  # the worker fails before the build
    out = cli("run", "--dry-run", "--threads", "1")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines()[-1] == (
        "tui-bench: error: torch/eager build probe (0 of 1 built): RuntimeError: "
        "injected crash at data"
    )


@pytest.mark.needs_runtime("torch")
def test_failed_run_exits_1_and_shows_reason_and_log_tail(monkeypatch):
    _seed_peak()
    monkeypatch.setenv("TUI_BENCH_FAULT", "crash@data")  # the worker fails after it started
    out = cli("run", *TINY)
    assert out.returncode == 1
    assert "RuntimeError: injected crash at data" in out.stderr
    assert History().all()[0].status == "failed"


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_a_gpu_the_machine_lacks_is_one_line_and_exit_2_before_anything_starts(dry):
    """NVML is the judge (as the Setup screen's device list): no peak probe, no worker, no
    record for a GPU that is not there. gpu:63: absent on any machine these tests run on."""
    out = cli("run", *TINY, "--device", "gpu:63", *dry)
    assert out.returncode == 2, out.stderr
    assert re.fullmatch(
        r"tui-bench: error: no GPU 63 on this machine \(NVML found \d+\): --device cpu runs "
        r"here\n",
        out.stderr,
    )
    assert out.stdout == ""
    assert History().all() == []


def _seed_peak(threads: int = 1) -> None:
    """A stand-in measured peak in the test's own cache: the real one is taken once before a
    first run (every installed framework's matmul, a minute on a loaded 2-core machine), which
    these tests are not about (tests/test_peaks.py is)."""
    from tui_bench.engine.machine import peaks

    row = {"kernel": "matmul", "precision": "float32", "tflops": 0.05, "times_s": [0.04] * 10}
    load = peaks.ProbeLoad(0.0, 0.0, 2, 0.0, 1.0)
    peaks.store_probe({"framework": "torch", "threads": threads, "compute": [row]}, "cpu",
                      threads, load)  # fmt: skip


def test_ctrl_c_cancels_the_worker_and_records_cancelled():
    require_runtime("torch")
    _seed_peak()  # so the Ctrl-C lands in training, not in the peak's measurement
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui_bench", "run", "--threads", "1", "--epochs", "50"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        records = History().all()
        if records and records[0].status == "running":
            break
        time.sleep(0.2)
    time.sleep(3)  # let the worker get into training
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "cancelling" in err
    assert History().all()[0].status == "cancelled"


def test_sysinfo_reports_machine_and_runtimes():
    out = cli("sysinfo", "--json")
    info = json.loads(out.stdout)
    assert info["machine"]["logical_cores"] >= 1 and info["machine"]["cpu_model"]
    assert {r["framework"] for r in info["runtimes"]} >= {"torch"}


# -- the package's shape -----------------------------------------------------------------------------
def test_every_command_module_registers_alike_and_imports_no_sibling():
    import ast
    import importlib
    import inspect

    from tui_bench import cli

    package = REPO / "tui_bench" / "cli"
    shared = {"common", "help", "spec_flags", "following", "reporting"}  # shared, by concern
    commands = {p.stem for p in package.glob("*.py")} - {"__init__"} - shared
    assert set(cli.COMMAND_GROUPS) == commands
    for name in cli.COMMAND_GROUPS:
        group = importlib.import_module(f"tui_bench.cli.{name}")
        assert list(inspect.signature(group.register).parameters) == ["subparsers"]
    for name in commands | shared:
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                if node.module == "tui_bench.cli":
                    imported.update(f"tui_bench.cli.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        siblings = {f"tui_bench.cli.{other}" for other in commands}
        assert not imported & siblings, (name, imported & siblings)


def test_the_static_command_table_is_what_the_modules_register():
    """`--help` and the choice of module to import come from cli.COMMANDS: it must name every
    command the modules register, in their order, with their help line, and import only those."""
    from tui_bench import cli

    full = cli.build_parser()._subparsers._group_actions[0]
    registered = [(a.dest, a.help) for a in full._choices_actions]
    assert registered == [(name, line) for name, _, line in cli.COMMANDS]
    for name, modules, _ in cli.COMMANDS:
        assert set(modules) <= set(cli.COMMAND_GROUPS)
        for argv in ([name, "--help"], ["--home", "/x", name], ["--home=/x", name], ["--", name]):
            assert cli.chosen_command(argv) == name
        lazy = cli.build_parser([name])._subparsers._group_actions[0]
        assert [a.dest for a in lazy.choices[name]._actions] == [
            a.dest for a in full.choices[name]._actions
        ]
    assert cli.chosen_command(["--home", "history"]) is None  # the home's name, not a command
    assert cli.chosen_command(["nonsense", "history"]) is None
    assert cli.chosen_command(["--version"]) is None


def test_a_command_imports_only_its_own_module():
    from tui_bench import cli

    code = (
        "import sys; from tui_bench import cli; cli.build_parser(['history', 'list']); "
        "print(sorted(m for m in sys.modules if m.startswith('tui_bench.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(eval(out.stdout))
    assert {"tui_bench.cli.history", "tui_bench.cli.trends"} <= loaded
    assert not loaded & {"tui_bench.cli.cards", "tui_bench.cli.run", "tui_bench.cli.presets"}
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from tui_bench.cli import main; main(['--help'])"],
        capture_output=True,
        text=True,
    )
    listed = {line.split()[0] for line in out.stdout.splitlines() if line.startswith("    ")}
    assert {name for name, _, _ in cli.COMMANDS} <= listed, out.stdout


def test_run_flags_are_generated_from_the_spec_declaration():
    from tui_bench import cli
    from tui_bench.engine.spec import declared_fields

    parser = cli.build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]
    by_dest = {action.dest: action for action in run._actions}
    for declared in declared_fields():
        action = by_dest[declared.name]
        assert action.option_strings == ["--" + declared.name.replace("_", "-")]
        # Numbers are parsed and range-checked by their declaration, names by RunSpec; a number
        # or a name is read by a parser that refuses a comma list where the field does not
        # sweep (spec.list_flag_parser); a free text (a path, a device) is taken as it is.
        parsed = declared.type in (int, float) or declared.choices is not None
        assert action.type is not declared.type if parsed else action.type is declared.type
        assert action.default is None
        assert declared.help.split(" (")[0].replace("%", "%%") in action.help
        if declared.choices:
            assert ", ".join(declared.choices) in action.help


def test_a_usage_mistake_is_one_line_too():
    out = cli("run", "--threads", "two")
    assert out.returncode == 2
    assert out.stderr == "tui-bench: error: threads must be a whole number, got 'two'\n"
    out = cli("nonsense")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("tui-bench: error: argument COMMAND: invalid choice: 'nonsense'")


def test_a_runs_table_shows_the_settings_behind_its_numbers_and_an_emulated_bf16():
    """The settings that decide a number stand above it in `run`'s and `history show`'s table,
    and a bf16 run on a CPU without bf16 units says so there, not only in a comparison."""
    from rich.console import Console

    from tui_bench.cli.common import summary_table

    settings = {
        "compile": "no (eager)",
        "attention": "SDPA math (training, dropout 0.25)",
        "bf16_note": "bf16 emulated: CPU lacks avx512_bf16/amx_bf16",
    }
    record = {
        "id": "r1",
        "status": "finished",
        "spec": {"framework": "torch", "api": "eager", "precision": "bf16"},
        "worker": {"settings": settings},
        "metrics": {"step_median_s": 0.5},
    }
    console = Console(width=80, record=True)
    console.print(summary_table([Run.from_record(record)]))
    text = console.export_text()
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in text.splitlines()
        if line.count("│") == 3 and line.split("│")[1].strip()
    }
    assert rows["precision"] == "bf16" and rows["compilation"] == "no (eager)"
    assert rows["attention kernel"].startswith("SDPA math (training,")
    assert rows["bf16"] == "bf16 emulated: CPU lacks avx512_bf16/amx_bf16"
    assert "initial weights" not in rows  # not recorded: not shown
