"""The JAX adapter (APIs ``flax`` and ``jit``) in its own runtime: one subprocess builds what the
tests below check beyond the equity tests (tests/test_frameworks.py holds every model's parameter
count and first loss in both APIs to torch's): the LSTM's initialisers, a wrong shared draw
refused, dropout's semantics, the device input path and the precision settings as applied and
read back.

The app environment has no jax: the checks run in the ``jax`` runtime (``tui-bench runtime setup
jax``), found as tests/test_frameworks.py finds every runtime (a missing one skips, or fails with
``TUI_BENCH_REQUIRE_RUNTIMES=1``). Training through the real worker is tests/test_frameworks.py.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import REPO
from test_frameworks import runtime_for

from tui_bench.engine import catalog

# One xdist worker runs them all, so the module fixture (one JAX process that compiles) runs once,
# not once per worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("jax-adapter")]

SCRIPT = r"""
import importlib.util, json, sys
here = sys.argv[1] + "/adapters"
spec = importlib.util.spec_from_file_location(
    "adapters", here + "/__init__.py", submodule_search_locations=[here])
package = importlib.util.module_from_spec(spec)
sys.modules["adapters"] = package
spec.loader.exec_module(package)
sys.path.insert(0, sys.argv[1] + "/tests")
import numpy as np
from adapters import backend as contract, data, models, shared_init
from adapters.jax import adapter, flax_models

DATASETS = {"cnn": "synthetic-mnist", "mlp": "synthetic-mnist", "vgg16": "synthetic-cifar10",
            "lstm": "synthetic-imdb", "transformer": "synthetic-imdb", "gpt": "synthetic-tokens"}
out = {}

def dataset_for(model):
    dims = models.gpt_dims({}) if model == "gpt" else None
    tokens = (dims.seq_len, dims.vocab_size) if dims else None
    return dims, data.load(DATASETS[model], train_samples=40, test_samples=8, tokens=tokens)

def backend(api, model, dropout=0.0, precision="fp32"):
    dims, dataset = dataset_for(model)
    b = adapter.make_backend(api, "cpu", 1)
    applied = b.apply_settings(contract.Settings(precision=precision))
    b.build(contract.Hyper(model, 4, 0.01, "sgd", dropout, 0, dims=dims), dataset)
    return b, dataset, dims, applied

# The LSTM's recurrent kernel: orthogonal as one (hidden, 4·hidden) matrix, forget bias 1.
b, *_ = backend("flax", "lstm")
w = np.asarray(b.model.lstm.recurrent[...], dtype=np.float64)
bias = np.asarray(b.model.lstm.bias[...])
out["lstm_gram_error"] = float(np.abs(w @ w.T - np.eye(w.shape[0])).max())
out["lstm_forget_bias"] = sorted(set(bias[128:256].tolist()))
out["lstm_other_bias"] = sorted(set(np.concatenate([bias[:128], bias[256:]]).tolist()))

# A wrong shared draw is refused by name, never broadcast.
model = b = None
b, dataset, dims, _ = backend("flax", "transformer")
weights = shared_init.transformer_weights(0, dataset.shape.vocab_size, dataset.shape.input_shape[0])
del weights["head.bias"]
try:
    flax_models.load_shared(b.model, "transformer", weights)
    out["missing_weight"] = None
except ValueError as exc:
    out["missing_weight"] = str(exc)

# Dropout: training drops (two steps' forward differ), evaluation does not (equal twice).
for api in adapter.APIS:
    b, dataset, dims, _ = backend(api, "mlp", dropout=0.5)
    x, y = dataset.x_train[:4], dataset.y_train[:4]
    out[f"{api}_eval_twice"] = [b.evaluate(x, y, 4)[0] for _ in range(2)]
    b._mode(True)
    if api == "flax":
        logits = [np.asarray(b.model(x)) for _ in range(2)]
    else:
        import jax
        keys = jax.random.split(b.key)
        logits = [np.asarray(b.apply(b.params, x, k, 0.5)) for k in keys]
    out[f"{api}_train_differs"] = bool(np.abs(logits[0] - logits[1]).max() > 0)

# Device input gathers what host input gathers.
b, dataset, dims, _ = backend("flax", "cnn")
idx = np.array([5, 3, 20, 7])
host = b.take(dataset.x_train, dataset.y_train, idx)
resident = b.take(*b.to_device(dataset.x_train, dataset.y_train), idx)
out["device_input_same"] = bool(
    np.array_equal(np.asarray(host[0]), np.asarray(resident[0]))
    and np.array_equal(np.asarray(host[1]), np.asarray(resident[1])))
out["device_input_loss"] = b.loss_value(b.train_step(*resident))

