"""A run as a value: the one reader of a stored history record.

The history keeps each run as a JSON object (``results/journal.py``: a journal of dicts, written by
``runs/runner.py`` and ``runs/fleet.py``). Everything that reads runs back — tables, trends,
regression checks, cards, figures, exports, the TUI and the CLI — goes through ``Run`` instead of
digging into that dict: one place says where a field lives, what a missing or damaged one means,
and which numbers can be used (``Run.metric``). Like pyperf's ``Run``: immutable, typed, built
from what was stored.

``Run.from_record`` never raises. A record is read from a file that may be damaged (a field of the
wrong type, a string where a number belongs, NaN written by an old version): every accessor then
answers "not recorded" (None, an empty mapping) for that field instead of failing, and the rest of
the run stays readable.

``raw`` is the stored dict itself, for the places whose job is the file format (export, import,
the store, a JSON dump). It is not copied: treat it as read-only.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.machine.limits import Limits
from tui_bench.engine.results import metrics

_EMPTY: Mapping[str, Any] = MappingProxyType({})

# A metric's key → the key records stored it under before it was renamed (the registry's
# ``Metric.was``). Old histories are never rewritten (the store is a journal): ``Run.metric``
# reads the old key where the new one is absent.
METRIC_ALIASES: Mapping[str, str] = MappingProxyType(metrics.renamed())


def number(value: Any) -> float | None:
    """THE rule for a usable number: an int or float (not a bool), finite. Anything else — None,
    a string, NaN, ±inf, a list — is "no number" and is left out rather than guessed at."""
    kind = type(value)
    if kind is float:  # the common case first: a list of 10,000 runs reads five each
        return value if math.isfinite(value) else None
    if kind is bool or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return MappingProxyType(value) if isinstance(value, dict) else _EMPTY


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _when(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.astimezone()


@dataclass(frozen=True)
class Reason:
    """One rule a run's stability verdict broke: ``results/stability.py`` writes them
    (``as_dict`` is the stored form), ``Run.reasons`` reads them back (``from_dict``)."""

    rule: str
    value: float | None
    threshold: float | None
    message: str
    level: str = "unreliable"

    def as_dict(self) -> dict[str, Any]:
        value = round(self.value, 4) if isinstance(self.value, float) else self.value
        return {
            "rule": self.rule,
            "value": value,
            "threshold": self.threshold,
            "message": self.message,
            "level": self.level,
        }

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Reason:
        """The reason a stored verdict holds; a damaged field reads as unknown, never raises."""
        return cls(
            rule=str(stored.get("rule") or "?"),
            value=number(stored.get("value")),
            threshold=number(stored.get("threshold")),
            message=str(stored.get("message") or ""),
            level=str(stored.get("level") or "unreliable"),
        )


class Run(NamedTuple):
    """One run of the history, read-only. Build it with ``Run.from_record``.

    A named tuple rather than a frozen dataclass: as immutable, and built three times faster,
    which a list of 10,000 runs (the History screen, ``history list``) feels."""

    raw: Mapping[str, Any]
    id: str
    status: str  # a RunStatus value, or "" when the record has none
    spec: Mapping[str, Any]  # the spec it was asked to run, as stored
    metrics: Mapping[str, Any]  # as stored, for file formats; numbers: ``metric``
    stability: Mapping[str, Any]  # the stored verdict (``stability.Verdict.as_dict``), {} if none

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, status={self.status!r})"

    @classmethod
    def from_record(cls, record: Any) -> Run:
        """The run a stored record describes. Never raises: a record that is not a dict is a run
        with nothing recorded (status "", id "?")."""
        if isinstance(record, Run):
            return record
        raw = record if isinstance(record, dict) else {}
        status = raw.get("status")
        return cls(
            raw,
            str(raw.get("id") or "?"),
            status if isinstance(status, str) else "",
            _mapping(raw.get("spec")),
            _mapping(raw.get("metrics")),
            _mapping(raw.get("stability")),
        )

    # -- what and where ------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.status == RunStatus.FINISHED

    @property
    def failed(self) -> bool:
        return self.status == RunStatus.FAILED

    def spec_value(self, name: str, default: Any = None) -> Any:
        return self.spec.get(name, default)

    @property
    def mode(self) -> str:
        """'train' or 'inference' (the spec's mode; a record from before modes trained)."""
        mode = self.spec.get("mode")
        return mode if isinstance(mode, str) else "train"

    @property
    def label(self) -> str:
        """'torch/eager cnn synthetic-mnist cpu×2': the spec's label as recorded."""
        label = _text(self.raw.get("label"))
        if label:
            return label
        s = self.spec
        return f"{s.get('framework', '?')}/{s.get('api', '?')} {s.get('model', '?')}"

    @property
    def env(self) -> Mapping[str, Any]:
        """The machine fingerprint taken as the run started (``machine/sysinfo``)."""
        return _mapping(self.raw.get("env"))

    @property
    def worker(self) -> Mapping[str, Any]:
        """What the worker reported about itself: framework version, device, settings."""
        return _mapping(self.raw.get("worker"))

    @property
    def host(self) -> str | None:
        """The host the run ran on: a fleet run's node, else the machine fingerprint's."""
        return _text(self.raw.get("host")) or _text(self.env.get("host"))

    @property
    def device_model(self) -> str:
        """The device the number was measured on: the GPU's or the CPU's model name."""
        if str(self.spec.get("device", "cpu")).startswith("gpu"):
            return str(
                self.worker.get("device_name")
                or self.env.get("gpu_model")
                or self.spec.get("device")
            )
        return str(self.env.get("cpu_model") or "cpu")

    @property
    def machine_check(self) -> Mapping[str, Any]:
        """The doctor's verdict on the machine as the run started (``doctor.Report.snapshot``),
        {} for a run recorded before the check was kept."""
        return _mapping(self.raw.get("machine_check"))

    @property
    def settings(self) -> Mapping[str, Any]:
        """The framework settings the worker applied (compile, autotune, …)."""
        return _mapping(self.worker.get("settings"))

    @property
    def load(self) -> Mapping[str, Any]:
        """The machine's load as the run started (``load_at_start``)."""
        return _mapping(self.raw.get("load_at_start"))

    # -- membership ----------------------------------------------------------------------------
    def text_field(self, name: str) -> str | None:
        """A grouping field of the record as text: group (sweep id), batch, preset, config."""
        value = self.raw.get(name)
        return None if value is None or isinstance(value, dict | list) else str(value)

    @property
    def group(self) -> str | None:
        return self.text_field("group")

    @property
    def preset(self) -> str | None:
        return self.text_field("preset")

    @property
    def config(self) -> str | None:
        """A sweep's configuration key, as the sweep wrote it (``runs/presets.expand``)."""
        return self.text_field("config")

    @property
    def repeat(self) -> int | None:
        value = self.raw.get("repeat")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def reason(self) -> str | None:
        """Why a run failed, was cancelled or interrupted, as recorded."""
        return self.text_field("reason")

    @property
    def log_tail(self) -> str | None:
        """The last lines of a failed run's worker log, as recorded."""
        return _text(self.raw.get("log_tail"))

    # -- when ----------------------------------------------------------------------------------
    @property
    def started_text(self) -> str:
        """The stored start time as text ('' when none): it sorts in time order."""
        value = self.raw.get("started_at")
        return value if isinstance(value, str) else ""

    @property
    def started(self) -> dt.datetime | None:
        """When the run started, timezone-aware (a naive time is taken as local)."""
        return _when(self.raw.get("started_at"))

    @property
    def ended(self) -> dt.datetime | None:
        return _when(self.raw.get("finished_at"))

    @property
    def ended_text(self) -> str:
        """The stored end time as text ('' when none)."""
        value = self.raw.get("finished_at")
        return value if isinstance(value, str) else ""

    # -- numbers -------------------------------------------------------------------------------
    def metric(self, name: str) -> float | None:
        """A usable number the run measured under ``name``, or None (see ``number``); a record
        from before a metric was renamed answers under its new name (``METRIC_ALIASES``)."""
        value = number(self.metrics.get(name))
        if value is None and name in METRIC_ALIASES:
            return number(self.metrics.get(METRIC_ALIASES[name]))
        return value

    def figure(self, name: str) -> float | None:
        """The run's figure for ``name`` in its own mode: an inference run answers
        ``step_median_s`` with its p50 latency, ``samples_per_s`` with its inference samples/s
        (``metrics.in_mode``); what a list of runs, trends and regress read."""
        return self.metric(metrics.in_mode(name, self.mode))

    def metric_names(self) -> list[str]:
        """The names of the metrics this run has a usable number for (a renamed metric under
        its new name)."""
        names = [k for k, v in self.metrics.items() if number(v) is not None]
        renamed = {old: new for new, old in METRIC_ALIASES.items()}
        return list(dict.fromkeys(renamed.get(k, k) for k in names))

    def metric_text(self, name: str) -> str | None:
        """A metric stored as text (``step_source``, ``timing``), or None."""
        value = self.metrics.get(name)
        return value if isinstance(value, str) else None

    def resources(self) -> dict[str, Any]:
        """The sampler's steady-phase summary (``res_*`` metrics) without the prefix."""
        return {k[4:]: v for k, v in self.metrics.items() if k.startswith("res_")}

    @property
    def step_times(self) -> tuple[float, ...] | None:
        """The steady phase's step times (or window means, see ``windowed``) as stored; None when
        the run kept none (failed before its steady phase, or recorded before they were kept).
        Entries that are not usable numbers are left out."""
        times = self.metrics.get("steady_step_times")
        if not isinstance(times, list):
            return None
        return tuple(v for v in (number(t) for t in times) if v is not None)

    @property
    def windowed(self) -> bool:
        """The step times are per-step means of pipelined windows, not single steps."""
        return (self.metric_text("step_source") or "").startswith("windows of")

    @property
    def timing(self) -> str:
        return self.metric_text("timing") or "synced"

    @property
    def limits(self) -> Limits | None:
        """Its place against the machine's limits (FLOP/s, MFU of named peaks, energy,
        memory), or None for a run recorded without a FLOP count."""
        return Limits.from_metrics(self.metrics)

    # -- the verdict ---------------------------------------------------------------------------
    @property
    def verdict(self) -> str | None:
        """'stable', 'noisy' or 'unreliable'; None when the run has no verdict."""
        return _text(self.stability.get("verdict"))

    @property
    def reasons(self) -> tuple[Reason, ...]:
        stored = self.stability.get("reasons") or ()
        return tuple(Reason.from_dict(r) for r in stored if isinstance(r, dict))

    @property
    def state(self) -> str:
        """One word for lists with room for one: a finished run's verdict (it says more than
        'finished'), else the run's status."""
        return (self.verdict or self.status) if self.finished else self.status

    # -- what may change under a configuration ------------------------------------------------
    @property
    def framework_version(self) -> str | None:
        value = self.worker.get("framework_version") or self.metrics.get("framework_version")
        return None if value is None else str(value)

    @property
    def backend_version(self) -> str | None:
        extra = self.worker.get("extra")
        value = extra.get("backend_version") if isinstance(extra, dict) else None
        return None if value is None else str(value)

    @property
    def busy(self) -> bool:
        """The machine was busy with other work as the run started."""
        return bool(self.load.get("busy"))

    @property
    def oversubscribed(self) -> bool:
        """More threads were asked for than the machine has cores (the sweep's flag, else
        threads × workers against the fingerprint's logical cores)."""
        if "oversubscribed" in self.raw:
            return bool(self.raw["oversubscribed"])
        cores = number(self.env.get("logical_cores"))
        threads = number(self.spec.get("threads")) or 0
        workers = number(self.spec.get("workers")) or 1
        return bool(cores and threads and threads * workers > cores)
