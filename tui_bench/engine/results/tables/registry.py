"""The one list of compare's tables. Each table is declared once, here: its name, the function
that builds it from the compared runs, the Compare screen's tab label and the HTML page's
section. ``compute`` builds them in this order; the Compare screen makes a tab of each and the
page a section of each (``SECTIONS``, in order). A new table is one ``TableKind`` (and, when it
needs a section of its own, one ``Section``); no view names a table family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tui_bench.engine.results import identity, metrics
from tui_bench.engine.results import published as published_module
from tui_bench.engine.results.record import Run
from tui_bench.engine.results.tables.comparisons import comparison_table
from tui_bench.engine.results.tables.fairness import CARD_SPEC_FIELD, CONSEQUENCES, fairness_card
from tui_bench.engine.results.tables.groups import Group, group
from tui_bench.engine.results.tables.limits import limits_table
from tui_bench.engine.results.tables.model import Metric, Table, metric_info
from tui_bench.engine.results.tables.published_figures import published_table
from tui_bench.engine.results.tables.scaling import scaling_table, worker_scaling_table
from tui_bench.engine.results.tables.serving import batch_curve_table
from tui_bench.engine.results.tables.skipped import skipped_table
from tui_bench.engine.results.tables.study import study_table
from tui_bench.engine.results.tables.summary import summary_table
from tui_bench.engine.results.tables.tradeoff import LatencyBound, answers_batches, tradeoff_table


@dataclass(frozen=True)
class Inputs:
    """What a table is built from: the compared configurations and what compare was asked."""

    configs: list[Group]
    varying: list[str]
    metric: str
    study_metric: str = "train_wall_s"
    skipped: Sequence[tuple[str, str]] = ()
    published: Sequence[published_module.Figure] = ()
    bound: LatencyBound | None = None


@dataclass(frozen=True)
class Section:
    """A section of the HTML page: its id, its heading, and what it says when none of its tables
    has rows (None: the section is left out then). ``tail``: after the trends and figures."""

    id: str
    heading: str
    empty: str | None = None
    tail: bool = False


@dataclass(frozen=True)
class TableKind:
    """One table: ``name`` (its id in CSV, JSON, the page and the screen), ``build`` (None or a
    table without rows: not shown), the Compare screen's ``tab`` label, the page's ``section``."""

    name: str
    build: Callable[[Inputs], Table | None]
    tab: str
    section: str


def _batch_is_traded(i: Inputs) -> bool:
    """A sweep over batch sizes compared on a time or a rate is the trade-off table's question
    (a larger batch pays in latency by design): compare's ratios leave batch size out of it."""
    unit = metrics.get(i.metric).unit
    return (unit == "s" or unit.endswith("/s")) and answers_batches(i.configs)


# The page's sections, in order (the question, the verdict and the machine come first; a
# section with ``tail`` after the trends and the figures).
SECTIONS: tuple[Section, ...] = (
    Section(
        "fairness",
        "Fairness card",
        "No setting the fairness card checks (precision, compilation, autotune, input path, "
        "timing mode, threads, versions, driver, load) differs between the compared "
        "configurations beyond what the comparison varies.",
    ),
    Section("configurations", "Per configuration", ""),
    Section("ratios", "Ratios", "No two configurations differ in one setting."),
    Section("tradeoff", "Batch size: throughput bought, latency paid"),
    Section("scaling", "Scaling", "These runs do not vary threads or workers."),
    Section("batches", "Inference over batch sizes"),
    Section(
        "published",
        "Published figures beside ours",
        "These runs are not a study preset's sweep: no published figure to set beside them.",
    ),
    Section("limits", "Machine use"),
    Section("skipped", "Not run", "Every configuration ran.", tail=True),
)

