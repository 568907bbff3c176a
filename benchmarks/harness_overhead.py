"""Harness overhead for every framework × API: steady-state step time as tui-bench reports it vs a
bare hand-written loop of the same framework, same model (reference CNN), batch, data bytes,
interpreter, thread settings, affinity and input rule (every API, ``fit`` and the
Estimator included, gathers and copies each batch from numpy inside the timed step, with no
prefetch; the bare loops do the same, so the ratio is the harness, not the input path).

Measured alternately (A B, then B A, ...) in one run so machine drift hits both alike; each
measurement is a fresh process. Prints per-API medians, the ratio of medians and the spread of
the per-round ratios (target: ratio <= 1.05 for every API).

    python benchmarks/harness_overhead.py                   # every available framework × API
    python benchmarks/harness_overhead.py --only torch/eager --rounds 5

A bare loop is what a user's own script would do: slice the batch from numpy, hand it to the
framework, forward, backward, update, read the loss; ``perf_counter`` around each step (around each
of ``fit``'s / ``Estimator.train``'s steps, through the framework's own callback or hook).
No events, no sampler, no clock object, no history. It trains on tui-bench's own synthetic-mnist
arrays (loaded by path from adapters/data.py): the same loop runs ~3 % slower on those images than
on uniform noise, so a bare loop on other data would flatter or blame the harness.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HEADER = r"""
import importlib.util, json, os, sys, time
import numpy as np
args = json.loads(sys.argv[1])
here = args["adapters"]
spec = importlib.util.spec_from_file_location(
    "adapters", here + "/__init__.py", submodule_search_locations=[here])
package = importlib.util.module_from_spec(spec)
sys.modules["adapters"] = package
spec.loader.exec_module(package)
from adapters import data
dataset = data.load("synthetic-mnist", train_samples=args["train_samples"], test_samples=1)
x, y = dataset.x_train, dataset.y_train
rng = np.random.default_rng(0)
B, T = args["batch_size"], args["warmup"] + args["steps"]
n = len(x)
batches = [rng.permutation(n)[:B] for _ in range(T)]
times = []
"""

FOOTER = r"""
print(json.dumps({"step_median_s": float(np.median(times[args["warmup"]:]))}))
"""  # in inference mode: the timed requests' p50 (np.median)

KERAS_MODEL = r"""
def cnn(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((28, 28, 1)),
        L.Conv2D(32, 5, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(),
        L.Dense(1024, activation="relu"), L.Dropout(0.25), L.Dense(10)])
"""

TF_SETUP = r"""
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(args["threads"])
tf.config.threading.set_inter_op_parallelism_threads(args["threads"])
"""

TF_LOOP = (
    TF_SETUP
    + KERAS_MODEL
    + r"""
model = cnn(tf.keras)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
opt = tf.keras.optimizers.Adam(1e-3, epsilon=1e-7)
opt.build(model.trainable_variables)
def step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss
if args["api"] == "graph":
    step = tf.function(step)
elif args["api"] == "xla":
    step = tf.function(step, jit_compile=True)
for idx in batches:
    t0 = time.perf_counter()
    float(step(tf.convert_to_tensor(x[idx]), tf.convert_to_tensor(y[idx])))
    times.append(time.perf_counter() - t0)
"""
)

FIT_LOOP = (
    KERAS_MODEL
    + r"""
def fit_input():
    # The same rule as tui-bench's host input: each batch gathered from numpy when fit asks.
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        def gen():
            for idx in batches:
                yield x[idx], y[idx]
        ds = tf.data.Dataset.from_generator(gen, output_signature=(
            tf.TensorSpec((None, 28, 28, 1), tf.float32), tf.TensorSpec((None,), tf.int64)))
        options = tf.data.Options()
        options.autotune.enabled = False
        options.experimental_optimization.inject_prefetch = False
        options.threading.private_threadpool_size = args["threads"]
        options.threading.max_intra_op_parallelism = 1
        return ds.with_options(options)
    class Batches(keras.utils.PyDataset):
        def __init__(self):
            super().__init__(workers=1, use_multiprocessing=False)
        def __len__(self):
            return len(batches)
        def __getitem__(self, i):
            return x[batches[i]], y[batches[i]]
    return Batches()
class Timer(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        self.t0 = time.perf_counter()
    def on_train_batch_end(self, batch, logs=None):
        float(np.asarray(logs["loss"]))
        times.append(time.perf_counter() - self.t0)
model = cnn(keras)
model.compile(optimizer=keras.optimizers.Adam(1e-3, epsilon=1e-7),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              jit_compile=keras.backend.backend() == "jax")
model.fit(fit_input(), epochs=1, verbose=0, callbacks=[Timer()])
"""
)

TF_KERAS = TF_SETUP + "keras = tf.keras\n" + FIT_LOOP

KERAS3_SETUP = r"""
import keras
backend = keras.backend.backend()
if backend == "tensorflow":
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(args["threads"])
elif backend == "torch":
    import torch
    torch.set_num_threads(args["threads"])
"""

KERAS3 = KERAS3_SETUP + FIT_LOOP

ESTIMATOR = (
    TF_SETUP
    + KERAS_MODEL
    + r"""
class Timer(tf.estimator.SessionRunHook):
    def __init__(self, loss):
        self.loss = loss
    def before_run(self, run_context):
        self.t0 = time.perf_counter()
        return tf.estimator.SessionRunArgs(self.loss)
    def after_run(self, run_context, run_values):
        float(run_values.results)
        times.append(time.perf_counter() - self.t0)
def model_fn(features, labels, mode):
    logits = cnn(tf.keras)(features, training=mode == tf.estimator.ModeKeys.TRAIN)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    opt = tf.compat.v1.train.AdamOptimizer(1e-3, epsilon=1e-7)
    train_op = opt.minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[Timer(loss)])
def input_fn():
    ds = tf.data.Dataset.from_generator(lambda: ((x[i], y[i]) for i in batches),
        output_signature=(tf.TensorSpec((None, 28, 28, 1), tf.float32), tf.TensorSpec((None,), tf.int64)))
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    options.threading.private_threadpool_size = args["threads"]
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)
threads = args["threads"]
config = tf.estimator.RunConfig(
    model_dir=tempfile.mkdtemp(), save_checkpoints_steps=10**9, save_checkpoints_secs=None,
    save_summary_steps=0, log_step_count_steps=None,
    session_config=tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                            inter_op_parallelism_threads=threads))
