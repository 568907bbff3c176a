"""TensorFlow adapter. APIs: ``keras`` (Keras ``fit`` on TF), ``eager`` (custom GradientTape loop,
no ``tf.function``), ``graph`` (the same step in ``tf.function``), ``xla``
(``tf.function(jit_compile=True)``), ``estimator`` (``tf.estimator`` with a custom ``model_fn``;
TF <= 2.15 only, so it runs in the ``tf-legacy`` runtime).

Same shape as ``adapters/torch``: ``make_backend(api, device, threads)`` returns a ``Backend``;
model and step code sit between ``# tui-bench:begin``/``# tui-bench:end`` markers (a marker naming
APIs applies to those APIs only). The worker has set ``TF_NUM_INTRAOP_THREADS`` and
``TF_NUM_INTEROP_THREADS`` before import; the setters below run before the first op.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import queue
import shutil
import tempfile
import time
from typing import Any

import numpy as np
import tensorflow as tf

from adapters import keras_models, shared_init
from adapters.backend import (
    Backend,
    DeviceError,
    Hyper,
    Parallel,
    Settings,
    logits_loss_correct,
)
from adapters.clock import StepClock

# tui-bench:uses ../keras_models.py
from adapters.data import binary_head
from adapters.precision import bf16_settings

APIS = ("keras", "eager", "graph", "xla", "estimator")

# How each API serves (spec mode "inference"): the named path, and how eval mode is ensured.
SERVING = {
    "keras": (
        "Keras predict_on_batch (the model's compiled predict_function, tf.function)",
        "predict_step: model(x, training=False); no GradientTape",
    ),
    "eager": ("eager model call", "model(x, training=False); no GradientTape"),
    "graph": ("tf.function forward", "model(x, training=False) traced; no GradientTape"),
    "xla": (
        "tf.function(jit_compile=True) forward (XLA)",
        "model(x, training=False) traced; no GradientTape",
    ),
}


def _apply_threads(threads: int) -> None:
    """TF reads its pools' sizes at the first op; afterwards the setters raise RuntimeError."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass  # already initialised: the environment variables set before import still apply


def apply_precision(settings: Settings) -> dict[str, Any]:
    """TF32 off unless asked for (TF turns it on by default on Ampere/Hopper); a Keras mixed
    policy for amp-fp16 / bf16. Must run before the model is built."""
    tf.config.experimental.enable_tensor_float_32_execution(settings.precision == "tf32")
    policy = {"amp-fp16": "mixed_float16", "bf16": "mixed_bfloat16"}.get(settings.precision)
    if policy:
        tf.keras.mixed_precision.set_global_policy(policy)
    return {
        "precision": settings.precision,
        "tf32": tf.config.experimental.tensor_float_32_execution_enabled(),
        "policy": tf.keras.mixed_precision.global_policy().name,
    }


def autotune_readback(gpu: bool) -> str:
    if not gpu:
        return "not applicable on cpu"
    return f"TF_CUDNN_USE_AUTOTUNE={os.environ.get('TF_CUDNN_USE_AUTOTUNE', 'unset (on)')}"


def host_batches(x: np.ndarray, y: np.ndarray, batch_indices, threads: int, labels) -> Any:
    """A tf.data pipeline that gathers each batch from numpy when the step asks for it: no
    prefetch (neither explicit nor injected), no autotuned parallelism, its private thread pool
    bounded by the run's thread count. The gather and copy stay inside the timed step."""

    def batches():
        for idx in batch_indices:
            yield x[idx], labels(y[idx])

    first = labels(y[batch_indices[0][:1]])
    dataset = tf.data.Dataset.from_generator(
        batches,
        output_signature=(
            tf.TensorSpec((None, *x.shape[1:]), tf.as_dtype(x.dtype)),
            tf.TensorSpec((None, *first.shape[1:]), tf.as_dtype(first.dtype)),
        ),
    )
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    options.threading.private_threadpool_size = threads
    options.threading.max_intra_op_parallelism = 1
    return dataset.with_options(options)


