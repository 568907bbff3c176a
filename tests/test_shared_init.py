"""The transformer's shared initial weights (adapters/shared_init.py): one draw, the catalog's
initialisers, loaded into torch's model it gives the float64 reference's loss, and the worker's
initial loss is taken on the first training batch. Every framework × API is held to the same
loss in tests/test_frameworks.py (real runtimes, slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from transformer_reference import transformer_loss

VOCAB, LENGTH = 5000, 200
TRANSFORMER_PARAMS = 1_062_273
# fp32 against the float64 reference; tests/test_frameworks.py says why (INITIAL_LOSS_RTOL).
RTOL = 1e-6


@pytest.fixture
def shared_init(adapters_on_path):
    from adapters import shared_init

    return shared_init


def test_one_draw_in_the_documented_layout(shared_init) -> None:
    weights = shared_init.transformer_weights(7, VOCAB, LENGTH)
    again = shared_init.transformer_weights(7, VOCAB, LENGTH)
    other = shared_init.transformer_weights(8, VOCAB, LENGTH)
    assert list(weights) == list(again)
    assert all(np.array_equal(weights[n], again[n]) for n in weights)
    assert not np.array_equal(weights["tokens"], other["tokens"])
    assert sum(v.size for v in weights.values()) == TRANSFORMER_PARAMS
    assert all(v.dtype == np.float32 for v in weights.values())
    assert weights["tokens"].shape == (VOCAB, 128) and weights["positions"].shape == (LENGTH, 128)
    for name, value in weights.items():
        kind = name.rsplit(".", 1)[-1]
        if kind == "kernel":  # Glorot-uniform with the fans of an (in, out) dense kernel
            limit = math.sqrt(6.0 / sum(value.shape))
            assert np.abs(value).max() <= limit and np.abs(value).max() > 0.95 * limit, name
        elif kind in ("bias", "beta"):
            assert not value.any(), name
        elif kind == "gamma":
            assert (value == 1).all(), name
        else:
            assert np.abs(value).max() <= 0.05 and np.abs(value).max() > 0.049, name
    assert weights["block0.query.kernel"].shape == (128, 128)
    assert weights["block1.hidden.kernel"].shape == (128, 512)
    assert weights["head.kernel"].shape == (128, 1)


def test_a_wrong_shape_is_refused_by_name(shared_init) -> None:
    with pytest.raises(ValueError, match="block0.back.kernel"):
        shared_init.checked("block0.back.kernel", np.zeros((512, 128)), (128, 512))


def _batch(adapters_on_path, size: int = 4):
    from adapters import data

    dataset = data.load("synthetic-imdb", train_samples=40, test_samples=4)
    first = data.batches(len(dataset.x_train), size, 0, 1, 1)[0]
    return dataset.x_train[first], dataset.y_train[first]


def _torch_loss(torch_adapter, weights, ids, labels) -> float:
    import torch

    model = torch_adapter.build_model("transformer", (LENGTH,), 2, 0.25, VOCAB)
    torch_adapter.load_shared_weights(model, weights)
    model.eval()  # inference: no dropout, as the worker's initial loss
    with torch.inference_mode():
        logits = model(torch.from_numpy(ids)).squeeze(1)
        target = torch.from_numpy(labels).float()
        return float(torch.nn.functional.binary_cross_entropy_with_logits(logits, target))


def test_torch_from_the_shared_weights_gives_the_reference_loss(shared_init, adapters_on_path):
    from conftest import require_module

    require_module("torch")
    from adapters.torch import adapter as torch_adapter

    ids, labels = _batch(adapters_on_path)
    weights = shared_init.transformer_weights(0, VOCAB, LENGTH)
    reference = transformer_loss(weights, ids, labels)
    assert _torch_loss(torch_adapter, weights, ids, labels) == pytest.approx(reference, rel=RTOL)
    # The check has teeth: one attention projection loaded without torch's transpose (block 0's
    # query, where attention is nearly uniform at this initialisation: the least visible place)
    # moves the loss far outside the tolerance.
    wrong = dict(weights)
    wrong["block0.query.kernel"] = np.ascontiguousarray(weights["block0.query.kernel"].T)
    assert abs(_torch_loss(torch_adapter, wrong, ids, labels) - reference) > 10 * RTOL * reference


def test_the_worker_takes_the_initial_loss_on_the_first_batch(adapters_on_path) -> None:
    from adapters import backend as contract
    from adapters import data, worker

    dataset = data.load("synthetic-imdb", train_samples=40, test_samples=4)
    seen = []

    class Backend:
        def evaluate(self, x, y, batch_size):
            seen.append((x, y, batch_size))
            return 0.75, 0.5

    hyper = contract.Hyper("transformer", 8, 1e-3, "adam", 0.25, 3)
    assert worker.initial_loss(Backend(), dataset, contract.Parallel(), hyper) == {
        "initial_loss": 0.75
    }
    first = data.batches(len(dataset.x_train), 8, 3, 1, 1)[0]
    ((x, y, batch_size),) = seen
    assert np.array_equal(x, dataset.x_train[first]) and np.array_equal(y, dataset.y_train[first])
    assert batch_size == 8
    # Models whose weights each framework draws itself have no shared starting loss.
    cnn = contract.Hyper("cnn", 8, 1e-3, "adam", 0.25, 3)
    assert worker.initial_loss(Backend(), dataset, contract.Parallel(), cnn) == {}
    assert len(seen) == 1
