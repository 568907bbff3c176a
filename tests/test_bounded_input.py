"""Issue 21 item 3, one regression test per defect: presets bounded by count before they expand,
TOML/JSON bounded in size and nesting, every number refused by its declaration with one line (the
same from a flag, a preset, the config file and the TUI form), ``history list --limit``, and
``--home`` that moves the history only."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui_bench import cli
from tui_bench.engine import paths
from tui_bench.engine.config import load_config
from tui_bench.engine.errors import ConfigError, PresetError, RuntimeUnavailable, SpecError
from tui_bench.engine.machine import runtimes
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import presets
from tui_bench.engine.spec import MAX_NESTING, RunSpec, WorkerOptions, read_input

TEN = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
# The preset: well under 400 bytes, ten values in each of seven fields: 10^7 configurations.
HOSTILE_PRESET = (
    "\n".join(
        f"{field} = {TEN}"
        for field in ("threads", "batch_size", "epochs", "seed", "warmup_steps", "timing_window")
    )
    + "\nlr = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]\n"
)


def _main(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().err


# -- preset expansion -----------------------------------------------------------------------------
@pytest.mark.timeout(60)  # it used to fill memory for minutes: a hang is a failure
@pytest.mark.parametrize("command", [["presets", "show"], ["run", "--preset"]])
def test_a_preset_of_ten_million_configurations_is_refused_by_count(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: list[str]
) -> None:
    path = tmp_path / "huge.toml"
    path.write_text(HOSTILE_PRESET, encoding="utf-8")
    assert len(HOSTILE_PRESET.encode()) < 400
    code, err = _main(capsys, *command, str(path))
    assert code == 2
    assert err.count("\n") == 1 and "expands to 10,000,000 configurations" in err
    assert f"limit of {presets.MAX_CONFIGURATIONS:,}" in err


def test_the_limit_is_counted_from_list_lengths_and_expansion_is_lazy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(presets, "MAX_CONFIGURATIONS", 100)
    path = tmp_path / "p.toml"
    path.write_text(f"threads = {TEN}\nseed = {TEN}\n", encoding="utf-8")
    preset = presets.load(path)  # exactly at the limit: accepted
    assert presets.configuration_count(preset) == 100
    assert isinstance(presets._raw_configs(preset, {}), Iterator)
    assert len(presets.expand(preset, probe=None)) == 100
    # An override that removes an axis brings a preset back under the limit.
    path.write_text(f"threads = {TEN}\nseed = {TEN}\nepochs = [1, 2]\n", encoding="utf-8")
    with pytest.raises(PresetError, match="expands to 200 configurations"):
        presets.load(path)
    preset = presets.Preset(**{**vars(preset), "axes": {**preset.axes, "epochs": [1, 2]}})
    assert len(presets.expand(preset, overrides={"epochs": 1}, probe=None)) == 100


def test_configurations_times_repeats_is_bounded_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(presets, "MAX_RUNS", 50)
    path = tmp_path / "p.toml"
    path.write_text(f"threads = {TEN}\nrepeats = 6\n", encoding="utf-8")
    with pytest.raises(PresetError, match=r"10 configurations × 6 repeats is 60 runs"):
        presets.load(path)


# -- file size and nesting ------------------------------------------------------------------------
DEEP_ARRAY = "threads = " + "[" * 5000 + "]" * 5000 + "\n"
JUST_TOO_DEEP = "threads = " + "[" * (MAX_NESTING + 1) + "1" + "]" * (MAX_NESTING + 1) + "\n"
DEEP_KEYS = "a" + ".a" * 3000 + " = 1\n"


@pytest.mark.parametrize(
    "text", [DEEP_ARRAY, JUST_TOO_DEEP, DEEP_KEYS], ids=["deep-array", "just-too-deep", "deep-keys"]
)
def test_deep_nesting_is_one_line_everywhere_toml_is_read(tmp_path: Path, text: str) -> None:
    wanted = f"nested more than {MAX_NESTING} levels deep"
    path = tmp_path / "deep.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PresetError, match=wanted):
        presets.load(path)
    with pytest.raises(SpecError, match=wanted):
        RunSpec.from_toml(text)
    Path(os.environ["TUI_BENCH_CONFIG"]).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=wanted):
        load_config()


def test_deep_json_spec_is_one_line() -> None:
    with pytest.raises(SpecError, match="nested more than"):
        RunSpec.from_json("[" * 100_000 + "]" * 100_000)


def test_huge_files_are_refused_without_being_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    path.write_text("# " + "x" * (2 * 1024 * 1024) + "\n", encoding="utf-8")
    with pytest.raises(PresetError, match="larger than 1024 KiB"):
        presets.load(path)
    Path(os.environ["TUI_BENCH_CONFIG"]).write_text(path.read_text(), encoding="utf-8")
    with pytest.raises(ConfigError, match="larger than 1024 KiB"):
        load_config()
    with pytest.raises(ValueError, match="larger than"):
        read_input("/dev/zero")  # endless: only limit + 1 bytes are ever read
    with pytest.raises(PresetError, match="/dev/zero is not a regular file"):
        presets.find("/dev/zero")


# -- numbers: one declaration, one check, one line ---------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--sample-interval", "0"], "sample_interval must be in [0.05, 3600.0], got 0.0"),
        (["run", "--sample-interval", "nan"], "sample_interval must be in [0.05, 3600.0], got nan"),
        (["run", "--sample-interval=-inf"], "sample_interval must be in [0.05, 3600.0], got -inf"),
        (["run", "--stall-timeout=-1"], "stall_timeout must be in [1.0, 604800.0], got -1.0"),
        (["run", "--stall-timeout", "nan"], "stall_timeout must be in [1.0, 604800.0], got nan"),
        (["run", "--stall-timeout", "0.001"], "stall_timeout must be in [1.0, 604800.0], got 0.001"),
        (["run", "--threads", "nan"], "threads must be a whole number, got 'nan'"),
        (["run", "--threads", "0"], "threads must be between 1 and 64, got 0"),
        (["run", "--lr", "inf"], "lr must be in (0.0, 10.0], got inf"),
        (["history", "list", "--limit=-1"], "limit must be between 0 and 1000000000, got -1"),
        (["history", "list", "--limit", "1e3"], "limit must be a whole number, got '1e3'"),
        (["--home", "", "history", "list"], "--home: an empty path; give the directory that keeps the history"),
    ],
)  # fmt: skip
def test_nonsense_numbers_and_homes_are_one_line_exit_2(
    capsys: pytest.CaptureFixture, argv: list[str], message: str
) -> None:
    code, err = _main(capsys, *argv)
    assert (code, err) == (2, f"tui-bench: error: {message}\n")


def test_worker_options_are_checked_by_the_engine_too() -> None:
    with pytest.raises(SpecError, match=r"sample_interval must be in \[0.05, 3600.0\], got 0"):
        WorkerOptions.from_dict({"sample_interval": 0, "cluster": "auto"})
    assert WorkerOptions.from_dict({"stall_timeout": 3}).stall_timeout == 3.0


def test_one_field_one_message_from_flag_preset_form_and_config(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    wanted = "threads must be between 1 and 64, got 0"
    _, err = _main(capsys, "run", "--threads", "0")
    assert err == f"tui-bench: error: {wanted}\n"
    path = tmp_path / "p.toml"
    path.write_text("threads = 0\n", encoding="utf-8")
    with pytest.raises(PresetError) as preset_error:
        presets.load(path)
    assert str(preset_error.value).endswith("threads: must be between 1 and 64, got 0")
    with pytest.raises(SpecError, match=wanted):  # what the TUI's form shows: validate()'s text
        RunSpec(threads=0).validate()
    config = Path(os.environ["TUI_BENCH_CONFIG"])
    for value in ("nan", "inf", "0", "-1", "100"):
        config.write_text(f"[ui]\nrefresh_hz = {value}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=r"ui.refresh_hz must be in \[0.2, 4.0\], got"):
            load_config()
    config.write_text("[ui]\nrefresh_hz = 4\n", encoding="utf-8")
    assert load_config()["ui"]["refresh_hz"] == 4


def test_history_list_limit_counts_runs_even_when_they_are_repeats_of_one_group(
    capsys: pytest.CaptureFixture,
) -> None:
    history = History()
    for i in range(3):
        history.add({"id": f"run-{i}", "status": "finished", "group": "g1", "repeat": i})
    assert cli.main(["history", "list", "--limit", "2", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["run-1", "run-2"]
    assert cli.main(["history", "list", "--limit", "0", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3


# -- --home moves the history, not the runtimes -------------------------------------------------
def test_home_must_be_a_usable_directory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, err = _main(capsys, "--home", str(a_file), "history", "list")
    assert (code, err) == (2, f"tui-bench: error: --home {a_file}: exists and is not a directory\n")
    code, err = _main(capsys, "--home", str(a_file / "below"), "history", "list")
    assert code == 2 and "cannot be created" in err and err.count("\n") == 1
    fresh = tmp_path / "new" / "home"
    assert cli.main(["--home", str(fresh), "history", "list", "--json"]) == 0
    assert os.environ["TUI_BENCH_HOME"] == str(fresh)


def test_runtimes_stay_where_setup_put_them_whatever_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TUI_BENCH_RUNTIMES_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # platformdirs' default home
    managed = tmp_path / "xdg" / "tui-bench" / "runtimes" / "mxnet" / "bin" / "python"
    managed.parent.mkdir(parents=True)
    managed.symlink_to(sys.executable)
    monkeypatch.setenv("TUI_BENCH_HOME", str(tmp_path / "elsewhere"))
    assert paths.runtimes_home() == managed.parents[2]
    found = runtimes.resolve("mxnet", "gluon")
    assert (found.source, found.python) == ("managed", str(managed))
    monkeypatch.setenv("TUI_BENCH_RUNTIMES_DIR", str(tmp_path / "override"))
    assert paths.runtimes_home() == tmp_path / "override"


@pytest.mark.slow
def test_a_managed_framework_runs_under_a_non_default_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The issue's defect, end to end: with any home but the default, MXNet was 'not installed'."""
    monkeypatch.delenv("TUI_BENCH_RUNTIMES_DIR")  # only where `runtime setup` put it by default
    if not (paths.default_data_home() / "runtimes" / "mxnet" / "bin" / "python").exists():
        pytest.skip("the mxnet runtime is not set up (tui-bench runtime setup mxnet)")
    home = tmp_path / "another-home"
    code = cli.main(
        ["--home", str(home), "run", "--framework", "mxnet", "--api", "gluon", "--threads", "1",
         "--epochs", "1", "--steps-per-epoch", "3", "--batch-size", "32", "--train-samples", "200",
         "--test-samples", "64", "--warmup-steps", "1", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    (record,) = json.loads(out.out)
    assert record["status"] == "finished", record.get("reason")
    assert record["metrics"]["step_median_s"] > 0
    assert record["metrics"]["framework_version"].startswith("1.9")  # MXNet itself ran
    assert (home / "history.jsonl").is_file()
    assert History(home).get(record["id"]).spec["framework"] == "mxnet"


# -- runtime names and interpreters ---------------------------------------------------------------
def test_a_runtime_name_or_interpreter_that_is_not_one_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # Never near the shared runtimes: a refusal comes before anything is created, but be sure.
    monkeypatch.setenv("TUI_BENCH_RUNTIMES_DIR", str(tmp_path / "runtimes"))
    code, err = _main(capsys, "runtime", "setup", "caffe")
    assert code == 2 and err.startswith("tui-bench: error: no managed runtime named 'caffe'")
    for not_python in ("/bin/echo", str(tmp_path / "missing")):
        code, err = _main(capsys, "runtime", "setup", "mxnet", "--python", not_python)
        assert code == 2, err
        assert f"tui-bench: error: --python {not_python} is not a Python interpreter" in err
        assert err.count("tui-bench: error:") == 1 and "Traceback" not in err
    assert not (tmp_path / "runtimes").exists()
    config = Path(os.environ["TUI_BENCH_CONFIG"])
    config.write_text(f'[runtimes.mxnet]\npython = "{tmp_path}"\n', encoding="utf-8")
    with pytest.raises(RuntimeUnavailable, match="not an executable interpreter"):
        runtimes.resolve("mxnet", "gluon")
