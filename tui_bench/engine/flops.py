"""FLOPs of a model: one training step and one inference sample, from the architecture alone.

The one home of the count that MFU (model FLOPs utilization, PaLM appendix B) is computed from.
No framework is imported: each model's layers are written down here, declaratively; their
dimensions come from the model manifest (``adapters/models.json``, which every adapter builds
from) and the data's shape from the dataset manifest.
A test (tests/test_flops.py) holds every count against PyTorch's own ``FlopCounterMode`` on the
torch adapter's model, forward and forward+backward.

What is counted (the convention of Kaplan et al. 2020 and Narayanan et al. 2021):
- matrix products only, at 2 FLOPs per multiply-accumulate: dense layers (2·in·out), convolutions
  (2·out_h·out_w·out_c·in_c·k_h·k_w), the LSTM's input and recurrent gate products
  (2·4h·(in + h) per time step), attention's q/k/v/output projections and its two sequence
  products QKᵀ and AV (2·S²·d each);
- backward = 2 × forward for every matrix product: one product for the weight gradient and one
  for the input gradient. The one exception is the first layer that reads the data: nothing
  needs the gradient of the data, and every autograd system prunes it (torch, TF, JAX, MXNet), so
  that layer's backward is 1 × its forward. For a dense model this is the 6·N·tokens rule.

The gpt (``_gpt``) is counted the same way per sequence of S tokens: per block the fused q/k/v
(2·d·3d per token), QKᵀ and AV over the full S×S (2·S²·d each per sequence, as PaLM, nanoGPT and
torchtitan count attention: the causal mask's skipped half is not subtracted), the output
projection (2·d²) and the feed-forward (2·2·d·4d); then the tied head (2·d·V per token). Forward
per token: L·(24d² + 4Sd) + 2dV (GPT-2 small: 284,812,800); nothing reads the data through a
product (the embeddings are look-ups and are trained), so every backward is 2 × forward and a
training step is 3 × (854,438,400 per token). ``gpt_rule`` states nanoGPT's / PaLM's
6N + 12·L·H·Q·T beside it (855,166,464 for GPT-2 small).

What is excluded, and why: biases, activations (ReLU, GELU, the LSTM's gate sigmoids/tanh),
pooling, softmax, dropout, LayerNorm, embedding look-ups, the loss and the optimizer update.
They are elementwise (O(activations) or O(parameters), not O(MACs)), they bound memory traffic
rather than arithmetic, and MFU counts model FLOPs of the matrix units: counting them would
make the figure depend on how each framework fuses them. ``FlopCounterMode`` excludes the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui_bench.engine import model_manifest
from tui_bench.engine.dataset_manifest import manifest
from tui_bench.engine.model_manifest import GptDims


@dataclass(frozen=True)
class Layer:
    """One matrix-product layer: its forward FLOPs per sample and what its backward computes."""

    name: str
    forward: int  # FLOPs per sample
    weight_grad: bool = True  # the layer has trainable weights in the product
    input_grad: bool = True  # the gradient of its input is needed (False: it reads the data)

    @property
    def backward(self) -> int:
        return self.forward * (int(self.weight_grad) + int(self.input_grad))


@dataclass(frozen=True)
class Transformer:
    """The transformer encoder's shapes (token + position embedding, encoder blocks of
    multi-head self-attention and a GELU feed-forward, mean over positions, Dense 1), as the
    model manifest declares them."""

    d_model: int
    heads: int
    d_ff: int
    blocks: int

    @classmethod
    def declared(cls) -> Transformer:
        return cls(**model_manifest.dims("transformer"))


@dataclass(frozen=True)
class Count:
    """A model's FLOPs per sample, layer by layer."""

    model: str
    layers: tuple[Layer, ...]

    @property
    def forward_per_sample(self) -> int:
        return sum(layer.forward for layer in self.layers)

    @property
    def backward_per_sample(self) -> int:
        return sum(layer.backward for layer in self.layers)

    @property
    def train_per_sample(self) -> int:
        return self.forward_per_sample + self.backward_per_sample

    def train_step(self, batch: int) -> int:
        """FLOPs of one training step (forward + backward) over a batch; the update excluded."""
        return self.train_per_sample * batch

    def inference_sample(self) -> int:
        return self.forward_per_sample


