"""``history export --mlflow URI``: every tui-bench run as an MLflow run.

- one MLflow run per tui-bench run, named by its id and tagged ``tui_bench.run_id``: exporting
  again skips the runs already there, so nothing is duplicated;
- one experiment per configuration (``identity``), or per preset for runs of a preset sweep;
- params: the spec's fields and the configuration key; metrics: the run's numeric summary
  figures; series: the training loss per global step (from the ``steps`` events) and the median
  step time of each epoch (step = epoch: the worker streams per-epoch figures, not each step's
  time); tags: versions, host, status, verdict, label, batch/sweep.

The ``mlflow`` package is an optional extra, imported here only. The default URI is a SQLite file
in the data home (MLflow's plain file store is deprecated).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results.history import History
from tui_bench.engine.results.identity import identity, versions

INSTALL_HINT = "pip install 'tui-bench[mlflow]'"
RUN_ID_TAG = "tui_bench.run_id"
BATCH = 1000  # MLflow's log_batch takes at most 1000 metrics and 100 params per call
MAX_PARAMS = 100
MLFLOW_STATUS = {
    RunStatus.FINISHED: "FINISHED",
    RunStatus.FAILED: "FAILED",
    RunStatus.CANCELLED: "KILLED",
    RunStatus.INTERRUPTED: "KILLED",
}


def default_uri(home: Path) -> str:
    return f"sqlite:///{(home / 'mlflow.db').resolve()}"


@dataclass(frozen=True)
class Exported:
    created: int
    skipped: int  # already in the store (an earlier export)
    experiments: int


def _client(uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise TuiBenchError(
            f"exporting to MLflow needs the mlflow package, which is not installed: {INSTALL_HINT}",
            title="export",
        ) from None
    return MlflowClient(tracking_uri=uri)


def experiment_name(record: dict[str, Any], by: str = "configuration") -> str:
    if by == "preset" and record.get("preset"):
        return f"tui-bench preset {record['preset']}"
    ident = identity(record)
    return f"tui-bench {ident.label} [{ident.key}]"


def _ms(text: Any) -> int | None:
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return int(when.timestamp() * 1000)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _tag_key(name: str) -> str:
    return name.replace(" ", "_")


def series_points(events: Sequence[dict[str, Any]]) -> Iterator[tuple[str, float, int]]:
    """(metric, value, step) from a run's series: the loss at each global step, the median step
    time of each epoch."""
    offset = 0  # global index of the current epoch's first step
    steps_in_epoch = 0
    for event in events:
        kind = event.get("type")
        if kind == "epoch_started":
            offset += steps_in_epoch
            steps_in_epoch = int(event.get("steps") or 0)
        elif kind == "steps":
            first = int(event.get("first_step") or 0)
            for i, loss in enumerate(event.get("losses") or []):
                value = _number(loss)
                if value is not None:
                    yield "loss", value, offset + first + i
        elif kind == "epoch_finished":
            value = _number(event.get("step_median_s"))
            if value is not None:
                yield "epoch_step_median_s", value, int(event.get("epoch") or 0)


def _tags(record: dict[str, Any]) -> dict[str, str]:
    ident = identity(record)
    tags = {
        RUN_ID_TAG: str(record["id"]),
        "mlflow.runName": str(record["id"]),
        "tui_bench.configuration": ident.key,
        "tui_bench.label": ident.label,
        "tui_bench.status": str(record.get("status")),
        "tui_bench.host": str((record.get("env") or {}).get("host")),
    }
    verdict = (record.get("stability") or {}).get("verdict")
    if verdict:
        tags["tui_bench.verdict"] = str(verdict)
    for key in ("preset", "group", "batch", "reason"):
        if record.get(key):
            tags[f"tui_bench.{key}"] = str(record[key])[:5000]
    for name, value in versions(record).items():
        if value is not None:
            tags[f"tui_bench.version.{_tag_key(name)}"] = str(value)
    return tags


def _existing_ids(client: Any, experiment_id: str) -> set[str]:
    found: set[str] = set()
    token = None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        found.update(run.data.tags.get(RUN_ID_TAG) for run in page)
        token = page.token
        if not token:
            return found


def export(
    records: Sequence[dict[str, Any]],
    history: History,
    uri: str,
    by: str = "configuration",
) -> Exported:
    """Export runs that have ended (a run in progress is left for a later export)."""
    client = _client(uri)
    from mlflow.entities import Metric, Param

    experiments: dict[str, str] = {}
    existing: dict[str, set[str]] = {}
    created = skipped = 0
    for record in records:
        if record.get("status") not in MLFLOW_STATUS:
            continue
        name = experiment_name(record, by)
        if name not in experiments:
            found = client.get_experiment_by_name(name)
            experiments[name] = (
                found.experiment_id if found is not None else client.create_experiment(name)
            )
            existing[name] = _existing_ids(client, experiments[name])
        if record["id"] in existing[name]:
            skipped += 1
            continue
        start = _ms(record.get("started_at"))
        run = client.create_run(experiments[name], start_time=start, tags=_tags(record))
        run_id = run.info.run_id
        spec = record.get("spec") or {}
        params = [Param(k, str(v)[:6000]) for k, v in sorted(spec.items())]
        params.append(Param("configuration", identity(record).key))
        stamp = start or 0
        metrics = [
            Metric(k, number, stamp, 0)
            for k, raw in sorted((record.get("metrics") or {}).items())
            if (number := _number(raw)) is not None
        ]
        metrics += [
            Metric(k, v, stamp, step)
            for k, v, step in series_points(history.read_series(record["id"]))
        ]
        for i in range(0, max(len(params), 1), MAX_PARAMS):
            client.log_batch(run_id, params=params[i : i + MAX_PARAMS])
        for i in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[i : i + BATCH])
        client.set_terminated(
            run_id, status=MLFLOW_STATUS[record["status"]], end_time=_ms(record.get("finished_at"))
        )
        existing[name].add(record["id"])
        created += 1
    return Exported(created, skipped, len(experiments))
