"""PyTorch adapter. APIs: ``eager`` (plain nn.Module), ``compile`` (``torch.compile``, inductor).

Shape shared by every adapter: ``make_backend(api, device, threads)`` returns a ``loop.Backend``;
the model and the training step sit between ``# tui-bench:begin``/``# tui-bench:end`` markers so
the lines-of-code metric counts only them. The worker has already set the thread environment
before this module is imported.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from adapters.loop import Backend, DeviceError, Hyper, evaluate_in_batches

APIS = ("eager", "compile")


def _init_like_keras(module: nn.Module) -> None:
    """Keras' defaults, so every framework starts from the same initializer family:
    Glorot-uniform kernels, zero biases, orthogonal recurrent kernels, forget-gate bias 1,
    embeddings uniform in ±0.05."""
    for layer in module.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.Embedding):
            nn.init.uniform_(layer.weight, -0.05, 0.05)
        elif isinstance(layer, nn.LSTM):
            hidden = layer.hidden_size
            nn.init.xavier_uniform_(layer.weight_ih_l0)
            for gate in range(4):
                nn.init.orthogonal_(layer.weight_hh_l0.data[gate * hidden : (gate + 1) * hidden])
            with torch.no_grad():
                layer.bias_ih_l0.zero_()
                layer.bias_ih_l0[hidden : 2 * hidden] = 1.0
                # Keras has one bias per gate, torch two: the second is pinned to zero and frozen
                # so the function and the trainable parameter count match Keras exactly.
                layer.bias_hh_l0.zero_()
            layer.bias_hh_l0.requires_grad_(False)


class _LastStep(nn.Module):
    def forward(self, output: tuple[torch.Tensor, Any]) -> torch.Tensor:
        sequence, _ = output
        return sequence[:, -1, :]


# tui-bench:begin model
def build_model(
    model: str, input_shape: tuple[int, ...], classes: int, dropout: float, vocab: int
) -> nn.Module:
    if model == "cnn":
        h, w, c = input_shape
        flat = 64 * (((h - 4) // 2 - 2) // 2) * (((w - 4) // 2 - 2) // 2)
        return nn.Sequential(
            nn.Conv2d(c, 32, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(flat, 1024),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(1024, classes),
        )
    if model == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(math.prod(input_shape), 512),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(512, classes),
        )
    if model == "vgg16":
        layers: list[nn.Module] = []
        channels = input_shape[2]
        for width, repeats in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
            for _ in range(repeats):
                layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU()]
                channels = width
            layers.append(nn.MaxPool2d(2))
        side = input_shape[0] // 32
        return nn.Sequential(
            *layers,
            nn.Flatten(),
            nn.Linear(512 * side * side, 512),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(512, classes),
        )
    if model == "lstm":
        return nn.Sequential(
            nn.Embedding(vocab, 128),
            nn.LSTM(128, 128, batch_first=True),
            _LastStep(),
            nn.Linear(128, 1),
        )
    raise ValueError(f"model {model!r} is not defined for torch")


# tui-bench:end model


def resolve_device(device: str) -> torch.device:
    if device == "cpu":
        return torch.device("cpu")
    index = int(device.split(":")[1]) if ":" in device else 0
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found == 0:
        build = "CPU-only" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise DeviceError(
            f"torch runtime sees 0 GPUs; installed build {torch.__version__} is {build}"
        )
    if index >= found:
        raise DeviceError(
            f"torch runtime sees {found} GPU(s) (gpu:0..gpu:{found - 1}); {device} does not exist"
        )
    return torch.device(f"cuda:{index}")


class TorchBackend(Backend):
    framework = "torch"

    def __init__(self, api: str, device: str, threads: int) -> None:
        self.api = api
        self.device = resolve_device(device)
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:
            pass  # only settable before the first parallel work; the effective value is recorded
        self.binary = False

    def describe(self) -> dict[str, Any]:
        cuda = self.device.type == "cuda"
        return {
            "framework_version": torch.__version__,
            "device": str(self.device),
            "device_name": torch.cuda.get_device_name(self.device) if cuda else "cpu",
            "threads_effective": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "extra": {
                "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version() if cuda else None,
                "mkldnn": torch.backends.mkldnn.is_available(),
            },
        }

    def build(self, hyper: Hyper, dataset) -> None:
        torch.manual_seed(hyper.seed)
        shape = dataset.shape
        self.binary = shape.num_classes == 2 and hyper.model == "lstm"
        self.images = shape.kind == "image"
        model = build_model(
            hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
        )
        _init_like_keras(model)
        self.model = model.to(self.device)
        # tui-bench:begin step
        params = [p for p in self.model.parameters() if p.requires_grad]
        if hyper.optimizer == "adam":
            self.optimizer = torch.optim.Adam(
                params, lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.epsilon
            )
        else:
            self.optimizer = torch.optim.SGD(params, lr=hyper.lr)
        self.loss_fn = nn.BCEWithLogitsLoss() if self.binary else nn.CrossEntropyLoss()
        # tui-bench:end step
        self.forward = self.model
        if self.api == "compile":
            # tui-bench:begin step compile
            self.forward = torch.compile(self.model)
            # tui-bench:end step

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _tensors(self, x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        xt = torch.from_numpy(x)
        if self.images:
            xt = xt.permute(0, 3, 1, 2)  # NHWC (the data's layout) → NCHW
        xt = xt.to(self.device).contiguous()
        yt = torch.from_numpy(y).to(self.device)
        return xt, (yt.float() if self.binary else yt)

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt, yt = self._tensors(x, y)
        if self.images:
            xt = xt.permute(0, 2, 3, 1)  # back to the data's NHWC
        return xt.cpu().numpy(), yt.cpu().numpy()

    # tui-bench:begin step
    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        xt, yt = self._tensors(x, y)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.forward(xt)
        loss = self.loss_fn(logits.squeeze(1) if self.binary else logits, yt)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    # tui-bench:end step

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        self.model.eval()

        def predict(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            xt, yt = self._tensors(xb, yb)
            with torch.inference_mode():
                logits = self.forward(xt)
                if self.binary:
                    logits = logits.squeeze(1)
                    loss = nn.functional.binary_cross_entropy_with_logits(
                        logits, yt, reduction="sum"
                    )
                    right = ((logits > 0).float() == yt).sum()
                else:
                    loss = nn.functional.cross_entropy(logits, yt, reduction="sum")
                    right = (logits.argmax(1) == yt).sum()
            return loss.item(), int(right.item())

        return evaluate_in_batches(predict, x, y, batch_size)


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"torch adapter has no API {api!r} (choose: {', '.join(APIS)})")
    return TorchBackend(api, device, threads)
