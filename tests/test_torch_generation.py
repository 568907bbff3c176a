"""torch's generation paths (adapters/torch/generate.py): the cached decode step's tokens equal a
full recompute without any cache, eager and compiled, and the float64 reference's."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _backend(api: str, monkeypatch, batch: int = 3):
    from adapters import backend as loop
    from adapters import data, models, shared_init
    from adapters.torch.adapter import TorchBackend

    monkeypatch.setattr(shared_init, "_gpt_scale", shared_init.GENERATION_SCALE)
    dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
    dataset = data.load("synthetic-tokens", test_samples=8, tokens=(dims.seq_len, dims.vocab_size))
    backend = TorchBackend(api, "cpu", 1)
    backend.apply_settings(loop.Settings())
    backend.build(loop.Hyper("gpt", batch, 1e-3, "adam", 0.0, 0, dims=dims), dataset)
    return backend, dims, np.ascontiguousarray(dataset.x_test[:batch, :40])


@pytest.mark.parametrize("api", ["eager", pytest.param("compile", marks=pytest.mark.slow)])
def test_cached_tokens_equal_a_recompute_and_the_reference(
    adapters_on_path, monkeypatch, api: str
) -> None:
    from gpt_reference import agreeing_prefix, greedy_cached

    from adapters import shared_init
    from adapters.clock import TokenClock
    from adapters.torch.generate import recompute

    backend, dims, prompt = _backend(api, monkeypatch)
    facts = backend.prepare_generation(3, 40, 20)
    assert facts["token_timing"] == "per-token"
    clock = TokenClock()
    ids = backend.generate(prompt, 20, clock)
    assert ids.shape == (3, 20) and len(clock.stamps) == 20
    again = backend.generate(prompt, 20, TokenClock())  # the cache reused: the same tokens
    np.testing.assert_array_equal(ids, again)
    np.testing.assert_array_equal(ids, recompute(backend.model, prompt, 20))
    weights = shared_init.gpt_weights(0, dims, shared_init.GENERATION_SCALE)
    reference, gaps = greedy_cached(weights, dims.heads, prompt, 20)
    count, why = agreeing_prefix(ids, reference, gaps, 1e-3)
    assert count >= 5, why
    np.testing.assert_array_equal(ids[:, :count], reference[:, :count])
    # A one-token generation is the prefill's token.
    np.testing.assert_array_equal(backend.generate(prompt, 1, TokenClock()), ids[:, :1])


def test_a_cache_that_skips_the_write_is_caught(adapters_on_path, monkeypatch) -> None:
    """The recompute comparison can fail: a decode step that never writes its key and value
    generates other tokens."""
    from adapters.clock import TokenClock
    from adapters.torch.generate import recompute

    backend, _dims, prompt = _backend("eager", monkeypatch)
    backend.prepare_generation(3, 40, 20)
    monkeypatch.setattr(torch.Tensor, "index_copy_", lambda self, *a: self)
    broken = backend.generate(prompt, 20, TokenClock())
    assert not np.array_equal(broken, recompute(backend.model, prompt, 20))


def test_bf16_serves_bfloat16_weights_and_cache(adapters_on_path, monkeypatch) -> None:
    from adapters import backend as loop

    backend, _dims, prompt = _backend("eager", monkeypatch)
    backend.apply_settings(loop.Settings(precision="bf16"))
    facts = backend.prepare_generation(3, 40, 4)
    assert facts["weights_dtype"] == facts["cache_dtype"] == "bfloat16"
    assert next(backend.model.parameters()).dtype == torch.bfloat16
