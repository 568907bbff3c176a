"""What training a sized model (the gpt) needs in memory, estimated from its shape before any
process starts, and whether it fits this machine: "does gpt2-medium fit at batch 16 here".

The estimate, in fp32 bytes (4 per number; a bf16 run keeps fp32 weights and some activations in
16 bits, so for it this is an upper bound):

- parameter state: weights + gradients + the optimizer's slots (Adam: 2) = 4·(2 + slots)·N;
- activations kept for the backward pass, per token: per block 16·d (the two LayerNorms' inputs
  and outputs, q/k/v, the attention output, the feed-forward's 4d input to GELU and its 4d output)
  plus heads·S (the attention probabilities, kept by the math kernel; fused kernels keep only a
  log-sum-exp per head, so this is an upper bound), then 2·V for the head (the logits and their
  softmax) and 2·d for the final LayerNorm. Activations = 4·tokens·(L·(16d + heads·S) + 2V + 2d),
  tokens = batch × S.

An inference run (``mode`` inference) keeps no gradients, no optimizer state and no activations
for a backward pass: the weights (4·N) and, per token, what one forward pass holds at its widest:
the logits and their softmax (2·V), one block's activations (16·d) and one layer's attention
probabilities (heads·S): 4·tokens·(2V + 16d + heads·S).

The framework's own workspace, its allocator's caching and the interpreter are not in it: a
request refused by this estimate cannot fit, one it passes may still not. Only the CPU is checked
here (psutil's available memory); on a GPU the worker reports the device's memory once it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui_bench.engine.model_manifest import GptDims
from tui_bench.engine.spec import RunSpec

BYTES = 4  # fp32
OPTIMIZER_SLOTS = {"adam": 2, "sgd": 0}
FORMULA = (
    "4 B × (N·(2 + optimizer slots) + batch·S·(L·(16d + heads·S) + 2V + 2d)): weights, gradients, "
    "optimizer state and the activations kept for backward, fp32"
)
INFERENCE_FORMULA = (
    "4 B × (N + batch·S·(2V + 16d + heads·S)): the weights and one forward pass's widest "
    "activations, fp32"
)


def formula(spec: RunSpec) -> str:
    """The estimate's formula for the spec's mode, as a sentence can quote it."""
    return INFERENCE_FORMULA if spec.mode == "inference" else FORMULA


@dataclass(frozen=True)
class Estimate:
    """Bytes a training step of this spec keeps, by part."""

    state_bytes: int  # weights + gradients + optimizer slots (inference: the weights)
    activation_bytes: int
    state_name: str = "parameters + optimizer state"

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.activation_bytes

    def text(self) -> str:
        gib = 2**30
        return (
            f"{self.total_bytes / gib:.2f} GiB ({self.state_name} "
            f"{self.state_bytes / gib:.2f} GiB, activations {self.activation_bytes / gib:.2f} GiB)"
        )


def gpt_estimate(dims: GptDims, batch: int, optimizer: str) -> Estimate:
    """The estimate above for one worker's batch of ``batch`` sequences."""
    copies = 2 + OPTIMIZER_SLOTS.get(optimizer, 0)
    d, seq = dims.d_model, dims.seq_len
    per_token = dims.layers * (16 * d + dims.heads * seq) + 2 * dims.vocab_size + 2 * d
    return Estimate(
        state_bytes=BYTES * copies * dims.parameters,
        activation_bytes=BYTES * batch * seq * per_token,
    )


def gpt_inference_estimate(dims: GptDims, batch: int) -> Estimate:
    """An inference run's estimate (above) for one request of ``batch`` sequences."""
    seq = dims.seq_len
    per_token = 2 * dims.vocab_size + 16 * dims.d_model + dims.heads * seq
    return Estimate(
        state_bytes=BYTES * dims.parameters,
        activation_bytes=BYTES * batch * seq * per_token,
        state_name="weights",
    )


def worker_batch(spec: RunSpec) -> int:
    """The batch one worker holds: the spec's, or its share of it under strong scaling."""
    return spec.batch_size // spec.workers if spec.scaling == "strong" else spec.batch_size


def estimate(spec: RunSpec, batch: int | None = None) -> Estimate | None:
    """The spec's estimate per worker (at a worker batch of ``batch``: default the spec's),
    or None for a model without one (the fixed-shape models, far below any machine's memory)."""
    dims = spec.model_dims()
    if dims is None:
        return None
    per_worker = worker_batch(spec) if batch is None else batch
    if spec.mode == "inference":
        return gpt_inference_estimate(dims, per_worker)
    return gpt_estimate(dims, per_worker, spec.optimizer)


def largest_batch(spec: RunSpec, available: int) -> int | None:
    """The largest batch (as the spec counts it: per worker under weak scaling, global under
    strong) whose estimate fits ``available`` bytes with every worker's copy on this machine;
    0 when not even one sample fits, None for a model without an estimate. The estimate is
    linear in the batch: state + batch × one sample's activations."""
    one = estimate(spec, 1)
    if one is None:
        return None
    per_worker = available // max(1, spec.workers)
    room = per_worker - one.state_bytes
    if room < one.activation_bytes:
        return 0
    fits = min(room // one.activation_bytes, 65536)
    return fits * spec.workers if spec.scaling == "strong" else fits


def available_bytes() -> int:
    """This machine's available memory (psutil: what can be given to a process without swapping)."""
    import psutil

    return int(psutil.virtual_memory().available)


def memory_problem(spec: RunSpec, available: int | None = None) -> str | None:
    """One line when the spec's training cannot fit this machine's available memory (CPU runs;
    ``available`` defaults to psutil's), else None."""
    found = estimate(spec)
    if found is None or spec.device != "cpu":
        return None
    free = available_bytes() if available is None else available
    workers = max(1, spec.workers)  # each worker holds its own copy on this one machine
    if found.total_bytes * workers <= free:
        return None
    many = f" × {workers} workers" if workers > 1 else ""
    largest = largest_batch(spec, free)
    choose = (
        f"the largest batch that fits is {largest}"
        if largest
        else "no batch fits: choose a smaller size or --seq-len"
    )
    return (
        f"{spec.model_label()} at batch {spec.batch_size} needs about {found.text()}{many}; this "
        f"machine has {free / 2**30:.2f} GiB available (estimate: {formula(spec)}): {choose}"
    )
