"""Equity defects that a CPU can prove, with the framework replaced by stubs
where the defect is in how the adapter calls it."""

from __future__ import annotations

import importlib
import sys
import types

import pytest


@pytest.fixture
def stubbed_keras_adapter(adapters_on_path, monkeypatch):
    """adapters.keras_adapter imported over stub keras and torch modules; records syncs."""
    calls = []

    class Callback:
        def __init__(self):
            pass

    class PyDataset:
        def __init__(self, **kwargs):
            pass

    keras = types.ModuleType("keras")
    keras.callbacks = types.SimpleNamespace(Callback=Callback)
    keras.utils = types.SimpleNamespace(PyDataset=PyDataset)
    torch = types.ModuleType("torch")
    torch.device = lambda kind, index=None: f"{kind}:{index}"
    torch.cuda = types.SimpleNamespace(synchronize=lambda device=None: calls.append(device))
    monkeypatch.setitem(sys.modules, "keras", keras)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "adapters.keras_adapter", raising=False)
    module = importlib.import_module("adapters.keras_adapter")
    yield module, calls
    sys.modules.pop("adapters.keras_adapter", None)


def test_keras_torch_syncs_the_runs_gpu_not_the_current_one(stubbed_keras_adapter):
    """torch.cuda.synchronize() with no argument waits for the *current* device (gpu:0 unless
    someone set it); a run on gpu:1 must wait for gpu:1."""
    keras_adapter, calls = stubbed_keras_adapter
    backend = object.__new__(keras_adapter.KerasBackend)
    backend.api, backend.device, backend.last_output = "torch", "gpu:1", None
    backend.sync()
    assert calls == ["cuda:1"]


def test_fit_step_losses_are_recovered_when_read_later_in_order(stubbed_keras_adapter):
    """fit logs a running mean; pipelined timing reads the handles once per window, after the
    steps ran, and must recover the same per-step losses as reading each at once."""
    keras_adapter, _ = stubbed_keras_adapter
    callback = types.SimpleNamespace(seen=0, mean=0.0)
    means = [2.0, 1.5, 1.0, 1.0]
    handles = [keras_adapter.FitStepLoss(callback, m) for m in means]  # shared via adapters.loop
    assert [float(h) for h in handles] == [2.0, 1.0, 0.0, 1.0]
