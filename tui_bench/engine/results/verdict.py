"""The verdict of a comparison: the rule that an answer is *established* and the sentences
that state it, read off compare's computed tables (``tables.compute``). The HTML page,
``tui-bench compare`` in the terminal and the Compare screen state these same sentences; the
figures hatch the same rows. Nothing here formats a table or computes a statistic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tui_bench.engine.results import render as render_module
from tui_bench.engine.results import stability, stats
from tui_bench.engine.results.tables import Table, Verdicts, metric_info

MAX_VERDICT_LINES = 8  # comparisons spelled out in the verdict; the rest in the ratios table


def established(p: float | None, state: str) -> bool:
    """An answer is established when the test found it (p below ``stats.ALPHA``) and every run
    behind it was judged stable: a run with no verdict (stored before verdicts, or too short to
    judge) leaves the answer open, as a noisy one does. ``state`` is ``row_state``'s."""
    return p is not None and p < stats.ALPHA and state in ("", stability.STABLE)


def table(found: Sequence[Table], name: str) -> Table | None:
    return next((t for t in found if t.name == name), None)


def rows_of(t: Table | None) -> list[dict[str, Any]]:
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
    in bold."""
    label, _lower = _metric_label(metric)
    summary = rows_of(table(found, "summary"))
    comparisons = rows_of(table(found, "comparisons"))
    out: list[tuple[str, str]] = []
    if not summary:
        return [("No run of these configurations has finished: ", "there is nothing to compare.")]
    if not comparisons:
        if len(summary) == 1:
            row = summary[0]
            out.append(
                (
                    f"One configuration, {row['configuration']}: ",
                    f"{label} median {render_module.cell_text(row.get('median'))} (IQR "
                    f"{render_module.cell_text(row.get('IQR'))}, n={row.get('n')}).",
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
    compared = table(found, "comparisons")
    pairs = list(zip(compared.rows, comparisons, strict=True)) if compared is not None else []
    for measured, cells in pairs[:MAX_VERDICT_LINES]:
        who, base = cells.get("configuration"), cells.get("baseline")
        where = cells.get("with")
        context = f" (with {where})" if where and where != "—" else ""
        ratio, speedup = number(cells.get("ratio")), number(cells.get("speed-up"))
        significance = str(cells.get("significance") or "")
        p = number(cells.get("p"))
        state = row_state(measured.verdicts)
        answered = established(p, state)
        if ratio is None:
            out.append((f"{who} against {base}{context}: not compared ", f"({significance})."))
        elif speedup is None:
            out.append(
                (
                    f"{who} against {base}{context}: no clear difference ",
                    f"(ratio of medians {ratio:.3g}); {significance}.",
                )
            )
        else:
            how = f"{_times(speedup)} faster" if speedup >= 1 else f"{_times(1 / speedup)} slower"
            if answered:
                out.append(
                    (
                        f"{who} is {how} than {base}{context}: ",
                        f"ratio of medians {ratio:.3g}; {significance}.",
                    )
                )
            else:
                out.append(
                    (
                        f"{who} against {base}{context}: not established; ",
                        f"these runs measured {who} {how} (ratio of medians {ratio:.3g}), but "
                        f"{significance}.",
                    )
                )
    if len(comparisons) > MAX_VERDICT_LINES:
        more = len(comparisons) - MAX_VERDICT_LINES
        out.append(("", f"{more} more comparison(s) in the ratios table."))
    out.append(_stability_sentence(table(found, "summary")))
    counts = sorted({int(r.get("n") or 0) for r in summary})
    if counts:
        n_text = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        out.append(("", f"Finished runs per configuration: {n_text}."))
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