def resolve_device(device: str) -> str:
    if device == "cpu":
        return "/CPU:0"
    index = int(device.split(":")[1]) if ":" in device else 0
    found = len(tf.config.list_physical_devices("GPU"))
    if found == 0:
        build = "built with CUDA" if tf.test.is_built_with_cuda() else "CPU-only"
        raise DeviceError(
            f"tensorflow runtime sees 0 GPUs; installed build {tf.__version__} is {build}"
        )
    if index >= found:
        raise DeviceError(
            f"tensorflow runtime sees {found} GPU(s) (gpu:0..gpu:{found - 1}); {device} does not exist"
        )
    return f"/GPU:{index}"


def build_model(
    model: str,
    input_shape: tuple[int, ...],
    classes: int,
    dropout: float,
    vocab: int,
    dims: Any = None,
) -> tf.keras.Model:
    if model == "gpt":  # its size is the run's (``dims``), not the data's shape
        return keras_models.gpt(tf.keras, dims, dropout)
    return keras_models.build_model(tf.keras, model, input_shape, classes, dropout, vocab)


def _loader(model_name: str):
    """The shared draw's loader for a Keras model (the gpt's or the transformer's)."""
    return shared_init.load_keras_gpt if model_name == "gpt" else shared_init.load_keras


def attention(model: Any, model_name: str, xla: bool) -> str | None:
    """The attention kernel a built transformer or gpt runs (None: no attention). tf.keras on
    TF 2.16+ is Keras 3 on its TF backend, which has no flash path; 2.15's (the Estimator's)
    has no ``ops.dot_product_attention`` at all."""
    if model_name == "transformer":
        return keras_models.attention_kernel(model, xla)
    if model_name != "gpt":
        return None
    flash = "None → False (Keras' TF backend has no flash path)"
    if not hasattr(tf.keras, "ops"):
        flash = "not a setting in this Keras"
    return keras_models.attention_kernel(model, xla, causal=True, flash=flash)


# tui-bench:begin step keras eager graph xla
def _loss_fn(binary: bool, reduction: str | None = "sum_over_batch_size"):
    if binary:
        return tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=reduction)
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def _optimizer(hyper: Hyper):
    if hyper.optimizer == "adam":
        return tf.keras.optimizers.Adam(
            learning_rate=hyper.lr,
            beta_1=hyper.beta1,
            beta_2=hyper.beta2,
            epsilon=hyper.epsilon,
        )
    return tf.keras.optimizers.SGD(learning_rate=hyper.lr)


# tui-bench:end step


class _ClockCallback(tf.keras.callbacks.Callback):
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
        # Read by the clock: every step (synced) or once per window (pipelined), in order.
        self.clock.end(keras_models.FitStepLoss(self, logs["loss"]))