tf.estimator.Estimator(model_fn, config=config).train(input_fn)
"""
).replace("import tensorflow as tf", "import tempfile\nimport tensorflow as tf", 1)

MXNET_GLUON = r"""
import mxnet as mx
from mxnet import autograd, gluon, nd
from mxnet.gluon import nn
net = nn.HybridSequential()
net.add(nn.Conv2D(32, 5, activation="relu"), nn.MaxPool2D(2), nn.Conv2D(64, 3, activation="relu"),
        nn.MaxPool2D(2), nn.Flatten(), nn.Dense(1024, activation="relu"), nn.Dropout(0.25), nn.Dense(10))
net.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3))
if args["api"] == "hybrid":
    net.hybridize(static_alloc=True, static_shape=True)
trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3, "epsilon": 1e-7})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
for idx in batches:
    t0 = time.perf_counter()
    xb = nd.array(x[idx], dtype=np.float32).transpose(axes=(0, 3, 1, 2))
    yb = nd.array(y[idx], dtype=np.float32)
    with autograd.record():
        loss = loss_fn(net(xb), yb)
    loss.backward()
    trainer.step(B)
    float(loss.mean().asscalar())
    times.append(time.perf_counter() - t0)
"""

MXNET_MODULE = r"""
import mxnet as mx
from mxnet import nd
s = mx.sym
h = s.Pooling(s.relu(s.Convolution(s.Variable("data"), kernel=(5, 5), num_filter=32)), kernel=(2, 2), stride=(2, 2), pool_type="max")
h = s.Pooling(s.relu(s.Convolution(h, kernel=(3, 3), num_filter=64)), kernel=(2, 2), stride=(2, 2), pool_type="max")
h = s.Dropout(s.relu(s.FullyConnected(s.flatten(h), num_hidden=1024)), p=0.25)
logits = s.FullyConnected(h, num_hidden=10)
net = s.Group([s.SoftmaxOutput(logits, s.Variable("label")), s.BlockGrad(logits)])
mod = mx.mod.Module(net, label_names=["label"])
mod.bind(data_shapes=[("data", (B, 1, 28, 28))], label_shapes=[("label", (B,))])
mod.init_params(mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3))
mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 1e-3, "epsilon": 1e-7})
for idx in batches:
    t0 = time.perf_counter()
    xb = nd.array(x[idx], dtype=np.float32).transpose(axes=(0, 3, 1, 2))
    yb = nd.array(y[idx], dtype=np.float32)
    mod.forward_backward(mx.io.DataBatch([xb], [yb]))
    mod.update()
    float((-nd.pick(nd.log_softmax(mod.get_outputs()[1]), yb)).mean().asscalar())
    times.append(time.perf_counter() - t0)
"""

TORCH = r"""
import torch
from torch import nn
torch.set_num_threads(args["threads"])
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(1600, 1024), nn.ReLU(), nn.Dropout(0.25), nn.Linear(1024, 10),
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
loss_fn = nn.CrossEntropyLoss()
forward = torch.compile(model) if args["api"] == "compile" else model
model.train()
for idx in batches:
    t0 = time.perf_counter()
    xb = torch.from_numpy(x[idx]).permute(0, 3, 1, 2).contiguous()
    yb = torch.from_numpy(y[idx])
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(forward(xb), yb)
    loss.backward()
    opt.step()
    loss.item()
    times.append(time.perf_counter() - t0)
"""

# Inference (``--mode inference``): the same model in eval mode under torch.inference_mode,
# requests of the test split's bytes in the order tui-bench draws them (the split's epoch-1
# order, consecutive batches wrapping round), each timed alone with perf_counter_ns, p50 of the
# timed ones. No events, no clock object, no history.
TORCH_INFER = r"""
import torch
from torch import nn
torch.set_num_threads(args["threads"])
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(1600, 1024), nn.ReLU(), nn.Dropout(0.25), nn.Linear(1024, 10),
)
model.eval()
forward = torch.compile(model) if args["api"] == "compile" else model
test = data.load("synthetic-mnist", train_samples=args["train_samples"],
                 test_samples=args["test_samples"]).x_test
order = data.epoch_order(len(test), 0, 1)
requests = [np.take(order, np.arange(i * B, (i + 1) * B), mode="wrap") for i in range(T)]
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    with torch.inference_mode():
        forward(torch.from_numpy(xb).permute(0, 3, 1, 2).contiguous())
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""

# JAX: the reference CNN as a Flax NNX module with optax, one nnx.jit step (api flax), or as a pure
# function of a params dict under jax.jit (api jit), as a user of each writes it. Threads: the
# affinity mask (set by this script before the process starts, as the worker pins it).
JAX_MODEL = r"""
import functools
import jax, jax.numpy as jnp, optax
from flax import nnx
# fp32 as the adapter sets it (explicitly, recorded with the run): XLA's matmuls and convolutions
# at full float32, whatever the platform's default
jax.config.update("jax_default_matmul_precision", "float32")
glorot = nnx.initializers.glorot_uniform()
class Cnn(nnx.Module):
    def __init__(self, rngs):
        kw = dict(padding="VALID", kernel_init=glorot, rngs=rngs)
        self.conv1, self.conv2 = nnx.Conv(1, 32, (5, 5), **kw), nnx.Conv(32, 64, (3, 3), **kw)
        self.dense = nnx.Linear(1600, 1024, kernel_init=glorot, rngs=rngs)
        self.drop = nnx.Dropout(0.25, rngs=rngs)
        self.out = nnx.Linear(1024, 10, kernel_init=glorot, rngs=rngs)
    def __call__(self, x):
        x = nnx.max_pool(nnx.relu(self.conv1(x)), (2, 2), strides=(2, 2))
        x = nnx.max_pool(nnx.relu(self.conv2(x)), (2, 2), strides=(2, 2))
        return self.out(self.drop(nnx.relu(self.dense(x.reshape(x.shape[0], -1)))))
device = jax.devices("cpu")[0]
"""

FLAX = (
    JAX_MODEL
    + r"""
model = nnx.jit(lambda: Cnn(nnx.Rngs(params=0, dropout=1)))()
optimizer = nnx.Optimizer(model, optax.adam(1e-3, eps=1e-7), wrt=nnx.Param)
both = (model, optimizer)
nnx.update(both, jax.device_put(nnx.state(both), device))
@nnx.jit
def step(model, optimizer, xb, yb):
    def loss_fn(m):
        return optax.softmax_cross_entropy_with_integer_labels(m(xb), yb).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss
model.train()
for idx in batches:
    t0 = time.perf_counter()
    xb, yb = jax.device_put((x[idx], y[idx]), device)
    float(step(model, optimizer, xb, yb))
    times.append(time.perf_counter() - t0)
"""
)

