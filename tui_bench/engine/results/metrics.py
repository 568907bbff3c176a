"""Every per-run metric a view names, in one registry: its key, its label, its unit, which way is
better, how it is displayed and what it means. Compare's tables (``tables``), the regress gate
(``regress``), a run's summary in the terminal (``cli/common``), the HTML page's runs table
(``html_report``), the History screen's columns and the trends views all read it; none names a
registered metric's label, unit or direction itself (tests/test_metrics_registry.py holds that).

A new metric is one entry here; ``places`` says where it shows up:

- ``RUN``: a row of the one-run summary (``tui-bench run`` / ``history show``), as
  ``short`` with ``value × scale`` to ``digits`` decimals, its ``note`` in the caption;
- ``CHOICE``: a figure ``compare --metric`` and the Compare screen offer to compare on;
- ``MEDIAN``: compare's summary carries its median per configuration in a column of its own
  (CSV, JSON and the page, not a terminal's width);
- ``PAGE``: a column of the HTML page's runs table, where some run has it.

A key that is not registered (``regress --metric`` takes any numeric figure) is read by its name
(``get``): better higher for accuracies, rates and efficiencies, lower for the rest; seconds
when it ends in ``_s``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

RUN, CHOICE, MEDIAN, PAGE = "run", "choice", "median", "page"


@dataclass(frozen=True)
class Metric:
    key: str
    label: str  # what a table or a page is about: "median step time s (steady state, …)"
    short: str  # a row's or a column's header, in the displayed unit: "step ms median"
    unit: str  # of the stored value: "s", "samples/s", "MiB", "" (a fraction or a count)
    higher_is_better: bool | None  # None: no better way (a count, a setting read back)
    scale: float = 1.0  # displayed value = stored value × scale (s → ms: 1000)
    digits: int = 2  # decimals of the displayed value
    note: str = ""  # what it means, said beside it
    places: frozenset[str] = frozenset()
    column: str = ""  # a narrow column's header (History); ``short`` when empty
    # The key records stored it under before it was renamed: ``record.Run.metric`` reads an old
    # record's figure under the new key (a history is a journal, never rewritten).
    was: str = ""
    # An inference run's figure that stands where a training run's ``stands_for`` does (p50
    # latency for the steady step, inference samples/s for training samples/s): what a view
    # reads of an inference run when it is asked for the training figure (``in_mode``).
    stands_for: str = ""
    # The spec mode whose runs carry it in ``stands_for``'s place (empty: inference).
    mode: str = ""

    @property
    def lower_is_better(self) -> bool:
        return self.higher_is_better is not True

    @property
    def better(self) -> str:
        """'lower is better' / 'higher is better' / '' for a figure with no better way."""
        if self.higher_is_better is None:
            return ""
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def header(self) -> str:
        return self.column or self.short

    @property
    def what(self) -> str:
        """The label without its unit in seconds: a table shows seconds in the unit that reads
        best (ms for a step) and says which in each column's header."""
        if self.unit != "s":
            return self.label
        return re.sub(r" s(?= \(|$)", "", self.label)

    def text(self, value: float | None) -> str:
        """A value as a view shows it: scaled, to ``digits`` decimals; "—" for none."""
        if value is None:
            return "—"
        return f"{value * self.scale:.{self.digits}f}"

    @property
    def shown_unit(self) -> str:
        """The unit of the displayed value (``value × scale``): ms for seconds × 1000, % for a
        fraction × 100, GFLOP for FLOP × 1e-9; else the stored unit."""
        return _SHOWN_UNITS.get((self.unit, self.scale), self.unit)

    def quantity(self, value: float | None) -> str:
        """A value with its unit, as a sentence states it: "12.3 ms", "1,234 samples/s"; "—"
        for none."""
        if value is None:
            return "—"
        unit = self.shown_unit
        number = f"{value * self.scale:,.{self.digits}f}"
        return f"{number}{unit}" if unit == "%" else f"{number} {unit}".rstrip()


def _m(
    key: str,
    label: str,
    short: str,
    unit: str,
    higher: bool | None,
    scale: float = 1.0,
    digits: int = 2,
    note: str = "",
    places: tuple[str, ...] = (RUN,),
    column: str = "",
    was: str = "",
    stands_for: str = "",
    mode: str = "",
) -> Metric:
    return Metric(
        key,
        label,
        short,
        unit,
        higher,
        scale,
        digits,
        note,
        frozenset(places),
        column,
        was,
        stands_for,
        mode,
    )


