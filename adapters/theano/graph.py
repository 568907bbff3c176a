"""Theano 1.0.5, the API ``theano``: the model and the step written as Theano symbolic functions
(gradients from ``theano.grad``, Adam written in Theano with Keras' formulation).

Model and step code sit between ``# tui-bench:begin``/``# tui-bench:end`` markers (a marker naming
APIs applies to those APIs only); ``common`` configures and imports Theano first.
"""

from __future__ import annotations

from typing import Any

# First: ``common`` writes THEANO_FLAGS, then imports Theano (its configuration is read once).
from adapters.theano.common import (
    ATTENTION,
    FLOATX,
    GPT_ATTENTION,
    TheanoBase,
    causal_attention,
    gelu_tanh,
    glorot_uniform,
    orthogonal,
)

# isort: split
import numpy as np
import theano
import theano.tensor as T  # noqa: N812 - Theano's own convention
from theano.sandbox.rng_mrg import MRG_RandomStreams
from theano.tensor.nnet import conv2d
from theano.tensor.signal.pool import pool_2d

from adapters import shared_init
from adapters.backend import Hyper, evaluate_in_batches, logits_loss_correct
from adapters.data import binary_head
from adapters.models import CNN, LSTM, MLP, TRANSFORMER, VGG16, flat_features

# The LSTM's and the transformer's sizes, as the model manifest declares them.
UNITS = LSTM.hidden
WIDTH, HEADS, HEAD_DIM, D_FF = (
    TRANSFORMER.d_model,
    TRANSFORMER.heads,
    TRANSFORMER.head_dim,
    TRANSFORMER.d_ff,
)


