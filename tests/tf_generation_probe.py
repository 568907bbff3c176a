"""Run in the tensorflow runtime by tests/test_tensorflow_generation.py (TF is not in the app
environment): each asked API's cached tokens, a second request's, a one-token generation's, the
no-cache recompute's, the trace counts, and a cache that skips its write; one JSON line out.

Usage: python tf_generation_probe.py REPO API[,API...] [PRECISION]"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, sys.argv[1])

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from adapters import backend as contract  # noqa: E402
from adapters import data, models, shared_init  # noqa: E402
from adapters.generate import TokenClock  # noqa: E402
from adapters.tensorflow import generate as tf_generate  # noqa: E402
from adapters.tensorflow.adapter import TensorFlowBackend  # noqa: E402

BATCH, PROMPT, NEW = 3, 40, 20


def main() -> None:
    apis = sys.argv[2].split(",")
    precision = sys.argv[3] if len(sys.argv) > 3 else "fp32"
    shared_init._gpt_scale = shared_init.GENERATION_SCALE
    dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
    dataset = data.load("synthetic-tokens", test_samples=8, tokens=(dims.seq_len, dims.vocab_size))
    prompt = np.ascontiguousarray(dataset.x_test[:BATCH, :PROMPT])
    out: dict = {"prompt": prompt.tolist()}
    recomputed = None
    for api in apis:
        backend = TensorFlowBackend(api, "cpu", 1)
        backend.apply_settings(contract.Settings(precision=precision))
        backend.build(contract.Hyper("gpt", BATCH, 1e-3, "adam", 0.0, 0, dims=dims), dataset)
        facts = backend.prepare_generation(BATCH, PROMPT, NEW)
        clock = TokenClock()
        ids = backend.generate(prompt, NEW, clock)
        again = backend.generate(prompt, NEW, TokenClock())
        one = backend.generate(prompt, 1, TokenClock())
        other = backend.generate(prompt[::-1].copy(), NEW, TokenClock())  # new values, no retrace
        if recomputed is None and precision == "fp32":
            recomputed = tf_generate.recompute(backend.model, prompt, NEW).tolist()
        row = {
            "facts": facts,
            "ids": ids.tolist(),
            "again": again.tolist(),
            "one": one.tolist(),
            "other": other.tolist(),
            "stamps": len(clock.stamps),
            "traces": backend.generation.traces(),
        }
        if api == "eager":  # a decode step that never writes its key and value
            gen = backend.generation
            gen.cache = [(tf.Variable(k), tf.Variable(v)) for k, v in gen.cache]
            real = gen._blocks

            def skipping(h, position, caches, real=real, gen=gen):
                if h.shape[1] == 1:
                    frozen = [(tf.Variable(k), tf.Variable(v)) for k, v in caches]
                    return real(h, position, frozen)
                return real(h, position, caches)

            gen._blocks = skipping
            row["broken"] = backend.generate(prompt, NEW, TokenClock()).tolist()
        out[api] = row
    out["recompute"] = recomputed
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