class TensorFlowBackend(Backend):
    framework = "tensorflow"

    def __init__(self, api: str, device: str, threads: int) -> None:
        self.api = api
        self.threads = threads
        _apply_threads(threads)
        self.device = resolve_device(device)
        self.binary = False
        self.settings = Settings()
        self.parallel = Parallel()
        self.strategy: Any = None
        self.applied: dict[str, Any] = {}

    def setup_parallel(self, parallel: Parallel) -> dict[str, Any]:
        """One MultiWorkerMirroredStrategy over the ranks in TF_CONFIG (the worker set it before
        TensorFlow was imported); the first collective is part of the set-up, not of a step."""
        self.parallel = parallel
        if parallel.workers == 1:
            return {}
        if self.api not in ("eager", "graph"):
            raise RuntimeError(f"tensorflow/{self.api} has no data-parallel path in tui-bench")
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        self.strategy.reduce("SUM", self.strategy.run(lambda: tf.constant(1.0)), axis=None)
        return {
            "engine": "tf.distribute.MultiWorkerMirroredStrategy (ring all-reduce)",
            "replicas": self.strategy.num_replicas_in_sync,
            "cluster": json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"],
            # TF's gRPC server binds 0.0.0.0 whatever the cluster addresses (grpc_server_lib.cc).
            "listens": "TF gRPC server on 0.0.0.0 at each cluster port; peers talk over 127.0.0.1",
        }

    def gather_step_times(self, times: list[float]) -> list[list[float]]:
        if self.strategy is None:
            return [list(times)]
        local = tf.constant(times, dtype=tf.float64)

        @tf.function
        def gather() -> tf.Tensor:
            return tf.distribute.get_replica_context().all_gather(local, axis=0)

        result = self.strategy.experimental_local_results(self.strategy.run(gather))[0]
        return result.numpy().reshape(self.parallel.workers, len(times)).tolist()

    def _scope(self) -> Any:
        """Variables made under the strategy are mirrored on every worker; else on the device."""
        if self.strategy is not None:
            return self.strategy.scope()
        return tf.device(self.device)

    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        self.settings = settings
        compiles = {
            "keras": "graph (tf.function), XLA off (jit_compile=False)",
            "eager": "no (eager)",
            "graph": "graph (tf.function), XLA off",
            "xla": "XLA (tf.function(jit_compile=True))",
        }[self.api]
        # Recorded in run_started after build, which adds the attention kernel.
        self.applied = {
            **apply_precision(settings),
            "autotune": autotune_readback(self.device.startswith("/GPU")),
            "input": settings.input,
            "timing": settings.timing,
            "compile": compiles,
            "tf_data_threads": self.threads if self.api == "keras" else None,
            **bf16_settings(settings.precision, "gpu" if self.device.startswith("/GPU") else "cpu"),
        }
        return self.applied

    def to_device(self, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        with tf.device(self.device):
            return tf.identity(tf.convert_to_tensor(x)), tf.identity(
                tf.convert_to_tensor(self._labels(y))
            )

    def take(self, x: Any, y: Any, idx: np.ndarray) -> tuple[Any, Any]:
        if isinstance(x, tf.Tensor):  # input="device": gather on the device
            with tf.device(self.device):
                where = tf.convert_to_tensor(idx)
                return tf.gather(x, where), tf.gather(y, where)
        return x[idx], y[idx]

    def loss_value(self, loss: Any) -> float:
        return float(loss.numpy()) if isinstance(loss, tf.Tensor) else float(loss)

    def memory_stats(self) -> dict[str, Any]:
        if not self.device.startswith("/GPU"):
            return {}
        info = tf.config.experimental.get_memory_info(self.device.lstrip("/"))
        return {
            "allocator_peak_mib": info["peak"] / 2**20,
            "allocator": "TF BFC allocator, get_memory_info peak",
        }

    def describe(self) -> dict[str, Any]:
        details = tf.sysconfig.get_build_info()
        gpu = self.device.startswith("/GPU")
        name = "cpu"
        if gpu:
            index = int(self.device.rsplit(":", 1)[1])
            found = tf.config.list_physical_devices("GPU")[index]
            name = tf.config.experimental.get_device_details(found).get("device_name", "gpu")
        return {
            "framework_version": tf.__version__,
            "device": self.device,
            "device_name": name,
            "threads_effective": tf.config.threading.get_intra_op_parallelism_threads(),
            "interop_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "extra": {
                "keras": getattr(tf.keras, "__version__", None),
                "cuda": details.get("cuda_version"),
                "cudnn": details.get("cudnn_version"),
                "env_intra_op": os.environ.get("TF_NUM_INTRAOP_THREADS"),
            },
        }

    def build(self, hyper: Hyper, dataset) -> None:
        tf.keras.utils.set_random_seed(hyper.seed)
        shape = dataset.shape
        self.hyper = hyper
        self.binary = binary_head(hyper.model, shape.num_classes)
        with self._scope():
            self.model = build_model(
                hyper.model,
                shape.input_shape,
                shape.num_classes,
                hyper.dropout,
                shape.vocab_size,
                hyper.dims,
            )
            load = functools.partial(_loader(hyper.model), self.model)
            if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
                self.applied["init"] = init
            self.loss_fn = _loss_fn(self.binary)
            self.optimizer = _optimizer(hyper)
            if self.api == "keras":
                # tui-bench:begin step keras
                self.model.compile(optimizer=self.optimizer, loss=self.loss_fn, jit_compile=False)
                # tui-bench:end step
            else:
                if self.settings.precision == "amp-fp16":
                    # tui-bench:begin step eager graph xla
                    self.optimizer = tf.keras.optimizers.LossScaleOptimizer(self.optimizer)
                    # tui-bench:end step
                self.optimizer.build(self.model.trainable_variables)
        self.step = self._step
        if self.strategy is not None:
            if self.settings.precision == "amp-fp16":
                raise RuntimeError("amp-fp16 loss scaling is not wired into the multi-worker step")
            # Each worker's loss is its shard's sum over the global batch: the optimizer's
            # all-reduce (a sum) then gives the global batch's mean gradient.
            self.loss_fn = _loss_fn(self.binary, reduction=None)
            self.step = self._distributed_step
        if self.api == "graph":
            # tui-bench:begin step graph
            self.step = tf.function(self.step)
            # tui-bench:end step
        elif self.api == "xla":
            # tui-bench:begin step xla
            self.step = tf.function(self._step, jit_compile=True)
            # tui-bench:end step
        self.forward = self.model if self.api == "eager" else tf.function(self.model)
        if kernel := attention(self.model, hyper.model, self.api == "xla"):
            self.applied["attention"] = kernel

    def param_count(self) -> int:
        return int(sum(math.prod(v.shape) for v in self.model.trainable_variables))

    def sync(self) -> None:
        if self.device.startswith("/GPU"):
            tf.test.experimental.sync_devices()

    def _labels(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.float32).reshape(-1, 1) if self.binary else y

    def _tensors(self, x: Any, y: Any) -> tuple[tf.Tensor, tf.Tensor]:
        if isinstance(x, tf.Tensor):
            return x, y  # input="device": already there
        with tf.device(self.device):
            return tf.convert_to_tensor(x), tf.convert_to_tensor(self._labels(y))

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt, yt = self._tensors(x, y)
        return xt.numpy(), yt.numpy()

    # tui-bench:begin step eager graph xla
    def _step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        scaled = hasattr(self.optimizer, "scale_loss")  # amp-fp16: a LossScaleOptimizer
        with tf.GradientTape() as tape:
            logits = tf.cast(self.model(x, training=True), tf.float32)
            loss = self.loss_fn(y, logits)
            target = self.optimizer.scale_loss(loss) if scaled else loss
        variables = self.model.trainable_variables
        grads = tape.gradient(target, variables)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def _replica_step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(self.model(x, training=True), tf.float32)
            per_example = tf.reshape(self.loss_fn(y, logits), [-1])
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=self.hyper.batch_size * self.parallel.workers
            )
        variables = self.model.trainable_variables
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))  # all-reduces
        return tf.reduce_mean(per_example)

    def _distributed_step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        # This rank's shard mean, as torch's DDP rank 0 reports: no extra collective per step.
        result = self.strategy.run(self._replica_step, args=(x, y))
        return self.strategy.experimental_local_results(result)[0]

    def train_step(self, x: Any, y: Any) -> tf.Tensor:
        xt, yt = self._tensors(x, y)
        with contextlib.nullcontext() if self.strategy is not None else tf.device(self.device):
            return self.step(xt, yt)  # read back by the loop (loss_value)

    # tui-bench:end step

    # tui-bench:begin step keras
    def train_epoch(self, x, y, batch_indices, clock: StepClock) -> None:
        if self.api != "keras":
            return super().train_epoch(x, y, batch_indices, clock)
        batches = host_batches(x, y, batch_indices, self.threads, self._labels)
        with tf.device(self.device):
            # shuffle=False: a tf.data input is never reshuffled by fit, but say it (adapters/keras)
            self.model.fit(
                batches, epochs=1, shuffle=False, verbose=0, callbacks=[_ClockCallback(clock)]
            )

    # tui-bench:end step

    def prepare_inference(self) -> dict[str, Any]:
        # Serving: no tape anywhere, training=False at every call (dropout off). keras goes
        # through Keras's own predict path (its predict_function, a tf.function built here, traced
        # at the first request, a warm-up one); graph/xla trace their forward at the first request.
        path, mode = SERVING[self.api]
        if self.api == "keras":
            self.model.make_predict_function()
            self.serve = self.model.predict_on_batch
        elif self.api == "eager":
            self.serve = functools.partial(self.model, training=False)
        else:
            self.serve = tf.function(
                functools.partial(self.model, training=False), jit_compile=self.api == "xla"
            )
        return {"path": path, "mode": mode, "policy": self.applied.get("policy")}

    def predict(self, x: np.ndarray) -> Any:
        with tf.device(self.device):
            if self.api == "keras":
                return self.serve(x)  # predict_on_batch: numpy in, numpy out (copied back)
            return self.serve(tf.convert_to_tensor(x))

    def served_outputs(self, outputs: Any) -> np.ndarray:
        if isinstance(outputs, tf.Tensor):
            outputs = tf.cast(outputs, tf.float32).numpy()
        return np.asarray(outputs, dtype=np.float32)  # bf16 numpy (ml_dtypes) too

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        total_loss, correct = 0.0, 0
        with tf.device(self.device):
            for start in range(0, len(x), batch_size):
                logits = self.forward(tf.convert_to_tensor(x[start : start + batch_size])).numpy()
                # The gpt's (batch, S, V): one row of logits per position, as its targets.
                loss, right = logits_loss_correct(
                    logits.reshape(-1, logits.shape[-1]), y[start : start + batch_size], self.binary
                )
                total_loss, correct = total_loss + loss, correct + right
        n = max(y.size, 1)  # per target: one per sample, or one per position (the gpt)
        return total_loss / n, correct / n

    # -- generation (spec mode "generate": adapters/generate.py, adapters/tensorflow/generate.py)
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        from adapters.tensorflow.generate import TensorFlowGeneration

        self.generation = TensorFlowGeneration(
            self.model, self.api, self.settings.precision, self.device
        )
        return self.generation.prepare(batch, prompt_tokens, new_tokens)

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        return self.generation.generate(prompt, new_tokens, clock)