# Precision, read back.
_, _, _, out["fp32"] = backend("flax", "cnn")
b, dataset, dims, out["bf16"] = backend("jit", "transformer", precision="bf16")
out["bf16_logits_dtype"] = str(b._logits(dataset.x_train[:2]).dtype)
# Flax's bf16 (the modules' compute dtype), with dropout: one training step.
b, dataset, dims, out["bf16_flax"] = backend("flax", "transformer", 0.1, precision="bf16")
out["bf16_flax_attention"] = b.applied["attention"]
out["bf16_flax_logits_dtype"] = str(b._logits(dataset.x_train[:2]).dtype)
batch = b.take(dataset.x_train, dataset.y_train, np.arange(4))
out["bf16_flax_loss"] = b.loss_value(b.train_step(*batch))
try:
    adapter.make_backend("flax", "cpu", 1).apply_settings(contract.Settings(precision="amp-fp16"))
    out["fp16"] = None
except RuntimeError as exc:
    out["fp16"] = str(exc)
print("RESULT " + json.dumps(out, default=str))
"""

_REPORT: dict = {}


@pytest.fixture(scope="module")
def report() -> dict:
    if not _REPORT:
        if "jax" not in catalog.FRAMEWORKS:  # its manifest is read through the entry point
            message = "jax is not a registered framework here (tui_bench.frameworks entry point)"
            if os.environ.get("TUI_BENCH_REQUIRE_RUNTIMES") == "1":
                pytest.fail(message)
            pytest.skip(message)
        runtime = runtime_for("jax", "flax")
        done = subprocess.run(
            [runtime.python, "-I", "-c", SCRIPT, str(REPO)],
            capture_output=True,
            text=True,
            timeout=900,
            # What it checks is what was built and applied, never how fast: it compiles as a
            # build-only worker does, with the manifest's build_env (XLA's optimisation off).
            env={
                "CUDA_VISIBLE_DEVICES": "",
                "PATH": "/usr/bin:/bin",
                **catalog.framework("jax").build_env,
            },
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        assert done.returncode == 0 and lines, done.stderr[-3000:]
        _REPORT.update(json.loads(lines[-1][len("RESULT ") :]))
    return _REPORT


def test_every_model_is_held_to_torch_in_both_apis_elsewhere() -> None:
    """Parameter counts, first batches and the shared draw's first losses of both APIs are held to
    torch's elsewhere, in processes that start anyway: the CNN served and the transformer trained
    (tests/test_frameworks.py, test_inference_equity.py), the FNN and the gpt built by the build
    probes, VGG16 and the LSTM built from a changed declaration and held to the formula
    (tests/test_model_declaration.py). Built here again, every model in both APIs cost 85 s of
    one test process on a fresh machine and checked nothing more."""
    from test_frameworks import BUILD_PATHS, COMBOS, GPT_PROBES, OTHER_MODELS
    from test_inference_equity import SERVING
    from test_model_declaration import CHANGED

    for api in ("flax", "jit"):
        assert ("jax", api) in COMBOS and ("jax", api) in SERVING
        assert ("jax", api) in BUILD_PATHS and ("jax", api) in GPT_PROBES
    assert set(OTHER_MODELS) <= set(CHANGED)
    assert set(OTHER_MODELS) | {"cnn", "transformer", "mlp", "gpt"} == set(catalog.MODELS)


def test_lstm_initialisers_are_keras(report) -> None:
    assert report["lstm_gram_error"] < 1e-5  # orthogonal as a whole, not per gate
    assert report["lstm_forget_bias"] == [1.0] and report["lstm_other_bias"] == [0.0]


def test_a_wrong_shared_draw_is_refused(report) -> None:
    assert "do not match" in report["missing_weight"]


@pytest.mark.parametrize("api", ["flax", "jit"])
def test_dropout_drops_while_training_and_never_in_evaluation(report, api) -> None:
    first, second = report[f"{api}_eval_twice"]
    assert first == second
    assert report[f"{api}_train_differs"] is True


def test_device_input_gathers_the_same_batch_as_host_input(report) -> None:
    assert report["device_input_same"] is True and report["device_input_loss"] > 0


def test_precision_is_applied_and_read_back(report) -> None:
    fp32, bf16 = report["fp32"], report["bf16"]
    assert fp32["precision"] == "fp32" and fp32["policy"] == "float32"
    assert fp32["matmul_precision"] == "float32" and fp32["compile"] == "XLA (nnx.jit)"
    assert bf16["compile"] == "XLA (jax.jit)" and bf16["policy"] == "mixed_bfloat16"
    assert bf16["dtypes"] == "parameters float32, compute bfloat16, loss float32"
    assert report["bf16_logits_dtype"] == "bfloat16"  # the compute dtype really is bf16
    assert "loss scaling" in report["fp16"]


def test_flax_bf16_computes_in_bfloat16_and_trains(report) -> None:
    """The Flax modules' compute dtype (tests/test_frameworks.py's bf16 runs hold the other ways
    bf16 reaches a model): bfloat16 logits, the settings said, a finite first loss."""
    settings = report["bf16_flax"]
    assert settings["precision"] == "bf16" and settings["policy"] == "mixed_bfloat16"
    assert settings["compile"] == "XLA (nnx.jit)"
    assert report["bf16_flax_logits_dtype"] == "bfloat16"
    assert report["bf16_flax_attention"].startswith("written out: einsum + softmax + dropout")
    assert 0 < report["bf16_flax_loss"] < 5
