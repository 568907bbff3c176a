"""The study-shaped table: model × dataset × device × threads by framework/API, the median
and its n in each cell (Kabakus's layout), inference rows per batch size beside it."""

from __future__ import annotations

from typing import Any

from tui_bench.engine.results import metrics
from tui_bench.engine.results.tables.groups import Group, count_of, inference_groups, median_of
from tui_bench.engine.results.tables.model import (
    COUNT,
    NUMBER,
    WITH_N,
    Cell,
    Column,
    Shown,
    Table,
    metric_info,
)


def _stack_headers(stacks: list[str]) -> list[str]:
    """The study's column headers: the framework alone where it tells the stacks apart (the
    API alone where that does), as the configurations' names do; the columns keep 'fw/api'."""
    for part in (0, 1):
        names = [stack.split("/", 1)[part] for stack in stacks]
        if len(set(names)) == len(names):
            return names
    return stacks


# -- the study's table -----------------------------------------------------------------------------
def study_table(configs: list[Group], metric: str = "train_wall_s") -> Table | None:
    """The processing-time table of a thread/framework study: rows model × dataset × device ×
    threads, a column per framework/api with the median and, beside it, its n. Inference runs
    among them add rows of their own, a row per batch size, of their median request (p50) where
    the study's figure is a time: the serving figure beside the study's, which stays as it is
    (Kabakus's test time is the training runs' ``test_s``)."""
    if len(configs) < 2:
        return None
    m = metric_info(metric)
    served = metrics.in_mode(metric, metrics.INFERENCE)
    if served == metric:  # no inference figure stands for it: a time's is the median request
        served = metrics.in_mode(metrics.COMPARED_BY_DEFAULT, metrics.INFERENCE)
    if metrics.get(served).unit != m.unit:
        served = ""  # the columns hold the study's unit: no inference row in another one
    inference = bool(served) and bool(inference_groups(configs))
    stacks = list(dict.fromkeys(f"{c.spec.get('framework')}/{c.spec.get('api')}" for c in configs))
    rows: dict[tuple[Any, ...], dict[str, Group]] = {}
    for c in configs:
        device = c.spec.get("device")
        key: tuple[Any, ...] = (
            c.spec.get("model"),
            c.spec.get("dataset"),
            device,
            c.spec.get("threads") if device == "cpu" else None,
        )
        if c.spec.get("mode") == metrics.INFERENCE:
            if not inference:
                continue
            key += (_figure_name(served), count_of(c.spec.get("batch_size")))
        elif inference:
            key += (_figure_name(metric), None)
        rows.setdefault(key, {})[f"{c.spec.get('framework')}/{c.spec.get('api')}"] = c
    columns = [Column("model"), Column("dataset"), Column("device"), Column("threads", COUNT)]
    if inference:
        columns += [Column("figure"), Column("batch", COUNT)]
    layout = [Shown(c.name, (c.name,)) for c in columns]
    for stack, header in zip(stacks, _stack_headers(stacks), strict=True):
        columns += [Column(stack, NUMBER, m.unit), Column(f"{stack} n", COUNT)]
        layout.append(Shown(header, (stack, f"{stack} n"), WITH_N))
    table = Table(
        "study",
        f"median {m.what}: model × dataset × device × threads by framework"
        + (f"; inference runs: {metrics.get(served).what} per batch size" if inference else ""),
        tuple(columns),
        note="cells: median over finished repeats (n); — where no run finished or was skipped.",
        layout=tuple(layout),
    )
    for key, by_stack in rows.items():
        cells: list[Cell] = list(key)
        sides = []
        for stack in stacks:
            found = by_stack.get(stack)
            read = (
                served
                if found is not None and found.spec.get("mode") == metrics.INFERENCE
                else metric
            )
            values = found.values(read) if found is not None else []
            cells += [median_of(values), len(values) if values else None]
            if found is not None:
                sides.append((found.label, found.verdicts()))
        table.add(cells, sides)
    return table


def _figure_name(key: str) -> str:
    """'inference latency p50', 'training wall time': a study row's figure, in a few words."""
    return metrics.get(key).what.split(" (")[0]
