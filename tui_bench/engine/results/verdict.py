"""The verdict of a comparison: the rule that an answer is *established* and the sentences
that state it, read off compare's computed tables (``tables.compute``). The HTML page,
``tui-bench compare`` in the terminal and the Compare screen state these same sentences; the
figures hatch the same rows. Nothing here formats a table or computes a statistic.

Cells are read by the column each table family declares (``comparisons.SPEEDUP``,
``tradeoff.THROUGHPUT``), typed (``Table.number``, ``text``, ``flag``), never by the header a
view shows: a renamed header cannot silently empty a sentence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tui_bench.engine.results import render as render_module
from tui_bench.engine.results import stability, stats
from tui_bench.engine.results.tables import Column, Row, Table, Verdicts, metric_info
from tui_bench.engine.results.tables import comparisons as C
from tui_bench.engine.results.tables import summary as S
from tui_bench.engine.results.tables import tradeoff as T

MAX_VERDICT_LINES = 8  # comparisons spelled out in the verdict; the rest in the ratios table


def established(p: float | None, state: str) -> bool:
    """An answer is established when the test found it (p below ``stats.ALPHA``) and every run
    behind it was judged stable: a run with no verdict (stored before verdicts, or too short to
    judge) leaves the answer open, as a noisy one does. ``state`` is ``row_state``'s."""
    return p is not None and p < stats.ALPHA and state in ("", stability.STABLE)


def table(found: Sequence[Table], name: str) -> Table | None:
    return next((t for t in found if t.name == name), None)


def rows_of(t: Table | None) -> list[dict[str, Any]]:
    """A table's rows as {column name: cell}, for an export; a reader of one cell uses
    ``Table.number``/``text`` with the column its family declares."""
    return t.records() if t is not None else []


