"""The preset, sweep and compare commands end to end through ``tui_bench.cli.main``."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest
from conftest import THEANO_GROUP

from tui_bench import cli
from tui_bench.engine import catalog
from tui_bench.engine.results.history import History
from tui_bench.engine.runs import presets
from tui_bench.engine.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]
QUICK = sorted(p.stem for p in (REPO / "presets").glob("*-quick.toml"))
# Quick presets whose every configuration trains, on the same worker path (framework, API, model,
# data, workers), in another test of this suite: running them again through the CLI would repeat
# minutes of the same training (attention-quick alone is 7-10 minutes of cold Theano compiles on 2
# cores; shatnawi-2018-quick 300 s, its Keras 2 on Theano compiling the CNN again with OpenMP for
# 2 and 4 threads). The CLI's preset sweep itself still runs end to end below (kabakus-2020-quick)
# and in tests/test_sweep.py; oversubscribed threads are flagged in tests/test_presets.py.
# test_presets_trained_elsewhere_are_trained holds each to the tests named here.
TRAINED_ELSEWHERE = {
    "attention-quick": "tests/test_frameworks.py::test_transformer_trains_identically_everywhere",
    "nayak-jain-2019-quick": "tests/test_frameworks.py::test_reference_cnn_trains_identically_everywhere",
    "scaling-quick": "tests/test_data_parallel.py::test_two_workers_train_the_same_global_batches",
    "shatnawi-2018-quick": "tests/test_frameworks.py::test_reference_cnn_trains_identically_everywhere"
    " (1 thread; test_two_threads_take_effect_and_mlp_counts_match reads 2 back)",
    # Serves, not trains: 60 runs, 3 min 23 s warm here (27 Nov 2026, load ~1). Every framework ×
    # API serves the transformer there, and every model-building path the CNN's images (batch 1;
    # batch 64 is the same path with more bytes).
    "inference-quick": "tests/test_inference_equity.py::test_every_api_serves_the_shared_transformer"
    " and ::test_every_build_path_serves_the_reference_cnn_on_the_same_bytes",
    # Generates, not trains: every API that generates runs the tiny gpt's generation, its tokens
    # held to the reference (batch 2; batch 1 and 8 are the same path), through the worker there
    # or in its package's own test (test_generation.REFERENCE_IN_PROCESS).
    "generate-quick": "tests/test_generation.py::test_every_generating_api_gives_the_reference_tokens",
}


@pytest.mark.needs_runtime("torch")
def test_presets_list_and_show(capsys):
    assert cli.main(["presets", "list"]) == 0
    listed = capsys.readouterr().out
    for name in ("nayak-jain-2019", "shatnawi-2018", "kabakus-2020", "shatnawi-2018-quick"):
        assert name in listed
    assert cli.main(["presets", "show", "nayak-jain-2019-quick", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    by_key = {c["key"]: c for c in shown["configurations"]}
    assert by_key["framework=torch api=eager device=cpu"]["skip_reason"] is None
    mxnet = by_key["framework=mxnet api=gluon device=cpu"]["skip_reason"]
    if "mxnet" not in presets.catalog.FRAMEWORKS:
        assert mxnet.startswith("framework 'mxnet' is not available in this installation")


def test_bad_preset_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "x.toml").write_text("threads = 0\n")
    assert cli.main(["run", "--preset", "presets/x.toml"]) == 2
    err = capsys.readouterr().err
    assert err == "tui-bench: error: presets/x.toml: threads: must be between 1 and 64, got 0\n"
    assert cli.main(["run", "--preset", "shatnawi-2017"]) == 2
    assert "did you mean 'shatnawi-2018'" in capsys.readouterr().err
    assert cli.main(["run", "--resume"]) == 2
    assert "--resume needs a SWEEP_ID or --preset NAME" in capsys.readouterr().err
    assert History().all() == []  # nothing ran, nothing recorded


def test_compare_exports_csv_and_markdown(tmp_path, capsys):
    history = History()
    for device, values in (
        ("cpu", [4.0, 4.1, 3.9, 4.2, 4.05]),
        ("gpu", [1.0, 1.1, 0.9, 0.95, 1.05]),
    ):
        for i, value in enumerate(values):
            history.add(
                {
                    "id": f"run-{device}-{i}",
                    "status": "finished",
                    "spec": RunSpec(device=device).to_dict(),
                    "group": "g1",
                    "metrics": {"step_median_s": value, "train_wall_s": 10 * value},
                }
            )
    csv_path, md_path = tmp_path / "out.csv", tmp_path / "out.md"
    code = cli.main(["compare", "g1", "--csv", str(csv_path), "--markdown", str(md_path)])
    assert code == 0
    assert "comparisons of median step time" in capsys.readouterr().out
    markdown = md_path.read_text()
    assert "| device | — | gpu | cpu | 0.247 | 4.05 | sig p=0.0079 |" in markdown
    assert "comparisons" in csv_path.read_text()
    assert cli.main(["compare", "run-cpu-0", "run-gpu-0", "--json"]) == 0
    tables = json.loads(capsys.readouterr().out)
    comparisons = next(t for t in tables if t["name"] == "comparisons")
    assert "not enough repeats (n=1/1" in comparisons["rows"][0][-1]
    assert cli.main(["compare", "g1", "--metric", "speed"]) == 2


TINY_FLAGS = [
    "--model",
    "mlp",
    "--batch-size",
    "32",
    "--epochs",
    "1",
    "--steps-per-epoch",
    "2",
    "--warmup-steps",
    "1",
    "--train-samples",
    "200",
    "--test-samples",
    "64",
    "--threads",
    "1",
]


@pytest.mark.slow
def test_replay_from_history_with_an_override(capsys):
    assert cli.main(["run", *TINY_FLAGS, "--json", "--sample-interval", "0.2"]) == 0
    (first,) = json.loads(capsys.readouterr().out)
    code = cli.main(
        [
            "run",
            "--from-history",
            first["id"],
            # not --threads: a new thread count measures its matmul peak first (every installed
            # framework's probe, ~15 s), which tests/test_peaks.py checks on its own
            "--seed",
            "1",
            "--json",
            "--sample-interval",
            "0.2",
        ]
    )
    assert code == 0
    (replayed,) = json.loads(capsys.readouterr().out)
    assert replayed["spec"] == {**first["spec"], "seed": 1}


@pytest.mark.slow
def test_target_accuracy_is_reported_in_the_sweep(tmp_path, capsys):
    preset = tmp_path / "tta.toml"
    preset.write_text(
        'repeats = 1\nmodel = "mlp"\nbatch_size = 32\nepochs = 3\nsteps_per_epoch = 3\n'
        "warmup_steps = 1\ntrain_samples = 200\ntest_samples = 64\nthreads = 1\n"
        "target_accuracy = [0.01, 0.9999]\n"
    )
    assert cli.main(["run", "--preset", str(preset), "--json", "--sample-interval", "0.2"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    easy, hard = (r["metrics"] for r in runs)
    assert easy["target_reached_epoch"] == 1 and easy["epochs_run"] == 1  # stopped at once
    assert hard["target_reached_epoch"] is None and hard["epochs_run"] == 3
    assert cli.main(["compare", runs[0]["group"], "--json"]) == 0
    summary = next(t for t in json.loads(capsys.readouterr().out) if t["name"] == "summary")
    column = summary["columns"].index("time to accuracy")
    reached, missed = (row[column] for row in summary["rows"])
    assert reached.startswith("epoch 1, ") and reached.endswith("(1/1 reached 0.01)")
    assert missed == "not reached (1 run(s))"


def trained_by_other_tests() -> set[tuple]:
    """(framework, API, model, dataset, workers) of every CPU run the framework and data-parallel
    tests train for real (weak or strong scaling only splits the same batches differently)."""
    from tests.test_data_parallel import TWO_WORKER_PATHS
    from tests.test_frameworks import CNN_TRAINED, COMBOS

    single = {(framework, api, "cnn", "synthetic-mnist", 1) for framework, api in CNN_TRAINED}
    single |= {(framework, api, "transformer", "synthetic-imdb", 1) for framework, api in COMBOS}
    parallel = {
        (framework, api, "cnn", "synthetic-mnist", workers)
        for framework, api in TWO_WORKER_PATHS
        for workers in (1, 2)
    }
    return single | parallel


def threads_checked_by_other_tests() -> set[tuple[str, str]]:
    """(framework, API) whose way of setting 2 threads a worker checks (tests/test_frameworks.py
    reads the count back from the library), itself or through an API that shares its code."""
    from tests.test_frameworks import COMBOS, THREAD_MECHANISMS, THREADS_SET_AS

    return {combo for combo in COMBOS if THREADS_SET_AS.get(combo, combo) in THREAD_MECHANISMS}


@pytest.mark.parametrize("name", sorted(TRAINED_ELSEWHERE))
def test_presets_trained_elsewhere_are_trained(name):
    """Every CPU configuration of a preset the CLI test leaves out trains in another test, on the
    same framework, API, model, data and workers: leaving the preset out loses no worker path."""
    configs = presets.expand(presets.load(presets.find(name)), probe=None)
    # (a framework no Python here can run, CNTK, is skipped with its reason, never trained)
    on_cpu = [
        c.spec
        for c in configs
        if c.spec.device == "cpu" and not catalog.framework(c.spec.framework).unavailable
    ]
    assert on_cpu
    if name == "generate-quick":  # generated: every API the catalog says generates, no other
        runnable = {(c.spec.framework, c.spec.api) for c in configs if c.skip_reason is None}
        assert {s.mode for s in on_cpu} == {"generate"}
        assert {(s.model, s.dataset) for s in on_cpu} == {("gpt", "synthetic-tokens")}
        # every API that generates is in the preset, and runs there (a new one: add its line)
        assert runnable == set(catalog.generating_apis())
        return
    if name == "inference-quick":  # served, not trained: by the serving tests, every API, both
        from tests.test_inference_equity import SERVING

        assert {s.mode for s in on_cpu} == {"inference"}
        assert {(s.framework, s.api) for s in on_cpu} == set(SERVING)
        assert {(s.model, s.dataset) for s in on_cpu} == {
            ("cnn", "synthetic-mnist"),
            ("transformer", "synthetic-imdb"),
        }
        return
    signatures = {(s.framework, s.api, s.model, s.dataset, s.workers) for s in on_cpu}
    assert signatures <= trained_by_other_tests(), signatures - trained_by_other_tests()
    # More than one thread: the framework's way of setting threads is checked with 2 elsewhere.
    threaded = {(s.framework, s.api) for s in on_cpu if s.threads > 1 and s.workers == 1}
    assert threaded <= threads_checked_by_other_tests(), threaded - threads_checked_by_other_tests()
    if name == "attention-quick":  # every framework x API, nothing less
        from tests.test_frameworks import COMBOS

        assert {(s.framework, s.api) for s in on_cpu} == set(COMBOS)


# gpt-quick's configurations the CLI test leaves out (``run --only`` the rest), each for a
# reason: torch eager trains the gpt in tests/test_frameworks.py from the same draw against the
# float64 reference. TensorFlow's five, Keras 3 on its three backends and Keras 2 on Theano train
# with the step each of them trains the transformer with in tests/test_frameworks.py (a Keras
# or TF loss over the logits of every position is the one line the gpt adds), and their gpt
# (every build path) is built, and its first batch's loss taken through each API's own
# evaluation, by the build probes there. What is left trains here: torch.compile (Inductor
# compiles the gpt's own graph), JAX's two, MXNet's three and Theano's own training function
# (written for each model). 53 s of a quiet box's 289 s gpt-quick for TF's five, 54 s for the
# four Keras ones (28 Nov 2026, one run each, load ~1).
_TRAINS_AS_THE_TRANSFORMER = "the transformer's training step; the gpt built and its loss probed"
GPT_QUICK_LEFT_OUT = {
    ("torch", "eager"): "trained from the shared draw in test_gpt_tiny_trains_from_the_shared_draw",
    **{
        ("tensorflow", api): _TRAINS_AS_THE_TRANSFORMER
        for api in ("keras", "eager", "graph", "xla", "estimator")
    },
    **{("keras", api): _TRAINS_AS_THE_TRANSFORMER for api in ("tensorflow", "torch", "jax")},
    ("theano", "keras2"): _TRAINS_AS_THE_TRANSFORMER,
}
_GPT_QUICK_RUNS = [
    f"{c.spec.framework}/{c.spec.api}"
    for c in presets.expand(presets.load(presets.find("gpt-quick")), probe=None)
    if (c.spec.framework, c.spec.api) not in GPT_QUICK_LEFT_OUT
]
# gpt-quick's Theano run goes with the other Theano runs, to their test process (its own run of the
# CLI, the same preset): beside them it waited on Theano's compile lock with its core idle (gpt-quick
# took 168 s of a fresh machine's suite, 116 s of a warm one's). After them: run first there, it
# compiled the ops it shares with the transformer's runs from an empty cache (102 s).
GPT_QUICK_THEANO = "theano/theano"
QUICK_RUNS = [
    pytest.param(name, "", id=name)
    for name in sorted(set(QUICK) - set(TRAINED_ELSEWHERE) - {"gpt-quick"})
] + [
    pytest.param(
        "gpt-quick", ",".join(r for r in _GPT_QUICK_RUNS if r != GPT_QUICK_THEANO), id="gpt-quick"
    ),
    pytest.param(
        "gpt-quick",
        GPT_QUICK_THEANO,
        id="gpt-quick-theano",
        marks=[pytest.mark.xdist_group(THEANO_GROUP), pytest.mark.after_its_group],
    ),
]


def test_every_quick_preset_runs_whole_in_the_cli_test_or_is_trained_elsewhere():
    """The CLI test's runs of a preset add up to the preset, less what GPT_QUICK_LEFT_OUT says is
    trained elsewhere."""
    runs: dict[str, list[str]] = {}
    for param in QUICK_RUNS:
        name, only = param.values
        runs.setdefault(name, []).extend(only.split(",") if only else ["*"])
    assert set(runs) == set(QUICK) - set(TRAINED_ELSEWHERE)
    assert sorted(runs["gpt-quick"]) == sorted(_GPT_QUICK_RUNS)
    assert all(only == ["*"] for name, only in runs.items() if name != "gpt-quick")


def test_what_gpt_quicks_cli_run_leaves_out_is_trained_or_probed_elsewhere():
    from tests.test_frameworks import COMBOS, GPT_PROBES, GPT_TRAINED

    assert ("torch", "eager") in GPT_TRAINED
    for combo, reason in GPT_QUICK_LEFT_OUT.items():
        if reason == _TRAINS_AS_THE_TRANSFORMER:
            # Keras or TF's own step, which trains the transformer; never a hand-written one
            assert combo[0] in ("tensorflow", "keras") or combo == ("theano", "keras2"), combo
            assert combo in COMBOS  # test_transformer_trains_identically_everywhere
    # every gpt build path among them is probed (test_every_gpt_api_is_trained_or_probed)
    assert {("tensorflow", "graph"), ("tensorflow", "estimator")} <= set(GPT_PROBES)
    assert {("keras", b) for b in ("tensorflow", "torch", "jax")} <= set(GPT_PROBES)
    assert ("theano", "keras2") in GPT_PROBES


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a hang guard: cold Theano compiles take minutes on a loaded box
@pytest.mark.parametrize(("name", "only_flag"), QUICK_RUNS)
def test_quick_preset_runs(name, only_flag, capsys):
    """Each shipped quick preset, every configuration as shipped (framework, API, model, data,
    device, threads, workers): what this installation can run finishes; the rest is skipped with
    a reason, never an abort. One repeat of three steps each (one warm-up, two timed): that proves
    the wiring; repeats (interleaving, seeds, groups, resume) are tests/test_sweep.py's, and the
    shipped repeats and steps made shatnawi-2018-quick alone 381-463 s of the suite's critical
    path on a fresh machine."""
    fewest = {"steps_per_epoch": 3, "warmup_steps": 1}  # a configuration's key follows them
    only = tuple(only_flag.split(",")) if only_flag else ()
    configs = presets.expand(presets.load(presets.find(name)), fewest, only=only)
    runnable = [c for c in configs if c.skip_reason is None]
    assert runnable, "a quick preset must run something with only PyTorch installed"
    flags = ["--steps-per-epoch", "3", "--warmup-steps", "1"]
    if only:
        flags += ["--only", only_flag]
    code = cli.main(["run", "--preset", name, "--repeats", "1", *flags, "--json"])
    result = json.loads(capsys.readouterr().out)
    statuses = [(r["config"], r["status"], r.get("reason")) for r in result["runs"]]
    assert code == 0, statuses
    assert sorted(r["config"] for r in result["runs"]) == sorted(c.key for c in runnable)
    assert all(status == "finished" for _, status, _ in statuses)
    if name == "gpt-quick":  # every framework × API from the one shared draw: one first loss
        firsts = [r["metrics"]["initial_loss"] for r in result["runs"]]
        assert max(firsts) - min(firsts) <= 1e-6 * min(firsts), firsts
        for r in result["runs"]:  # every API's gpt states its rate and FLOPs, causal
            metrics = r["metrics"]
            assert metrics["tokens_per_s"] == pytest.approx(metrics["samples_per_s"] * 128)
            assert metrics["flops_per_step"] == 8 * 128 * 3 * 3_014_656, r["config"]
            assert "causal" in metrics["setting_attention"], r["config"]
    oversubscribed = {r["config"]: r["oversubscribed"] for r in result["runs"]}
    for c in runnable:
        assert oversubscribed[c.key] == (c.spec.threads > (os.cpu_count() or 1))


# -- a study's published figures beside ours ---------------------------------------------------------
def kabakus_sweep(skip_lstm_keras: bool = True):
    """A kabakus-2020-quick sweep recorded without workers: Keras twice as fast as PyTorch on
    the FNN and VGG16 (one noisy PyTorch run), the Keras LSTM skipped."""
    from tui_bench.engine.runs import sweep as sweep_module

    preset = presets.load(presets.find("kabakus-2020-quick"))
    sweep = sweep_module.create(preset, probe=None)
    history = History()
    for config in sweep.configs:
        spec = config.spec
        if skip_lstm_keras and spec.model == "lstm" and spec.framework == "keras":
            continue
        base = {"mlp": 10.0, "vgg16": 50.0, "lstm": 20.0}[spec.model]
        for repeat in range(3):
            wall = base * (2 if spec.framework == "torch" else 1) + repeat
            noisy = spec.framework == "torch" and repeat == 0
            history.add(
                {
                    "id": f"run-{spec.framework}-{spec.model}-{repeat}",
                    "status": "finished",
                    "started_at": f"2026-11-21T05:00:{repeat:02d}",
                    "spec": spec.to_dict(),
                    "group": sweep.id,
                    "preset": preset.name,
                    "config": config.key,
                    "repeat": repeat,
                    "metrics": {"step_median_s": 0.01, "train_wall_s": wall, "test_s": wall / 10},
                    "stability": {"verdict": "noisy" if noisy else "stable"},
                }
            )
    return sweep, preset


def test_compare_prints_published_beside_here_for_a_study_sweep(tmp_path, capsys):
    sweep, preset = kabakus_sweep()
    csv_path, md_path = tmp_path / "out.csv", tmp_path / "out.md"
    args = ["compare", sweep.id, "--csv", str(csv_path), "--markdown", str(md_path)]
    assert cli.main(args) == 0
    assert "published figures beside ours" in capsys.readouterr().out
    markdown = md_path.read_text()
    assert (
        "| 3.8 | 1.91 | 3/3 | training time, model=mlp: torch/eager ÷ keras/tensorflow | — | "
        "same direction; torch/eager: not stable: 1 noisy of 3 |\n" in markdown
    )
    assert "Source: Kabakus (2020)" in markdown  # once, under the table
    assert (
        "| 1.3 | — | 0/3 | training time, model=lstm: keras/tensorflow ÷ torch/eager | — | "
        "not run here: no run of keras/tensorflow model=lstm |" in markdown
    )
    rows = [
        r for r in csv.DictReader(io.StringIO(csv_path.read_text())) if r["table"] == "published"
    ]
    assert len(rows) == len(preset.published) == 6
    assert float(rows[0]["here"]) == pytest.approx(21 / 11)  # medians over runs: 21 s / 11 s
    assert rows[0]["stability"] == "torch/eager: not stable: 1 noisy of 3"
    assert cli.main(["compare", sweep.id, "--json"]) == 0
    tables = json.loads(capsys.readouterr().out)
    figures = next(t for t in tables if t["name"] == "published")
    assert [row[0] for row in figures["rows"]] == [f.title() for f in preset.published]


def test_compare_of_runs_picked_by_id_has_no_published_table(capsys):
    sweep, _ = kabakus_sweep()
    assert cli.main(["compare", "run-torch-mlp-0", "run-keras-mlp-0", "--json"]) == 0
    assert "published" not in [t["name"] for t in json.loads(capsys.readouterr().out)]


def test_the_sweep_manifest_keeps_its_figures_and_old_ones_read_the_preset(capsys):
    from tui_bench.engine.runs import sweep as sweep_module

    sweep, preset = kabakus_sweep()
    manifest = json.loads(sweep.manifest_path.read_text())
    assert [f["value"] for f in manifest["published"]] == [f.value for f in preset.published]
    assert sweep_module.find(sweep.id).figures() == list(preset.published)
    # A manifest written before sweeps kept figures: its preset's, as the file reads now.
    del manifest["published"]
    sweep.manifest_path.write_text(json.dumps(manifest))
    assert sweep_module.find(sweep.id).figures() == list(preset.published)
    # Damaged figures make the manifest unreadable like any other damage: compare goes on with
    # the sweep's runs as a group, without figures, and says nothing it cannot back.
    manifest["published"] = [{"source": "x", "metric": "speed"}]
    sweep.manifest_path.write_text(json.dumps(manifest))
    assert cli.main(["compare", sweep.id, "--json"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert "summary" in names and "published" not in names