# tui-bench:begin model theano
class Net:
    """The network as Theano expressions over shared variables (the trainable parameters)."""

    def __init__(
        self, model: str, shape, classes: int, dropout: float, vocab: int, seed: int, dims=None
    ):
        # shape: the data's input shape; dims: the gpt's (adapters.models.gpt_dims), else None
        self.model, self.classes, self.dropout, self.dims = model, classes, dropout, dims
        self.rng = np.random.RandomState(seed)
        self.noise = MRG_RandomStreams(self.rng.randint(1, 2**30))  # dropout masks (seed > 0)
        self.params: list[Any] = []
        self.layers: list[tuple[str, tuple[Any, ...]]] = []
        # tui-bench:end model
        if model == "cnn":
            # tui-bench:begin model theano cnn
            (c1, k1), (c2, k2) = CNN.conv
            flat = flat_features("cnn", shape)
            self._conv(shape[2], c1, k1, "valid")
            self.layers.append(("pool", (CNN.pool,)))
            self._conv(c1, c2, k2, "valid")
            self.layers += [("pool", (CNN.pool,)), ("flatten", ())]
            self._dense(flat, CNN.dense, relu=True)
            self.layers.append(("dropout", ()))
            self._dense(CNN.dense, classes)
            # tui-bench:end model
        elif model == "mlp":
            # tui-bench:begin model theano mlp
            self.layers.append(("flatten", ()))
            self._dense(int(np.prod(shape)), MLP.hidden[0], relu=True)
            self.layers.append(("dropout", ()))
            self._dense(MLP.hidden[0], MLP.hidden[1], relu=True)
            self.layers.append(("dropout", ()))
            self._dense(MLP.hidden[1], classes)
            # tui-bench:end model
        elif model == "vgg16":
            # tui-bench:begin model theano vgg16
            channels = shape[2]
            for width, repeats in VGG16.stages:
                for _ in range(repeats):
                    self._conv(channels, width, VGG16.kernel, "half")
                    channels = width
                self.layers.append(("pool", (VGG16.pool,)))
            flat = flat_features("vgg16", shape)
            self.layers.append(("flatten", ()))
            self._dense(flat, VGG16.dense, relu=True)
            self.layers.append(("dropout", ()))
            self._dense(VGG16.dense, classes)
            # tui-bench:end model
        elif model == "lstm":
            # tui-bench:begin model theano lstm
            table = self._shared(self.rng.uniform(-0.05, 0.05, (vocab, LSTM.embed)).astype(FLOATX))
            kernel = self._shared(glorot_uniform(self.rng, (LSTM.embed, 4 * UNITS)))
            recurrent = self._shared(orthogonal(self.rng, (UNITS, 4 * UNITS)))
            bias = np.zeros(4 * UNITS, FLOATX)
            bias[UNITS : 2 * UNITS] = 1.0  # Keras' unit_forget_bias
            self.layers += [("embed", (table,)), ("lstm", (kernel, recurrent, self._shared(bias)))]
            self._dense(UNITS, 1)
            # tui-bench:end model
        elif model == "transformer":
            # tui-bench:begin model theano transformer
            tokens = self._uniform((vocab, WIDTH))
            self.layers.append(("embed", (tokens, self._uniform((shape[0], WIDTH)))))
            for _ in range(TRANSFORMER.blocks):
                self.layers.append(("encoder", self._encoder_params()))
            self.layers.append(("mean", ()))
            self._dense(WIDTH, 1)
            # tui-bench:end model
        elif model == "gpt":
            # tui-bench:begin model theano gpt
            d = dims.d_model
            # Placeholders of the canonical shapes, in its order: the shared draw sets them all.
            tokens = self._shared(np.zeros((dims.vocab_size, d), FLOATX))
            self.layers.append(
                ("embed", (tokens, self._shared(np.zeros((dims.seq_len, d), FLOATX))))
            )
            for _ in range(dims.layers):
                self.layers.append(("gpt_block", self._gpt_params(dims)))
            # The head is the token table itself (tied): no weight, no bias of its own.
            self.layers.append(("gpt_head", (*self._norm_params(d), tokens)))
            # tui-bench:end model
        else:
            raise ValueError(f"model {model!r} is not defined for theano")

    # tui-bench:begin model theano
    def _shared(self, value: np.ndarray):
        variable = theano.shared(value)
        self.params.append(variable)
        return variable

    # tui-bench:end model
    # tui-bench:begin model theano cnn vgg16
    def _conv(self, cin: int, cout: int, k: int, border: str) -> None:
        kernel = self._shared(glorot_uniform(self.rng, (cout, cin, k, k)))
        self.layers.append(("conv", (kernel, self._shared(np.zeros(cout, FLOATX)), border)))

    # tui-bench:end model
    # tui-bench:begin model theano
    def _dense(self, fan_in: int, fan_out: int, relu: bool = False) -> None:
        kernel = self._shared(glorot_uniform(self.rng, (fan_in, fan_out)))
        self.layers.append(("dense", (kernel, self._shared(np.zeros(fan_out, FLOATX)), relu)))

    def logits(self, x, train: bool):
        """x: NHWC images (float32) or (batch, time) word ids; the logits of the last layer."""
        h = x.dimshuffle(0, 3, 1, 2) if x.ndim == 4 else x  # NHWC (the data's layout) → NCHW
        for kind, args in self.layers:
            # tui-bench:end model
            if kind == "conv":
                # tui-bench:begin model theano cnn vgg16
                kernel, bias, border = args
                h = conv2d(h, kernel, border_mode=border, filter_flip=False)
                h = T.nnet.relu(h + bias.dimshuffle("x", 0, "x", "x"))
                # tui-bench:end model
            elif kind == "pool":
                # tui-bench:begin model theano cnn vgg16
                h = pool_2d(h, ws=args * 2, ignore_border=True, mode="max")
                # tui-bench:end model
            elif kind == "flatten":
                # tui-bench:begin model theano cnn mlp vgg16
                h = h.flatten(2)
                # tui-bench:end model
            elif kind == "dense":
                # tui-bench:begin model theano
                kernel, bias, relu = args
                h = T.dot(h, kernel) + bias
                h = T.nnet.relu(h) if relu else h
                # tui-bench:end model
            elif kind == "dropout" and train and self.dropout > 0:
                # tui-bench:begin model theano cnn mlp vgg16
                keep = 1.0 - self.dropout
                mask = self.noise.binomial(h.shape, p=keep, dtype="float32")
                h = h * mask / np.float32(keep)
                # tui-bench:end model
            elif kind == "embed":
                # tui-bench:begin model theano lstm transformer gpt
                h = args[0][h]  # (batch, time, width)
                # tui-bench:end model
                if len(args) > 1:
                    # tui-bench:begin model theano transformer gpt
                    h = h + args[1]  # learned positions, broadcast over the batch
                    # tui-bench:end model
            elif kind == "encoder":
                # tui-bench:begin model theano transformer
                h = self._encoder(h, train, *args)
                # tui-bench:end model
            elif kind == "gpt_block":
                # tui-bench:begin model theano gpt
                h = self._gpt_block(h, train, *args)
                # tui-bench:end model
            elif kind == "gpt_head":
                # tui-bench:begin model theano gpt
                gamma, beta, tokens = args
                h = T.dot(self._layer_norm(h, gamma, beta, 1e-5), tokens.T)  # (batch, S, V)
                h = h.reshape((-1, tokens.shape[0]))  # one row per position
                # tui-bench:end model
            elif kind == "mean":
                # tui-bench:begin model theano transformer
                h = h.mean(axis=1)
                # tui-bench:end model
            elif kind == "lstm":
                # tui-bench:begin model theano lstm
                h = self._lstm(h, *args)
                # tui-bench:end model
        # tui-bench:begin model theano
        return h.flatten() if self.model in ("lstm", "transformer") else h

    # tui-bench:end model
    # tui-bench:begin model theano lstm
    @staticmethod
    def _lstm(sequence, kernel, recurrent, bias):
        """Keras' LSTM: gates i, f, c, o; sigmoid and tanh; the last step's output."""
        inputs = (T.dot(sequence, kernel) + bias).dimshuffle(1, 0, 2)  # (time, batch, 4·units)

        def step(x_t, h, c):
            z = x_t + T.dot(h, recurrent)
            i, f = T.nnet.sigmoid(z[:, :UNITS]), T.nnet.sigmoid(z[:, UNITS : 2 * UNITS])
            g, o = T.tanh(z[:, 2 * UNITS : 3 * UNITS]), T.nnet.sigmoid(z[:, 3 * UNITS :])
            c = f * c + i * g
            return o * T.tanh(c), c

        zeros = T.zeros((sequence.shape[0], UNITS), dtype="float32")
        (hs, _), _ = theano.scan(step, sequences=inputs, outputs_info=[zeros, zeros])
        return hs[-1]

    # tui-bench:end model
    # tui-bench:begin model theano transformer
    def _uniform(self, shape: tuple[int, int]):
        return self._shared(self.rng.uniform(-0.05, 0.05, shape).astype(FLOATX))

    def _encoder_params(self) -> tuple[Any, ...]:
        """q, k, v, out (width × width + bias), LayerNorm, Dense d_ff, Dense width, LayerNorm."""

        def dense(fan_in: int, fan_out: int) -> list[Any]:
            kernel = self._shared(glorot_uniform(self.rng, (fan_in, fan_out)))
            return [kernel, self._shared(np.zeros(fan_out, FLOATX))]

        def norm() -> list[Any]:
            return [self._shared(np.ones(WIDTH, FLOATX)), self._shared(np.zeros(WIDTH, FLOATX))]

        projections = [p for _ in "qkvo" for p in dense(WIDTH, WIDTH)]
        return tuple(projections + norm() + dense(WIDTH, D_FF) + dense(D_FF, WIDTH) + norm())

    # tui-bench:end model
    # tui-bench:begin model theano transformer gpt
    def _drop(self, h, train: bool):
        if not train or self.dropout <= 0:
            return h
        keep = 1.0 - self.dropout
        return h * self.noise.binomial(h.shape, p=keep, dtype="float32") / np.float32(keep)

    @staticmethod
    def _layer_norm(x, gamma, beta, eps: float = 1e-6):
        mean = x.mean(axis=-1, keepdims=True)
        var = T.sqr(x - mean).mean(axis=-1, keepdims=True)
        return (x - mean) / T.sqrt(var + np.float32(eps)) * gamma + beta

    # tui-bench:end model
    # tui-bench:begin model theano transformer
    def _encoder(self, x, train, wq, bq, wk, bk, wv, bv, wo, bo, g1, b1, w1, c1, w2, c2, g2, b2):
        """Multi-head self-attention from dot and batched_dot (Theano has no attention op)."""
        batch, time = x.shape[0], x.shape[1]

        def split(t):  # (batch, time, width) → (batch·heads, time, head_dim)
            return t.reshape((batch, time, HEADS, -1)).swapaxes(1, 2).reshape((-1, time, HEAD_DIM))

        q, k, v = (split(T.dot(x, w) + b) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        scores = T.batched_dot(q, k.dimshuffle(0, 2, 1)) / np.float32(np.sqrt(HEAD_DIM))
        weights = T.nnet.softmax(scores.reshape((-1, time))).reshape(scores.shape)
        h = T.batched_dot(self._drop(weights, train), v)
        h = h.reshape((batch, HEADS, time, -1)).dimshuffle(0, 2, 1, 3).reshape((batch, time, WIDTH))
        x = self._layer_norm(x + self._drop(T.dot(h, wo) + bo, train), g1, b1)
        f = T.dot(x, w1) + c1
        f = np.float32(0.5) * f * (np.float32(1.0) + T.erf(f / np.float32(np.sqrt(2.0))))
        f = T.dot(f, w2) + c2
        return self._layer_norm(x + self._drop(f, train), g2, b2)

    # tui-bench:end model
    # tui-bench:begin model theano gpt
    def _norm_params(self, d: int) -> list[Any]:
        return [self._shared(np.ones(d, FLOATX)), self._shared(np.zeros(d, FLOATX))]

    def _gpt_params(self, dims: Any) -> tuple[Any, ...]:
        """LN, fused q/k/v (d × 3d + bias), out (d × d + bias), LN, Dense 4d, Dense d."""

        def dense(fan_in: int, fan_out: int) -> list[Any]:
            kernel = self._shared(np.zeros((fan_in, fan_out), FLOATX))
            return [kernel, self._shared(np.zeros(fan_out, FLOATX))]

        d = dims.d_model
        attention = self._norm_params(d) + dense(d, 3 * d) + dense(d, d)
        return tuple(attention + self._norm_params(d) + dense(d, dims.d_ff) + dense(dims.d_ff, d))

    def _gpt_block(self, x, train, g1, b1, wqkv, bqkv, wo, bo, g2, b2, w1, c1, w2, c2):
        """Pre-LN: x + causal attention(LN(x)), x + MLP(LN(x)); LN ε 1e-5, GELU in tanh form."""
        qkv = T.dot(self._layer_norm(x, g1, b1, 1e-5), wqkv) + bqkv
        h = causal_attention(qkv, self.dims, lambda weights: self._drop(weights, train))
        x = x + self._drop(T.dot(h, wo) + bo, train)
        f = gelu_tanh(T.dot(self._layer_norm(x, g2, b2, 1e-5), w1) + c1)
        return x + self._drop(T.dot(f, w2) + c2, train)


# tui-bench:end model


class TheanoBackend(TheanoBase):
    def _inputs(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # The gpt's targets flattened like its logits: one row per position.
        return x, (y.astype(FLOATX) if self.binary else y.reshape(-1))

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The arrays as the compiled function holds them: filtered by its input types."""
        xb, yb = self._inputs(x, y)
        return self.x_var.type.filter(xb), self.y_var.type.filter(yb)

    def build(self, hyper: Hyper, dataset) -> None:
        shape = dataset.shape
        self.binary = binary_head(hyper.model, shape.num_classes)
        if hyper.model in ("transformer", "gpt"):
            self.applied["attention"] = GPT_ATTENTION if hyper.dims else ATTENTION[self.api]
        self.net = Net(
            hyper.model,
            shape.input_shape,
            shape.num_classes,
            hyper.dropout,
            shape.vocab_size,
            hyper.seed,
            hyper.dims,
        )
        load = self._load_shared
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        self.x_var = T.tensor4("x") if shape.kind == "image" else T.imatrix("x")
        self.y_var = T.vector("y") if self.binary else T.lvector("y")
        build_only = getattr(self, "build_only", False)  # the worker's build-only mode
        serve_only = getattr(self, "serve_only", False)  # an inference run: never trains
        if not (build_only or serve_only):  # no training function: it costs minutes cold
            self._compile(hyper)
        if not build_only or serve_only or hyper.model in shared_init.SHARED_MODELS:
            # Inference only (evaluation, and the worker's initial loss of shared weights).
            self.logits_fn = theano.function([self.x_var], self.net.logits(self.x_var, train=False))

    def _load_shared(self, weights: dict[str, np.ndarray]) -> None:
        """The shared draw into the shared variables: ``Net`` holds them in the canonical order
        and (in, out) layout of adapters/shared_init.py (positions: (length, 128))."""
        if len(weights) != len(self.net.params):
            raise ValueError(f"the shared weights and Theano's {self.net.model} do not match")
        for (name, value), variable in zip(weights.items(), self.net.params, strict=True):
            variable.set_value(
                shared_init.checked(name, value, variable.get_value(borrow=True).shape)
            )

    # tui-bench:begin step theano
    def _loss(self, logits):
        if self.binary:  # log(1 + e^z) - z·t: binary cross-entropy from logits
            return T.mean(T.nnet.softplus(logits) - logits * self.y_var)
        return T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), self.y_var))

    def _compile(self, hyper: Hyper) -> None:
        params = self.net.params
        loss = self._loss(self.net.logits(self.x_var, train=True))
        grads = theano.grad(loss, params)
        lr = np.float32(hyper.lr)
        if hyper.optimizer == "adam":
            b1, b2, eps = (np.float32(v) for v in (hyper.beta1, hyper.beta2, hyper.epsilon))
            t = theano.shared(np.float32(0.0))
            t_next = t + np.float32(1.0)
            lr_t = lr * T.sqrt(np.float32(1.0) - b2**t_next) / (np.float32(1.0) - b1**t_next)
            updates = [(t, t_next)]
            for p, g in zip(params, grads, strict=True):
                m = theano.shared(np.zeros_like(p.get_value()))
                v = theano.shared(np.zeros_like(p.get_value()))
                m_next = b1 * m + (np.float32(1.0) - b1) * g
                v_next = b2 * v + (np.float32(1.0) - b2) * T.sqr(g)
                updates += [(m, m_next), (v, v_next)]
                updates.append((p, p - lr_t * m_next / (T.sqrt(v_next) + eps)))
        else:
            updates = [(p, p - lr * g) for p, g in zip(params, grads, strict=True)]
        self.train_fn = theano.function([self.x_var, self.y_var], loss, updates=updates)

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(self.train_fn(*self._inputs(x, y)))

    # tui-bench:end step

    def param_count(self) -> int:
        return int(sum(p.get_value(borrow=True).size for p in self.net.params))

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        def predict(xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
            return logits_loss_correct(self.logits_fn(xb), yb, self.binary)

        return evaluate_in_batches(predict, x, y, batch_size)

    def prepare_inference(self) -> dict[str, Any]:
        # The forward pass compiled at build (the evaluation function: logits with train=False,
        # so no dropout node and no gradient in its graph) serves: its C code exists before the
        # first request, so build_s, not first_request_s, carries Theano's compilation.
        return {
            "path": "compiled theano.function of the forward pass (logits), built at build",
            "mode": "graph built with train=False: no dropout masks, no gradients",
        }

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.logits_fn(x)  # synchronous on the CPU: the numpy logits

    # -- generation (spec mode "generate": adapters/generate.py, adapters/theano/generate.py) --
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        from adapters.theano.generate import from_net

        path = "compiled theano.function prefill and one-token decode step, cache in shared"
        self.generation = from_net(self.net, path + " variables (updates=)")
        return self.generation.prepare(batch, prompt_tokens, new_tokens)

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        return self.generation.generate(prompt, new_tokens, clock)
