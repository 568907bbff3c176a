"""Keras 3 standalone adapter. API = backend: ``tensorflow``, ``torch``, ``jax``.

Same shape as ``adapters/torch``: ``make_backend(api, device, threads)`` returns a ``Backend``;
model and step code sit between ``# tui-bench:begin``/``# tui-bench:end`` markers. Keras picks its
backend at import from ``KERAS_BACKEND``, which the runner sets per API (catalog ``api_env``).
Threads: TensorFlow's variables and setters, torch's setter; JAX only honours the CPU affinity the
worker pinned before import.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from typing import Any

import keras
import numpy as np

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

APIS = ("tensorflow", "torch", "jax")
# Stated per backend, never "auto" (which turns XLA on for TF when a GPU is visible): Keras on TF
# and tensorflow/keras are then the same graph code, and JAX is always jitted.
JIT_COMPILE = {"tensorflow": False, "torch": False, "jax": True}


def _apply_threads(backend: str, threads: int) -> dict[str, Any]:
    """Set the backend's thread count and read back what it will use."""
    if backend == "tensorflow":
        import tensorflow as tf

        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:
            pass  # pools already exist: the environment variables set before import apply
        return {
            "threads_effective": tf.config.threading.get_intra_op_parallelism_threads(),
            "interop_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        }
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        return {
            "threads_effective": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
        }
    # JAX sizes its CPU pools from the affinity mask the worker set before import.
    return {"threads_effective": len(os.sched_getaffinity(0)), "interop_threads": None}


def _gpus(backend: str) -> tuple[int, str]:
    """(visible GPUs, what the installed build is) for the backend."""
    if backend == "tensorflow":
        import tensorflow as tf

        build = "built with CUDA" if tf.test.is_built_with_cuda() else "CPU-only"
        return len(tf.config.list_physical_devices("GPU")), f"tensorflow {tf.__version__} {build}"
    if backend == "torch":
        import torch

        build = "CPU-only" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return found, f"torch {torch.__version__} {build}"
    import jax

    found = len([d for d in jax.devices() if d.platform == "gpu"])
    return found, f"jaxlib {jax.__version__} {'with' if found else 'without'} a GPU plugin"


def resolve_device(backend: str, device: str) -> str:
    if device == "cpu":
        # Plain "cpu": with "cpu:0" the torch backend copies each new variable into a
        # non-Parameter tensor, which breaks Dropout's integer seed state.
        return "cpu"
    index = int(device.split(":")[1]) if ":" in device else 0
    found, build = _gpus(backend)
    if found == 0:
        raise DeviceError(f"keras/{backend} runtime sees 0 GPUs; installed build is {build}")
    if index >= found:
        raise DeviceError(
            f"keras/{backend} runtime sees {found} GPU(s) (gpu:0..gpu:{found - 1}); "
            f"{device} does not exist"
        )
    return f"gpu:{index}"


def build_model(
    model: str,
    input_shape: tuple[int, ...],
    classes: int,
    dropout: float,
    vocab: int,
    dims: Any = None,
) -> keras.Model:
    if model == "gpt":  # its size is the run's (``dims``), not the data's shape
        return keras_models.gpt(keras, dims, dropout)
    return keras_models.build_model(keras, model, input_shape, classes, dropout, vocab)


def flash_resolved(api: str, layer: Any, batch: int, length: int, device: str) -> str:
    """What ``flash_attention`` the attention of ``layer`` (a built MultiHeadAttention) runs with:
    its own flag when set; when None (the default), what Keras' backend decides per call, asked
    of the same check ``ops.dot_product_attention`` makes (a private Keras function: if this Keras
    has none, say so) on q/k/v of the run's shape and compute dtype."""
    flag = getattr(layer, "_flash_attention", None)
    if flag is not None:
        return str(flag)
    if api == "tensorflow":
        return "None → False (Keras' TF backend has no flash path)"
    heads, width = layer._num_heads, layer._key_dim
    dtype = keras.mixed_precision.dtype_policy().compute_dtype
    try:
        if api == "jax":
            import jax.numpy as jnp
            from keras.src.backend.jax.nn import _can_use_flash_attention

            q = jnp.zeros((batch, length, heads, width), dtype)  # Keras/JAX's (B, T, N, H)
            use = _can_use_flash_attention(q, q, q, None)
        else:
            import torch
            from keras.src.backend.torch.nn import _can_use_flash_attention

            where = "cuda" if device.startswith("gpu") else "cpu"
            q = torch.zeros(
                (batch, heads, length, width), dtype=getattr(torch, dtype), device=where
            )
            use = _can_use_flash_attention(q, q, q, None, True)
    except (ImportError, AttributeError, TypeError) as exc:
        return f"None (the backend decides per call; its check could not be asked: {exc})"
    return f"None → {bool(use)} (Keras' {api} backend at batch {batch}, {dtype})"


class _ClockCallback(keras.callbacks.Callback):
    """Times each of ``fit``'s steps. Keras logs the epoch's running mean loss; the batch's own
    loss is recovered from consecutive means (all batches have the same size)."""

    def __init__(self, clock: StepClock, backend: KerasBackend) -> None:
        super().__init__()
        self.clock = clock
        self.backend = backend
        self.seen = 0
        self.mean = 0.0

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.clock.begin()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        # Read by the clock: every step (synced) or once per window (pipelined), in order.
        self.backend.last_output = logs["loss"]
        self.clock.end(keras_models.FitStepLoss(self, logs["loss"]))


class _Batches(keras.utils.PyDataset):
    """``fit``'s input: each batch is gathered when ``fit`` asks for it, inside the timed step,
    from numpy (input="host") or from the device-resident split (input="device"). No worker
    threads, no queue (workers=1, no multiprocessing: Keras then iterates in the step)."""

    def __init__(self, backend: KerasBackend, x: Any, y: Any, batch_indices: list) -> None:
        super().__init__(workers=1, use_multiprocessing=False)
        self.backend, self.x, self.y, self.batch_indices = backend, x, y, batch_indices

    def __len__(self) -> int:
        return len(self.batch_indices)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self.backend.take(self.x, self.y, self.batch_indices[index])


def _tf_host_batches(x: np.ndarray, y: np.ndarray, batch_indices, threads: int, labels) -> Any:
    """Keras on TF turns a PyDataset into tf.data with AUTOTUNE prefetch; use the TF adapter's
    pipeline instead (gather on request, no prefetch, bounded thread pool). Imported here: only
    the TF backend's runtime has TensorFlow."""
    from adapters.tensorflow.adapter import host_batches

    return host_batches(x, y, batch_indices, threads, labels)


def _apply_precision(backend: str, precision: str) -> dict[str, Any]:
    """Strict fp32 (TF32 off) unless tf32 is asked for, in the backend's own switch; a Keras
    mixed policy for amp-fp16 / bf16 (fit wraps the optimizer in a LossScaleOptimizer for
    mixed_float16). Runs before the model is built."""
    tf32 = precision == "tf32"
    out: dict[str, Any] = {"precision": precision}
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)
        out["tf32"] = tf.config.experimental.tensor_float_32_execution_enabled()
    elif backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        out["tf32"] = torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    else:
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")
        out["tf32"] = jax.config.jax_default_matmul_precision
    policy = {"amp-fp16": "mixed_float16", "bf16": "mixed_bfloat16"}.get(precision)
    if policy:
        keras.mixed_precision.set_dtype_policy(policy)
    out["policy"] = keras.mixed_precision.dtype_policy().name
    return out


