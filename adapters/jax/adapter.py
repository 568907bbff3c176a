"""JAX adapter. APIs: ``flax`` (Flax NNX modules, optax, one ``nnx.jit`` train step) and ``jit``
(plain ``jax.jit`` over pure functions of an explicit parameter pytree, as research code writes it).

Same shape as its siblings: ``make_backend(api, device, threads)`` returns a ``Backend``; the model
and the training step sit between ``# tui-bench:begin``/``# tui-bench:end`` markers (the models in
``flax_models.py`` and ``jit_models.py``, named below by ``tui-bench:uses``).

Threads: JAX sizes its CPU pools from the CPU affinity mask, which the worker pinned before this
module imported jax (the manifest asks for it); no thread variable or setter of XLA's takes effect
(FIELD-NOTES), so the effective count is the mask's size. Sync: JAX dispatches asynchronously on a
CPU too; ``sync`` blocks until the last output the harness was handed (a step's loss, whose
computation also wrote the new parameters, or a request's logits) is ready.

Data-parallel (spec ``workers`` > 1): one process over N local devices (N GPUs, or on a CPU the N
host devices ``--xla_force_host_platform_device_count`` makes), with ``jax.sharding``: a 1-D mesh
``data``, the parameters and optimizer state replicated, each global batch split along its first
axis; XLA inserts the gradient all-reduce inside the one compiled step.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import flax
import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import optax
from flax import nnx

from adapters import shared_init
from adapters.backend import Backend, DeviceError, Hyper, Parallel, Settings
from adapters.data import binary_head
from adapters.jax import flax_models, jit_models
from adapters.precision import bf16_settings

# The models each API's user writes live beside this module; their marked lines count here.
# tui-bench:uses flax_models.py
# tui-bench:uses jit_models.py

APIS = ("flax", "jit")
COMPILES = {"flax": "XLA (nnx.jit)", "jit": "XLA (jax.jit)"}


def resolve_device(device: str) -> jax.Device:
    if device == "cpu":
        return jax.devices("cpu")[0]
    index = int(device.split(":")[1]) if ":" in device else 0
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        raise DeviceError(
            f"jax runtime sees 0 GPUs; installed build jaxlib {jaxlib.__version__} has no GPU "
            "plugin (tui-bench runtime setup jax --gpu installs jax[cuda12])"
        )
    if index >= len(gpus):
        raise DeviceError(
            f"jax runtime sees {len(gpus)} GPU(s) (gpu:0..gpu:{len(gpus) - 1}); "
            f"{device} does not exist"
        )
    return gpus[index]


def optimizer(hyper: Hyper) -> optax.GradientTransformation:
    """Adam with the harness's constants (ε added to √v̂, as torch's and Keras'), or plain SGD."""
    # tui-bench:begin step
    if hyper.optimizer == "adam":
        return optax.adam(hyper.lr, b1=hyper.beta1, b2=hyper.beta2, eps=hyper.epsilon)
    return optax.sgd(hyper.lr)
    # tui-bench:end step


# tui-bench:begin step
def mean_loss(logits: jax.Array, y: jax.Array, binary: bool) -> jax.Array:
    logits = logits.astype(jnp.float32)
    if binary:
        return optax.sigmoid_binary_cross_entropy(logits[:, 0], y).mean()
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


# tui-bench:end step


def row_losses(logits: jax.Array, y: jax.Array, binary: bool) -> tuple[jax.Array, jax.Array]:
    """Per-target loss and correctness, in float32 on the device; summed on the host in float64,
    so a whole split's mean does not depend on XLA's order of summation."""
    logits = logits.astype(jnp.float32)
    if binary:
        z = logits[:, 0]
        return optax.sigmoid_binary_cross_entropy(z, y), (z > 0) == (y > 0.5)
    return (
        optax.softmax_cross_entropy_with_integer_labels(logits, y),
        jnp.argmax(logits, axis=1) == y,
    )


# tui-bench:begin step flax
def flax_train_step(binary: bool) -> Any:
    @nnx.jit
    def step(model: nnx.Module, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array) -> jax.Array:
        loss, grads = nnx.value_and_grad(lambda m: mean_loss(m(x), y, binary))(model)
        optimizer.update(model, grads)
        return loss

    return step


