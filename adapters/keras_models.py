"""The Keras models, written once for Keras 3 (``adapters/keras``, every backend) and tf.keras
(``adapters/tensorflow``: its keras, eager, graph, xla and Estimator APIs): each builder takes the
``keras`` module to build with. Their sizes come from the model manifest (``adapters.models``).
It sits beside the framework packages, not in one, so that both import it, and it imports no
framework itself. ``FitStepLoss`` is the per-step loss both APIs' ``fit`` callbacks read.

The marked lines here are counted for both adapters' APIs (``tui_bench/engine/results/loc.py``
follows each adapter's ``tui-bench:uses`` line here): a user of either API writes them.
Keras 2 on Theano has no ``MultiHeadAttention``; its transformer stays in ``adapters/theano``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16

# The transformer's sizes, as the model manifest declares them.
WIDTH, HEADS, HEAD_DIM = TRANSFORMER.d_model, TRANSFORMER.heads, TRANSFORMER.head_dim


# tui-bench:begin model transformer
# Glorot-uniform's limit for one width × width projection: Keras' MultiHeadAttention holds its
# kernels as (width, heads, head_dim) and (heads, head_dim, width), whose fans Glorot would
# compute differently.
PROJECTION_LIMIT = math.sqrt(6.0 / (WIDTH + WIDTH))


def transformer(keras: Any, vocab: int, length: int, dropout: float) -> Any:
    layers = keras.layers

    class AddPositions(layers.Layer):
        """Adds a learned position embedding (length × width, uniform ±0.05)."""

        def build(self, input_shape: Any) -> None:
            uniform = keras.initializers.RandomUniform(-0.05, 0.05)
            self.table = self.add_weight(
                name="positions", shape=tuple(input_shape[1:]), initializer=uniform
            )

        def call(self, x: Any) -> Any:
            return x + self.table

    ids = keras.Input((length,))
    h = AddPositions()(layers.Embedding(vocab, WIDTH)(ids))
    for _ in range(TRANSFORMER.blocks):
        init = keras.initializers.RandomUniform(-PROJECTION_LIMIT, PROJECTION_LIMIT)
        mha = layers.MultiHeadAttention(HEADS, HEAD_DIM, dropout=dropout, kernel_initializer=init)
        h = layers.Add()([h, layers.Dropout(dropout)(mha(h, h))])
        h = layers.LayerNormalization(epsilon=1e-6)(h)
        f = layers.Dense(WIDTH)(layers.Dense(TRANSFORMER.d_ff, activation="gelu")(h))
        h = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([h, layers.Dropout(dropout)(f)]))
    return keras.Model(ids, layers.Dense(1)(layers.GlobalAveragePooling1D()(h)))


# tui-bench:end model


# tui-bench:begin model gpt
# torch's LayerNorm epsilon, which GPT-2 and the gpt's reference use; Keras' default is 1e-3.
GPT_LAYER_NORM_EPSILON = 1e-5


def gpt(keras: Any, dims: Any, dropout: float) -> Any:
    """GPT-2's layout (docs/frameworks.md, "The GPT") at ``dims`` (``adapters.models.gpt_dims``):
    logits (batch, S, V) for the next token at every position."""
    layers = keras.layers
    ops = getattr(keras, "ops", None)  # Keras 3; tf.keras 2.15 (the Estimator's) has no ops

    def gelu(x: Any) -> Any:
        return keras.activations.gelu(x, approximate=True)  # GPT-2's tanh form, as torch's

    class TiedEmbedding(layers.Embedding):
        """The token table; called with ``reverse=True`` it is the output head, h·Eᵀ (no bias)."""

        def call(self, inputs: Any, reverse: bool = False) -> Any:
            if not reverse:
                return super().call(inputs)
            if ops is None:
                return keras.backend.dot(inputs, keras.backend.transpose(self.embeddings))
            return ops.matmul(inputs, ops.transpose(self.embeddings))

        def compute_output_spec(self, inputs: Any, reverse: bool = False) -> Any:  # Keras 3
            if not reverse:
                return super().compute_output_spec(inputs)
            shape = (*inputs.shape[:-1], self.input_dim)
            return keras.KerasTensor(shape, dtype=self.compute_dtype)

    class Positions(layers.Layer):
        """Adds the learned position table (S × d)."""

        def build(self, input_shape: Any) -> None:
            self.table = self.add_weight(name="positions", shape=tuple(input_shape[1:]))

        def call(self, x: Any) -> Any:
            return x + self.table

    def norm(name: str) -> Any:
        return layers.LayerNormalization(epsilon=GPT_LAYER_NORM_EPSILON, name=name)

    ids = keras.Input((dims.seq_len,), dtype="int32")
    tokens = TiedEmbedding(dims.vocab_size, dims.d_model, name="tokens")
    h = layers.Dropout(dropout)(Positions(name="positions")(tokens(ids)))
    for b in range(dims.layers):
        a = norm(f"block{b}_norm1")(h)
        mha = layers.MultiHeadAttention(
            dims.heads, dims.head_dim, dropout=dropout, name=f"block{b}_attention"
        )
        h = layers.Add()([h, layers.Dropout(dropout)(mha(a, a, use_causal_mask=True))])
        f = norm(f"block{b}_norm2")(h)
        f = layers.Dense(dims.d_ff, activation=gelu, name=f"block{b}_hidden")(f)
        f = layers.Dense(dims.d_model, name=f"block{b}_back")(f)
        h = layers.Add()([h, layers.Dropout(dropout)(f)])
    return keras.Model(ids, tokens(norm("final")(h), reverse=True))


# tui-bench:end model


def attention_kernel(model: Any, xla: bool, causal: bool = False, flash: Any = None) -> str:
    """How Keras' MultiHeadAttention computes the attention of this built model: its
    ``flash_attention`` flag as resolved (``flash``: what the adapter resolved it to for the
    backend, where it can; else the layer's flag), and whether dropout on the weights makes it
    take the explicit einsum + softmax path (Keras calls ``ops.dot_product_attention`` only
    without it). ``causal``: the gpt's, called with ``use_causal_mask=True``."""
    mha = [layer for layer in model.layers if layer.__class__.__name__ == "MultiHeadAttention"]
    if not mha:
        return "no attention layer"
    layer = mha[0]
    if flash is None:
        flash = getattr(layer, "_flash_attention", "not a setting in this Keras")
    mask = ", causal mask" if causal else ""
    if float(getattr(layer, "_dropout", 0.0)) > 0.0 or not hasattr(layer, "_flash_attention"):
        path = f"MultiHeadAttention einsum + softmax + dropout{mask}"
    elif causal:
        path = "MultiHeadAttention ops.dot_product_attention(is_causal=True) (the backend's kernel)"
    else:
        path = "MultiHeadAttention ops.dot_product_attention (the backend's fused kernel)"
    return f"{path}, flash_attention={flash}; XLA {'on' if xla else 'off'}"


# tui-bench:begin model
def build_model(
    keras: Any, model: str, input_shape: tuple[int, ...], classes: int, dropout: float, vocab: int
) -> Any:
    layers = keras.layers
    # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model cnn
        stack = [
            layers.Conv2D(*CNN.conv[0], activation="relu"),
            layers.MaxPooling2D(CNN.pool),
            layers.Conv2D(*CNN.conv[1], activation="relu"),
            layers.MaxPooling2D(CNN.pool),
            layers.Flatten(),
            layers.Dense(CNN.dense, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
        # tui-bench:end model
    elif model == "mlp":
        # tui-bench:begin model mlp
        stack = [
            layers.Flatten(),
            layers.Dense(MLP.hidden[0], activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(MLP.hidden[1], activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
        # tui-bench:end model
    elif model == "vgg16":
        # tui-bench:begin model vgg16
        stack = []
        for w, n in VGG16.stages:  # each stage: n convolutions of width w
            stack += [
                layers.Conv2D(w, VGG16.kernel, padding="same", activation="relu") for _ in range(n)
            ]
            stack.append(layers.MaxPooling2D(VGG16.pool))
        stack += [
            layers.Flatten(),
            layers.Dense(VGG16.dense, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(classes),
        ]
        # tui-bench:end model
    elif model == "lstm":
        # tui-bench:begin model lstm
        stack = [layers.Embedding(vocab, LSTM.embed), layers.LSTM(LSTM.hidden), layers.Dense(1)]
        # tui-bench:end model
    elif model == "transformer":
        # tui-bench:begin model transformer
        return transformer(keras, vocab, input_shape[0], dropout)
        # tui-bench:end model
    else:
        raise ValueError(f"model {model!r} is not defined for Keras")
    # tui-bench:begin model
    return keras.Sequential([keras.Input(input_shape), *stack])


# tui-bench:end model


class FitStepLoss:
    """A step's loss recovered from Keras ``fit``'s running mean when it is read (blocks until
    the step's loss exists); reads happen in step order. Shared by the APIs whose framework owns
    the loop through ``fit`` (Keras 3 on any backend, TensorFlow's keras API)."""

    def __init__(self, callback: Any, running_mean: Any) -> None:
        self.callback = callback
        self.running_mean = running_mean

    def __float__(self) -> float:
        cb = self.callback
        mean = float(np.asarray(self.running_mean))
        loss = mean * (cb.seen + 1) - cb.mean * cb.seen
        cb.seen, cb.mean = cb.seen + 1, mean
        return loss
