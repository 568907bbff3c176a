"""The timed loop and the data, without any framework: a numpy softmax-regression backend."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest


@pytest.fixture
def harness(adapters_on_path):
    """The worker-side harness: the contract (``backend``), the clock, the training and the
    serving loop."""
    from adapters import backend, clock, serve, train

    return SimpleNamespace(contract=backend, clock=clock, train=train, serve=serve)


@pytest.fixture
def data(adapters_on_path):
    from adapters import data

    return data


class NumpyBackend:
    """Softmax regression in numpy; records every batch it is handed and every sync."""

    framework = "numpy"

    def __init__(self, lr: float = 0.5) -> None:
        self.lr = lr
        self.seen: list[np.ndarray] = []
        self.syncs = 0

    def build(self, hyper, dataset) -> None:
        features = int(np.prod(dataset.shape.input_shape))
        self.w = np.zeros((features, dataset.shape.num_classes))

    def sync(self) -> None:
        self.syncs += 1

    def _probs(self, x):
        z = x.reshape(len(x), -1) @ self.w
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def train_step(self, x, y):
        self.seen.append(x)
        p = self._probs(x)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1
        self.w -= self.lr * x.reshape(len(x), -1).T @ p / len(y)
        return float(loss)

    def evaluate(self, x, y, batch_size):
        p = self._probs(x)
        return float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean()), float(
            (p.argmax(1) == y).mean()
        )

    def train_epoch(self, x, y, batch_indices, clock):
        for idx in batch_indices:
            clock.begin()
            loss = self.train_step(x[idx], y[idx])
            clock.end(loss)


def run(harness, data, backend, epochs=2, steps=5, warmup=2, target=None, seed=0):
    dataset = data.load("synthetic-mnist", train_samples=2000, test_samples=500)
    hyper = harness.contract.Hyper(
        model="cnn", batch_size=64, lr=0.1, optimizer="sgd", dropout=0.0, seed=seed
    )
    backend.build(hyper, dataset)
    events = []
    summary = harness.train.run_training(
        backend,
        dataset,
        hyper,
        epochs=epochs,
        steps_per_epoch=steps,
        warmup_steps=warmup,
        emit=lambda kind, **fields: events.append((kind, fields)),
        target_accuracy=target,
    )
    return dataset, events, summary


def test_warm_up_steps_stay_out_of_steady_state(harness, data):
    _, events, summary = run(harness, data, NumpyBackend(), epochs=2, steps=5, warmup=2)
    epochs = [f for kind, f in events if kind == "epoch_finished"]
    assert [e["steady_steps"] for e in epochs] == [3, 5]
    assert epochs[0]["warmup_s"] > 0 and epochs[1]["warmup_s"] == 0
    assert summary["steady_steps"] == 8
    assert summary["first_step_s"] is not None and summary["warmup_s"] >= summary["first_step_s"]
    assert summary["samples_per_s"] == pytest.approx(64 * 8 / (summary["step_mean_s"] * 8))


def test_event_order_and_every_loss_reported(harness, data):
    _, events, _ = run(harness, data, NumpyBackend(), epochs=2, steps=5)
    kinds = [k for k, _ in events if k not in ("steps", "steady")]
    assert kinds == ["epoch_started", "epoch_finished"] * 2 + ["test_finished"]
    losses = [loss for k, f in events if k == "steps" for loss in f["losses"]]
    assert len(losses) == 10


def test_device_is_synchronised_around_every_timed_step(harness, data):
    backend = NumpyBackend()
    run(harness, data, backend, epochs=1, steps=5)
    assert backend.syncs >= 2 * 5  # before and after each step


def test_batches_follow_the_shared_epoch_order(harness, data):
    backend = NumpyBackend()
    dataset, _, _ = run(harness, data, backend, epochs=2, steps=3, seed=3)
    for epoch in (1, 2):
        order = data.epoch_order(len(dataset.x_train), 3, epoch)
        for step in range(3):
            expected = dataset.x_train[order[step * 64 : (step + 1) * 64]]
            assert np.array_equal(backend.seen[(epoch - 1) * 3 + step], expected)
    assert not np.array_equal(backend.seen[0], backend.seen[3])  # epochs reshuffle


def test_loss_falls_on_learnable_synthetic_data(harness, data):
    _, events, summary = run(harness, data, NumpyBackend(), epochs=3, steps=20)
    epochs = [f for kind, f in events if kind == "epoch_finished"]
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    assert summary["test_accuracy"] > 0.3  # chance is 0.1


def test_target_accuracy_stops_training_and_reports_when(harness, data):
    _, events, summary = run(harness, data, NumpyBackend(), epochs=10, steps=20, target=0.2)
    assert summary["target_reached_epoch"] == summary["epochs_run"] < 10
    assert summary["target_reached_s"] > 0
    _, _, missed = run(harness, data, NumpyBackend(), epochs=1, steps=2, target=0.999)
    assert missed["target_reached_epoch"] is None


def test_step_losses_are_coalesced_to_ten_messages_per_second(harness):
    now = [0.0]
    emitted = []
    clock = harness.clock.StepClock(
        lambda: None,
        lambda kind, **f: emitted.append(f) if kind == "steps" else None,
        0,
        32,
        now=lambda: now[0],
    )
    clock.new_epoch(1)
    for _ in range(1000):  # 1000 steps of 1 ms = 1 s
        clock.begin()
        now[0] += 0.001
        clock.end(1.0)
    clock.flush()
    assert 9 <= len(emitted) <= 11
    assert sum(len(f["losses"]) for f in emitted) == 1000
    assert [f["first_step"] for f in emitted][:2] == [0, len(emitted[0]["losses"])]


def test_steps_events_carry_the_steady_step_times_and_not_the_warm_up(harness):
    now = [0.0]
    emitted = []
    clock = harness.clock.StepClock(
        lambda: None,
        lambda kind, **f: emitted.append(f) if kind == "steps" else None,
        3,  # warm-up steps
        32,
        now=lambda: now[0],
    )
    clock.new_epoch(1)
    for i in range(40):
        clock.begin()
        now[0] += 0.5 if i < 3 else 0.01 + i * 1e-5  # 3 slow warm-up steps, then steady
        clock.end(1.0)
    clock.flush()
    times = [t for f in emitted for t in f.get("step_times", [])]
    assert len(times) == 37 and times == harness.clock.compact(clock.steady_times)
    assert max(times) < 0.1  # no warm-up step among them
    assert "step_times" not in emitted[0]  # the first flush held warm-up steps only


def test_percentile_matches_numpy(harness):
    values = sorted([5.0, 1.0, 9.0, 3.0, 7.0, 2.0])
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert harness.clock.percentile(values, q) == pytest.approx(np.percentile(values, q * 100))


# -- data ---------------------------------------------------------------------------------------
# Golden digests: any change to the generator (or a numpy release changing a stream we rely on)
# changes the data every framework sees, and must be a deliberate, visible decision.
GOLDEN = {
    "synthetic-mnist": "dc3e432f7b7733d2",
    "synthetic-cifar10": "dc6d010c59c3264c",
    "synthetic-imdb": "975c3d53bba5b078",
}


def digest(dataset) -> str:
    h = hashlib.sha256()
    for array in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_synthetic_data_is_pinned_and_prefix_stable(data, name):
    small = data.load(name, train_samples=1500, test_samples=300)
    assert digest(small) == GOLDEN[name]
    bigger = data.load(name, train_samples=3000, test_samples=300)
    # the cap takes a prefix of the same stream: the first samples do not depend on it
    assert np.array_equal(bigger.x_train[:1000], small.x_train[:1000])
    assert len(small.x_train) == 1200 and len(small.x_val) == 300


def test_synthetic_images_are_learnable_not_noise(data):
    d = data.load("synthetic-mnist", train_samples=4000, test_samples=10)
    means = np.stack([d.x_train[d.y_train == k].mean(axis=0) for k in range(10)])
    # class means differ far more than the noise of a mean over ~400 samples would explain
    assert np.abs(means[:, None] - means[None, :]).max(axis=(2, 3, 4)).min() == 0  # diagonal
    off = [np.abs(means[a] - means[b]).mean() for a in range(10) for b in range(10) if a < b]
    assert min(off) > 0.02
    assert d.x_train.dtype == np.float32 and d.x_train.min() >= 0.0 and d.x_train.max() <= 1.0
    assert sorted(set(d.y_train.tolist())) == list(range(10))


def test_synthetic_sequences_look_like_imdb(data):
    d = data.load("synthetic-imdb", train_samples=500, test_samples=10)
    assert d.x_train.shape[1] == 200 and d.x_train.max() < 5000
    first_nonzero = (d.x_train != 0).argmax(axis=1)
    assert (d.x_train[np.arange(len(d.x_train)), first_nonzero] == 1).all()  # start marker
    assert set(d.y_train.tolist()) == {0, 1}


def test_epoch_order_is_a_seeded_permutation(data):
    a = data.epoch_order(1000, seed=1, epoch=1)
    assert sorted(a.tolist()) == list(range(1000))
    assert np.array_equal(a, data.epoch_order(1000, seed=1, epoch=1))
    assert not np.array_equal(a, data.epoch_order(1000, seed=1, epoch=2))
    assert not np.array_equal(a, data.epoch_order(1000, seed=2, epoch=1))
    assert [len(b) for b in data.batches(1000, 128, 1, 1)] == [128] * 7  # partial batch dropped
    assert len(data.batches(1000, 128, 1, 1, max_steps=3)) == 3


# -- timing modes, input paths, steady-state marks ----------------------------------------------
class LazyLoss:
    """A loss the backend has not read back yet (like a device tensor); counts reads."""

    reads = 0

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        LazyLoss.reads += 1
        return self.value


def test_pipelined_clock_syncs_once_per_window_and_reads_losses_then(harness):
    now, syncs, reads_at_end = [0.0], [0], []
    events = []

    def sync():
        syncs[0] += 1

    clock = harness.clock.StepClock(
        sync,
        lambda kind, **f: events.append((kind, f)),
        warmup_steps=2,
        batch_size=8,
        now=lambda: now[0],
        timing="pipelined",
        window=5,
    )
    clock.new_epoch(1)
    LazyLoss.reads = 0
    for step in range(12):
        clock.begin()
        now[0] += 0.01 if step >= 2 else 1.0  # warm-up steps are slow
        clock.end(LazyLoss(float(step)))
        reads_at_end.append(LazyLoss.reads)
    warmup_syncs = syncs[0]
    clock.end_epoch()
    # warm-up: synced per step (2 syncs each); steady: 10 steps in 2 windows, 2 syncs each
    assert warmup_syncs == 2 * 2 + 2 * 2
    assert reads_at_end[2:] == [2, 2, 2, 2, 7, 7, 7, 7, 7, 12]  # losses read per window only
    assert clock.windows == 2 and clock.steady_times == pytest.approx([0.01] * 10)
    assert clock.warmup_s == pytest.approx(2.0)
    losses = [x for kind, f in events if kind == "steps" for x in f["losses"]]
    assert losses == [float(i) for i in range(12)]
    marks = [f["edge"] for kind, f in events if kind == "steady"]
    assert marks == ["begin", "end"]


def test_synced_clock_syncs_around_every_step(harness):
    syncs = [0]
    clock = harness.clock.StepClock(
        lambda: syncs.__setitem__(0, syncs[0] + 1), lambda k, **f: None, 0, 8
    )
    clock.new_epoch(1)
    for _ in range(10):
        clock.begin()
        clock.end(1.0)
    assert syncs[0] == 20 and clock.windows == 0


def test_pipelined_uses_device_event_times_when_the_backend_has_them(harness):
    class Events:
        def __init__(self):
            self.started = self.stopped = 0

        def start(self):
            self.started += 1

        def stop(self):
            self.stopped += 1

        def times(self):
            n, self.started, self.stopped = self.stopped, 0, 0
            return [0.001 * (i + 1) for i in range(n)]

    now = [0.0]
    clock = harness.clock.StepClock(
        lambda: None,
        lambda k, **f: None,
        0,
        8,
        now=lambda: now[0],
        timing="pipelined",
        window=3,
        device_timer=Events(),
    )
    clock.new_epoch(1)
    for _ in range(4):
        clock.begin()
        now[0] += 1.0
        clock.end(0.5)
    clock.end_epoch()  # closes the partial window of 1 step
    assert clock.steady_times == pytest.approx([0.001, 0.002, 0.003, 0.001])
    assert "device events" in clock.step_source


class DeviceNumpyBackend(NumpyBackend):
    """Marks arrays that went through ``to_device`` and gathers from them in ``take``."""

    def __init__(self):
        super().__init__()
        self.uploads = 0
        self.takes = 0

    def to_device(self, x, y):
        self.uploads += 1
        return x.copy(), y.copy()

    def take(self, x, y, idx):
        self.takes += 1
        return x[idx], y[idx]

    def train_epoch(self, x, y, batch_indices, clock):
        self.device_x = x
        for idx in batch_indices:
            clock.begin()
            xb, yb = self.take(x, y, idx)
            clock.end(self.train_step(xb, yb))


def test_device_input_uploads_once_and_gathers_inside_each_step(harness, data):
    backend = DeviceNumpyBackend()
    dataset = data.load("synthetic-mnist", train_samples=2000, test_samples=500)
    hyper = harness.contract.Hyper(
        model="cnn", batch_size=64, lr=0.1, optimizer="sgd", dropout=0.0, seed=0
    )
    backend.build(hyper, dataset)
    settings = harness.contract.Settings(input="device", timing="pipelined", timing_window=4)
    summary = harness.train.run_training(
        backend, dataset, hyper, 2, 5, 1, lambda kind, **f: None, settings=settings
    )
    assert backend.uploads == 1 and backend.takes == 10
    assert backend.device_x is not dataset.x_train  # trained from the uploaded copy
    assert summary["input"] == "device" and summary["input_upload_s"] >= 0
    assert summary["timing"] == "pipelined" and summary["timing_window"] == 4
    assert summary["pipelined_windows"] == 3  # 4 steady steps, then 4 + a partial 1
    assert summary["steady_steps"] == 9


def test_host_input_is_the_default_and_records_itself(harness, data):
    _, events, summary = run(harness, data, NumpyBackend(), epochs=2, steps=5, warmup=2)
    assert summary["input"] == "host" and summary["input_upload_s"] is None
    assert summary["timing"] == "synced" and summary["pipelined_windows"] is None
    marks = [(f["edge"], f["epoch"]) for kind, f in events if kind == "steady"]
    assert marks == [("begin", 1), ("end", 1), ("begin", 2), ("end", 2)]


def test_a_backend_without_settings_hooks_refuses_what_it_cannot_do(harness):
    plain = harness.contract.Backend()
    applied = plain.apply_settings(harness.contract.Settings(timing="pipelined"))
    assert applied["precision"] == "fp32" and applied["timing"] == "pipelined"
    with pytest.raises(RuntimeError, match="cannot apply precision='bf16'"):
        plain.apply_settings(harness.contract.Settings(precision="bf16"))
    with pytest.raises(RuntimeError, match="cannot apply input='device'"):
        harness.contract.default_settings(NumpyBackend(), harness.contract.Settings(input="device"))


def test_settings_come_from_the_spec_with_defaults_for_old_specs(harness):
    assert (
        harness.contract.Settings.from_spec({"framework": "torch"}) == harness.contract.Settings()
    )
    assert (
        harness.contract.Settings.from_spec({"precision": "bf16", "timing_window": 3}).timing_window
        == 3
    )