JAX_PURE = (
    JAX_MODEL
    + r"""
model = nnx.jit(lambda: Cnn(nnx.Rngs(params=0, dropout=1)))()
params = {"/".join(map(str, k)): v for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
params = {k: v[...] for k, v in params.items()}
def apply(p, x, key=None):
    conv = lambda x, n: jax.lax.conv_general_dilated(x, p[n + "/kernel"], (1, 1), "VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC")) + p[n + "/bias"]
    pool = lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = pool(jax.nn.relu(conv(x, "conv1")))
    x = pool(jax.nn.relu(conv(x, "conv2")))
    x = jax.nn.relu(x.reshape(x.shape[0], -1) @ p["dense/kernel"] + p["dense/bias"])
    if key is not None:
        x = jnp.where(jax.random.bernoulli(key, 0.75, x.shape), x / 0.75, 0)
    return x @ p["out/kernel"] + p["out/bias"]
"""
)

JAX_JIT = (
    JAX_PURE
    + r"""
tx = optax.adam(1e-3, eps=1e-7)
def loss_fn(p, key, xb, yb):
    return optax.softmax_cross_entropy_with_integer_labels(apply(p, xb, key), yb).mean()
@functools.partial(jax.jit, donate_argnums=(0, 1))
def step(p, opt_state, key, xb, yb):
    key, sub = jax.random.split(key)
    loss, grads = jax.value_and_grad(loss_fn)(p, sub, xb, yb)
    updates, opt_state = tx.update(grads, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, key, loss
params, opt_state, key = jax.device_put((params, tx.init(params), jax.random.key(1)), device)
for idx in batches:
    t0 = time.perf_counter()
    xb, yb = jax.device_put((x[idx], y[idx]), device)
    params, opt_state, key, loss = step(params, opt_state, key, xb, yb)
    float(loss)
    times.append(time.perf_counter() - t0)
"""
)

REQUESTS_JAX = r"""
test = data.load("synthetic-mnist", train_samples=args["train_samples"],
                 test_samples=args["test_samples"]).x_test
order = data.epoch_order(len(test), 0, 1)
requests = [np.take(order, np.arange(i * B, (i + 1) * B), mode="wrap") for i in range(T)]
"""