# tui-bench:end step


class JaxBackend(Backend):
    framework = "jax"

    def __init__(self, api: str, device: str, threads: int) -> None:
        self.api = api
        self.device = resolve_device(device)
        self.gpu = self.device.platform == "gpu"
        self.threads_requested = threads
        self.binary = self.tokens = False
        self.dtype: Any = None
        self.settings = Settings()
        self.applied: dict[str, Any] = {}
        self.parallel = Parallel()
        self.mesh: Any = None
        self.last: Any = None  # the last output handed to the harness: what sync waits for

    # -- placement ---------------------------------------------------------------------------
    def _batch_sharding(self) -> Any:
        if self.mesh is None:
            return self.device
        return jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec("data"))

    def _replicated(self) -> Any:
        if self.mesh is None:
            return self.device
        return jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())

    def setup_parallel(self, parallel: Parallel) -> dict[str, Any]:
        self.parallel = parallel
        if parallel.workers == 1:
            return {}
        if not parallel.in_process:
            raise RuntimeError(
                "jax runs data-parallel in one process over N local devices; this worker was "
                "launched as one rank of several (the manifest's launcher must be 'devices')"
            )
        kind = "gpu" if self.gpu else "cpu"
        devices = jax.devices(kind)
        if len(devices) < parallel.workers:
            raise DeviceError(
                f"jax sees {len(devices)} {kind} device(s); workers {parallel.workers} needs one "
                "each"
            )
        devices = devices[: parallel.workers]
        self.mesh = jax.sharding.Mesh(np.array(devices), ("data",))
        return {
            "engine": "jax.sharding: one process, a 1-D mesh over N devices, batch split on "
            "'data', parameters replicated, XLA's all-reduce in the compiled step",
            "devices": [str(d) for d in devices],
        }

    # -- settings ----------------------------------------------------------------------------
    def apply_settings(self, settings: Settings) -> dict[str, Any]:
        self.settings = settings
        if settings.precision == "amp-fp16":
            raise RuntimeError(
                "jax/flax: float16 training needs loss scaling, which this adapter does not do "
                "(bf16 needs none)"
            )
        tf32 = settings.precision == "tf32"
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")
        self.dtype = jnp.bfloat16 if settings.precision == "bf16" else None
        autotune = "not applicable on cpu"
        if self.gpu:
            autotune = f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r} (level 0 = off)"
        self.applied = {
            "precision": settings.precision,
            "matmul_precision": jax.config.jax_default_matmul_precision,
            # Keras' name for the same rule: float32 variables, bfloat16 computation.
            "policy": "mixed_bfloat16" if self.dtype is not None else "float32",
            "dtypes": "parameters float32, compute bfloat16, loss float32"
            if self.dtype is not None
            else "float32 throughout",
            "autotune": autotune,
            "input": settings.input,
            "timing": settings.timing,
            "compile": COMPILES[self.api],
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE") if self.gpu else None,
            **bf16_settings(settings.precision, "gpu" if self.gpu else "cpu"),
        }
        return self.applied

    def describe(self) -> dict[str, Any]:
        return {
            "framework_version": jax.__version__,
            "device": f"gpu:{self.device.id}" if self.gpu else "cpu",
            "device_name": getattr(self.device, "device_kind", str(self.device)),
            # JAX's CPU pools are sized from the affinity mask the worker pinned before import.
            "threads_effective": len(os.sched_getaffinity(0)),
            "interop_threads": None,
            "extra": {
                "jaxlib": jaxlib.__version__,
                "flax": flax.__version__,
                "optax": optax.__version__,
                "backend": jax.default_backend(),
                "devices": len(jax.devices()),
            },
        }

    # -- model -------------------------------------------------------------------------------
    def build(self, hyper: Hyper, dataset: Any) -> None:
        shape = dataset.shape
        self.hyper = hyper
        self.binary = binary_head(hyper.model, shape.num_classes)
        self.tokens = shape.kind == "tokens"
        with jax.default_device(self.device):
            if self.api == "flax":
                self._build_flax(hyper, shape)
            else:
                self._build_jit(hyper, shape)
        self.score = jax.jit(functools.partial(row_losses, binary=self.binary))
        if hyper.model in ("transformer", "gpt"):
            self.applied["attention"] = flax_models.attention_kernel(
                hyper.dropout, causal=hyper.model == "gpt"
            )

    def _build_flax(self, hyper: Hyper, shape: Any) -> None:
        # Built inside one compiled function: the initialisers run as one XLA program, not as
        # dozens of small ones compiled op by op.
        create = functools.partial(
            flax_models.build_model,
            hyper.model,
            shape,
            hyper.dropout,
            hyper.dims,
            self.dtype,
            hyper.seed,
        )
        model = nnx.jit(create)()
        load = functools.partial(flax_models.load_shared, model, hyper.model)
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        # tui-bench:begin step flax
        self.optimizer = nnx.Optimizer(model, optimizer(hyper), wrt=nnx.Param)
        self.step = flax_train_step(self.binary)
        # tui-bench:end step
        # Every array committed to the run's device (or replicated over the mesh): an
        # uncommitted one would make the first step's compilation differ from the second's.
        both = (model, self.optimizer)
        nnx.update(both, jax.device_put(nnx.state(both), self._replicated()))
        self.model = model
        self.forward = nnx.jit(lambda m, x: m(x))
        self.training = True

    def _build_jit(self, hyper: Hyper, shape: Any) -> None:
        params, self.apply = jit_models.build_model(
            hyper.model, shape, hyper.dims, self.dtype, hyper.seed
        )
        load = functools.partial(jit_models.load_shared, params)
        if init := shared_init.start(hyper.model, hyper.seed, shape, load, hyper.dims):
            self.applied["init"] = init
        # tui-bench:begin step jit
        tx = optimizer(hyper)
        loss = functools.partial(mean_loss, binary=self.binary)
        self.step = jit_models.train_step(self.apply, tx, hyper.dropout, loss)
        state = (params, tx.init(params), jax.random.key(hyper.seed + 1))
        # tui-bench:end step
        self.params, self.opt_state, self.key = jax.device_put(state, self._replicated())
        self.forward = jax.jit(lambda p, x: self.apply(p, x, None, 0.0))

    def param_count(self) -> int:
        if self.api == "flax":
            leaves = jax.tree_util.tree_leaves(nnx.state(self.model, nnx.Param))
        else:
            leaves = jax.tree_util.tree_leaves(self.params)
        return int(sum(math.prod(leaf.shape) for leaf in leaves))

    def sync(self) -> None:
        if self.last is not None:
            jax.block_until_ready(self.last)

    # -- data --------------------------------------------------------------------------------
    def _labels(self, y: np.ndarray) -> np.ndarray:
        if self.binary:
            return y.astype(np.float32)
        return y.reshape(-1) if self.tokens else y  # the gpt's logits: one row per position

    def _put(self, x: Any, y: Any) -> tuple[jax.Array, jax.Array]:
        if isinstance(x, np.ndarray):
            x, y = jax.device_put((x, self._labels(y)), self._batch_sharding())
        return x, y

    def to_device(self, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        self.last = jax.device_put(
            (x, self._labels(y) if not self.tokens else y), self._replicated()
        )
        return self.last

    def take(self, x: Any, y: Any, idx: np.ndarray) -> tuple[Any, Any]:
        if isinstance(x, np.ndarray):
            return x[idx], y[idx]
        where = jnp.asarray(idx)  # input="device": gather on the device, inside the step
        xb, yb = jnp.take(x, where, axis=0), jnp.take(y, where, axis=0)
        if self.tokens:
            yb = yb.reshape(-1)
        if self.mesh is not None:
            xb, yb = jax.device_put((xb, yb), self._batch_sharding())
        return xb, yb

    def framework_view(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt, yt = self._put(x, y)
        return np.asarray(xt), np.asarray(yt)

    def loss_value(self, loss: Any) -> float:
        return float(loss)

    def memory_stats(self) -> dict[str, Any]:
        if not self.gpu:
            return {}
        peak = (self.device.memory_stats() or {}).get("peak_bytes_in_use")
        if peak is None:
            return {}
        return {"allocator_peak_mib": peak / 2**20, "allocator": "XLA allocator, peak_bytes_in_use"}

    # -- training ----------------------------------------------------------------------------
    def _mode(self, training: bool) -> None:
        if self.api == "flax" and self.training != training:
            self.model.train() if training else self.model.eval()
            self.training = training

    # tui-bench:begin step
    def train_step(self, x: Any, y: Any) -> jax.Array:
        xb, yb = self._put(x, y)
        self._mode(True)
        if self.api == "flax":
            loss = self.step(self.model, self.optimizer, xb, yb)
        else:
            step = self.step(self.params, self.opt_state, self.key, xb, yb)
            self.params, self.opt_state, self.key, loss = step
        self.last = loss
        return loss  # read back by the loop: every step (synced) or per window

    # tui-bench:end step

    def _logits(self, x: Any) -> jax.Array:
        if self.api == "flax":
            return self.forward(self.model, x)
        return self.forward(self.params, x)

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> tuple[float, float]:
        """Per-target losses in float32 on the device, summed in float64 on the host. A short
        last batch is padded with its own first row to the batch's shape (the padding's rows
        dropped), so the forward pass compiles for one shape, not two."""
        self._mode(False)
        total, right = 0.0, 0
        for start in range(0, len(x), batch_size):
            xb, yb = x[start : start + batch_size], y[start : start + batch_size]
            pad = batch_size - len(xb)
            if pad:
                xb = np.concatenate([xb, np.repeat(xb[:1], pad, axis=0)])
                yb = np.concatenate([yb, np.repeat(yb[:1], pad, axis=0)])
            xt, yt = jax.device_put((xb, self._labels(yb)), self._replicated())
            losses, correct = self.score(self._logits(xt), yt)
            kept = (batch_size - pad) * (yb.size // len(yb))  # targets of the real samples
            total += float(np.asarray(losses, dtype=np.float64)[:kept].sum())
            right += int(np.asarray(correct)[:kept].sum())
        n = max(y.size, 1)  # per target: one per sample, or one per position (the gpt)
        return total / n, right / n

    # -- inference (docs/inference.md) -------------------------------------------------------
    def prepare_inference(self) -> dict[str, Any]:
        # Serving: the forward pass alone, compiled (its first call, a warm-up request, traces
        # and compiles), dropout off, no gradient transform; outputs stay on the device.
        self._mode(False)
        path = "nnx.jit forward, model.eval()" if self.api == "flax" else "jax.jit forward"
        return {
            "path": f"{path} (XLA)",
            "mode": "no dropout, no grad transform",
            "policy": self.applied.get("policy"),
        }

    def predict(self, x: np.ndarray) -> jax.Array:
        self.last = self._logits(jax.device_put(x, self._replicated()))
        return self.last

    def served_outputs(self, outputs: Any) -> np.ndarray:
        return np.asarray(outputs, dtype=np.float32)

    # -- generation (spec mode generate: adapters/generate.py's contract) ---------------------
    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
        """The gpt's static-cache prefill and decode step (``adapters/jax/generate.py``), in the
        precision's stored dtype (bf16: weights and cache in bfloat16)."""
        from adapters.jax import generate

        state = self.model if self.api == "flax" else self.params
        self.generation = generate.Generation(
            self.api, state, self.hyper.dims, self.dtype, self._replicated()
        )
        return self.generation.prepare(batch, prompt_tokens, new_tokens)

    def generate(self, prompt: np.ndarray, new_tokens: int, clock: Any) -> np.ndarray:
        ids = self.generation.generate(prompt, new_tokens, clock)
        self.last = self.generation.last
        return ids


def make_backend(api: str, device: str, threads: int) -> Backend:
    if api not in APIS:
        raise ValueError(f"jax adapter has no API {api!r} (choose: {', '.join(APIS)})")
    return JaxBackend(api, device, threads)