# In the order a run's summary lists them.
REGISTRY: tuple[Metric, ...] = (
    _m("train_wall_s", "training wall time s (warm-up included)", "train s", "s", False,
       note="wall time of all training steps, warm-up included", places=(RUN, CHOICE)),
    _m("warmup_s", "warm-up time s", "warm-up s", "s", False,
       note="warm-up steps or requests (tracing, compilation), kept out of steady state",
       places=(RUN, CHOICE, MEDIAN)),
    _m("first_step_s", "first step time s", "first step s", "s", False, digits=3),
    _m("step_median_s", "median step time s (steady state, device-synchronised)",
       "step ms median", "s", False, 1000, 1, "steady state, device-synchronised",
       (RUN, CHOICE), column="step ms"),
    _m("step_iqr_s", "IQR of the step time s", "step ms IQR", "s", False, 1000, 1),
    _m("samples_per_s", "training samples/s (steady state)", "samples/s", "samples/s", True,
       digits=0, note="steady state", places=(RUN, CHOICE, MEDIAN)),
    _m("tokens_per_s", "training tokens/s (steady state)", "tokens/s", "tokens/s", True,
       digits=0, note="steady state; samples/s × the gpt's context S",
       places=(RUN, CHOICE, PAGE)),
    # An inference run (spec mode "inference", docs/inference.md): each request timed alone. Not
    # median columns of every comparison: a training comparison's CSV would carry empty ones.
    _m("latency_p50_s", "inference latency p50 s (one request, device-synchronised)",
       "p50 ms", "s", False, 1000, 3, "median request, each timed alone, device-synchronised",
       (RUN, CHOICE, PAGE), stands_for="step_median_s"),
    _m("latency_p90_s", "inference latency p90 s", "p90 ms", "s", False, 1000, 3,
       "a run's latency note says when its requests are too few to bound it", (RUN, CHOICE, PAGE)),
    _m("latency_p99_s", "inference latency p99 s", "p99 ms", "s", False, 1000, 3,
       "a run's latency note says when its requests are too few to bound it", (RUN, CHOICE, PAGE)),
    _m("latency_max_s", "inference latency max s", "max ms", "s", False, 1000, 3),
    _m("latency_mean_s", "inference latency mean s", "mean ms", "s", False, 1000, 3),
    _m("latency_requests", "timed requests behind each percentile", "requests", "", None,
       digits=0, note="after the warm-up requests"),
    _m("inference_samples_per_s", "inference samples/s (timed requests)", "infer samples/s",
       "samples/s", True, digits=0, note="batch × requests / their summed latency",
       places=(RUN, CHOICE, PAGE), stands_for="samples_per_s"),
    _m("first_request_s", "first request time s (tracing, compilation)", "first request s",
       "s", False, digits=3, note="the first warm-up request"),
    _m("flops_per_request", "GFLOP per inference request", "GFLOP/request", "FLOP", None,
       1e-9, 3, "forward FLOPs of one request's batch (engine/flops.py)"),
    # A generation run (spec mode "generate", docs/generation.md): each request timed alone from
    # a synchronised start; TTFT to its first token on the host, E2E to its last, TPOT = (E2E −
    # TTFT) / (N − 1) per request, ITL every gap between tokens (per-token timing only).
    _m("ttft_p50_s", "generation TTFT p50 s (time to the first token on the host)",
       "TTFT p50 ms", "s", False, 1000, 2, "prefill + first token, per request",
       (RUN, CHOICE, PAGE)),
    _m("ttft_p90_s", "generation TTFT p90 s", "TTFT p90 ms", "s", False, 1000, 2),
    _m("ttft_p99_s", "generation TTFT p99 s", "TTFT p99 ms", "s", False, 1000, 2,
       "a run's latency note says when its requests are too few to bound it",
       (RUN, CHOICE, PAGE)),
    _m("tpot_p50_s", "generation TPOT p50 s (time per output token after the first)",
       "TPOT p50 ms", "s", False, 1000, 3, "(E2E − TTFT) / (N − 1) per request",
       (RUN, CHOICE, PAGE), stands_for="step_median_s", mode="generate"),
    _m("tpot_p90_s", "generation TPOT p90 s", "TPOT p90 ms", "s", False, 1000, 3),
    _m("tpot_p99_s", "generation TPOT p99 s", "TPOT p99 ms", "s", False, 1000, 3,
       "a run's latency note says when its requests are too few to bound it",
       (RUN, CHOICE, PAGE)),
    _m("e2e_p50_s", "generation request E2E p50 s (start to the last token)", "E2E p50 ms",
       "s", False, 1000, 2, places=(RUN, CHOICE)),
    _m("e2e_p99_s", "generation request E2E p99 s", "E2E p99 ms", "s", False, 1000, 2),
    _m("itl_p50_s", "generation inter-token latency p50 s", "ITL p50 ms", "s", False, 1000, 3,
       "every gap between two tokens of a request (per-token timing only)"),
    _m("itl_p99_s", "generation inter-token latency p99 s", "ITL p99 ms", "s", False, 1000, 3),
    _m("generate_requests", "timed generation requests behind each percentile", "gen requests",
       "", None, digits=0, note="after the warm-up requests"),
    _m("prefill_tokens_per_s", "prefill tokens/s (batch × P / TTFT)", "prefill tokens/s",
       "tokens/s", True, digits=0, note="batch × prompt tokens × requests / summed TTFT",
       places=(RUN, CHOICE, PAGE)),
    _m("decode_tokens_per_s", "decode tokens/s (batch × (N − 1) / (E2E − TTFT))",
       "decode tokens/s", "tokens/s", True, digits=0,
       note="batch × (N − 1) × requests / summed E2E − TTFT", places=(RUN, CHOICE, PAGE),
       stands_for="samples_per_s", mode="generate"),
    _m("prefill_flops_per_token", "prefill MFLOP per prompt token", "prefill MFLOP/token",
       "FLOP", None, 1e-6, 2, "matmul FLOPs, head on the last position only"),
    _m("prefill_mfu", "prefill MFU", "prefill MFU %", "", True, 100, 1,
       "at the p50 TTFT, of the measured matmul peak", (RUN, PAGE)),
    _m("prefill_mfu_nominal", "prefill MFU of the nominal peak", "prefill MFU % nominal", "",
       True, 100, 1, "of the vendor / ISA peak"),
    _m("decode_bytes_per_step", "bytes read per decode step MB", "MB/decode step", "B", None,
       1e-6, 2, "weights in their stored precision + the whole static KV cache"),
    _m("decode_gbps", "decode GB/s achieved (bytes per step / p50 TPOT)", "decode GB/s", "GB/s",
       True, 1, 2, "at the p50 TPOT", (RUN, CHOICE, PAGE)),
    _m("mbu", "MBU", "MBU %", "", True, 100, 1, "of the measured memory bandwidth", (RUN, PAGE)),
    _m("mbu_nominal", "MBU of the nominal bandwidth", "MBU % nominal", "", True, 100, 1,
       "of the vendor's HBM bandwidth", (RUN, PAGE)),
    _m("val_accuracy", "validation accuracy, last epoch", "val accuracy", "", True, digits=4,
       note="last epoch", places=(RUN, CHOICE)),
    _m("test_s", "test (inference) time s", "test s", "s", False,
       note="inference over the test set", places=(RUN, CHOICE)),
    _m("test_accuracy", "test accuracy", "test accuracy", "", True, digits=4,
       places=(RUN, CHOICE), column="acc"),
    _m("target_reached_s", "training time to the target accuracy s", "to target s", "s", False,
       places=(CHOICE,)),
    _m("threads_effective", "threads, read back from the framework", "threads", "", None,
       digits=0, note="read back from the framework"),
    _m("cores_observed", "cores observed", "cores observed", "", None, digits=1,
       note="steady-state CPU use of the worker (sampler)"),
    _m("busy_threads_observed", "busy threads observed", "busy threads", "", None, digits=1,
       note="OS threads busy ≥ half the time (sampler)"),
    _m("param_count", "trainable parameters", "parameters", "", None, digits=0,
       note="trainable"),
    _m("res_peak_rss_mib", "peak RSS MiB", "peak RSS MiB", "MiB", False, digits=0,
       note="worker process tree", places=(RUN, PAGE)),
    _m("res_mean_cpu_pct", "mean CPU %", "CPU %", "%", None, digits=0,
       note="mean; 100 % = one core"),
    _m("res_mean_gpu_util", "mean GPU util %", "GPU util %", "%", None, digits=0, note="mean",
       places=(RUN, PAGE)),
    _m("res_peak_gpu_mem_mib", "peak GPU memory MiB", "GPU mem MiB", "MiB", False, digits=0,
       note="peak, device-wide (NVML)", places=(RUN, PAGE)),
    _m("allocator_peak_mib", "allocator peak MiB", "allocator MiB", "MiB", False, digits=0,
       note="peak of the framework's own allocator"),
    _m("res_energy_j", "energy J", "energy J", "J", False, digits=0, note="GPU, whole process"),
    _m("res_steady_energy_j", "energy (steady) J", "steady energy J", "J", False, digits=0,
       note="GPU, steady-state windows (NVML counter)", places=(RUN, PAGE)),
    _m("gpu_samples_per_joule", "GPU samples/J", "GPU samples/J", "samples/J", True, digits=1,
       note="steady samples / steady GPU energy (NVML)", places=(RUN, PAGE),
       # until it took the device in its name beside cpu_samples_per_joule (one key a figure)
       was="samples_per_joule"),
    _m("flops_per_step", "GFLOP per training step", "GFLOP/step", "FLOP", None, 1e-9, 3,
       "model FLOPs of a training step (engine/flops.py)"),
    _m("achieved_tflops", "achieved GFLOP/s", "GFLOP/s", "TFLOP/s", True, 1000, 2,
       "steady-state median step (an inference run's: its p50 request)"),
    _m("mfu", "MFU", "MFU %", "", True, 100, 1, "of the measured matmul peak", (RUN, PAGE)),
    _m("mfu_nominal", "MFU of the nominal peak", "MFU % nominal", "", True, 100, 1,
       "of the vendor / ISA peak"),
    _m("cpu_joules_per_step", "CPU J/step", "CPU J/step", "J", False, digits=3,
       note="CPU package, RAPL, device-level"),
    _m("gpu_joules_per_step", "GPU J/step", "GPU J/step", "J", False, digits=3,
       note="GPU board, NVML, device-level"),
)  # fmt: skip

