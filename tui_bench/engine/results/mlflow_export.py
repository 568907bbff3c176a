"""``history export --mlflow URI``: every tui-bench run as an MLflow run.

- one MLflow run per tui-bench run, named by its id and tagged ``tui_bench.run_id``: exporting
  again skips the runs already there, so nothing is duplicated;
- one experiment per configuration (``identity.configuration_of``), or per preset for runs of a preset sweep;
- params: the spec's fields and the configuration key; metrics: the run's numeric summary
  figures; series: the training loss per global step (from the ``steps`` events) and the median
  step time of each epoch (step = epoch: the worker streams per-epoch figures, not each step's
  time); tags: versions, host, status, verdict, label, batch/sweep.

The ``mlflow`` package is an optional extra, imported here only. The default URI is a SQLite file
in the data home (MLflow's plain file store is deprecated).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results.history import History
from tui_bench.engine.results.identity import configuration_of, versions
from tui_bench.engine.results.record import Run, number

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


def experiment_name(run: Run, by: str = "configuration") -> str:
    if by == "preset" and run.preset:
        return f"tui-bench preset {run.preset}"
    config = configuration_of(run)
    return f"tui-bench {config.name} [{config.id}]"


def _ms(when: dt.datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _tag_key(name: str) -> str:
    return name.replace(" ", "_")


def series_points(events: Sequence[dict[str, Any]]) -> Iterator[tuple[str, float, int]]:
    """(metric, value, step) from a run's series: the loss at each global step, the median step
    time of each epoch; an inference run's latency of each timed request (``requests`` events,
    step = the request's index among the timed ones)."""
    offset = 0  # global index of the current epoch's first step
    steps_in_epoch = 0
    timed = 0  # timed requests seen so far
    for event in events:
        kind = event.get("type")
        if kind == "epoch_started":
            offset += steps_in_epoch
            steps_in_epoch = int(event.get("steps") or 0)
        elif kind == "steps":
            first = int(event.get("first_step") or 0)
            for i, loss in enumerate(event.get("losses") or []):
                value = number(loss)
                if value is not None:
                    yield "loss", value, offset + first + i
        elif kind == "requests":
            for latency in event.get("latencies") or []:
                value = number(latency)
                if value is not None:
                    yield "request_latency_s", value, timed
                timed += 1
        elif kind == "epoch_finished":
            value = number(event.get("step_median_s"))
            if value is not None:
                yield "epoch_step_median_s", value, int(event.get("epoch") or 0)


def _tags(run: Run) -> dict[str, str]:
    config = configuration_of(run)
    tags = {
        RUN_ID_TAG: run.id,
        "mlflow.runName": run.id,
        "tui_bench.configuration": config.id,
        "tui_bench.label": config.name,
        "tui_bench.status": run.status,
        "tui_bench.host": str(run.host),
    }
    if run.verdict:
        tags["tui_bench.verdict"] = run.verdict
    for key in ("preset", "group", "batch", "reason"):
        value = run.text_field(key)
        if value:
            tags[f"tui_bench.{key}"] = value[:5000]
    for name, value in versions(run).items():
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
    records: Sequence[Run],
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
    for run in records:
        if run.status not in MLFLOW_STATUS:
            continue
        name = experiment_name(run, by)
        if name not in experiments:
            found = client.get_experiment_by_name(name)
            experiments[name] = (
                found.experiment_id if found is not None else client.create_experiment(name)
            )
            existing[name] = _existing_ids(client, experiments[name])
        if run.id in existing[name]:
            skipped += 1
            continue
        start = _ms(run.started)
        created_run = client.create_run(experiments[name], start_time=start, tags=_tags(run))
        run_id = created_run.info.run_id
        params = [Param(k, str(v)[:6000]) for k, v in sorted(run.spec.items())]
        params.append(Param("configuration", configuration_of(run).id))
        stamp = start or 0
        metrics = [
            Metric(k, value, stamp, 0)
            for k in sorted(run.metric_names())
            if (value := run.metric(k)) is not None
        ]
        metrics += [
            Metric(k, v, stamp, step) for k, v, step in series_points(history.read_series(run.id))
        ]
        for i in range(0, max(len(params), 1), MAX_PARAMS):
            client.log_batch(run_id, params=params[i : i + MAX_PARAMS])
        for i in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[i : i + BATCH])
        client.set_terminated(
            run_id, status=MLFLOW_STATUS[RunStatus(run.status)], end_time=_ms(run.ended)
        )
        existing[name].add(run.id)
        created += 1
    return Exported(created, skipped, len(experiments))
