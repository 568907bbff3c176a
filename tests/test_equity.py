"""Equity defects that a CPU can prove, with the framework replaced by stubs
where the defect is in how the adapter calls it."""

from __future__ import annotations

import importlib
import sys
import types

import pytest


@pytest.fixture
def stubbed_keras_adapter(adapters_on_path, monkeypatch):
    """adapters.keras.adapter imported over stub keras and torch modules; records syncs."""
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
    monkeypatch.delitem(sys.modules, "adapters.keras.adapter", raising=False)
    module = importlib.import_module("adapters.keras.adapter")
    yield module, calls
    sys.modules.pop("adapters.keras.adapter", None)


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
    handles = [
        keras_adapter.keras_models.FitStepLoss(callback, m) for m in means
    ]  # in keras_models
    assert [float(h) for h in handles] == [2.0, 1.0, 0.0, 1.0]


# -- data-parallel runs: the same global batches, split, never duplicated or dropped --------------
class _RecordingBackend:
    """Trains nothing; records which training rows each step was handed."""

    def __init__(self) -> None:
        self.steps: list[list[int]] = []

    def build(self, hyper, dataset) -> None:
        pass

    def param_count(self) -> int:
        return 0

    def sync(self) -> None:
        pass

    def take(self, x, y, idx):
        self.steps.append([int(i) for i in idx])
        return x[idx], y[idx]

    def train_step(self, x, y) -> float:
        return 1.0

    def evaluate(self, x, y, batch_size):
        return 0.0, 0.0

    def framework_view(self, x, y):
        return x, y


def _steps_seen(parallel, batch_size: int, dataset) -> list[list[int]]:
    from adapters import backend as contract
    from adapters import train as training

    backend = type("Recording", (_RecordingBackend, contract.Backend), {})()
    hyper = contract.Hyper("cnn", batch_size, 1e-3, "adam", 0.0, seed=7)
    training.run_training(backend, dataset, hyper, 2, 3, 1, lambda *a, **k: None, parallel=parallel)
    return backend.steps


@pytest.mark.parametrize(("workers", "scaling", "per_worker"), [(2, "weak", 16), (4, "strong", 8)])
def test_ranks_split_the_single_process_global_batches(
    adapters_on_path, workers, scaling, per_worker
):
    from adapters import backend as contract
    from adapters import data

    dataset = data.load("synthetic-mnist", train_samples=200, test_samples=8)
    single = _steps_seen(contract.Parallel(), 32, dataset)
    ranks = [
        _steps_seen(contract.Parallel(rank, workers, scaling), per_worker, dataset)
        for rank in range(workers)
    ]
    assert (
        contract.Parallel(0, workers, scaling).worker_batch(16 if scaling == "weak" else 32)
        == per_worker
    )
    for step, indices in enumerate(single):
        # Rank r's step is the r-th contiguous slice of the single run's step: nothing twice.
        assert sum((r[step] for r in ranks), []) == indices


def test_global_batch_digest_is_the_single_process_digest(adapters_on_path):
    from adapters import backend as contract
    from adapters import data, worker

    dataset = data.load("synthetic-mnist", train_samples=200, test_samples=8)
    view = _RecordingBackend()

    def digest(parallel, batch):
        hyper = contract.Hyper("cnn", batch, 1e-3, "adam", 0.0, seed=7)
        return worker.global_first_batch_digest(view, dataset, parallel, hyper)

    single = digest(contract.Parallel(), 32)
    assert digest(contract.Parallel(0, 2, "weak"), 16) == single
    assert digest(contract.Parallel(0, 4, "strong"), 8) == single
    assert digest(contract.Parallel(0, 2, "weak", in_process=True), 16) == single
    assert digest(contract.Parallel(), 16) != single  # a different batch is told apart