class _EstimatorClockHook(tf.estimator.SessionRunHook if hasattr(tf, "estimator") else object):
    """Times each ``session.run`` of ``Estimator.train`` (input pipeline included) and reads the
    step's loss in the same run."""

    def __init__(self, clock: StepClock, loss: Any) -> None:
        self.clock = clock
        self.loss = loss

    def before_run(self, run_context: Any) -> Any:
        self.clock.begin()
        return tf.estimator.SessionRunArgs(self.loss)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.clock.end(float(run_values.results))


class EstimatorBackend(Backend):
    """tf.estimator (TF 1.x graph + session under the hood), TF <= 2.15."""

    framework = "tensorflow"

    def __init__(self, device: str, threads: int) -> None:
        if not hasattr(tf, "estimator"):
            raise RuntimeError(
                f"tf.estimator does not exist in TensorFlow {tf.__version__} (removed in 2.16); "
                "run it in the tf-legacy runtime: tui-bench runtime setup tf-legacy"
            )
        self.threads = threads
        _apply_threads(threads)
        self.device = resolve_device(device)
        self.clock: StepClock | None = None
        self.model_dir: str | None = None
        self.session_overhead_s = 0.0
        self.sessions = 0
        self.applied: dict[str, Any] = {}
        self.served: Any = None  # the one open Estimator.predict generator (inference)
        self.requests: queue.Queue = queue.Queue()

    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        self.applied = {
            **apply_precision(settings),
            "autotune": autotune_readback(self.device.startswith("/GPU")),
            "input": settings.input,
            "timing": settings.timing,
            "compile": "graph (TF1 session), XLA off",
            "tf_data_threads": self.threads,
        }
        return self.applied  # build adds the attention kernel before run_started records it

    def run_facts(self) -> dict[str, Any]:
        """Each ``train()`` rebuilds the graph, restores and writes a checkpoint: that time is
        outside every timed step and reported here, apart."""
        return {
            "estimator_sessions": self.sessions,
            "estimator_session_overhead_s": self.session_overhead_s,
        }

    def close(self) -> None:
        if self.served is not None:
            self.requests.put(None)  # ends the request generator, should anything still pull
            self.served.close()  # GeneratorExit in Estimator.predict: its session closes
            self.served = None
        if self.model_dir:
            shutil.rmtree(self.model_dir, ignore_errors=True)
            self.model_dir = None

    def describe(self) -> dict[str, Any]:
        return {
            "framework_version": tf.__version__,
            "device": self.device,
            "device_name": "cpu" if self.device.startswith("/CPU") else self.device,
            # The estimator's sessions get exactly these pools (session_config below).
            "threads_effective": self.threads,
            "interop_threads": self.threads,
            "extra": {"estimator": True, "keras": getattr(tf.keras, "__version__", None)},
        }

    def build(self, hyper: Hyper, dataset) -> None:
        shape = dataset.shape
        self.hyper = hyper
        self.shape = shape
        self.binary = binary_head(hyper.model, shape.num_classes)
        self.x_dtype = dataset.x_train.dtype
        self.model_dir = tempfile.mkdtemp(prefix="tui-bench-estimator-")
        config = tf.estimator.RunConfig(
            model_dir=self.model_dir,
            tf_random_seed=hyper.seed,
            session_config=tf.compat.v1.ConfigProto(
                intra_op_parallelism_threads=self.threads,
                inter_op_parallelism_threads=self.threads,
            ),
            # One checkpoint per train() call (at its end), carrying weights between epochs.
            save_checkpoints_steps=10**9,
            save_checkpoints_secs=None,
            save_summary_steps=0,
            log_step_count_steps=None,
            keep_checkpoint_max=1,
        )
        self.estimator = tf.estimator.Estimator(model_fn=self._model_fn, config=config)
        # model_fn builds at every train() and predict(): the run's size rides with the builder.
        self.build_model = functools.partial(build_model, dims=hyper.dims)
        with tf.Graph().as_default():
            counted = self.build_model(
                hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
            )
            self._params = int(sum(math.prod(v.shape) for v in counted.trainable_variables))
            if kernel := attention(counted, hyper.model, xla=False):
                self.applied["attention"] = kernel
        labels = self._labels(dataset.y_train[:1])
        load = functools.partial(
            self._write_initial_checkpoint, dtype=dataset.x_train.dtype, labels=labels
        )
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init

    def _write_initial_checkpoint(
        self, weights: dict[str, np.ndarray], dtype: np.dtype, labels: np.ndarray
    ) -> None:
        """The Estimator builds its model inside ``model_fn`` on a new graph at every train() and
        predict(), and carries the weights between them in its checkpoint. So the shared initial
        weights go in as the step-0 checkpoint: ``model_fn``'s training graph (the model, Adam's
        slots, the global step) built once here, initialised, the model's weights set, saved in
        the model dir, where the first train() (and a predict() before it) restores them."""
        with tf.Graph().as_default():
            tf.compat.v1.train.get_or_create_global_step()
            features = tf.compat.v1.placeholder(tf.as_dtype(dtype), (None, *self.shape.input_shape))
            # The labels as the input_fn gives them: (batch, 1) floats for the binary models,
            # a class per sample, the gpt's next token per position.
            targets = tf.compat.v1.placeholder(tf.as_dtype(labels.dtype), (None, *labels.shape[1:]))
            self._model_fn(features, targets, tf.estimator.ModeKeys.TRAIN, None)
            threads = self.threads
            config = tf.compat.v1.ConfigProto(
                intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
            )
            with tf.compat.v1.Session(config=config) as session, session.as_default():
                session.run(tf.compat.v1.global_variables_initializer())
                # Keras 2 assigns in this session
                _loader(self.hyper.model)(self._model, weights)
                tf.compat.v1.train.Saver().save(
                    session, os.path.join(self.model_dir, "model.ckpt"), global_step=0
                )

    def param_count(self) -> int:
        return self._params

    def _labels(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.float32).reshape(-1, 1) if self.binary else y

    # tui-bench:begin step estimator
    def _model_fn(self, features, labels, mode, params):
        hyper, shape = self.hyper, self.shape
        with tf.device(self.device):
            model = self.build_model(
                hyper.model, shape.input_shape, shape.num_classes, hyper.dropout, shape.vocab_size
            )
            logits = model(features, training=mode == tf.estimator.ModeKeys.TRAIN)
            self._model = model
            if mode == tf.estimator.ModeKeys.PREDICT:
                return tf.estimator.EstimatorSpec(mode, predictions=logits)
            loss = _loss_fn(self.binary)(labels, logits)
            if hyper.optimizer == "adam":
                optimizer = tf.compat.v1.train.AdamOptimizer(
                    hyper.lr, hyper.beta1, hyper.beta2, hyper.epsilon
                )
            else:
                optimizer = tf.compat.v1.train.GradientDescentOptimizer(hyper.lr)
            train_op = optimizer.minimize(
                loss,
                global_step=tf.compat.v1.train.get_global_step(),
                var_list=model.trainable_variables,
            )
        hooks = [_EstimatorClockHook(self.clock, loss)] if self.clock else []
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=hooks)

    def _input_fn(self, x: np.ndarray, y: np.ndarray, batch_indices: list[np.ndarray]):
        return host_batches(x, y, batch_indices, self.threads, self._labels)

    def train_epoch(self, x, y, batch_indices, clock: StepClock) -> None:
        self.clock = clock
        # Every train() opens a new session on a rebuilt graph: its first step pays for the
        # session's lazy set-up, so it is warm-up, whatever warm-up is left of the run.
        clock.warmup_remaining = max(clock.warmup_remaining, 1)
        steps_before = len(clock.steady_times)
        warmup_before = clock.warmup_s
        t0 = time.perf_counter()
        self.estimator.train(lambda: self._input_fn(x, y, batch_indices))
        wall = time.perf_counter() - t0
        timed = sum(clock.steady_times[steps_before:]) + clock.warmup_s - warmup_before
        self.session_overhead_s += max(0.0, wall - timed)
        self.sessions += 1
        self.clock = None

    # tui-bench:end step

    def prepare_inference(self) -> dict[str, Any]:
        """One Estimator.predict kept open for the whole run, fed one request at a time: its
        input_fn's dataset is a generator whose next element is the next request (a queue the
        request fills). A predict() per request would rebuild the graph and restore the
        checkpoint each time, which is not serving. The graph build, checkpoint restore and
        session start happen at the first next(): the first request, a warm-up one."""

        def requests():
            while (batch := self.requests.get()) is not None:
                yield batch

        def input_fn():
            dataset = tf.data.Dataset.from_generator(
                requests,
                output_signature=tf.TensorSpec(
                    (None, *self.shape.input_shape), tf.as_dtype(self.x_dtype)
                ),
            )
            options = tf.data.Options()  # as host_batches: nothing fetched ahead of a request
            options.autotune.enabled = False
            options.experimental_optimization.inject_prefetch = False
            options.threading.private_threadpool_size = self.threads
            options.threading.max_intra_op_parallelism = 1
            return dataset.with_options(options)

        self.served = self.estimator.predict(input_fn, yield_single_examples=False)
        return {
            "path": "Estimator.predict, one session kept open, a request per next()",
            "mode": "ModeKeys.PREDICT: model(x, training=False), no train_op",
        }

    def predict(self, x: np.ndarray) -> np.ndarray:
        # The request enters the dataset, one session.run (the dataset's next element, the
        # forward) returns its logits to the host.
        self.requests.put(x)
        return next(self.served)

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        spans = [np.arange(s, min(s + batch_size, len(x))) for s in range(0, len(x), batch_size)]
        outputs = self.estimator.predict(
            lambda: self._input_fn(x, y, spans).map(lambda features, labels: features),
            yield_single_examples=False,
        )
        total_loss, correct = 0.0, 0
        for span, logits in zip(spans, outputs, strict=True):
            # The gpt's (batch, S, V): one row of logits per position, as its targets.
            loss, right = logits_loss_correct(
                logits.reshape(-1, logits.shape[-1]), y[span], self.binary
            )
            total_loss, correct = total_loss + loss, correct + right
        n = max(y.size, 1)  # per target: one per sample, or one per position (the gpt)
        return total_loss / n, correct / n


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"tensorflow adapter has no API {api!r} (choose: {', '.join(APIS)})")
    if api == "estimator":
        return EstimatorBackend(device, threads)
    return TensorFlowBackend(api, device, threads)