BY_KEY: dict[str, Metric] = {m.key: m for m in REGISTRY}

# A displayed value's unit where the scale changes it: (stored unit, scale) -> shown unit.
_SHOWN_UNITS = {
    ("s", 1000): "ms",
    ("", 100): "%",
    ("FLOP", 1e-9): "GFLOP",
    ("TFLOP/s", 1000): "GFLOP/s",
    ("FLOP", 1e-6): "MFLOP",  # a generation run's prefill FLOPs per token
    ("B", 1e-6): "MB",  # a decode step's bytes
}

# An unregistered key read by its name: larger is better for these, smaller for the rest
# (times, losses, memory).
_HIGHER_BY_NAME = re.compile(r"accuracy|per_s$|per_joule$|throughput|speedup|efficiency")


def get(key: str) -> Metric:
    """The registered metric, or one read off an unregistered key's name."""
    found = BY_KEY.get(key)
    if found is not None:
        return found
    seconds = key.endswith("_s")
    return Metric(
        key,
        key,
        key,
        "s" if seconds else "",
        bool(_HIGHER_BY_NAME.search(key)),
        digits=4 if not seconds else 3,
    )


def renamed() -> dict[str, str]:
    """Each renamed metric's key → the key older records stored it under."""
    return {m.key: m.was for m in REGISTRY if m.was}


