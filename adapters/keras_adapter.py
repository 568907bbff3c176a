"""Keras 3 standalone adapter. API = backend: ``tensorflow``, ``torch``, ``jax``.

Same shape as ``torch_adapter``: ``make_backend(api, device, threads)`` returns a ``loop.Backend``;
model and step code sit between ``# tui-bench:begin``/``# tui-bench:end`` markers. Keras picks its
backend at import from ``KERAS_BACKEND``, which the runner sets per API (catalog ``api_env``).
Threads: TensorFlow's variables and setters, torch's setter; JAX only honours the CPU affinity the
worker pinned before import.
"""

from __future__ import annotations

import math
import os
from typing import Any

import keras
import numpy as np

from adapters.loop import Backend, DeviceError, Hyper, StepClock, logits_loss_correct

APIS = ("tensorflow", "torch", "jax")


def _apply_threads(backend: str, threads: int) -> dict[str, Any]:
    """Set the backend's thread count and read back what it will use."""
    if backend == "tensorflow":
        import tensorflow as tf

        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:
            pass  # pools already exist: the environment variables set before import apply
        return {
            "threads_effective": tf.config.threading.get_intra_op_parallelism_threads(),
            "interop_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        }
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        return {
            "threads_effective": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
        }
    # JAX sizes its CPU pools from the affinity mask the worker set before import.
    return {"threads_effective": len(os.sched_getaffinity(0)), "interop_threads": None}


def _gpus(backend: str) -> tuple[int, str]:
    """(visible GPUs, what the installed build is) for the backend."""
    if backend == "tensorflow":
        import tensorflow as tf

        build = "built with CUDA" if tf.test.is_built_with_cuda() else "CPU-only"
        return len(tf.config.list_physical_devices("GPU")), f"tensorflow {tf.__version__} {build}"
    if backend == "torch":
        import torch

        build = "CPU-only" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return found, f"torch {torch.__version__} {build}"
    import jax

    found = len([d for d in jax.devices() if d.platform == "gpu"])
    return found, f"jaxlib {jax.__version__} {'with' if found else 'without'} a GPU plugin"


def resolve_device(backend: str, device: str) -> str:
    if device == "cpu":
        # Plain "cpu": with "cpu:0" the torch backend copies each new variable into a
        # non-Parameter tensor, which breaks Dropout's integer seed state.
        return "cpu"
    index = int(device.split(":")[1]) if ":" in device else 0
    found, build = _gpus(backend)
    if found == 0:
        raise DeviceError(f"keras/{backend} runtime sees 0 GPUs; installed build is {build}")
    if index >= found:
        raise DeviceError(
            f"keras/{backend} runtime sees {found} GPU(s) (gpu:0..gpu:{found - 1}); "
            f"{device} does not exist"
        )
    return f"gpu:{index}"


# tui-bench:begin model
def build_model(
    model: str, input_shape: tuple[int, ...], classes: int, dropout: float, vocab: int
) -> keras.Model:
    layers = keras.layers
    if model == "cnn":
        stack = [
            layers.Conv2D(32, 5, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(1024, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
    elif model == "mlp":
        stack = [
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(512, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
    elif model == "vgg16":
        stack = []
        for width, repeats in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
            stack += [
                layers.Conv2D(width, 3, padding="same", activation="relu") for _ in range(repeats)
            ]
            stack.append(layers.MaxPooling2D(2))
        stack += [
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
    elif model == "lstm":
        stack = [layers.Embedding(vocab, 128), layers.LSTM(128), layers.Dense(1)]
    else:
        raise ValueError(f"model {model!r} is not defined for keras")
    return keras.Sequential([keras.Input(input_shape), *stack])


# tui-bench:end model


class _ClockCallback(keras.callbacks.Callback):
    """Times each of ``fit``'s steps. Keras logs the epoch's running mean loss; the batch's own
    loss is recovered from consecutive means (all batches have the same size)."""

    def __init__(self, clock: StepClock) -> None:
        super().__init__()
        self.clock = clock
        self.seen = 0
        self.mean = 0.0

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.clock.begin()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        mean = float(np.asarray(logs["loss"]))  # blocks until the step's loss exists
        loss = mean * (self.seen + 1) - self.mean * self.seen
        self.seen, self.mean = self.seen + 1, mean
        self.clock.end(loss)


class KerasBackend(Backend):
    framework = "keras"

    def __init__(self, api: str, device: str, threads: int) -> None:
        active = keras.backend.backend()
        if active != api:
            raise RuntimeError(
                f"keras imported backend {active!r}, not {api!r}: KERAS_BACKEND={api} must be set "
                "before keras is imported"
            )
        self.api = api
        self.threads = _apply_threads(api, threads)
        self.device = resolve_device(api, device)
        self.binary = False

    def describe(self) -> dict[str, Any]:
        backend_module = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax"}[self.api]
        backend_version = __import__(backend_module).__version__
        return {
            "framework_version": keras.__version__,
            "device": self.device,
            "device_name": self.device,
            **self.threads,
            "extra": {
                "backend": self.api,
                "backend_version": backend_version,
                "jit_compile": getattr(getattr(self, "model", None), "jit_compile", None),
            },
        }

    def build(self, hyper: Hyper, dataset) -> None:
        keras.utils.set_random_seed(hyper.seed)
        shape = dataset.shape
        self.hyper = hyper
        self.binary = shape.num_classes == 2 and hyper.model == "lstm"
        with keras.device(self.device):
            self.model = build_model(
                hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
            )
            self._compile(hyper)

    def param_count(self) -> int:
        return int(sum(math.prod(v.shape) for v in self.model.trainable_weights))

    def sync(self) -> None:
        if self.device.startswith("gpu") and self.api == "torch":
            import torch

            torch.cuda.synchronize()
        elif self.device.startswith("gpu") and self.api == "tensorflow":
            import tensorflow as tf

            tf.test.experimental.sync_devices()
        # JAX: the loss read in each step blocks until the step is done.

    def _labels(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.float32).reshape(-1, 1) if self.binary else y

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with keras.device(self.device):
            xt = keras.ops.convert_to_tensor(x)
            yt = keras.ops.convert_to_tensor(self._labels(y))
        return keras.ops.convert_to_numpy(xt), keras.ops.convert_to_numpy(yt)

    # tui-bench:begin step
    def _compile(self, hyper: Hyper) -> None:
        if hyper.optimizer == "adam":
            optimizer = keras.optimizers.Adam(
                learning_rate=hyper.lr,
                beta_1=hyper.beta1,
                beta_2=hyper.beta2,
                epsilon=hyper.epsilon,
            )
        else:
            optimizer = keras.optimizers.SGD(learning_rate=hyper.lr)
        if self.binary:
            loss = keras.losses.BinaryCrossentropy(from_logits=True)
        else:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        # Each backend's own default: "auto" compiles with jax.jit on JAX, runs TF graphs without
        # XLA on CPU and torch eagerly; the resolved value is recorded in describe().
        self.model.compile(optimizer=optimizer, loss=loss, jit_compile="auto")

    def train_epoch(self, x, y, batch_indices, clock: StepClock) -> None:
        order = np.concatenate(batch_indices)
        with keras.device(self.device):
            self.model.fit(
                x[order],
                self._labels(y[order]),
                batch_size=self.hyper.batch_size,
                epochs=1,
                shuffle=False,
                verbose=0,
                callbacks=[_ClockCallback(clock)],
            )

    # tui-bench:end step

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        total_loss, correct = 0.0, 0
        with keras.device(self.device):
            for start in range(0, len(x), batch_size):
                logits = self.model.predict_on_batch(x[start : start + batch_size])
                loss, right = logits_loss_correct(
                    np.asarray(logits), y[start : start + batch_size], self.binary
                )
                total_loss, correct = total_loss + loss, correct + right
        n = max(len(x), 1)
        return total_loss / n, correct / n


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"keras adapter has no API {api!r} (choose: {', '.join(APIS)})")
    return KerasBackend(api, device, threads)
