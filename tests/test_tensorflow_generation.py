"""TensorFlow's generation paths (adapters/tensorflow/generate.py): each API's cached tokens equal
a full recompute through the model's own forward without any cache, and the float64
reference's; the traced functions trace a bounded number of times (never per token, nor per
request); a cache that skips its write is caught; bf16 serves bfloat16 weights and cache; the
Estimator refuses generation with its reason.

TensorFlow lives in its runtime, not in the app environment: the paths run there, in one process
(tests/tf_generation_probe.py), and this test reads its JSON line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import require_runtime

from tui_bench.engine.errors import SpecError
from tui_bench.engine.machine import runtimes
from tui_bench.engine.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]
APIS = ("eager", "graph", "keras", "xla")
NEW = 20  # the probe's N (P 40, batch 3)
# One xdist process runs the module, so its fp32 fixture (one TensorFlow process, 17 s on a fresh
# machine) runs once: split over both, each built it.
pytestmark = pytest.mark.xdist_group("tf-generation")


def _probe(apis: str, precision: str = "fp32") -> dict:
    require_runtime("tensorflow", "graph")
    python = runtimes.managed_python("tensorflow")
    if not python.exists():
        python = Path(runtimes.resolve("tensorflow", "graph").python)
    done = subprocess.run(
        [
            str(python),
            "-I",
            str(REPO / "tests" / "tf_generation_probe.py"),
            str(REPO),
            apis,
            precision,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module")
def fp32() -> dict:
    return _probe(",".join(APIS))


@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
def test_cached_tokens_equal_a_recompute_and_the_reference(
    adapters_on_path, fp32: dict, api: str
) -> None:
    from gpt_reference import agreeing_prefix, greedy_cached

    from adapters import models, shared_init

    row = fp32[api]
    ids = np.array(row["ids"])
    assert ids.shape == (3, NEW)
    np.testing.assert_array_equal(ids, np.array(fp32["recompute"]))
    np.testing.assert_array_equal(ids, np.array(row["again"]))  # the cache reused: same tokens
    np.testing.assert_array_equal(np.array(row["one"]), ids[:, :1])  # one token: the prefill's
    dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
    weights = shared_init.gpt_weights(0, dims, shared_init.GENERATION_SCALE)
    prompt = np.array(fp32["prompt"])
    reference, gaps = greedy_cached(weights, dims.heads, prompt, NEW)
    count, why = agreeing_prefix(ids, reference, gaps, 1e-3)
    assert count >= 5, why
    np.testing.assert_array_equal(ids[:, :count], reference[:, :count])
    other, other_gaps = greedy_cached(weights, dims.heads, prompt[::-1], NEW)
    count, why = agreeing_prefix(np.array(row["other"]), other, other_gaps, 1e-3)
    assert count >= 5, why
    facts = row["facts"]
    assert facts["weights_dtype"] == facts["cache_dtype"] == "float32"
    if api == "xla":  # one compiled loop: no token is timed alone
        assert facts["token_timing"] == "whole" and row["stamps"] == 0
    else:
        assert facts["token_timing"] == "per-token" and row["stamps"] == NEW


@pytest.mark.slow
def test_traced_paths_trace_once_not_per_token_or_request(fp32: dict) -> None:
    """Four requests (N 20, 20, 1, then other prompts): graph and keras traced their prefill and
    decode step once each; xla its whole loop once (N is a tensor argument, so the one-token
    generation runs the same program); eager traces nothing."""
    assert fp32["eager"]["traces"] == 0
    assert fp32["graph"]["traces"] == 2 and fp32["keras"]["traces"] == 2
    assert fp32["xla"]["traces"] == 1


@pytest.mark.slow
def test_a_cache_that_skips_the_write_is_caught(fp32: dict) -> None:
    """The recompute comparison can fail: decode steps that never write their keys and values
    into the cache the next step reads generate other tokens."""
    assert not np.array_equal(np.array(fp32["eager"]["broken"]), np.array(fp32["recompute"]))


@pytest.mark.slow
def test_bf16_serves_bfloat16_weights_and_cache() -> None:
    found = _probe("graph,xla", "bf16")
    for api in ("graph", "xla"):
        facts = found[api]["facts"]
        assert facts["weights_dtype"] == facts["cache_dtype"] == "bfloat16", api
        assert np.array(found[api]["ids"]).shape == (3, NEW)


def test_the_estimator_refuses_generation_with_its_reason() -> None:
    with pytest.raises(SpecError) as caught:
        RunSpec(framework="tensorflow", api="estimator", model="gpt", mode="generate").validate()
    assert caught.value.field == "mode"
    assert "no generation path" in str(caught.value) and "\n" not in str(caught.value)
