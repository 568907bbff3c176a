"""The FLOP count (engine/flops.py) against PyTorch's own ``FlopCounterMode`` on the torch
adapter's model, forward and forward+backward, for every model of the catalog.

Where the two count differently, and why:
- the LSTM: torch's CPU LSTM runs as one fused oneDNN kernel (``mkldnn_rnn_layer``) that
  ``FlopCounterMode`` has no formula for (it counts 0). The test turns oneDNN off for the
  LSTM so torch runs the LSTM as its per-step ``addmm``/``mm`` products, which it counts; the
  arithmetic is the same.
- the LSTM's backward: torch skips the gradient of the initial hidden state (zeros, no
  gradient), one recurrent product of 200; the count here keeps every step (0.08 % more).
- attention: torch 2.13's CPU flash-attention kernel (``scaled_dot_product_attention`` without
  dropout) has no formula either (it counts 0 for QKᵀ and AV); the test selects the math
  kernel, whose two batched products torch counts.
- the gpt: the math kernel computes the whole S×S product under the causal mask, and torch counts
  it whole, which is the convention here (PaLM, nanoGPT): causal attention is not halved.
- the transformer: where the torch adapter does not define it yet, a reference built from the
  catalog's description (nn.TransformerEncoderLayer, post-norm, GELU) stands in.
Everything else agrees exactly: both count matrix products only (no biases, activations,
pooling, softmax, LayerNorm), and both leave out the gradient of the data at the first layer.
"""

from __future__ import annotations

import pytest
from conftest import require_module

from tui_bench.engine import catalog, flops

DATASET_FOR = {
    "image": "synthetic-mnist",
    "sequence": "synthetic-imdb",
    "tokens": "synthetic-tokens",
}
TOLERANCE = 0.02


def _dataset(model: str) -> str:
    if model == "vgg16":
        return "synthetic-cifar10"
    return DATASET_FOR[catalog.MODELS[model].input_kind]


def test_every_catalog_model_has_a_count():
    for model in catalog.MODELS:
        count = flops.for_dataset(model, _dataset(model))
        assert count.forward_per_sample > 0 and count.train_per_sample > count.forward_per_sample


def test_a_training_step_is_three_forwards_less_the_data_gradient():
    count = flops.count("mlp", (28, 28, 1), 10)
    first = 2 * 784 * 512
    assert count.forward_per_sample == first + 2 * 512 * 512 + 2 * 512 * 10
    assert count.train_per_sample == 3 * count.forward_per_sample - first
    assert count.train_step(64) == 64 * count.train_per_sample
    assert count.inference_sample() == count.forward_per_sample


def test_a_model_without_an_architecture_has_no_count_not_a_guess():
    assert flops.train_step_flops("no-such-model", "synthetic-mnist", 32) is None
    assert flops.train_step_flops("cnn", "no-such-dataset", 32) is None
    with pytest.raises(flops.UnknownModel):
        flops.count("no-such-model", (28, 28, 1), 10)


def test_attention_grows_with_the_square_of_the_sequence():
    short = flops.count("transformer", (100,), 2).forward_per_sample
    long = flops.count("transformer", (200,), 2).forward_per_sample
    arch = flops.Transformer.declared()
    d, blocks = arch.d_model, arch.blocks
    # f(S) = c + a·S + b·S² (c: the head, 2·d): f(200) - 2·f(100) = 20000·b - c, and
    # b = blocks · (QKᵀ + AV) = blocks · 4·d
    assert long - 2 * short == 20000 * blocks * 4 * d - 2 * d


def _torch_model(torch, model: str, shape: tuple[int, ...], classes: int, vocab: int):
    from adapters.torch import adapter as torch_adapter

    if model == "gpt":  # the manifest's default size (tiny), as flops.count takes it
        from adapters.models import gpt_dims

        return torch_adapter._Gpt(gpt_dims({}), 0.0)
    try:
        return torch_adapter.build_model(model, shape, classes, 0.0, vocab)
    except ValueError:
        if model != "transformer":
            raise
    from torch import nn

    arch = flops.Transformer.declared()

    class Reference(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocab, arch.d_model)
            self.positions = nn.Embedding(shape[0], arch.d_model)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(
                    arch.d_model, arch.heads, arch.d_ff, 0.0, activation="gelu", batch_first=True
                )
                for _ in range(arch.blocks)
            )
            self.out = nn.Linear(arch.d_model, 1)

        def forward(self, x):
            h = self.tokens(x) + self.positions(torch.arange(x.shape[1]))
            for block in self.blocks:
                h = block(h)
            return self.out(h.mean(1))

    return Reference()


@pytest.mark.parametrize("model", list(catalog.MODELS))
def test_count_agrees_with_torch_flop_counter(model, adapters_on_path):
    torch = require_module("torch")
    from torch.utils.flop_counter import FlopCounterMode

    entry = catalog.DATASETS[_dataset(model)]
    from tui_bench.engine.dataset_manifest import manifest

    facts = manifest()[entry.name]
    shape, classes = tuple(facts["input_shape"]), facts["num_classes"]
    vocab = facts.get("vocab_size", 0)
    torch.manual_seed(0)
    net = _torch_model(torch, model, shape, classes, vocab).train()
    batch = 2
    if len(shape) == 1:
        x = torch.randint(0, vocab, (batch, *shape))
    else:
        x = torch.rand(batch, shape[2], shape[0], shape[1])  # the adapter's NCHW
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # LSTM: oneDNN off, so torch runs (and counts) its per-step products; attention: the math
    # kernel, whose two batched products torch counts (its CPU flash kernel counts 0).
    with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as counter:
            net(x)
        forward = counter.get_total_flops() / batch
        with FlopCounterMode(display=False) as counter:
            net(x).sum().backward()
        train = counter.get_total_flops() / batch
    ours = flops.count(model, shape, classes)
    assert forward > 0 and train > forward
    assert abs(ours.forward_per_sample - forward) / forward <= TOLERANCE, (model, forward)
    assert abs(ours.train_per_sample - train) / train <= TOLERANCE, (model, train)
