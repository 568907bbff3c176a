"""MXNet's and Theano's generation paths (adapters/mxnet/generate.py, adapters/theano/generate.py),
each run in its own managed runtime: the cached decode step's tokens equal a full recompute
without any cache, a second request over the reused cache gives them again, a one-token
generation is the prefill's token, a cache that is never written generates other tokens (so the
comparison can fail), and the hybridized MXNet step is traced once, not once per token. The
float64 reference's tokens are tests/test_generation.py's (every generating API)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
from conftest import REPO, require_runtime

from tui_bench.engine.machine import runtimes
from tui_bench.engine.paths import cache_home

CHECK = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from adapters import backend as loop, data, models, shared_init
    from adapters.clock import TokenClock

    framework, api = sys.argv[1], sys.argv[2]
    shared_init._gpt_scale = shared_init.GENERATION_SCALE
    dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
    ds = data.load("synthetic-tokens", test_samples=8, tokens=(dims.seq_len, dims.vocab_size))
    prompt = np.ascontiguousarray(ds.x_test[:3, :40])
    traces = []
    if framework == "mxnet":
        import mxnet as mx
        from adapters.mxnet import generate as gen
        from adapters.mxnet.adapter import make_backend

        forward = gen._Decode.hybrid_forward

        def counted(self, F, *args, **kwargs):
            if F is mx.sym:
                traces.append(1)
            return forward(self, F, *args, **kwargs)

        gen._Decode.hybrid_forward = counted
    else:
        from adapters.theano.adapter import make_backend  # first: it configures Theano
        from adapters.theano import generate as gen
        import theano.tensor as T
    backend = make_backend(api, "cpu", 1)
    backend.serve_only = True
    backend.apply_settings(loop.Settings())
    backend.build(loop.Hyper("gpt", 3, 1e-3, "adam", 0.0, 0, dims=dims), ds)
    facts = backend.prepare_generation(3, 40, 20)
    clock = TokenClock()
    ids = backend.generate(prompt, 20, clock)
    again = backend.generate(prompt, 20, TokenClock())
    one = backend.generate(prompt, 1, TokenClock())
    traced = len(traces)
    writes = []  # Theano: the decode step's cache writes, as compiled
    if framework == "theano":
        nodes = backend.generation.decode_fn.maker.fgraph.toposort()
        writes = [str(n.op) for n in nodes if "IncSubtensor" in str(n.op)]
    if framework == "mxnet":
        recomputed = gen.recompute(backend.net, dims.seq_len, prompt, 20)
        mx.nd.NDArray.__setitem__ = lambda self, key, value: None  # the cache never written
    else:
        recomputed = gen.recompute(backend.logits_fn, dims.seq_len, dims.vocab_size, prompt, 20)
        # The cache never written, in the generation module only (Theano's own code keeps it).
        gen.T = type("Unwritten", (), {"__getattr__": lambda self, name: getattr(T, name)})()
        gen.T.set_subtensor = lambda x, y, **kwargs: x.owner.inputs[0]  # the whole cache
    backend.prepare_generation(3, 40, 20)  # a fresh (zero) cache
    broken = backend.generate(prompt, 20, TokenClock())
    print(json.dumps({
        "facts": facts, "stamps": len(clock.stamps), "ids": ids.tolist(),
        "again": again.tolist(), "one": one.tolist(), "recomputed": recomputed.tolist(),
        "broken": broken.tolist(), "traces": traced, "writes": writes,
    }))
    """
)


@pytest.mark.slow
@pytest.mark.xdist_group("theano-compiles")  # conftest's THEANO_GROUP: Theano runs share a core
@pytest.mark.parametrize(
    ("framework", "api"), [("mxnet", "gluon"), ("mxnet", "hybrid"), ("theano", "theano")]
)
def test_cached_tokens_equal_a_recompute(framework: str, api: str) -> None:
    require_runtime(framework, api)
    python = runtimes.resolve(framework, api).python
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env["OPENBLAS_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    env.pop("KERAS_BACKEND", None)
    # Theano compiles into the session's compile cache, as a worker of these tests does; without
    # it, into the temp dir's, cold on a fresh machine (42 against 17 s warm).
    env["TUI_BENCH_WORKER_CACHE"] = str(cache_home() / "compiled")
    done = subprocess.run(
        [python, "-c", CHECK, framework, api], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["facts"]["token_timing"] == "per-token" and found["stamps"] == 20
    ids = found["ids"]
    assert len(ids) == 3 and all(len(row) == 20 for row in ids)
    assert found["recomputed"] == ids
    assert found["again"] == ids  # the cache reused by a second request
    assert found["one"] == [row[:1] for row in ids]  # a one-token generation: the prefill's
    assert found["broken"] != ids  # the comparison can fail: a cache never written is caught
    if framework == "theano":  # 2 per layer, each made in place (no copy of the cache)
        assert found["writes"] and all("InplaceSet" in op for op in found["writes"])
    if api == "hybrid":
        assert found["traces"] == 1  # traced in the first request only, never per token
    elif framework == "mxnet":
        assert found["traces"] == 0  # imperative: never traced


@pytest.mark.parametrize(
    ("framework", "api", "words"),
    [("mxnet", "module", "Module API binds a training graph"), ("theano", "keras2", "K.function")],
)
def test_the_apis_without_a_path_say_why(framework: str, api: str, words: str) -> None:
    from tui_bench.engine.errors import SpecError
    from tui_bench.engine.spec import RunSpec

    with pytest.raises(SpecError) as refused:
        RunSpec(framework=framework, api=api, model="gpt", mode="generate").validate()
    assert refused.value.field == "mode" and words in str(refused.value)
