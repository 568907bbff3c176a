"""A numpy MLP, implementing tui-bench's adapter contract (``adapters.backend``, which the worker
provides): Dense → ReLU → Dropout for each hidden width of the model manifest's ``mlp``, then
Dense to the classes; Glorot-uniform kernels, zero biases; softmax cross-entropy on logits; Adam
(Keras' formulation) or plain SGD. The worker times it; this file never reads a clock.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from adapters.backend import Backend, DeviceError, Hyper, evaluate_in_batches, logits_loss_correct
from adapters.models import MLP

APIS = ("numpy",)


class NumpyMlp(Backend):
    framework = "numpy-mlp"

    def __init__(self, device: str, threads: int) -> None:
        if device != "cpu":
            raise DeviceError(f"numpy runs on the CPU only, not {device}")
        self.threads = threads

    def describe(self) -> dict[str, Any]:
        return {
            "framework_version": np.__version__,
            "device": "cpu",
            "device_name": "cpu",
            "threads_effective": int(os.environ.get("OMP_NUM_THREADS") or 1),
            "interop_threads": None,
            "extra": {},
        }

    # tui-bench:begin model
    def build(self, hyper: Hyper, dataset: Any) -> None:
        if hyper.model != "mlp":
            raise ValueError(f"numpy-mlp builds the mlp only, not {hyper.model!r}")
        self.hyper = hyper
        self.rng = np.random.default_rng(hyper.seed)
        widths = [int(np.prod(dataset.shape.input_shape)), *MLP.hidden, dataset.shape.num_classes]
        self.params = []
        for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True):
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            kernel = self.rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)
            self.params += [kernel, np.zeros(fan_out, np.float32)]
        self.moments = [(np.zeros_like(p), np.zeros_like(p)) for p in self.params]
        self.steps = 0

    def _forward(self, x: np.ndarray, train: bool) -> tuple[np.ndarray, list[Any]]:
        h = x.reshape(len(x), -1).astype(np.float32)
        saved = []
        layers = len(self.params) // 2
        for i in range(layers):
            kernel, bias = self.params[2 * i], self.params[2 * i + 1]
            z = h @ kernel + bias
            if i == layers - 1:
                saved.append((h, None))
                return z, saved
            mask = np.ones_like(z)
            if train and self.hyper.dropout > 0:
                keep = 1.0 - self.hyper.dropout
                mask = (self.rng.random(z.shape) < keep).astype(np.float32) / keep
            saved.append((h, (z > 0) * mask))
            h = np.maximum(z, 0) * mask
        raise AssertionError("unreachable")

    # tui-bench:end model
    def param_count(self) -> int:
        return int(sum(p.size for p in self.params))

    # tui-bench:begin step
    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        logits, saved = self._forward(x, train=True)
        shifted = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(shifted)
        probs /= probs.sum(axis=1, keepdims=True)
        labels = y.astype(np.int64)
        loss = float(-np.log(probs[np.arange(len(labels)), labels] + 1e-12).mean())
        grad = probs
        grad[np.arange(len(labels)), labels] -= 1.0
        grad /= len(labels)
        grads = [None] * len(self.params)
        for i in reversed(range(len(saved))):
            h, gate = saved[i]
            grads[2 * i] = h.T @ grad
            grads[2 * i + 1] = grad.sum(axis=0)
            if i:
                grad = (grad @ self.params[2 * i].T) * saved[i - 1][1]
        self._update(grads)
        return loss

    def _update(self, grads: list[np.ndarray]) -> None:
        hyper = self.hyper
        self.steps += 1
        if hyper.optimizer == "sgd":
            for param, grad in zip(self.params, grads, strict=True):
                param -= hyper.lr * grad
            return
        lr = hyper.lr * np.sqrt(1 - hyper.beta2**self.steps) / (1 - hyper.beta1**self.steps)
        for param, grad, (m, v) in zip(self.params, grads, self.moments, strict=True):
            m += (1 - hyper.beta1) * (grad - m)
            v += (1 - hyper.beta2) * (grad * grad - v)
            param -= lr * m / (np.sqrt(v) + hyper.epsilon)

    # tui-bench:end step
    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        def batch(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            return logits_loss_correct(self._forward(xb, train=False)[0], yb, binary=False)

        return evaluate_in_batches(batch, x, y, batch_size)

    def prepare_inference(self) -> dict[str, Any]:
        return {"path": "the numpy forward pass", "mode": "no dropout, no gradients"}

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._forward(x, train=False)[0]


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"numpy-mlp has no API {api!r} (choose: {', '.join(APIS)})")
    return NumpyMlp(device, threads)
