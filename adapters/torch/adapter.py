"""PyTorch adapter. APIs: ``eager`` (plain nn.Module), ``compile`` (``torch.compile``, inductor).

Shape shared by every adapter: ``make_backend(api, device, threads)`` returns a ``Backend``;
the model and the training step sit between ``# tui-bench:begin``/``# tui-bench:end`` markers so
the lines-of-code metric counts only them. The worker has already set the thread environment
before this module is imported.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from adapters import shared_init
from adapters.backend import Backend, DeviceError, Hyper, Parallel, Settings, evaluate_in_batches
from adapters.data import binary_head
from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16, flat_features
from adapters.precision import bf16_settings

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
            # Keras' recurrent kernel (hidden × 4·hidden) is orthogonal as a whole, as is
            # MXNet's; torch holds its transpose, so one orthogonal_ over the whole matrix
            # (not per gate block, which would give each gate 2× Keras' scale).
            nn.init.orthogonal_(layer.weight_hh_l0)
            with torch.no_grad():
                layer.bias_ih_l0.zero_()
                layer.bias_ih_l0[hidden : 2 * hidden] = 1.0
                # Keras has one bias per gate, torch two: the second is pinned to zero and frozen
                # so the function and the trainable parameter count match Keras exactly.
                layer.bias_hh_l0.zero_()
            layer.bias_hh_l0.requires_grad_(False)


# tui-bench:begin model lstm
class _LastStep(nn.Module):
    def forward(self, output: tuple[torch.Tensor, Any]) -> torch.Tensor:
        sequence, _ = output
        return sequence[:, -1, :]


# tui-bench:end model


# The transformer's sizes, as the model manifest declares them.
WIDTH, HEADS, D_FF, BLOCKS = (
    TRANSFORMER.d_model,
    TRANSFORMER.heads,
    TRANSFORMER.d_ff,
    TRANSFORMER.blocks,
)


# tui-bench:begin model transformer
class _SelfAttention(nn.Module):
    """Multi-head self-attention: four width × width projections with biases, the scaled dot product
    in torch's fused ``scaled_dot_product_attention`` (dropout on the attention weights)."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.query, self.key, self.value, self.out = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:  # (batch, heads, time, width / heads)
            return t.view(batch, time, self.heads, width // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        drop = self.dropout if self.training else 0.0
        h = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=drop)
        return self.out(h.transpose(1, 2).reshape(batch, time, width))


class _Block(nn.Module):
    def __init__(self, width: int, heads: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.attention = _SelfAttention(width, heads, dropout)
        self.norm1 = nn.LayerNorm(width, eps=1e-6)
        self.feed = nn.Sequential(
            nn.Linear(width, hidden), nn.GELU(approximate="none"), nn.Linear(hidden, width)
        )
        self.norm2 = nn.LayerNorm(width, eps=1e-6)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.drop1(self.attention(x)))
        return self.norm2(x + self.drop2(self.feed(x)))