def number(value: Any) -> float | None:
    """A cell as a number, or None for text, a flag or an empty cell."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _metric_label(metric: str) -> tuple[str, bool]:
    info = metric_info(metric)
    return info.label, info.lower_is_better


def _times(value: float) -> str:
    return f"{value:.2f}×"


def row_state(verdicts: Sequence[tuple[str, Verdicts]]) -> str:
    """The worst state of the runs behind a row ("" for a row that is no measurement)."""
    states = [v.state for _, v in verdicts if v.state]
    for state in (stability.UNRELIABLE, stability.NOISY, "not judged", stability.STABLE):
        if state in states:
            return state
    return ""


def sentences(found: Sequence[Table], metric: str) -> list[str]:
    """The verdict in plain sentences, each read off a row of the computed tables."""
    return [lead + rest for lead, rest in parts(found, metric)]


def text(found: Sequence[Table], metric: str) -> str:
    """The verdict as one paragraph: what the terminal and the Compare screen print."""
    return " ".join(sentences(found, metric))


def parts(found: Sequence[Table], metric: str) -> list[tuple[str, str]]:
    """The verdict's sentences as (the answer, the evidence) pairs: the page sets the answer
    in bold. With a latency bound, its answer comes first; a sweep over batch sizes states
    what each step bought and paid (the trade-off table), never a batch "slower"."""
    label, _lower = _metric_label(metric)
    summary = table(found, "summary")
    compared = table(found, "comparisons")
    traded = table(found, "tradeoff")
    summary_rows = summary.rows if summary is not None else []
    out: list[tuple[str, str]] = []
    if not summary_rows:
        return [("No run of these configurations has finished: ", "there is nothing to compare.")]
    out += _bound_sentences(traded)
    steps = _step_sentences(traded)
    pairs = compared.rows if compared is not None else []
    if not pairs and not steps:
        if len(summary_rows) == 1 and summary is not None:
            row = summary_rows[0]
            out.append(
                (
                    f"One configuration, {summary.text(row, S.CONFIGURATION)}: ",
                    f"{label} median "
                    f"{render_module.cell_text(summary.cell(row, S.MEDIAN))} (IQR "
                    f"{render_module.cell_text(summary.cell(row, S.IQR))}, "
                    f"n={summary.cell(row, S.N)}).",
                )
            )
        else:
            out.append(
                (
                    "No two configurations differ in a single setting, ",
                    "so none is compared with another directly: read the medians per "
                    "configuration below.",
                )
            )
    out += steps[:MAX_VERDICT_LINES]
    if len(steps) > MAX_VERDICT_LINES:
        more = len(steps) - MAX_VERDICT_LINES
        out.append(("", f"{more} more step(s) in the trade-off table."))
    if compared is not None:
        for row in pairs[:MAX_VERDICT_LINES]:
            out.append(_comparison_sentence(compared, row))
    if len(pairs) > MAX_VERDICT_LINES:
        more = len(pairs) - MAX_VERDICT_LINES
        out.append(("", f"{more} more comparison(s) in the ratios table."))
    out.append(_stability_sentence(summary))
    counts = sorted({int(summary.number(r, S.N) or 0) for r in summary_rows}) if summary else []
    if counts:
        n_text = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        out.append(("", f"Finished runs per configuration: {n_text}."))
    return out


def _comparison_sentence(compared: Table, row: Row) -> tuple[str, str]:
    """One row of the ratios table in words: faster or slower, established or not."""
    who, base = compared.text(row, C.CONFIGURATION), compared.text(row, C.BASELINE)
    where = compared.text(row, C.WITH)
    context = f" (with {where})" if where and where != "—" else ""
    ratio = compared.number(row, C.RATIO_OF_MEDIANS)
    speedup = compared.number(row, C.SPEEDUP)
    significance = compared.text(row, C.SIGNIFICANCE)
    answered = established(compared.number(row, C.P), row_state(row.verdicts))
    if ratio is None:
        return (f"{who} against {base}{context}: not compared ", f"({significance}).")
    if speedup is None:
        return (
            f"{who} against {base}{context}: no clear difference ",
            f"(ratio of medians {ratio:.3g}); {significance}.",
        )
    how = f"{_times(speedup)} faster" if speedup >= 1 else f"{_times(1 / speedup)} slower"
    if answered:
        return (
            f"{who} is {how} than {base}{context}: ",
            f"ratio of medians {ratio:.3g}; {significance}.",
        )
    return (
        f"{who} against {base}{context}: not established; ",
        f"these runs measured {who} {how} (ratio of medians {ratio:.3g}), but {significance}.",
    )


def figure_text(key: str, value: float | None) -> str:
    """A figure with its unit as a sentence says it: '38.2 ms', '1234 samples/s'."""
    if value is None:
        return "—"
    m = metric_info(key)
    if m.unit == "s":
        ms = value * 1000
        return f"{render_module.number_text(ms)} ms" if ms < 1000 else f"{value:.3g} s"
    return f"{render_module.number_text(value)} {m.unit}".strip()


def _from_to(key: str, t: Table, before: Row, after: Row, column: Column) -> str:
    """'3810 → 9524 samples/s', '0.375 → 1.20 ms': a figure at two batches, its unit once."""
    a, b = figure_text(key, t.number(before, column)), figure_text(key, t.number(after, column))
    unit_a, unit_b = a.rpartition(" ")[2], b.rpartition(" ")[2]
    if unit_a == unit_b and " " in a:
        a = a.rpartition(" ")[0]
    return f"{a} → {b}"


def _pairs(traded: Table) -> dict[str, list[Row]]:
    """The trade-off's rows by the pair of figures they trade (one pair, unless modes mix)."""
    out: dict[str, list[Row]] = {}
    for row in traded.rows:
        out.setdefault(traded.text(row, T.PAIR), []).append(row)
    return out