def placed(place: str) -> tuple[Metric, ...]:
    """The registered metrics shown in ``place`` (RUN, CHOICE, MEDIAN, PAGE), in order."""
    return tuple(m for m in REGISTRY if place in m.places)


# What a comparison is about unless asked otherwise: the steady step, device-synchronised (an
# inference run's: its median request, ``in_mode``).
COMPARED_BY_DEFAULT = "step_median_s"

INFERENCE = "inference"  # spec mode of a run that serves requests (docs/inference.md)
GENERATE = "generate"  # spec mode of a run that generates tokens (docs/generation.md)


def in_mode(key: str, mode: str | None) -> str:
    """The key a run of ``mode`` carries for the figure ``key`` names: an inference run's
    ``latency_p50_s`` for ``step_median_s``, its ``inference_samples_per_s`` for
    ``samples_per_s``; a generation run's ``tpot_p50_s`` and ``decode_tokens_per_s`` (each
    entry's ``stands_for`` in its ``mode``); any other key as it is."""
    if mode in (INFERENCE, GENERATE):
        for m in REGISTRY:
            if m.stands_for == key and (m.mode or INFERENCE) == mode:
                return m.key
    return key


def throughput(mode: str | None, tokens: bool) -> str:
    """The rate a run states, by key: a language model's tokens/s where it trains (``tokens``:
    the model reads sequences, each sample S tokens), else samples/s in the run's own mode (an
    inference run's served samples/s, a generation run's decode tokens/s); ``samples_per_s``
    stays for every other run."""
    if tokens and mode not in (INFERENCE, GENERATE):
        return "tokens_per_s"
    return in_mode("samples_per_s", mode)


def compared_for(modes: Iterable[str | None]) -> str:
    """What a comparison of runs of these modes is about unless asked otherwise: the steady
    step, or the median request where every run is an inference run."""
    seen = set(modes)
    only = seen.pop() if len(seen) == 1 else None
    return in_mode(COMPARED_BY_DEFAULT, only)


def choices() -> dict[str, Metric]:
    """What ``compare --metric`` and the Compare screen offer, by key: the default first (the
    screen's ``m`` steps on from it), then in the registry's order."""
    offered = {m.key: m for m in placed(CHOICE)}
    return {COMPARED_BY_DEFAULT: offered.pop(COMPARED_BY_DEFAULT), **offered}


def higher_is_better(key: str) -> bool:
    """Which way a metric is better, for a gate that must pick one (no direction: lower)."""
    return get(key).higher_is_better is True