class _Transformer(nn.Module):
    def __init__(self, vocab: int, length: int, dropout: float) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, WIDTH), nn.Embedding(length, WIDTH)
        self.blocks = nn.Sequential(*(_Block(WIDTH, HEADS, D_FF, dropout) for _ in range(BLOCKS)))
        self.head = nn.Linear(WIDTH, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        where = torch.arange(ids.shape[1], device=ids.device)
        h = self.blocks(self.tokens(ids) + self.positions(where))
        return self.head(h.mean(dim=1))


# tui-bench:end model


# tui-bench:begin model gpt
class _CausalSelfAttention(nn.Module):
    """GPT-2's attention: one fused d × 3d projection for q, k, v (with bias), causal scaled dot
    product in torch's fused ``scaled_dot_product_attention(is_causal=True)``, output projection."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = (
            t.view(batch, time, self.heads, width // self.heads).transpose(1, 2)
            for t in self.qkv(x).split(width, dim=2)
        )
        drop = self.dropout if self.training else 0.0
        h = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
        return self.out(h.transpose(1, 2).reshape(batch, time, width))


class _GptBlock(nn.Module):
    """Pre-LayerNorm: x + attention(LN(x)), then x + MLP(LN(x)); GELU in GPT-2's tanh form."""

    def __init__(self, width: int, heads: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = _CausalSelfAttention(width, heads, dropout)
        self.feed = nn.Sequential(
            nn.Linear(width, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, width)
        )
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop1(self.attention(self.norm1(x)))
        return x + self.drop2(self.feed(self.norm2(x)))


class _Gpt(nn.Module):
    """Token + position embeddings, L blocks, a final LayerNorm, the head tied to the token
    table. Returns (batch · S, V) logits: one row per position, as the targets are flattened."""

    def __init__(self, dims: Any, dropout: float) -> None:
        super().__init__()
        width = dims.d_model
        self.tokens = nn.Embedding(dims.vocab_size, width)
        self.positions = nn.Embedding(dims.seq_len, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(
            *(_GptBlock(width, dims.heads, dims.d_ff, dropout) for _ in range(dims.layers))
        )
        self.final = nn.LayerNorm(width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        where = torch.arange(ids.shape[1], device=ids.device)
        h = self.blocks(self.drop(self.tokens(ids) + self.positions(where)))
        logits = nn.functional.linear(self.final(h), self.tokens.weight)  # tied: no head weight
        return logits.view(-1, logits.shape[-1])


# tui-bench:end model


def load_gpt_weights(model: _Gpt, weights: dict[str, np.ndarray]) -> None:
    """The shared gpt draw (``shared_init.gpt_weights``) into the built model: torch's Linear
    holds (out, in), the transpose of the canonical (in, out) kernel; the fused q/k/v keeps
    the canonical [q | k | v] order of its 3d outputs."""
    targets = {
        "tokens": model.tokens.weight,
        "positions": model.positions.weight,
        "final.gamma": model.final.weight,
        "final.beta": model.final.bias,
    }
    for b, block in enumerate(model.blocks):
        layers = {
            "norm1": block.norm1,
            "qkv": block.attention.qkv,
            "out": block.attention.out,
            "norm2": block.norm2,
            "hidden": block.feed[0],
            "back": block.feed[2],
        }
        for name, layer in layers.items():
            first, second = ("gamma", "beta") if name.startswith("norm") else ("kernel", "bias")
            targets[f"block{b}.{name}.{first}"] = layer.weight
            targets[f"block{b}.{name}.{second}"] = layer.bias
    _copy_shared(model, targets, weights, "gpt")


def load_shared_weights(model: _Transformer, weights: dict[str, np.ndarray]) -> None:
    """The shared draw (adapters/shared_init.py) into the built transformer: torch's Linear
    holds its weight as (out, in), the transpose of the canonical (in, out) kernel."""
    targets = {
        "tokens": model.tokens.weight,
        "positions": model.positions.weight,
        "head.kernel": model.head.weight,
        "head.bias": model.head.bias,
    }
    for b, block in enumerate(model.blocks):
        layers = {name: getattr(block.attention, name) for name in shared_init.PROJECTIONS}
        layers.update(
            norm1=block.norm1, hidden=block.feed[0], back=block.feed[2], norm2=block.norm2
        )
        for name, layer in layers.items():
            first, second = ("gamma", "beta") if name.startswith("norm") else ("kernel", "bias")
            targets[f"block{b}.{name}.{first}"] = layer.weight
            targets[f"block{b}.{name}.{second}"] = layer.bias
    _copy_shared(model, targets, weights, "transformer")


def _copy_shared(
    model: nn.Module, targets: dict[str, Any], weights: dict[str, np.ndarray], what: str
) -> None:
    """Every trainable parameter gets its shared array, and nothing else: torch's Linear holds
    its weight as (out, in), the transpose of the canonical (in, out) kernel."""
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    if set(targets) != set(weights) or {id(t) for t in targets.values()} != trainable:
        raise ValueError(f"the shared weights and torch's {what} parameters do not match")
    with torch.no_grad():
        for name, target in targets.items():
            value = weights[name].T if name.endswith(".kernel") else weights[name]
            target.copy_(torch.from_numpy(shared_init.checked(name, value, tuple(target.shape))))


def sdpa_backend(
    batch: int,
    length: int,
    dropout: float,
    dtype: torch.dtype,
    device: torch.device,
    heads: int = HEADS,
    head_dim: int = TRANSFORMER.head_dim,
    causal: bool = False,
) -> str:
    """The kernel torch's own selector picks for this model's attention (its heads; the gpt's
    with ``is_causal``) at this batch, dtype and dropout: what ``scaled_dot_product_attention``
    dispatches to."""
    from torch.nn.attention import SDPBackend

    q = torch.zeros(batch, heads, length, head_dim, dtype=dtype, device=device)
    names = {
        SDPBackend.MATH: "math",
        SDPBackend.FLASH_ATTENTION: "flash",
        SDPBackend.EFFICIENT_ATTENTION: "memory-efficient",
        SDPBackend.CUDNN_ATTENTION: "cuDNN",
    }
    choice = SDPBackend(torch._fused_sdp_choice(q, q, q, None, dropout, causal))
    return names.get(choice, str(choice).rsplit(".", 1)[-1].lower())


# tui-bench:begin model
def build_model(
    model: str, input_shape: tuple[int, ...], classes: int, dropout: float, vocab: int
) -> nn.Module:
    # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model cnn
        (c1, k1), (c2, k2) = CNN.conv
        flat = flat_features("cnn", input_shape)
        return nn.Sequential(
            nn.Conv2d(input_shape[2], c1, k1),
            nn.ReLU(),
            nn.MaxPool2d(CNN.pool),
            nn.Conv2d(c1, c2, k2),
            nn.ReLU(),
            nn.MaxPool2d(CNN.pool),
            nn.Flatten(),
            nn.Linear(flat, CNN.dense),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(CNN.dense, classes),
        )
        # tui-bench:end model
    if model == "mlp":
        # tui-bench:begin model mlp
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(math.prod(input_shape), MLP.hidden[0]),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(MLP.hidden[0], MLP.hidden[1]),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(MLP.hidden[1], classes),
        )
        # tui-bench:end model
    if model == "vgg16":
        # tui-bench:begin model vgg16
        layers: list[nn.Module] = []
        channels = input_shape[2]
        for width, repeats in VGG16.stages:
            for _ in range(repeats):
                layers += [nn.Conv2d(channels, width, VGG16.kernel, padding="same"), nn.ReLU()]
                channels = width
            layers.append(nn.MaxPool2d(VGG16.pool))
        flat = flat_features("vgg16", input_shape)
        return nn.Sequential(
            *layers,
            nn.Flatten(),
            nn.Linear(flat, VGG16.dense),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(VGG16.dense, classes),
        )
        # tui-bench:end model
    if model == "lstm":
        # tui-bench:begin model lstm
        return nn.Sequential(
            nn.Embedding(vocab, LSTM.embed),
            nn.LSTM(LSTM.embed, LSTM.hidden, batch_first=True),
            _LastStep(),
            nn.Linear(LSTM.hidden, 1),
        )
        # tui-bench:end model
    if model == "transformer":
        # tui-bench:begin model transformer
        return _Transformer(vocab, input_shape[0], dropout)
        # tui-bench:end model
    raise ValueError(f"model {model!r} is not defined for torch")


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


class CudaEventTimer:
    """Per-step CUDA events, read after the pipelined window's one sync (TorchBench's method)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.pairs: list[tuple[Any, Any]] = []

    def _event(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def start(self) -> None:
        self.pairs.append((self._event(), None))

    def stop(self) -> None:
        begin, _ = self.pairs[-1]
        self.pairs[-1] = (begin, self._event())

    def times(self) -> list[float]:
        out = [begin.elapsed_time(end) / 1000.0 for begin, end in self.pairs if end is not None]
        self.pairs = []
        return out


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
        self.tokens = False
        self.settings = Settings()
        self.autocast_dtype: torch.dtype | None = None
        self.scaler: Any = None
        self.parallel = Parallel()
        self.settings_applied: dict[str, Any] = {}

    def setup_parallel(self, parallel: Parallel) -> dict[str, Any]:
        """Join the process group torch.distributed.run set up (MASTER_ADDR/PORT, RANK,
        WORLD_SIZE in the environment): gloo on CPU, NCCL on a GPU."""
        self.parallel = parallel
        if parallel.workers == 1:
            return {}
        import torch.distributed as dist

        backend = "nccl" if self.device.type == "cuda" else "gloo"
        if self.device.type == "cuda":
            # One GPU per rank on this host (NCCL refuses two ranks on one device).
            self.device = resolve_device(f"gpu:{parallel.rank}")
            torch.cuda.set_device(self.device)
        dist.init_process_group(backend, rank=parallel.rank, world_size=parallel.workers)
        dist.barrier()  # every rank connected: set-up ends here, not inside the first step
        return {
            "engine": "torch.distributed DDP (launched by torch.distributed.run)",
            "backend": dist.get_backend(),
            "world_size": dist.get_world_size(),
        }

    def gather_step_times(self, times: list[float]) -> list[list[float]]:
        if self.parallel.workers == 1:
            return [list(times)]
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.parallel.workers
        dist.all_gather_object(gathered, list(times))
        return gathered

    def close(self) -> None:
        if self.parallel.workers > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                # Every rank leaves its last collective before any tears the group down: a
                # rank that destroyed it while a peer still talked aborted in gloo's threads.
                dist.barrier()
                dist.destroy_process_group()

    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        cuda = self.device.type == "cuda"
        self.settings = settings
        # Strict fp32 unless TF32 is asked for: torch's own default is TF32 for cuDNN
        # convolutions but not for matmuls; both are set explicitly, on CPU too (no effect).
        tf32 = settings.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        if settings.precision == "amp-fp16":
            self.autocast_dtype = torch.float16
            self.scaler = torch.amp.GradScaler(self.device.type)
        elif settings.precision == "bf16":
            self.autocast_dtype = torch.bfloat16
        torch.backends.cudnn.benchmark = cuda and settings.autotune == "on"
        self.settings_applied = {
            "precision": settings.precision,
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "autocast": str(self.autocast_dtype).replace("torch.", "")
            if self.autocast_dtype
            else None,
            "loss_scaling": self.scaler is not None,
            "autotune": f"cudnn.benchmark={torch.backends.cudnn.benchmark}"
            if cuda
            else "not applicable on cpu",
            "input": settings.input,
            "timing": settings.timing,
            "compile": "yes (torch.compile, inductor)" if self.api == "compile" else "no (eager)",
            **bf16_settings(settings.precision, self.device.type),
        }
        # The same dict is recorded in run_started after build: build adds the attention kernel.
        return self.settings_applied

    def _autocast(self) -> Any:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def to_device(self, x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        xt, yt = self._tensors(x, y)
        return xt, (yt.view(len(x), -1) if self.tokens else yt)  # rows stay samples for take

    def take(self, x: Any, y: Any, idx: np.ndarray) -> tuple[Any, Any]:
        if isinstance(x, torch.Tensor):  # input="device": gather on the device
            where = torch.from_numpy(idx).to(self.device)
            return x.index_select(0, where), y.index_select(0, where)
        return x[idx], y[idx]

    def loss_value(self, loss: Any) -> float:
        return float(loss.item()) if isinstance(loss, torch.Tensor) else float(loss)

    def device_timer(self) -> Any:
        return CudaEventTimer(self.device) if self.device.type == "cuda" else None

    def memory_stats(self) -> dict[str, Any]:
        if self.device.type != "cuda":
            return {}
        return {
            "allocator_peak_mib": torch.cuda.max_memory_allocated(self.device) / 2**20,
            "allocator": "torch caching allocator, max_memory_allocated",
        }

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
        self.binary = binary_head(hyper.model, shape.num_classes)
        self.images = shape.kind == "image"
        self.tokens = shape.kind == "tokens"  # targets per position, flattened like the logits
        if hyper.model == "gpt":
            # tui-bench:begin model gpt
            model: nn.Module = _Gpt(hyper.dims, hyper.dropout)
            # tui-bench:end model
            load = functools.partial(load_gpt_weights, model)
        else:
            model = build_model(
                hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
            )
            _init_like_keras(model)
            load = functools.partial(load_shared_weights, model)
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.settings_applied["init"] = init
        self.model = model.to(self.device)
        if hyper.model in ("transformer", "gpt"):
            self.settings_applied["attention"] = self._attention_kernel(hyper, shape)
        self.train_model: nn.Module = self.model
        if self.parallel.workers > 1:
            self.train_model = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
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
        self.train_forward = self.train_model
        if self.api == "compile":
            # tui-bench:begin step compile
            self.forward = torch.compile(self.model)
            self.train_forward = torch.compile(self.train_model)
            # tui-bench:end step

    def _attention_kernel(self, hyper: Hyper, shape) -> str:
        dtype = self.autocast_dtype or torch.float32
        length = shape.input_shape[0]
        heads = {}
        if hyper.dims is not None:  # the gpt: its own heads, causal
            heads = {"heads": hyper.dims.heads, "head_dim": hyper.dims.head_dim, "causal": True}
        train = sdpa_backend(hyper.batch_size, length, hyper.dropout, dtype, self.device, **heads)
        infer = sdpa_backend(hyper.batch_size, length, 0.0, dtype, self.device, **heads)
        where = "CPU" if self.device.type == "cpu" else "CUDA"
        causal = ", is_causal=True" if heads else ""
        text = (
            f"SDPA {train} (training, dropout {hyper.dropout:g}{causal}), {infer} (evaluation) "
            f"on {where}"
        )
        if self.api == "compile":
            text += "; inside torch.compile (inductor may fuse or decompose it)"
        return text

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _tensors(self, x: Any, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(x, torch.Tensor):  # already on the device in the framework's layout
            return x, (y.reshape(-1) if self.tokens else y)  # (input="device")
        xt = self._inputs(x)
        yt = torch.from_numpy(y).to(self.device)
        if self.tokens:
            yt = yt.reshape(-1)  # (batch · S,): the gpt's logits are one row per position
        return xt, (yt.float() if self.binary else yt)

    def _inputs(self, x: np.ndarray) -> torch.Tensor:
        xt = torch.from_numpy(x)
        if self.images:
            xt = xt.permute(0, 3, 1, 2)  # NHWC (the data's layout) → NCHW
        return xt.to(self.device).contiguous()

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt, yt = self._tensors(x, y)
        if self.images:
            xt = xt.permute(0, 2, 3, 1)  # back to the data's NHWC
        return xt.cpu().numpy(), yt.cpu().numpy()

    # tui-bench:begin step
    def train_step(self, x: Any, y: Any) -> torch.Tensor:
        xt, yt = self._tensors(x, y)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            logits = self.train_forward(xt)  # DDP all-reduces the gradients in backward
            loss = self.loss_fn(logits.squeeze(1) if self.binary else logits, yt)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()  # read back by the loop: every step (synced) or per window

    # tui-bench:end step

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        self.model.eval()

        def predict(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            xt, yt = self._tensors(xb, yb)
            with torch.inference_mode(), self._autocast():
                logits = self.forward(xt).float()
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

    def prepare_inference(self) -> dict[str, Any]:
        # Serving: evaluation mode (dropout off), no autograd (inference_mode in predict), the
        # API's own path: the module as built (eager) or the torch.compile'd one (compile), whose
        # first call, a warm-up request, traces and compiles for eval mode.
        self.model.eval()
        path = "torch.compile (inductor)" if self.api == "compile" else "eager nn.Module"
        return {
            "path": path,
            "mode": "model.eval(), torch.inference_mode()",
            "autocast": self.settings_applied.get("autocast"),
        }

    def predict(self, x: np.ndarray) -> torch.Tensor:
        xt = self._inputs(x)
        with torch.inference_mode(), self._autocast():
            return self.forward(xt)

    def served_outputs(self, outputs: torch.Tensor) -> np.ndarray:
        return outputs.float().cpu().numpy()

    # -- generation (spec mode "generate": adapters/generate.py, adapters/torch/generate.py) --
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        from adapters.torch.generate import TorchGeneration

        self.generation = TorchGeneration(
            self.model, self.device, self.api, self.settings.precision
        )
        return self.generation.prepare(batch, prompt_tokens, new_tokens)

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        return self.generation.generate(prompt, new_tokens, clock)


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"torch adapter has no API {api!r} (choose: {', '.join(APIS)})")
    return TorchBackend(api, device, threads)
