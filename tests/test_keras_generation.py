"""Keras 3's generation path (adapters/keras/generate.py) on each backend, run in that backend's
runtime: the cached tokens equal a full recompute through the built model's own forward without
any cache, and the float64 reference's; a cache whose decode step never writes is caught; bf16
serves bfloat16 weights and cache; the one compiled function serves N and 1 tokens alike."""

from __future__ import annotations

import functools
import json
import os
import subprocess

import numpy as np
import pytest
from conftest import REPO
from test_frameworks import runtime_for

# Runs in the Keras runtime (KERAS_BACKEND set): builds the tiny gpt from the shared draw scaled
# for generation, generates, recomputes, and prints what the test checks.
SCRIPT = r"""
import importlib.util, json, sys
here = sys.argv[1]
spec = importlib.util.spec_from_file_location("adapters", here + "/__init__.py",
                                              submodule_search_locations=[here])
package = importlib.util.module_from_spec(spec); sys.modules["adapters"] = package
spec.loader.exec_module(package)
import numpy as np
from adapters import backend as contract, data, models, shared_init
from adapters.keras import generate as keras_generate
from adapters.keras.adapter import KerasBackend
from adapters.generate import TokenClock

api, check = sys.argv[2], sys.argv[3]
shared_init.for_generation()
dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
dataset = data.load("synthetic-tokens", test_samples=8, tokens=(dims.seq_len, dims.vocab_size))
backend = KerasBackend(api, "cpu", 1)
backend.apply_settings(contract.Settings(precision="bf16" if check == "bf16" else "fp32"))
backend.build(contract.Hyper("gpt", 3, 1e-3, "adam", 0.0, 0, dims=dims), dataset)
prompt = np.ascontiguousarray(dataset.x_test[:3, :40])
out = {}
if check == "bf16":
    facts = backend.prepare_generation(3, 40, 4)
    out["facts"] = facts
    out["stored"] = sorted({str(w.dtype) for w in backend.generation.weights.values()})
    out["ids"] = backend.generate(prompt, 4, TokenClock()).tolist()
else:
    facts = backend.prepare_generation(3, 40, 20)
    clock = TokenClock()
    ids = backend.generate(prompt, 20, clock)
    out["facts"] = facts
    out["stamps"] = len(clock.stamps)
    out["ids"] = ids.tolist()
    out["again"] = backend.generate(prompt, 20, TokenClock()).tolist()
    out["one"] = backend.generate(prompt, 1, TokenClock()).tolist()
    out["recompute"] = keras_generate.recompute(backend.model, prompt, 20).tolist()
    out["prompt"] = prompt.tolist()
    if check == "ok+broken":  # then a decode step that never writes its key and value
        real = keras_generate.ops.slice_update
        keras_generate.ops.slice_update = (
            lambda cache, start, update: cache if update.shape[1] == 1 and cache.ndim == 4
            else real(cache, start, update)
        )
        backend.prepare_generation(3, 40, 20)
        out["broken"] = backend.generate(prompt, 20, TokenClock()).tolist()
print(json.dumps(out))
"""


@functools.cache
def _generate(api: str, check: str) -> dict:
    runtime = runtime_for("keras", api)
    env = {**os.environ, "KERAS_BACKEND": api, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [runtime.python, "-I", "-c", SCRIPT, str(REPO / "adapters"), api, check],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Keras on torch also generates through a cache whose decode step skips the write, in the same
# process (a second one cost 11 s of the fast tier): both tests run in one test process.
ONE_PROCESS = pytest.mark.xdist_group("keras-torch-generation")
CHECKS = {"torch": "ok+broken"}

APIS = [
    pytest.param("torch", marks=ONE_PROCESS),
    pytest.param("jax", marks=pytest.mark.slow),  # XLA compiles the loop: ~15 s on a busy box
    pytest.param("tensorflow", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("api", APIS)
def test_cached_tokens_equal_a_recompute_and_the_reference(adapters_on_path, api: str) -> None:
    from gpt_reference import agreeing_prefix, greedy_cached

    from adapters import models, shared_init

    found = _generate(api, CHECKS.get(api, "ok"))
    ids = np.array(found["ids"])
    assert ids.shape == (3, 20)
    assert found["facts"]["token_timing"] == "whole" and found["stamps"] == 0  # never per token
    np.testing.assert_array_equal(ids, found["again"])  # a second request: the same tokens
    np.testing.assert_array_equal(ids, found["recompute"])  # the cache = no cache
    np.testing.assert_array_equal(np.array(found["one"]), ids[:, :1])  # the prefill's token
    dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
    weights = shared_init.gpt_weights(0, dims, shared_init.GENERATION_SCALE)
    reference, gaps = greedy_cached(weights, dims.heads, np.array(found["prompt"]), 20)
    count, why = agreeing_prefix(ids, reference, gaps, 1e-3)
    assert count >= 5, why
    np.testing.assert_array_equal(ids[:, :count], reference[:, :count])
    jit = {"torch": "False", "jax": "True", "tensorflow": "False"}[api]  # a CPU-only machine
    assert found["facts"]["jit_compile"].startswith(f"'auto' → {jit}")


@ONE_PROCESS
def test_a_cache_that_skips_the_write_is_caught(adapters_on_path) -> None:
    """The recompute comparison can fail: a decode step that never writes its key and value
    generates other tokens."""
    found = _generate("torch", CHECKS["torch"])
    assert not np.array_equal(np.array(found["broken"]), np.array(found["recompute"]))


@pytest.mark.slow
def test_bf16_serves_bfloat16_weights_and_cache(adapters_on_path) -> None:
    found = _generate("jax", "bf16")
    assert found["facts"]["weights_dtype"] == found["facts"]["cache_dtype"] == "bfloat16"
    assert found["stored"] == ["bfloat16"]
    assert np.array(found["ids"]).shape == (3, 4)