def _bound_sentences(traded: Table | None) -> list[tuple[str, str]]:
    """With a latency bound: the configuration that serves the most inside it, per pair of
    figures; or that none fits, and the lowest latency measured."""
    if traded is None or not traded.has(T.WITHIN):
        return []
    out: list[tuple[str, str]] = []
    for key, rows in _pairs(traded).items():
        pair = T.by_key(key)
        if pair is None:
            continue
        bound = traded.number(rows[0], T.BOUND) or 0.0
        limit = f"{pair.latency_words} ≤ {T.LatencyBound(bound).ms_text}"
        inside = [
            r
            for r in rows
            if traded.flag(r, T.WITHIN) and traded.number(r, T.THROUGHPUT) is not None
        ]
        if inside:
            best = max(inside, key=lambda r: traded.number(r, T.THROUGHPUT) or 0.0)
            shaky = row_state(best.verdicts) in (stability.NOISY, stability.UNRELIABLE)
            out.append(
                (
                    f"Within {limit}: {traded.text(best, T.CONFIGURATION)} serves the most "
                    f"{pair.throughput_words}, "
                    f"{figure_text(pair.throughput, traded.number(best, T.THROUGHPUT))} ",
                    f"({pair.latency_words} "
                    f"{figure_text(pair.latency, traded.number(best, T.LATENCY))}, n="
                    f"{traded.cell(best, T.N)}; {len(inside)} of {len(rows)} configuration(s) "
                    "fit)" + ("; not every run behind it was stable." if shaky else "."),
                )
            )
            continue
        measured = [r for r in rows if traded.number(r, T.LATENCY) is not None]
        if not measured:
            out.append((f"Within {limit}: no configuration has a measured figure.", ""))
            continue
        lowest = min(measured, key=lambda r: traded.number(r, T.LATENCY) or 0.0)
        out.append(
            (
                f"No configuration keeps its {limit}: ",
                f"the lowest is {figure_text(pair.latency, traded.number(lowest, T.LATENCY))} "
                f"({traded.text(lowest, T.CONFIGURATION)}).",
            )
        )
    return out


def _step_sentences(traded: Table | None) -> list[tuple[str, str]]:
    """Each step up a batch sweep: the throughput it bought against the latency it paid."""
    if traded is None:
        return []
    out: list[tuple[str, str]] = []
    for key, rows in _pairs(traded).items():
        pair = T.by_key(key)
        if pair is None:
            continue
        previous: Row | None = None
        for row in rows:
            start = traded.number(row, T.FROM_BATCH)
            if start is None or previous is None:
                previous = row
                continue
            where = traded.text(row, T.WITH)
            context = f" ({where})" if where and where != "—" else ""
            step = f"batch {start:g} → {traded.cell(row, T.BATCH)}{context}: "
            gained, paid = traded.number(row, T.GAINED), traded.number(row, T.PAID)
            figures = (
                f" ({_from_to(pair.throughput, traded, previous, row, T.THROUGHPUT)}; "
                f"{_from_to(pair.latency, traded, previous, row, T.LATENCY)})"
            )
            if gained is None or paid is None:
                out.append((step, "no figure on one side."))
            else:
                out.append(
                    (
                        step + f"{_times(gained)} the {pair.throughput_words} ",
                        f"for {_times(paid)} the {pair.latency_words}{figures}.",
                    )
                )
            previous = row
    return out


def _stability_sentence(summary: Table | None) -> tuple[str, str]:
    """How the runs behind the summary were judged, counted over every configuration, naming
    those not all stable unless that is every one of them."""
    rows = summary.rows if summary is not None else []
    totals = {"stable": 0, "noisy": 0, "unreliable": 0, "not judged": 0}
    shaky = []
    for row in rows:
        for name, v in row.verdicts:
            totals["stable"] += v.stable
            totals["noisy"] += v.noisy
            totals["unreliable"] += v.unreliable
            totals["not judged"] += v.unjudged
            if v.noisy or v.unreliable:
                shaky.append(name)
    n = sum(totals.values())
    counted = ", ".join(f"{v} {k}" for k, v in totals.items() if v)
    if not totals["noisy"] and not totals["unreliable"]:
        judged = " (some not judged: tui-bench history recheck)" if totals["not judged"] else ""
        return (f"Every finished run of every configuration was judged stable{judged}.", "")
    where = "in every configuration" if len(shaky) == len(rows) else "in " + ", ".join(shaky)
    return (
        "Not every run was stable, so read these numbers with care: ",
        f"of {n} finished run(s), {counted}; the unstable ones {where}.",
    )
