"""The torch adapter in the test process (the app environment has torch): initialisation equity
and the precision / input / timing settings as the adapter applies and reads them back."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_module

torch = require_module("torch")


@pytest.fixture
def torch_adapter(adapters_on_path):
    from adapters.torch import adapter as torch_adapter

    return torch_adapter


def test_lstm_recurrent_kernel_is_orthogonal_as_a_whole_like_keras(torch_adapter):
    torch.manual_seed(0)
    model = torch_adapter.build_model("lstm", (200,), 2, 0.0, 5000)
    torch_adapter._init_like_keras(model)
    w = model[1].weight_hh_l0.detach().double()  # (4·hidden, hidden): Keras' kernel, transposed
    gram = w.T @ w
    # Keras: kernel @ kernel.T = I. Per-gate-block init would give 4·I here (2× the scale).
    assert torch.allclose(gram, torch.eye(128, dtype=torch.float64), atol=1e-5)
    assert float(w.abs().max()) < 1.0


def test_strict_fp32_and_bf16_are_applied_and_read_back_on_cpu(torch_adapter, adapters_on_path):
    from adapters.backend import Settings

    backend = torch_adapter.make_backend("eager", "cpu", 1)
    strict = backend.apply_settings(Settings())
    assert strict["precision"] == "fp32" and strict["matmul_tf32"] is False
    assert strict["cudnn_tf32"] is False and strict["float32_matmul_precision"] == "highest"
    assert strict["autocast"] is None and strict["compile"] == "no (eager)"
    assert strict["autotune"] == "not applicable on cpu"
    bf16 = torch_adapter.make_backend("compile", "cpu", 1).apply_settings(
        Settings(precision="bf16")
    )
    assert bf16["autocast"] == "bfloat16" and bf16["loss_scaling"] is False
    assert bf16["compile"] == "yes (torch.compile, inductor)"


def test_device_input_gathers_the_same_batch_as_host_input(torch_adapter, adapters_on_path):
    from adapters import data
    from adapters.backend import Hyper

    dataset = data.load("synthetic-mnist", train_samples=400, test_samples=10)
    backend = torch_adapter.make_backend("eager", "cpu", 1)
    backend.build(Hyper("cnn", 16, 1e-3, "adam", 0.0, 0), dataset)
    idx = np.array([5, 3, 200, 7])
    host = backend._tensors(*backend.take(dataset.x_train, dataset.y_train, idx))
    resident = backend.to_device(dataset.x_train, dataset.y_train)
    device = backend._tensors(*backend.take(*resident, idx))
    assert torch.equal(host[0], device[0]) and torch.equal(host[1], device[1])
    loss = backend.train_step(*device)
    assert isinstance(loss, torch.Tensor) and backend.loss_value(loss) > 0