class KerasBackend(Backend):
    framework = "keras"

    def __init__(self, api: str, device: str, threads: int) -> None:
        active = keras.backend.backend()
        if active != api:
            raise RuntimeError(
                f"keras imported backend {active!r}, not {api!r}: KERAS_BACKEND={api} must be set "
                "before keras is imported"
            )
        self.api = api
        self.thread_count = threads
        self.threads = _apply_threads(api, threads)
        self.device = resolve_device(api, device)
        self.binary = False
        self.settings = Settings()
        self.applied: dict[str, Any] = {}
        self.last_output: Any = None
        self.distributed = False
        self.applied_devices: list[Any] = []

    def setup_parallel(self, parallel: Parallel) -> dict[str, Any]:
        """Keras 3's distribution API (JAX only): DataParallel over N devices of this one process
        (on a CPU, the N host devices XLA_FLAGS asked for). fit splits each global batch."""
        if parallel.workers == 1:
            return {}
        if self.api != "jax":
            raise RuntimeError(
                f"keras/{self.api} has no data-parallel path (keras.distribution is JAX-only)"
            )
        kind = "gpu" if self.device.startswith("gpu") else "cpu"
        devices = keras.distribution.list_devices(kind)
        if len(devices) < parallel.workers:
            raise DeviceError(
                f"keras/jax sees {len(devices)} {kind} device(s); workers {parallel.workers} needs "
                "one each"
            )
        devices = devices[: parallel.workers]
        self.applied_devices = devices
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
        self.distributed = True
        return {
            "engine": "keras.distribution.DataParallel, one process over N JAX devices",
            "devices": [str(d) for d in devices],
        }

    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        self.settings = settings
        gpu = self.device.startswith("gpu")
        autotune = "not applicable on cpu"
        if gpu and self.api == "torch":
            import torch

            torch.backends.cudnn.benchmark = settings.autotune == "on"
            autotune = f"cudnn.benchmark={torch.backends.cudnn.benchmark}"
        elif gpu and self.api == "tensorflow":
            autotune = f"TF_CUDNN_USE_AUTOTUNE={os.environ.get('TF_CUDNN_USE_AUTOTUNE')}"
        elif gpu:
            autotune = f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r} (level 0 = off)"
        self.applied = {
            **_apply_precision(self.api, settings.precision),
            "autotune": autotune,
            "input": settings.input,
            "timing": settings.timing,
            "compile": f"jit_compile={JIT_COMPILE[self.api]}",
            "tf_data_threads": self.thread_count if self.api == "tensorflow" else None,
            **bf16_settings(settings.precision, self.device),
        }
        return self.applied

    def describe(self) -> dict[str, Any]:
        backend_module = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax"}[self.api]
        backend_version = __import__(backend_module).__version__
        return {
            "framework_version": keras.__version__,
            "device": self.device,
            "device_name": self.device,
            **self.threads,
            "extra": {
                "backend": self.api,
                "backend_version": backend_version,
                "jit_compile": getattr(getattr(self, "model", None), "jit_compile", None),
            },
        }

    def build(self, hyper: Hyper, dataset) -> None:
        keras.utils.set_random_seed(hyper.seed)
        shape = dataset.shape
        self.hyper = hyper
        self.binary = binary_head(hyper.model, shape.num_classes)
        with self._place():  # under a distribution: variables replicated on every device
            self.model = build_model(
                hyper.model,
                shape.input_shape,
                shape.num_classes,
                hyper.dropout,
                shape.vocab_size,
                hyper.dims,
            )
            gpt = hyper.model == "gpt"
            loader = shared_init.load_keras_gpt if gpt else shared_init.load_keras
            load = functools.partial(loader, self.model)
            if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
                self.applied["init"] = init
            self._compile(hyper)
        # What Keras resolved, read back from the compiled model.
        self.applied["compile"] = f"jit_compile={self.model.jit_compile}"
        if hyper.model == "transformer":
            self.applied["attention"] = keras_models.attention_kernel(
                self.model, bool(self.model.jit_compile)
            )
        elif gpt:
            layer = self.model.get_layer("block0_attention")
            flash = flash_resolved(
                self.api, layer, hyper.batch_size, hyper.dims.seq_len, self.device
            )
            self.applied["attention"] = keras_models.attention_kernel(
                self.model, bool(self.model.jit_compile), causal=True, flash=flash
            )

    def param_count(self) -> int:
        return int(sum(math.prod(v.shape) for v in self.model.trainable_weights))

    def _index(self) -> int:
        return int(self.device.split(":")[1]) if ":" in self.device else 0

    def sync(self) -> None:
        if self.device.startswith("gpu") and self.api == "torch":
            import torch

            torch.cuda.synchronize(torch.device("cuda", self._index()))  # the run's GPU
        elif self.device.startswith("gpu") and self.api == "tensorflow":
            import tensorflow as tf

            tf.test.experimental.sync_devices()
        elif self.api == "jax" and self.last_output is not None:
            import jax

            # JAX dispatches asynchronously (CPU too). Inside fit the model's variables are
            # not the live state; the last step's loss is an output of the same jitted step.
            # (An inference request needs no wait here: predict_on_batch hands back numpy.)
            jax.block_until_ready(self.last_output)

    def to_device(self, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        with keras.device(self.device):
            return keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(self._labels(y))

    def take(self, x: Any, y: Any, idx: np.ndarray) -> tuple[Any, Any]:
        if isinstance(x, np.ndarray):
            xb, yb = x[idx], self._labels(y[idx])
            if self.api == "jax" and self.device.startswith("gpu"):
                # Keras/JAX starts a batch's copy one step ahead on a GPU; copying here,
                # to completion, keeps one whole gather + copy in every timed step.
                import jax

                xb, yb = jax.block_until_ready(jax.device_put((xb, yb)))
            return xb, yb
        with keras.device(self.device):  # input="device": gather on the device
            where = keras.ops.convert_to_tensor(idx)
            return keras.ops.take(x, where, axis=0), keras.ops.take(y, where, axis=0)

    def memory_stats(self) -> dict[str, Any]:
        if not self.device.startswith("gpu"):
            return {}
        if self.api == "torch":
            import torch

            peak = torch.cuda.max_memory_allocated(torch.device("cuda", self._index()))
            label = "torch caching allocator, max_memory_allocated"
        elif self.api == "tensorflow":
            import tensorflow as tf

            peak = tf.config.experimental.get_memory_info(f"GPU:{self._index()}")["peak"]
            label = "TF BFC allocator, get_memory_info peak"
        else:
            import jax

            gpus = [d for d in jax.devices() if d.platform == "gpu"]
            stats = gpus[self._index()].memory_stats() or {}
            peak = stats.get("peak_bytes_in_use")
            label = "XLA allocator, memory_stats peak_bytes_in_use"
        if peak is None:
            return {}
        return {"allocator_peak_mib": peak / 2**20, "allocator": label}

    def _labels(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.float32).reshape(-1, 1) if self.binary else y

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with keras.device(self.device):
            xt = keras.ops.convert_to_tensor(x)
            yt = keras.ops.convert_to_tensor(self._labels(y))
        return keras.ops.convert_to_numpy(xt), keras.ops.convert_to_numpy(yt)

    # tui-bench:begin step
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
        self.model.compile(optimizer=optimizer, loss=loss, jit_compile=JIT_COMPILE[self.api])

    def train_epoch(self, x, y, batch_indices, clock: StepClock) -> None:
        if self.api == "tensorflow":
            batches = _tf_host_batches(x, y, batch_indices, self.thread_count, self._labels)
        else:
            batches = _Batches(self, x, y, batch_indices)
        with self._place():
            # shuffle=False: fit's default shuffles a PyDataset's batches with Python's random,
            # and every framework must see the batches in the order data.batches drew them.
            self.model.fit(
                batches,
                epochs=1,
                shuffle=False,
                verbose=0,
                callbacks=[_ClockCallback(clock, self)],
            )

    # tui-bench:end step

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        total_loss, correct = 0.0, 0
        with self._place():
            for start in range(0, len(x), batch_size):
                logits = self._predict(x[start : start + batch_size])
                # The gpt's (batch, S, V): one row of logits per position, as its targets.
                loss, right = logits_loss_correct(
                    logits.reshape(-1, logits.shape[-1]), y[start : start + batch_size], self.binary
                )
                total_loss, correct = total_loss + loss, correct + right
        n = max(y.size, 1)  # per target: one per sample, or one per position (the gpt)
        return total_loss / n, correct / n

    # -- inference (docs/inference.md) -----------------------------------------------------
    def prepare_inference(self) -> dict[str, Any]:
        # Serving: Keras's own one-batch predict path, predict_on_batch, through the model's
        # predict function as compile() resolved jit_compile for training: TF → tf.function
        # (XLA off), torch → eager under torch.no_grad(), JAX → jax.jit'd stateless predict_step.
        # predict_step calls the model with training=False (dropout off). Built here; its first
        # call (a warm-up request) traces or compiles, later requests reuse it.
        self.model.make_predict_function()
        jit = bool(self.model.jit_compile)
        path = {
            "tensorflow": "tf.function (XLA on)" if jit else "tf.function (XLA off)",
            "torch": "torch.compile" if jit else "eager torch",
            "jax": "jax.jit (XLA)" if jit else "eager jax",
        }[self.api]
        grads = {
            "tensorflow": "no gradient tape",
            "torch": "torch.no_grad()",
            "jax": "stateless_call, no grad transform",
        }[self.api]
        return {
            "path": f"Keras predict_on_batch → make_predict_function: {path}, "
            f"jit_compile={self.model.jit_compile}",
            "mode": f"predict_step: model(x, training=False), {grads}",
            # predict_on_batch returns numpy: the outputs' copy to the host (and, on JAX, the
            # wait for its asynchronous dispatch) is inside each request.
            "outputs": "host numpy, copied inside the request",
            "policy": keras.mixed_precision.dtype_policy().name,
        }

    def predict(self, x: np.ndarray) -> np.ndarray:
        with self._place():
            return self.model.predict_on_batch(x)

    # -- generation (spec mode "generate": adapters/generate.py, adapters/keras/generate.py) --
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        from adapters.keras.generate import KerasGeneration

        self.generation = KerasGeneration(
            self.model,
            self.api,
            self.device.startswith("gpu"),
            self.settings.precision,
            self.hyper.dims.layers,
        )
        with self._place():
            return self.generation.prepare(batch, prompt_tokens, new_tokens)

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        with self._place():
            return self.generation.generate(prompt, new_tokens, clock)

    def _place(self) -> Any:
        """Under a distribution its layouts place the work; otherwise the run's device."""
        return contextlib.nullcontext() if self.distributed else keras.device(self.device)

    def _predict(self, xb: np.ndarray) -> np.ndarray:
        """Logits of a batch; under DataParallel a batch must split evenly over the devices, so a
        short last batch is padded with its own rows and the padding's logits dropped."""
        devices = len(self.applied_devices) if self.distributed else 1
        pad = -len(xb) % devices
        padded = np.concatenate([xb, xb[:1].repeat(pad, axis=0)]) if pad else xb
        return np.asarray(self.model.predict_on_batch(padded))[: len(xb)]


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"keras adapter has no API {api!r} (choose: {', '.join(APIS)})")
    return KerasBackend(api, device, threads)