JIT_INFER = (
    JAX_PURE
    + REQUESTS_JAX
    + r"""
params = jax.device_put(params, device)
forward = jax.jit(apply)
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    jax.block_until_ready(forward(params, jax.device_put(xb, device)))
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

FLAX_INFER = (
    JAX_MODEL
    + REQUESTS_JAX
    + r"""
model = nnx.jit(lambda: Cnn(nnx.Rngs(params=0, dropout=1)))()
nnx.update(model, jax.device_put(nnx.state(model), device))
model.eval()
forward = nnx.jit(lambda m, x: m(x))
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    jax.block_until_ready(forward(model, jax.device_put(xb, device)))
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

# The same requests for MXNet, Theano, Keras and TensorFlow: the test split in tui-bench's
# order, each request timed alone until its output exists.
REQUESTS = r"""
test = data.load("synthetic-mnist", train_samples=args["train_samples"],
                 test_samples=args["test_samples"]).x_test
order = data.epoch_order(len(test), 0, 1)
requests = [np.take(order, np.arange(i * B, (i + 1) * B), mode="wrap") for i in range(T)]
"""

# Gluon: the block in predict mode (hybridized for ``hybrid``), its output waited for.
MXNET_GLUON_INFER = (
    r"""
import mxnet as mx
from mxnet import autograd, nd
from mxnet.gluon import nn
net = nn.HybridSequential()
net.add(nn.Conv2D(32, 5, activation="relu"), nn.MaxPool2D(2), nn.Conv2D(64, 3, activation="relu"),
        nn.MaxPool2D(2), nn.Flatten(), nn.Dense(1024, activation="relu"), nn.Dropout(0.25), nn.Dense(10))
net.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3))
if args["api"] == "hybrid":
    net.hybridize(static_alloc=True, static_shape=True)
"""
    + REQUESTS
    + r"""
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    with autograd.predict_mode():
        out = net(nd.array(xb, dtype=np.float32).transpose(axes=(0, 3, 1, 2)))
    out.wait_to_read()
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

# The Module as one serves a trained one: the logits bound for_training=False at the request
# shape, forward(is_train=False), the output waited for.
MXNET_MODULE_INFER = (
    r"""
import mxnet as mx
from mxnet import nd
s = mx.sym
h = s.Pooling(s.relu(s.Convolution(s.Variable("data"), kernel=(5, 5), num_filter=32)), kernel=(2, 2), stride=(2, 2), pool_type="max")
h = s.Pooling(s.relu(s.Convolution(h, kernel=(3, 3), num_filter=64)), kernel=(2, 2), stride=(2, 2), pool_type="max")
h = s.Dropout(s.relu(s.FullyConnected(s.flatten(h), num_hidden=1024)), p=0.25)
mod = mx.mod.Module(s.FullyConnected(h, num_hidden=10), label_names=None)
mod.bind(data_shapes=[("data", (B, 1, 28, 28))], for_training=False)
mod.init_params(mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3))
"""
    + REQUESTS
    + r"""
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    mod.forward(mx.io.DataBatch([nd.array(xb, dtype=np.float32).transpose(axes=(0, 3, 1, 2))]),
                is_train=False)
    mod.get_outputs()[0].wait_to_read()
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

# Theano's configuration (the BLAS a convolution links, the compile cache) comes from the
# adapter's import, as any script on this machine needs it; the model and the loop are Theano's.
THEANO_INFER = (
    r"""
from adapters.theano import adapter as theano_adapter  # THEANO_FLAGS, then theano (and Keras 2)
import theano
import theano.tensor as tt  # T is the request count (HEADER)
from theano.tensor.nnet import conv2d
from theano.tensor.signal.pool import pool_2d
rng = np.random.RandomState(0)
def glorot(shape):
    fan_in, fan_out = (shape[1] * np.prod(shape[2:]), shape[0] * np.prod(shape[2:])) if len(shape) == 4 else shape
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return theano.shared(rng.uniform(-limit, limit, shape).astype(np.float32))
def zeros(n):
    return theano.shared(np.zeros(n, np.float32))
if args["api"] == "keras2":
    keras = theano_adapter.keras2.keras
    L = keras.layers
    model = keras.models.Sequential([
        L.InputLayer(input_shape=(28, 28, 1)), L.Conv2D(32, 5, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(),
        L.Dense(1024, activation="relu"), L.Dropout(0.25), L.Dense(10)])
    serve = model.predict_on_batch
else:
    x_var = tt.tensor4("x")
    h = x_var.dimshuffle(0, 3, 1, 2)
    for cin, cout, k in ((1, 32, 5), (32, 64, 3)):
        h = tt.nnet.relu(conv2d(h, glorot((cout, cin, k, k)), border_mode="valid", filter_flip=False)
                        + zeros(cout).dimshuffle("x", 0, "x", "x"))
        h = pool_2d(h, ws=(2, 2), ignore_border=True, mode="max")
    h = tt.nnet.relu(tt.dot(h.flatten(2), glorot((1600, 1024))) + zeros(1024))
    serve = theano.function([x_var], tt.dot(h, glorot((1024, 10))) + zeros(10))  # no dropout: eval
"""
    + REQUESTS
    + r"""
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    serve(xb)
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

# Keras 3 (any backend): the model compiled as fit trains it (jit_compile on for JAX only), then
# served as a user would serve one batch: predict_on_batch (training=False, numpy out: on JAX the
# copy to the host waits for the asynchronous dispatch), each request timed alone.
KERAS3_INFER = (
    KERAS3_SETUP
    + KERAS_MODEL
    + r"""
model = cnn(keras)
model.compile(optimizer=keras.optimizers.Adam(1e-3, epsilon=1e-7),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              jit_compile=backend == "jax")
"""
    + REQUESTS
    + r"""
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    model.predict_on_batch(xb)
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

# TensorFlow's serving paths as a user's script writes them: keras through predict_on_batch
# (numpy in, numpy out), eager calls the model, graph/xla call its forward in tf.function; all
# with training=False.
TF_INFER = (
    TF_SETUP
    + KERAS_MODEL
    + REQUESTS
    + r"""
model = cnn(tf.keras)
if args["api"] == "keras":
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), jit_compile=False)
    serve = model.predict_on_batch
elif args["api"] == "eager":
    serve = lambda xb: model(tf.convert_to_tensor(xb), training=False)
else:
    forward = tf.function(lambda t: model(t, training=False), jit_compile=args["api"] == "xla")
    serve = lambda xb: forward(tf.convert_to_tensor(xb))
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    serve(xb)
    times.append((time.perf_counter_ns() - t0) * 1e-9)
"""
)

# The Estimator served as one open predict() fed a request per next() (a generator dataset over
# a queue): a predict() per request would rebuild the graph and reload the checkpoint each time.
ESTIMATOR_INFER = (
    TF_SETUP
    + KERAS_MODEL
    + REQUESTS
    + r"""
import queue, tempfile
def model_fn(features, labels, mode):
    return tf.estimator.EstimatorSpec(mode, predictions=cnn(tf.keras)(features, training=False))
pending = queue.Queue()
def gen():
    while (xb := pending.get()) is not None:
        yield xb
def input_fn():
    ds = tf.data.Dataset.from_generator(
        gen, output_signature=tf.TensorSpec((None, 28, 28, 1), tf.float32))
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    options.threading.private_threadpool_size = args["threads"]
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)
threads = args["threads"]
config = tf.estimator.RunConfig(model_dir=tempfile.mkdtemp(), session_config=tf.compat.v1.ConfigProto(
    intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads))
served = tf.estimator.Estimator(model_fn, config=config).predict(input_fn, yield_single_examples=False)
for idx in requests:
    xb = test[idx]
    t0 = time.perf_counter_ns()
    pending.put(xb)
    next(served)
    times.append((time.perf_counter_ns() - t0) * 1e-9)
pending.put(None)
served.close()
"""
)

BARE_INFERENCE = {
    ("torch", "eager"): TORCH_INFER,
    ("torch", "compile"): TORCH_INFER,
    ("mxnet", "gluon"): MXNET_GLUON_INFER,
    ("mxnet", "hybrid"): MXNET_GLUON_INFER,
    ("mxnet", "module"): MXNET_MODULE_INFER,
    ("theano", "theano"): THEANO_INFER,
    ("theano", "keras2"): THEANO_INFER,
    ("keras", "tensorflow"): KERAS3_INFER,
    ("keras", "torch"): KERAS3_INFER,
    ("keras", "jax"): KERAS3_INFER,
    ("tensorflow", "keras"): TF_INFER,
    ("tensorflow", "eager"): TF_INFER,
    ("tensorflow", "graph"): TF_INFER,
    ("tensorflow", "xla"): TF_INFER,
    ("tensorflow", "estimator"): ESTIMATOR_INFER,
    ("jax", "flax"): FLAX_INFER,
    ("jax", "jit"): JIT_INFER,
}

BARE = {
    ("torch", "eager"): TORCH,
    ("torch", "compile"): TORCH,
    ("tensorflow", "keras"): TF_KERAS,
    ("tensorflow", "eager"): TF_LOOP,
    ("tensorflow", "graph"): TF_LOOP,
    ("tensorflow", "xla"): TF_LOOP,
    ("tensorflow", "estimator"): ESTIMATOR,
    ("keras", "tensorflow"): KERAS3,
    ("keras", "torch"): KERAS3,
    ("keras", "jax"): KERAS3,
    ("mxnet", "gluon"): MXNET_GLUON,
    ("mxnet", "hybrid"): MXNET_GLUON,
    ("mxnet", "module"): MXNET_MODULE,
    ("jax", "flax"): FLAX,
    ("jax", "jit"): JAX_JIT,
}


def make_spec(framework: str, api: str, args: argparse.Namespace):
    from tui_bench.engine.spec import RunSpec

    if args.mode == "inference":
        return RunSpec(
            framework=framework,
            api=api,
            mode="inference",
            threads=args.threads,
            batch_size=args.batch_size,
            requests=args.steps,
            warmup_steps=args.warmup,
            train_samples=2000,
            test_samples=args.test_samples,
        ).validate()
    return RunSpec(
        framework=framework,
        api=api,
        threads=args.threads,
        batch_size=args.batch_size,
        epochs=1,
        steps_per_epoch=args.steps + args.warmup,
        warmup_steps=args.warmup,
        train_samples=max(args.batch_size * (args.steps + args.warmup) * 5 // 4 + 1, 2000),
        test_samples=args.batch_size,
        timing=args.timing,
        timing_window=args.steps,
    ).validate()


def bare(framework: str, api: str, python: str, args: argparse.Namespace) -> float:
    from tui_bench.engine import catalog
    from tui_bench.engine.runs.worker_launch import worker_environment

    spec = make_spec(framework, api, args)
    env = worker_environment(spec)  # the worker's thread variables, KERAS_BACKEND, CPU hiding
    cpus = None
    if catalog.framework(framework).pins_affinity(api):
        cpus = set(sorted(os.sched_getaffinity(0))[: args.threads])
    payload = json.dumps(
        {
            "threads": args.threads,
            "batch_size": args.batch_size,
            "api": api,
            "warmup": args.warmup,
            "steps": args.steps,
            "adapters": str(REPO / "adapters"),
            "train_samples": spec.train_samples,
            "test_samples": spec.test_samples,
        }
    )
    loops = BARE_INFERENCE if args.mode == "inference" else BARE
    out = subprocess.run(
        [python, "-I", "-c", HEADER + loops[(framework, api)] + FOOTER, payload],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    if out.returncode != 0:
        raise SystemExit(f"bare {framework}/{api} failed: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["step_median_s"]


def harness(framework: str, api: str, runtime, args: argparse.Namespace, home: Path) -> float:
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs.runner import execute

    result = execute(make_spec(framework, api, args), History(home), runtime=runtime)
    if not result.ok:
        raise SystemExit(f"tui-bench {framework}/{api} failed: {result.reason}")
    key = "latency_p50_s" if args.mode == "inference" else "step_median_s"
    return result.summary[key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="framework/api names (default: all available)")
    parser.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 2))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=60, help="steady-state steps per measurement")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="A/B pairs per API")
    parser.add_argument(
        "--timing",
        default="synced",
        choices=("synced", "pipelined"),
        help="tui-bench's timing mode (pipelined: one window of all steady steps, like the bare "
        "loop's one-sync-at-the-end throughput; the bare loop is the same either way)",
    )
    parser.add_argument(
        "--mode",
        default="train",
        choices=("train", "inference", "generate"),
        help="inference: p50 latency of requests (--steps of them, --batch-size each) vs a bare "
        "serving loop of the same framework (every framework × API); generate: decode tokens/s "
        "of the tiny gpt's generation vs a bare cached generation loop (every API that generates)",
    )
    parser.add_argument(
        "--test-samples", type=int, default=1000, help="inference: the split requests draw from"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="generate: the tool's request path (backend.generate + its token clock) and the bare "
        "request alternated request by request in one process a round, on the same prompts: "
        "what the harness adds inside a request without the scatter between processes (APIs "
        "whose bare loop drives the adapter's backend: TensorFlow, JAX, MXNet, Theano)",
    )
    parser.add_argument("--prompt-tokens", type=int, default=64, help="generate: P")
    parser.add_argument("--new-tokens", type=int, default=64, help="generate: N")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tui_bench.engine.machine import runtimes

    if args.mode == "generate":
        generation_main(args)
        return

    loops = BARE_INFERENCE if args.mode == "inference" else BARE
    combos = [tuple(name.split("/", 1)) for name in args.only] if args.only else list(loops)
    rows = []
    digits = 3 if args.mode == "inference" else 1  # sub-ms requests: µs resolution
    what = "p50 of" if args.mode == "inference" else ""
    unit = "requests" if args.mode == "inference" else "steady steps"
    print(
        f"reference CNN, {args.mode}, batch {args.batch_size}, {args.threads} thread(s), {what} "
        f"{args.steps} {unit} after {args.warmup} warm-up, {args.rounds} A/B rounds per API, "
        f"tui-bench timing {args.timing if args.mode == 'train' else 'per request'}; "
        f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    # Resolve runtimes first (from the real data home), then keep this run's history apart.
    found = {combo: runtimes.availability(*combo) for combo in combos}
    with tempfile.TemporaryDirectory() as home:
        for (framework, api), where in found.items():
            if not where.ok:
                print(f"{framework}/{api}: skipped, {where.problem} (fix: {where.fix})")
                continue
            runtime = runtimes.Runtime(where.runtime, where.python, where.source)
            h_runs, b_runs = [], []
            for round_no in range(1, args.rounds + 1):
                order = ("harness", "bare") if round_no % 2 else ("bare", "harness")
                for which in order:
                    if which == "harness":
                        h_runs.append(harness(framework, api, runtime, args, Path(home)))
                    else:
                        b_runs.append(bare(framework, api, where.python, args))
            h, b = statistics.median(h_runs), statistics.median(b_runs)
            per_round = [t / u for t, u in zip(h_runs, b_runs, strict=True)]
            rows.append((f"{framework}/{api}", h, b, min(per_round), max(per_round)))
            runs = " ".join(
                f"{t * 1000:.{digits}f}/{u * 1000:.{digits}f}"
                for t, u in zip(h_runs, b_runs, strict=True)
            )
            print(f"{framework}/{api}: tui-bench/bare ms per round {runs}", flush=True)
    print(f"\n| {'framework/api':<22} | tui-bench ms | bare ms | ratio | per-round ratios |")
    print(f"|{'-' * 24}|-------------:|--------:|------:|-----------------:|")
    for name, h, b, low, high in rows:
        print(
            f"| {name:<22} | {h * 1000:12.{digits + 1}f} | {b * 1000:7.{digits + 1}f} | "
            f"{h / b:5.3f} | "
            f"{low:.3f}–{high:.3f}{'':>5} |"
        )
    if args.mode == "inference":
        for name, h, b, _low, _high in rows:
            print(f"{name}: harness overhead per request {(h - b) * 1e6:+.1f} µs (p50 - p50)")
    print(f"target: ratio of medians <= 1.05 for every API; load now {os.getloadavg()[0]:.2f}")


# -- generation (``--mode generate``, docs/generation.md) ------------------------------------------
# A bare generation loop around the same model and the same cache design: the adapter's own gpt
# module, shared weights and prefill/decode step (``adapters/torch/generate.py``: eager, or
# compiled as the compile API does), driven by a loop a user would write: the prompts of
# tui-bench's order, each token copied to the host as it exists and timed then. No events, no
# clock object, no history, no summary: what differs is the harness alone. decode tokens/s =
# batch × (N − 1) × requests / summed (E2E − TTFT).
TORCH_GENERATE = r"""
import torch
from adapters import models, serve, shared_init
from adapters.torch.adapter import _Gpt, load_gpt_weights
from adapters.torch.generate import TorchGeneration
torch.set_num_threads(args["threads"])
dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
P, N = args["prompt_tokens"], args["new_tokens"]
torch.manual_seed(0)
model = _Gpt(dims, 0.0)
load_gpt_weights(model, shared_init.gpt_weights(0, dims, shared_init.GENERATION_SCALE))
gen = TorchGeneration(model, torch.device("cpu"), args["api"], "fp32")
gen.prepare(B, P, N)
prefill, decode = gen.prefill_fn, gen.decode_fn
test = data.load("synthetic-tokens", test_samples=args["test_samples"],
                 tokens=(dims.seq_len, dims.vocab_size)).x_test
prompts = [test[idx, :P] for idx in serve.request_batches(len(test), B, 0, T)]
ttft, e2e = [], []
with torch.inference_mode():
    for prompt in prompts:
        stamps = []
        t0 = time.perf_counter_ns()
        token = prefill(torch.from_numpy(prompt.astype(np.int64))).clone()
        gen.position.fill_(P)
        for t in range(N):
            if t:
                token = decode(token).clone()
                gen.position += 1
            token.cpu().numpy()
            stamps.append(time.perf_counter_ns())
        ttft.append((stamps[0] - t0) * 1e-9)
        e2e.append((stamps[-1] - t0) * 1e-9)
w = args["warmup"]
decode_s = sum(e2e[w:]) - sum(ttft[w:])
tpot = [(e - t) / (N - 1) for t, e in zip(ttft[w:], e2e[w:])]
print(json.dumps({"decode_tokens_per_s": B * (N - 1) * (T - w) / decode_s,
                  "tpot_p50_s": float(np.median(tpot))}))
"""


# Keras 3 (every backend): the adapter's own built gpt and ``KerasGeneration`` (its compiled
# ``generate_step``, adapters/keras/generate.py), the threads the adapter sets. Its token timing is
# "whole", so each request is timed as tui-bench times it: the prefill as a one-token generation
# (TTFT), then the whole generation (E2E), each call's ids on the host.
KERAS3_GENERATE = r"""
import keras
from adapters import keras_models, models, serve, shared_init
from adapters.keras.adapter import _apply_threads
from adapters.keras.generate import KerasGeneration
api = keras.backend.backend()
_apply_threads(api, args["threads"])
dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
P, N = args["prompt_tokens"], args["new_tokens"]
keras.utils.set_random_seed(0)
with keras.device("cpu"):
    model = keras_models.gpt(keras, dims, 0.0)
    shared_init.load_keras_gpt(model, shared_init.gpt_weights(0, dims, shared_init.GENERATION_SCALE))
    gen = KerasGeneration(model, api, False, "fp32", dims.layers)
    gen.prepare(B, P, N)
test = data.load("synthetic-tokens", test_samples=args["test_samples"],
                 tokens=(dims.seq_len, dims.vocab_size)).x_test
prompts = [test[idx, :P] for idx in serve.request_batches(len(test), B, 0, T)]
ttft, e2e = [], []
with keras.device("cpu"):
    for prompt in prompts:
        t0 = time.perf_counter_ns()
        gen.generate(prompt, 1, None)
        ttft.append((time.perf_counter_ns() - t0) * 1e-9)
        t0 = time.perf_counter_ns()
        gen.generate(prompt, N, None)
        e2e.append((time.perf_counter_ns() - t0) * 1e-9)
w = args["warmup"]
decode_s = sum(e2e[w:]) - sum(ttft[w:])
tpot = [(e - t) / (N - 1) for t, e in zip(ttft[w:], e2e[w:])]
print(json.dumps({"decode_tokens_per_s": B * (N - 1) * (T - w) / decode_s,
                  "tpot_p50_s": float(np.median(tpot))}))
"""
# JAX, MXNet and Theano: the gpt the adapter builds from the generation draw (the build is not
# timed; the worker builds it the same way) and that adapter's own prefill and decode step over its
# static cache (adapters/<framework>/generate.py), driven token by token by the loop a user would
# write around them: each token copied to the host as it exists and timed then, the cache written
# as the adapter writes it. No events, no clock object, no history: the harness is what differs.
ADAPTER_BUILT_GPT = r"""
import importlib
from adapters import backend as contract, models, serve, shared_init
adapter = importlib.import_module("adapters." + args["framework"] + ".adapter")
dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
P, N = args["prompt_tokens"], args["new_tokens"]
tokens = data.load("synthetic-tokens", train_samples=args["train_samples"],
                   test_samples=args["test_samples"], tokens=(dims.seq_len, dims.vocab_size))
backend = adapter.make_backend(args["api"], "cpu", args["threads"])
backend.apply_settings(contract.Settings(precision="fp32"))
backend.serve_only = True
shared_init.for_generation()
backend.build(contract.Hyper("gpt", B, 1e-3, "adam", 0.0, 0, dims=dims), tokens)
facts = backend.prepare_generation(B, P, N)
gen = backend.generation
prompts = [tokens.x_test[idx, :P] for idx in serve.request_batches(len(tokens.x_test), B, 0, T)]
ttft, e2e = [], []
"""
# The adapter-built loops define ``bare_request(prompt) -> (TTFT s, E2E s)``; this drives it.
BARE_REQUESTS = r"""
for prompt in prompts:
    first, last = bare_request(prompt)
    ttft.append(first)
    e2e.append(last)
"""
# ``--in-process``: the tool's own request path (the contract's ``backend.generate`` with the
# worker's TokenClock, timed as adapters/generate.py times it) and the bare request, alternated
# request by request in ONE process on the same prompts: what the harness adds inside a request,
# free of the scatter between processes.
PAIRED_REQUESTS = r"""
from adapters.clock import TokenClock
def tool_request(prompt):
    clock = TokenClock()
    if facts["token_timing"] == "whole":
        t0 = time.perf_counter_ns()
        backend.generate(prompt, 1, clock)
        first = (time.perf_counter_ns() - t0) * 1e-9
        t0 = time.perf_counter_ns()
        backend.generate(prompt, N, clock)
        return first, (time.perf_counter_ns() - t0) * 1e-9
    t0 = time.perf_counter_ns()
    backend.generate(prompt, N, clock)
    return (clock.stamps[0] - t0) * 1e-9, (clock.stamps[-1] - t0) * 1e-9
runs = {"tool": ([], []), "bare": ([], [])}
for i, prompt in enumerate(prompts):
    order = ("tool", "bare") if i % 2 else ("bare", "tool")
    for name in order:
        first, last = (tool_request if name == "tool" else bare_request)(prompt)
        runs[name][0].append(first)
        runs[name][1].append(last)
w = args["warmup"]
out = {}
for name, (ttft, e2e) in runs.items():
    decode_s = sum(e2e[w:]) - sum(ttft[w:])
    tpot = [(e - t) / (N - 1) for t, e in zip(ttft[w:], e2e[w:])]
    out[name] = {"decode_tokens_per_s": B * (N - 1) * (T - w) / decode_s,
                 "tpot_p50_s": float(np.median(tpot))}
print(json.dumps(out))
"""
GENERATE_FOOTER = r"""
w = args["warmup"]
decode_s = sum(e2e[w:]) - sum(ttft[w:])
tpot = [(e - t) / (N - 1) for t, e in zip(ttft[w:], e2e[w:])]
print(json.dumps({"decode_tokens_per_s": B * (N - 1) * (T - w) / decode_s,
                  "tpot_p50_s": float(np.median(tpot))}))
"""
JAX_GENERATE = (
    ADAPTER_BUILT_GPT
    + r"""
import jax
def bare_request(prompt):
    stamps = []
    t0 = time.perf_counter_ns()
    ids = jax.device_put(np.asarray(prompt, dtype=np.int32), gen.device)
    cache, token = gen.prefill_fn(gen.state, gen.cache, ids)
    for t in range(N):
        if t:
            where = jax.device_put(np.int32(P + t - 1), gen.device)
            cache, token = gen.decode_fn(gen.state, cache, token, where)
        np.asarray(token)
        stamps.append(time.perf_counter_ns())
    gen.cache = cache
    return (stamps[0] - t0) * 1e-9, (stamps[-1] - t0) * 1e-9
"""
)
MXNET_GENERATE = (
    ADAPTER_BUILT_GPT
    + r"""
from mxnet import autograd, nd
def bare_request(prompt):
    with autograd.predict_mode():
        stamps = []
        t0 = time.perf_counter_ns()
        token, *kv = gen.prefill(nd.array(prompt, ctx=gen.ctx, dtype=np.float32))
        for cache, new in zip(gen.cache, kv):
            cache[:, :P] = new
        for t in range(N):
            if t:
                pos = P + t - 1
                gen.position[:] = pos
                token, *kv = gen.decode(token, gen.position, *gen.cache)
                for cache, new in zip(gen.cache, kv):
                    cache[:, pos : pos + 1] = new
            token.asnumpy()
            stamps.append(time.perf_counter_ns())
    return (stamps[0] - t0) * 1e-9, (stamps[-1] - t0) * 1e-9
"""
)
THEANO_GENERATE = (
    ADAPTER_BUILT_GPT
    + r"""
def bare_request(prompt):
    stamps = []
    t0 = time.perf_counter_ns()
    token = gen.prefill_fn(np.asarray(prompt, dtype=np.int64))
    stamps.append(time.perf_counter_ns())
    for t in range(1, N):
        token = gen.decode_fn(token)  # a numpy array: on the host as the call returns
        stamps.append(time.perf_counter_ns())
    return (stamps[0] - t0) * 1e-9, (stamps[-1] - t0) * 1e-9
"""
)
# TensorFlow's: the gpt the adapter builds (its threads and settings applied as the worker applies
# them) and its own prefill/decode functions (``adapters/tensorflow/generate.py``: eager,
# tf.function, the keras layers' step, or the whole XLA loop). Per-token APIs copy each token to the
# host (.numpy()) and time it then; xla times, as the tool does, a one-token generation (TTFT) and
# the whole one. (A loop that built the model itself, with tf.config's thread setters only, ran
# 2.4-2.8x slower than the tool on 28 Nov: the bare loop must differ by the harness alone.)
TF_GENERATE = (
    r"""
import tensorflow as tf
"""
    + ADAPTER_BUILT_GPT
    + r"""
def bare_request(prompt):
    with tf.device(gen.device):
        ids = tf.convert_to_tensor(prompt.astype(np.int32))
        if args["api"] == "xla":
            t0 = time.perf_counter_ns()
            gen.whole(ids, tf.constant(1, tf.int32)).numpy()
            first = (time.perf_counter_ns() - t0) * 1e-9
            t0 = time.perf_counter_ns()
            gen.whole(ids, tf.constant(N, tf.int32)).numpy()
            return first, (time.perf_counter_ns() - t0) * 1e-9
        stamps = []
        t0 = time.perf_counter_ns()
        token = gen.prefill_fn(ids)
        for t in range(N):
            if t:
                token = gen.decode_fn(token)
            token.numpy()
            stamps.append(time.perf_counter_ns())
    return (stamps[0] - t0) * 1e-9, (stamps[-1] - t0) * 1e-9
"""
)
# The adapter-built ones: a ``bare_request`` each, driven alone or paired with the tool's request.
BARE_REQUEST = {
    **{("tensorflow", api): TF_GENERATE for api in ("eager", "graph", "keras", "xla")},
    ("jax", "flax"): JAX_GENERATE,
    ("jax", "jit"): JAX_GENERATE,
    ("mxnet", "gluon"): MXNET_GENERATE,
    ("mxnet", "hybrid"): MXNET_GENERATE,
    ("theano", "theano"): THEANO_GENERATE,
}
BARE_GENERATE = {
    ("torch", "eager"): TORCH_GENERATE,
    ("torch", "compile"): TORCH_GENERATE,
    ("keras", "tensorflow"): KERAS3_GENERATE,
    ("keras", "torch"): KERAS3_GENERATE,
    ("keras", "jax"): KERAS3_GENERATE,
    **{combo: body + BARE_REQUESTS + GENERATE_FOOTER for combo, body in BARE_REQUEST.items()},
}

# The header's loading of the adapters package, without its training batches.
GENERATE_HEADER = (
    HEADER.split("dataset = data.load")[0]
    + 'B, T = args["batch_size"], args["warmup"] + args["steps"]\n'
)


def request_figures(got: dict) -> tuple[float, float]:
    """Decode tokens/s and p50 TPOT, from a summary or a bare loop's JSON."""
    return got["decode_tokens_per_s"], got["tpot_p50_s"]


def bare_process(python: str, script: str, payload: str, spec, cpus: set[int] | None) -> dict:
    """One bare generation process (its last stdout line, JSON), in the worker's environment and,
    where the framework pins, on the worker's CPUs."""
    from tui_bench.engine.runs.worker_launch import worker_environment

    out = subprocess.run(
        [python, "-I", "-c", GENERATE_HEADER + script, payload],
        capture_output=True,
        text=True,
        env=worker_environment(spec),
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    if out.returncode != 0:
        raise SystemExit(f"bare {spec.framework}/{spec.api}: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def generation_main(args: argparse.Namespace) -> None:
    """Decode tokens/s of tui-bench's generation run against the bare loop above, alternated,
    each measurement a fresh process; the ratio bare/tui-bench (target >= 0.95 of the bare
    loop's rate: tui-bench / bare >= 0.95) and the per-token overhead (p50 TPOT difference)."""
    from tui_bench.engine import catalog
    from tui_bench.engine.machine import runtimes
    from tui_bench.engine.results.history import History
    from tui_bench.engine.results.stats import median_ci
    from tui_bench.engine.runs.runner import execute
    from tui_bench.engine.spec import RunSpec

    combos = (
        [tuple(n.split("/", 1)) for n in args.only]
        if args.only
        else [
            ("torch", "eager"),
            ("torch", "compile"),
            *(("tensorflow", api) for api in ("eager", "graph", "keras", "xla")),
            ("keras", "tensorflow"),
            ("keras", "torch"),
            ("keras", "jax"),
            ("jax", "flax"),
            ("jax", "jit"),
            ("mxnet", "gluon"),
            ("mxnet", "hybrid"),
            ("theano", "theano"),
        ]
    )
    print(
        f"tiny gpt, generate, batch {args.batch_size}, P {args.prompt_tokens} + N "
        f"{args.new_tokens}, {args.threads} thread(s), {args.steps} timed requests after "
        f"{args.warmup} warm-up, {args.rounds} "
        f"{'processes, tool and bare requests alternated in each,' if args.in_process else 'A/B rounds'}"
        " per API; load "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    rows = []
    with tempfile.TemporaryDirectory() as home:
        for framework, api in combos:
            where = runtimes.availability(framework, api)
            if not where.ok:
                print(f"{framework}/{api}: skipped, {where.problem}")
                continue
            spec = RunSpec(
                framework=framework,
                api=api,
                model="gpt",
                mode="generate",
                threads=args.threads,
                batch_size=args.batch_size,
                requests=args.steps,
                warmup_steps=args.warmup,
                prompt_tokens=args.prompt_tokens,
                new_tokens=args.new_tokens,
                train_samples=100,
                test_samples=args.test_samples,
            ).validate()
            runtime = runtimes.Runtime(where.runtime, where.python, where.source)
            loop = BARE_GENERATE[(framework, api)]
            cpus = None  # the CPUs the worker pins itself to where its framework needs it
            if catalog.framework(framework).pins_affinity(api):
                cpus = set(sorted(os.sched_getaffinity(0))[: args.threads])
            payload = json.dumps(
                {
                    "threads": args.threads,
                    "batch_size": args.batch_size,
                    "framework": framework,
                    "api": api,
                    "warmup": args.warmup,
                    "steps": args.steps,
                    "adapters": str(REPO / "adapters"),
                    "train_samples": 100,
                    "test_samples": args.test_samples,
                    "prompt_tokens": args.prompt_tokens,
                    "new_tokens": args.new_tokens,
                }
            )

            tool, plain = [], []
            if args.in_process and (framework, api) not in BARE_REQUEST:
                print(
                    f"{framework}/{api}: no in-process pair (its bare loop builds its own model, "
                    "not through the adapter's backend)"
                )
                continue
            for round_no in range(1, args.rounds + 1):
                if args.in_process:  # one process a round, the requests alternated in it
                    paired = BARE_REQUEST[(framework, api)] + PAIRED_REQUESTS
                    got = bare_process(where.python, paired, payload, spec, cpus)
                    tool.append(request_figures(got["tool"]))
                    plain.append(request_figures(got["bare"]))
                    continue
                order = ("harness", "bare") if round_no % 2 else ("bare", "harness")
                for which in order:
                    if which == "harness":
                        result = execute(spec, History(Path(home)), runtime=runtime)
                        if not result.ok:
                            raise SystemExit(f"tui-bench {framework}/{api}: {result.reason}")
                        tool.append(request_figures(result.summary))
                        continue
                    plain.append(
                        request_figures(bare_process(where.python, loop, payload, spec, cpus))
                    )
            rates = " ".join(f"{t[0]:.0f}/{u[0]:.0f}" for t, u in zip(tool, plain, strict=True))
            print(
                f"{framework}/{api}: decode tokens/s tui-bench/bare per round {rates}", flush=True
            )
            rows.append((f"{framework}/{api}", tool, plain))
    print(
        "\n| framework/api | tui-bench decode tok/s | bare decode tok/s | ratio | per round "
        "| paired median (95 % CI) | per-token overhead µs |"
    )
    print("|---|---:|---:|---:|---|---|---:|")
    for name, tool, plain in rows:
        t_rate = statistics.median(r for r, _ in tool)
        b_rate = statistics.median(r for r, _ in plain)
        per_round = [t[0] / u[0] for t, u in zip(tool, plain, strict=True)]
        overhead = statistics.median(t for _, t in tool) - statistics.median(t for _, t in plain)
        # Each round's two runs ran back to back: their ratio cancels the drift between rounds,
        # and the median of those ratios gets an order-statistics interval from 6 rounds on.
        interval = median_ci(per_round)
        paired = f"{statistics.median(per_round):.3f}" + (
            f" ({interval[0]:.3f}–{interval[1]:.3f})" if interval else " (CI from 6 rounds)"
        )
        print(
            f"| {name} | {t_rate:.0f} | {b_rate:.0f} | {t_rate / b_rate:.3f} | "
            f"{min(per_round):.3f}–{max(per_round):.3f} | {paired} | {overhead * 1e6:+.1f} |"
        )
    print(f"target: tui-bench / bare decode tokens/s >= 0.95; load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
