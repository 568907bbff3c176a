"""Theano 1.0.5, the API ``keras2``: Keras 2.3.1 ``fit`` on the Theano backend (the stack of
Shatnawi et al. 2018). ``fit`` owns the loop; a callback times each of its steps.

Imported only for this API (the runner sets ``KERAS_BACKEND=theano`` for it), so Keras 2's import
time is counted in the run's ``import_s``, where it is paid. ``common`` configures and imports
Theano first.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# First: ``common`` writes THEANO_FLAGS, then imports Theano (its configuration is read once).
from adapters.theano.common import (
    ATTENTION,
    FLOATX,
    GPT_ATTENTION,
    TheanoBase,
    causal_attention,
    compile_dir,
    gelu_tanh,
    restore_collections_aliases,
)

# isort: split
import numpy as np
import theano.tensor as T  # noqa: N812 - Theano's own convention

from adapters import shared_init
from adapters.backend import Hyper, evaluate_in_batches, logits_loss_correct
from adapters.clock import StepClock
from adapters.data import binary_head
from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16
from adapters.theano.graph import D_FF, HEAD_DIM, HEADS, UNITS, WIDTH, Net

os.environ.setdefault("KERAS_HOME", str(compile_dir().parent / "keras2"))
restore_collections_aliases()
import keras  # noqa: E402

# tui-bench:begin model keras2 transformer gpt
# Keras 2.3.1 has no attention, LayerNormalization or GELU: written as layers over Theano ops.
_Keras2Layer = keras.layers.Layer


class Keras2Positions(_Keras2Layer):
    def build(self, input_shape: Any) -> None:
        uniform = keras.initializers.RandomUniform(-0.05, 0.05)
        self.table = self.add_weight(name="positions", shape=input_shape[1:], initializer=uniform)
        super().build(input_shape)

    def call(self, x: Any) -> Any:
        return x + self.table


class Keras2LayerNorm(_Keras2Layer):
    def build(self, input_shape: Any) -> None:
        self.gamma = self.add_weight(name="gamma", shape=input_shape[-1:], initializer="ones")
        self.beta = self.add_weight(name="beta", shape=input_shape[-1:], initializer="zeros")
        super().build(input_shape)

    def call(self, x: Any) -> Any:
        return Net._layer_norm(x, self.gamma, self.beta)


# tui-bench:end model
# tui-bench:begin model keras2 transformer
class Keras2SelfAttention(_Keras2Layer):
    def __init__(self, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dropout = dropout

    def build(self, input_shape: Any) -> None:
        self.projections = [
            (
                self.add_weight(f"{n}_kernel", (WIDTH, WIDTH), initializer="glorot_uniform"),
                self.add_weight(f"{n}_bias", (WIDTH,), initializer="zeros"),
            )
            for n in ("query", "key", "value", "out")
        ]
        super().build(input_shape)

    def call(self, x: Any, training: Any = None) -> Any:
        batch, time = x.shape[0], x.shape[1]

        def split(t):  # (batch, time, width) → (batch·heads, time, head_dim)
            return t.reshape((batch, time, HEADS, -1)).swapaxes(1, 2).reshape((-1, time, HEAD_DIM))

        (wq, bq), (wk, bk), (wv, bv), (wo, bo) = self.projections
        q, k, v = (split(T.dot(x, w) + b) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        scores = T.batched_dot(q, k.dimshuffle(0, 2, 1)) / np.float32(np.sqrt(HEAD_DIM))
        weights = T.nnet.softmax(scores.reshape((-1, time))).reshape(scores.shape)
        if self.dropout > 0:
            dropped = keras.backend.dropout(weights, self.dropout)
            weights = keras.backend.in_train_phase(dropped, weights, training=training)
        h = T.batched_dot(weights, v)
        h = h.reshape((batch, HEADS, time, -1)).dimshuffle(0, 2, 1, 3).reshape((batch, time, WIDTH))
        return T.dot(h, wo) + bo


def gelu(x: Any) -> Any:
    return np.float32(0.5) * x * (np.float32(1.0) + T.erf(x / np.float32(np.sqrt(2.0))))


def keras2_transformer(vocab: int, length: int, dropout: float) -> Any:
    layers = keras.layers
    ids = layers.Input((length,))
    h = Keras2Positions()(layers.Embedding(vocab, WIDTH)(ids))
    for _ in range(TRANSFORMER.blocks):
        a = Keras2SelfAttention(dropout)(h)
        h = Keras2LayerNorm()(layers.Add()([h, layers.Dropout(dropout)(a)]))
        f = layers.Dense(WIDTH)(layers.Dense(D_FF, activation=gelu)(h))
        h = Keras2LayerNorm()(layers.Add()([h, layers.Dropout(dropout)(f)]))
    return keras.models.Model(ids, layers.Dense(1)(layers.GlobalAveragePooling1D()(h)))


# tui-bench:end model


# tui-bench:begin model keras2 gpt
class Keras2GptNorm(Keras2LayerNorm):
    def call(self, x: Any) -> Any:
        return Net._layer_norm(x, self.gamma, self.beta, 1e-5)  # GPT-2's ε


class Keras2CausalSelfAttention(_Keras2Layer):
    """Fused q/k/v (d × 3d, bias), causal multi-head attention, output projection (d × d, bias)."""

    def __init__(self, dims: Any, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dims, self.dropout = dims, dropout

    def build(self, input_shape: Any) -> None:
        d = self.dims.d_model
        self.qkv = self.add_weight(name="qkv_kernel", shape=(d, 3 * d), initializer="zeros")
        self.qkv_bias = self.add_weight(name="qkv_bias", shape=(3 * d,), initializer="zeros")
        self.out = self.add_weight(name="out_kernel", shape=(d, d), initializer="zeros")
        self.out_bias = self.add_weight(name="out_bias", shape=(d,), initializer="zeros")
        super().build(input_shape)

    def call(self, x: Any, training: Any = None) -> Any:
        def drop(weights: Any) -> Any:
            if self.dropout <= 0:
                return weights
            dropped = keras.backend.dropout(weights, self.dropout)
            return keras.backend.in_train_phase(dropped, weights, training=training)

        h = causal_attention(T.dot(x, self.qkv) + self.qkv_bias, self.dims, drop)
        return T.dot(h, self.out) + self.out_bias


class Keras2TiedHead(_Keras2Layer):
    """The logits from the token Embedding's own weight (no weight, no bias of its own)."""

    def __init__(self, embedding: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # In a tuple: Keras 2 would track a Layer attribute's weights as this layer's too.
        self.tied = (embedding,)

    def call(self, x: Any) -> Any:
        return T.dot(x, self.tied[0].embeddings.T)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[:-1] + (self.tied[0].input_dim,)


def next_token_loss(tokens: Any, logits: Any) -> Any:
    """Cross-entropy of every position's next token, exact (Keras 2's sparse cross-entropy on
    Theano clips the probabilities to [1e-7, 1 - 1e-7]); (batch, S): fit takes the mean."""
    rows = T.nnet.softmax(logits.reshape((-1, logits.shape[-1])))
    return T.nnet.categorical_crossentropy(rows, tokens.flatten()).reshape(tokens.shape)


def keras2_gpt(dims: Any, dropout: float) -> Any:
    layers = keras.layers
    ids = layers.Input((dims.seq_len,))
    embedding = layers.Embedding(dims.vocab_size, dims.d_model)
    h = layers.Dropout(dropout)(Keras2Positions()(embedding(ids)))
    for _ in range(dims.layers):
        a = Keras2CausalSelfAttention(dims, dropout)(Keras2GptNorm()(h))
        h = layers.Add()([h, layers.Dropout(dropout)(a)])
        f = layers.Dense(dims.d_ff, activation=gelu_tanh)(Keras2GptNorm()(h))
        h = layers.Add()([h, layers.Dropout(dropout)(layers.Dense(dims.d_model)(f))])
    return keras.models.Model(ids, Keras2TiedHead(embedding)(Keras2GptNorm()(h)))


# tui-bench:end model


def load_keras2_gpt(model: Any, weights: dict[str, np.ndarray]) -> None:
    """The shared gpt draw into the Keras 2 gpt, layer by layer in the model's order (kernels
    (in, out) as the canonical layout; ``set_weights`` refuses a wrong shape)."""
    layers: dict[str, list[Any]] = {}
    for layer in model.layers:
        layers.setdefault(type(layer).__name__, []).append(layer)
    (embedding,), (positions,) = layers["Embedding"], layers["Keras2Positions"]
    attention, norms, dense = (
        layers["Keras2CausalSelfAttention"],
        layers["Keras2GptNorm"],
        layers["Dense"],
    )
    blocks = len(attention)
    if (len(norms), len(dense)) != (2 * blocks + 1, 2 * blocks):
        raise ValueError("load_keras2_gpt: the model is not the catalog's gpt")
    embedding.set_weights([weights["tokens"]])
    positions.set_weights([weights["positions"]])

    def pair(name: str, first: str, second: str) -> list[np.ndarray]:
        return [weights[f"{name}.{first}"], weights[f"{name}.{second}"]]

    for b in range(blocks):
        p = f"block{b}."
        qkv, out = pair(p + "qkv", "kernel", "bias"), pair(p + "out", "kernel", "bias")
        attention[b].set_weights(qkv + out)
        for i, name in enumerate(("norm1", "norm2")):
            norms[2 * b + i].set_weights(pair(p + name, "gamma", "beta"))
        for i, name in enumerate(("hidden", "back")):
            dense[2 * b + i].set_weights(pair(p + name, "kernel", "bias"))
    norms[-1].set_weights(pair("final", "gamma", "beta"))
    if sum(w.size for w in model.get_weights()) != sum(v.size for v in weights.values()):
        raise ValueError("load_keras2_gpt: the model holds weights the shared draw does not set")


def load_keras2_transformer(model: Any, weights: dict[str, np.ndarray]) -> None:
    """The shared draw into the Keras 2 transformer, layer by layer in the model's order (its
    kernels are (in, out) like the canonical layout; ``set_weights`` refuses a wrong shape)."""
    layers: dict[str, list[Any]] = {}
    for layer in model.layers:
        layers.setdefault(type(layer).__name__, []).append(layer)
    attention, norms, dense = (
        layers["Keras2SelfAttention"],
        layers["Keras2LayerNorm"],
        layers["Dense"],
    )
    blocks = TRANSFORMER.blocks
    if (len(attention), len(norms), len(dense)) != (blocks, 2 * blocks, 2 * blocks + 1):
        raise ValueError("load_keras2_transformer: the model is not the catalog's transformer")
    (embedding,), (positions,) = layers["Embedding"], layers["Keras2Positions"]
    embedding.set_weights([weights["tokens"]])
    positions.set_weights([weights["positions"]])
    for b in range(blocks):
        p = f"block{b}."
        attention[b].set_weights(
            [
                weights[p + n + kind]
                for n in shared_init.PROJECTIONS
                for kind in (".kernel", ".bias")
            ]
        )
        for i, name in enumerate(("norm1", "norm2")):
            norms[2 * b + i].set_weights(
                [weights[p + name + ".gamma"], weights[p + name + ".beta"]]
            )
        for i, name in enumerate(("hidden", "back")):
            dense[2 * b + i].set_weights(
                [weights[p + name + ".kernel"], weights[p + name + ".bias"]]
            )
    dense[-1].set_weights([weights["head.kernel"], weights["head.bias"]])


# tui-bench:begin model keras2
def build_keras2_model(model: str, input_shape, classes: int, dropout: float, vocab: int):
    layers = keras.layers
    # tui-bench:end model
    if model == "cnn":
        # tui-bench:begin model keras2 cnn
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
        # tui-bench:begin model keras2 mlp
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
        # tui-bench:begin model keras2 vgg16
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
        # tui-bench:begin model keras2 lstm
        stack = [layers.Embedding(vocab, LSTM.embed), layers.LSTM(UNITS), layers.Dense(1)]
        # tui-bench:end model
    elif model == "transformer":
        # tui-bench:begin model keras2 transformer
        return keras2_transformer(vocab, input_shape[0], dropout)
        # tui-bench:end model
    else:
        raise ValueError(f"model {model!r} is not defined for keras2")
    # tui-bench:begin model keras2
    return keras.models.Sequential([layers.InputLayer(input_shape=input_shape), *stack])


# tui-bench:end model


class _ClockCallback(keras.callbacks.Callback):
    """Times each of ``fit``'s steps; Keras 2 logs each batch's own loss."""

    def __init__(self, clock: StepClock) -> None:
        super().__init__()
        self.clock = clock

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.clock.begin()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.clock.end(float(logs["loss"]))


class Keras2Backend(TheanoBase):
    """Keras 2.3.1 on the Theano backend; ``fit`` owns the loop."""

    def __init__(self, api: str, device: str, threads: int) -> None:
        if keras.backend.backend() != "theano":
            raise RuntimeError(
                "keras2 needs Keras 2 imported on the Theano backend: KERAS_BACKEND=theano must "
                "be set before the adapter is imported"
            )
        super().__init__(api, device, threads)

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        described["extra"]["keras_version"] = keras.__version__
        described["extra"]["backend"] = keras.backend.backend()
        return described

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keras 2 feeds numpy batches to its compiled Theano function, cast to floatX."""
        xb = x if x.dtype.kind == "i" else keras.backend.cast_to_floatx(x)
        return xb, y

    def build(self, hyper: Hyper, dataset) -> None:
        np.random.seed(hyper.seed)  # Keras 2 seeds its Theano random streams from numpy
        keras.backend.set_image_data_format("channels_last")
        shape = dataset.shape
        self.hyper = hyper
        self.binary = binary_head(hyper.model, shape.num_classes)
        if hyper.model in ("transformer", "gpt"):
            self.applied["attention"] = GPT_ATTENTION if hyper.dims else ATTENTION[self.api]
        if hyper.model == "gpt":
            # tui-bench:begin model keras2 gpt
            self.model = keras2_gpt(hyper.dims, hyper.dropout)
            # tui-bench:end model
            load = functools.partial(load_keras2_gpt, self.model)
        else:
            self.model = build_keras2_model(
                hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
            )
            load = functools.partial(load_keras2_transformer, self.model)
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        # The worker's build-only mode and an inference run train nothing: no training function.
        if not (getattr(self, "build_only", False) or getattr(self, "serve_only", False)):
            self._compile(hyper)

    # tui-bench:begin step keras2
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
        # tui-bench:end step
        if hyper.model == "gpt":
            # tui-bench:begin step keras2 gpt
            # Integer targets of every position, fed as they are (not cast to the logits' float).
            tokens = keras.backend.placeholder(ndim=2, dtype="int64", name="next_tokens")
            self.model.compile(optimizer=optimizer, loss=next_token_loss, target_tensors=[tokens])
            # tui-bench:end step
            return
        # tui-bench:begin step keras2
        self.model.compile(optimizer=optimizer, loss=loss)

    def train_epoch(self, x, y, batch_indices, clock: StepClock) -> None:
        order = np.concatenate(batch_indices)
        labels = y[order].astype(FLOATX) if self.binary else y[order]
        self.model.fit(
            x[order],
            labels,
            batch_size=self.hyper.batch_size,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[_ClockCallback(clock)],
        )

    # tui-bench:end step

    def param_count(self) -> int:
        return int(sum(keras.backend.count_params(w) for w in self.model.trainable_weights))

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        def predict(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            logits = self.model.predict_on_batch(xb)  # the gpt's: (batch, S, V)
            return logits_loss_correct(logits.reshape(-1, logits.shape[-1]), yb, self.binary)

        return evaluate_in_batches(predict, x, y, batch_size)

    def prepare_inference(self) -> dict[str, Any]:
        # Keras 2's own serving call: predict_on_batch feeds learning phase 0 (Dropout off)
        # to the model's predict function, which Keras compiles (a theano.function) on its
        # first call: the first request, a warm-up one.
        return {
            "path": "Keras 2 model.predict_on_batch (its compiled predict function)",
            "mode": "learning phase 0 (predict): Dropout off, no gradients",
        }

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_on_batch(x)