# Every table, in the order compare lists them (summary first).
TABLES: tuple[TableKind, ...] = (
    TableKind("summary", lambda i: summary_table(i.configs, i.metric), "summary", "configurations"),
    TableKind(
        "comparisons",
        lambda i: comparison_table(
            i.configs, i.varying, i.metric, ("batch_size",) if _batch_is_traded(i) else ()
        ),
        "ratios",
        "ratios",
    ),
    TableKind("tradeoff", lambda i: tradeoff_table(i.configs, i.bound), "trade-off", "tradeoff"),
    TableKind(
        "scaling", lambda i: scaling_table(i.configs, i.varying, i.metric), "threads", "scaling"
    ),
    TableKind(
        "workers", lambda i: worker_scaling_table(i.configs, i.varying), "workers", "scaling"
    ),
    TableKind("batches", lambda i: batch_curve_table(i.configs), "batch sizes", "batches"),
    TableKind("study", lambda i: study_table(i.configs, i.study_metric), "study", "published"),
    TableKind(
        "published",
        lambda i: published_table(i.configs, i.varying, i.published, i.skipped),
        "published",
        "published",
    ),
    TableKind("fairness", lambda i: fairness_card(i.configs), "fairness", "fairness"),
    TableKind("limits", lambda i: limits_table(i.configs), "limits", "limits"),
    TableKind("skipped", lambda i: skipped_table(i.skipped), "skipped", "skipped"),
)

TABS: dict[str, str] = {kind.name: kind.tab for kind in TABLES}  # table name -> tab label


def in_section(section: str) -> list[str]:
    """The names of the tables a page section holds, in ``TABLES``' order."""
    return [kind.name for kind in TABLES if kind.section == section]


@dataclass
class Comparison:
    """Every table for a set of runs; ``tables()`` lists those with rows, in order. A table is
    also an attribute by its name (``comparison.summary``, ``comparison.tradeoff``)."""

    metric: Metric
    groups: list[Group]
    varying: list[str]
    built: dict[str, Table | None] = field(default_factory=dict)
    bound: LatencyBound | None = None

    def __getattr__(self, name: str) -> Table | None:
        built = self.__dict__.get("built")
        if built is not None and name in built:
            return built[name]
        raise AttributeError(name)

    def tables(self) -> list[Table]:
        summary = self.built["summary"]
        rest = [t for name, t in self.built.items() if name != "summary" and t is not None]
        return [*([summary] if summary is not None else []), *(t for t in rest if t.rows)]

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables() if t.name == name), None)

    def also_differs(self) -> list[str]:
        """The fairness card's settings that differ beside what is compared, once each: what a
        reader must weigh besides the configurations' names. A setting the names carry is what
        is compared, and so is its observed consequence (``CONSEQUENCES``: threads observed
        follow the threads configured); the card shows both side by side, but neither is a
        second difference."""
        card = self.table("fairness")
        if card is None:
            return []
        named = identity.label_fields([g.config for g in self.groups])
        compared = {label for label, spec in CARD_SPEC_FIELD.items() if spec in named}
        compared |= {seen for seen, setting in CONSEQUENCES.items() if setting in compared}
        settings = dict.fromkeys(str(s) for s in card.values("setting"))
        return [s for s in settings if s not in compared]


def compute(
    records: Sequence[Run],
    metric: str | None = None,
    study_metric: str = "train_wall_s",
    skipped: Sequence[tuple[str, str]] = (),
    published: Sequence[published_module.Figure] = (),
    bound: LatencyBound | None = None,
) -> Comparison:
    """Every table for a set of runs (a sweep, a group, or runs picked by id); ``published``:
    the figures their study published, computed from these runs beside them; ``bound``: the
    latency a configuration may pay (``tradeoff.latency_bound``), which the trade-off table
    and the verdict answer. ``metric`` unnamed: the steady step, or the median request where
    every run is an inference run (``metrics.compared_for``)."""
    if metric is None:
        metric = metrics.compared_for(r.mode for r in records)
    configs, varying = group(records)
    inputs = Inputs(configs, varying, metric, study_metric, skipped, published, bound)
    return Comparison(
        metric=metric_info(metric),
        groups=configs,
        varying=varying,
        built={kind.name: kind.build(inputs) for kind in TABLES},
        bound=bound,
    )