def _dense(name: str, inputs: int, outputs: int, first: bool = False, positions: int = 1) -> Layer:
    return Layer(name, 2 * inputs * outputs * positions, input_grad=not first)


def _conv(
    name: str, hw: tuple[int, int], c_in: int, c_out: int, k: int, pad: int, first: bool
) -> tuple[Layer, tuple[int, int]]:
    out = (hw[0] + 2 * pad - k + 1, hw[1] + 2 * pad - k + 1)
    flops = 2 * out[0] * out[1] * c_out * c_in * k * k
    return Layer(name, flops, input_grad=not first), out


def _cnn(shape: tuple[int, ...], classes: int) -> list[Layer]:
    dims = model_manifest.dims("cnn")
    h, w, channels = shape
    hw = (h, w)
    layers: list[Layer] = []
    for filters, k in dims["conv"]:
        layer, hw = _conv(f"conv {k}×{k} → {filters}", hw, channels, filters, k, 0, not layers)
        layers.append(layer)
        channels = filters
        hw = (hw[0] // dims["pool"], hw[1] // dims["pool"])
    flat = channels * hw[0] * hw[1]
    return [
        *layers,
        _dense(f"dense {dims['dense']}", flat, dims["dense"]),
        _dense("dense out", dims["dense"], classes),
    ]


def _mlp(shape: tuple[int, ...], classes: int) -> list[Layer]:
    flat = 1
    for size in shape:
        flat *= size
    layers: list[Layer] = []
    for width in model_manifest.dims("mlp")["hidden"]:
        layers.append(_dense(f"dense {width}", flat, width, first=not layers))
        flat = width
    return [*layers, _dense("dense out", flat, classes)]


def _vgg16(shape: tuple[int, ...], classes: int) -> list[Layer]:
    dims = model_manifest.dims("vgg16")
    h, w, channels = shape
    hw = (h, w)
    k = dims["kernel"]
    layers: list[Layer] = []
    for width, repeats in dims["stages"]:
        for _ in range(repeats):
            layer, hw = _conv(f"conv {k}×{k} → {width}", hw, channels, width, k, k // 2, not layers)
            layers.append(layer)
            channels = width
        hw = (hw[0] // dims["pool"], hw[1] // dims["pool"])
    flat = channels * hw[0] * hw[1]
    return [
        *layers,
        _dense(f"dense {dims['dense']}", flat, dims["dense"]),
        _dense("dense out", dims["dense"], classes),
    ]


def _lstm(shape: tuple[int, ...]) -> list[Layer]:
    (steps,) = shape
    dims = model_manifest.dims("lstm")
    hidden, embed = dims["hidden"], dims["embed"]
    # The embedding is a look-up (no product); its output carries a gradient (the embedding is
    # trained), so the LSTM's input product computes its input gradient.
    return [
        Layer("lstm input gates", 2 * embed * 4 * hidden * steps),
        Layer("lstm recurrent gates", 2 * hidden * 4 * hidden * steps),
        _dense("dense out", hidden, 1),
    ]


def _transformer(shape: tuple[int, ...]) -> list[Layer]:
    (seq,) = shape
    arch = Transformer.declared()
    d = arch.d_model
    layers: list[Layer] = []
    for block in range(1, arch.blocks + 1):
        layers += _block(f"block {block}", "q/k/v projections", seq, d, arch.d_ff)
    return [*layers, _dense("dense out", d, 1)]


def _block(name: str, qkv: str, seq: int, d: int, d_ff: int) -> list[Layer]:
    """One attention + feed-forward block over ``seq`` positions (the transformer's and the
    gpt's: the same matmuls, whatever order their norms take)."""
    return [
        _dense(f"{name} {qkv}", d, 3 * d, positions=seq),
        # QKᵀ and AV over all heads: heads · 2·S²·(d/heads) = 2·S²·d each. Both operands are
        # activations; the backward computes both gradients (2 × forward), as for a weight.
        Layer(f"{name} attention QKᵀ", 2 * seq * seq * d),
        Layer(f"{name} attention AV", 2 * seq * seq * d),
        _dense(f"{name} output projection", d, d, positions=seq),
        _dense(f"{name} feed-forward {d_ff}", d, d_ff, positions=seq),
        _dense(f"{name} feed-forward {d}", d_ff, d, positions=seq),
    ]


def _gpt(dims: GptDims) -> list[Layer]:
    seq, d = dims.seq_len, dims.d_model
    layers: list[Layer] = []
    for block in range(1, dims.layers + 1):
        layers += _block(f"block {block}", "fused q/k/v", seq, d, dims.d_ff)
    # The tied head: its weight is the token table, which is trained, so both gradients count.
    return [*layers, _dense(f"head (tied) {dims.vocab_size}", d, dims.vocab_size, positions=seq)]


def gpt_count(dims: GptDims) -> Count:
    """The gpt's exact matmul count, per sequence of ``dims.seq_len`` tokens."""
    return Count("gpt", tuple(_gpt(dims)))


def gpt_rule(dims: GptDims) -> int:
    """Training FLOPs per token by the rule of PaLM (appendix B) and nanoGPT's ``estimate_mfu``:
    6N + 12·L·H·Q·T, N the parameters without the position table, H·Q = d, T = S (full S²
    attention). Stated beside the exact count, not instead of it."""
    return 6 * dims.non_embedding_parameters + 12 * dims.layers * dims.d_model * dims.seq_len


_IMAGE_MODELS: dict[str, Callable[[tuple[int, ...], int], list[Layer]]] = {
    "cnn": _cnn,
    "mlp": _mlp,
    "vgg16": _vgg16,
}
_SEQUENCE_MODELS: dict[str, Callable[[tuple[int, ...]], list[Layer]]] = {
    "lstm": _lstm,
    "transformer": _transformer,
}
MODELS = (*_IMAGE_MODELS, *_SEQUENCE_MODELS, "gpt")


class UnknownModel(KeyError):
    """No architecture is written down here for this model (no FLOP count, so no MFU)."""


def count(
    model: str, input_shape: tuple[int, ...], classes: int, dims: GptDims | None = None
) -> Count:
    """FLOPs per sample of ``model`` on inputs of ``input_shape`` (HWC images, (length,)
    sequences) with ``classes`` classes. Sequence models end in one logit (binary). The gpt's
    shape is its ``dims`` (default: the manifest's default size); a sample is one sequence."""
    if model == "gpt":
        return gpt_count(dims or model_manifest.gpt_dims())
    if model in _IMAGE_MODELS:
        return Count(model, tuple(_IMAGE_MODELS[model](tuple(input_shape), classes)))
    if model in _SEQUENCE_MODELS:
        return Count(model, tuple(_SEQUENCE_MODELS[model](tuple(input_shape))))
    raise UnknownModel(model)


def for_dataset(model: str, dataset: str, dims: GptDims | None = None) -> Count:
    """The count for ``model`` on a dataset of the manifest (its input shape and classes)."""
    entry = manifest()[dataset]
    return count(model, tuple(entry["input_shape"]), int(entry["num_classes"]), dims)


def train_step_flops(
    model: str, dataset: str, global_batch: int, dims: GptDims | None = None
) -> int | None:
    """FLOPs of one training step over the global batch, or None for a model without a count.
    ``dims``: the gpt's size (``RunSpec.gpt_dims``)."""
    try:
        return for_dataset(model, dataset, dims).train_step(global_batch)
    except (UnknownModel, KeyError):
        return None


def inference_request_flops(
    model: str, dataset: str, batch: int, dims: GptDims | None = None
) -> int | None:
    """FLOPs of one inference request of ``batch`` samples (forward only), or None for a model
    without a count."""
    try:
        return for_dataset(model, dataset, dims).inference_sample() * batch
    except (UnknownModel, KeyError):
        return None
