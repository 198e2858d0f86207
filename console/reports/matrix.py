"""A matrix round's cells as a table shaped like llama.cpp's compare-llama-bench.py: the axes that
vary, then each build's value, then the gain with its interval, its pairs and its outcome. It only
lays out what the gate decided (the verdict's ``speed.matrix``); the text lines, the exports, the
HTML heat map and the live view all read these rows."""
from __future__ import annotations

from typing import Any, Sequence

from ..core.records.verdict import VerdictRecord
from ..core.records.verdict_parts import CellPart
from .tables import Column, Table, percent

MATRIX_COLUMNS = (
    Column("metric", "what the cell measures (the bench's metric name)"),
    Column("role", "scored (it can earn the gain) | guarded (it must only not get worse)"),
    Column("main", "main's median in the cell, in the metric's unit", lambda x: "-" if x is None else f"{x:.2f}"),
    Column("candidate", "the candidate's median in the cell", lambda x: "-" if x is None else f"{x:.2f}"),
    Column("gain", "the cell's paired gain, a fraction (0.05 = 5 % faster)", percent),
    Column("low", "lower end of its interval at the cell's false-accept rate (empty: unbounded)", percent),
    Column("high", "upper end of its interval (empty: unbounded)", percent),
    Column("pairs", "the cell's timed pairs"),
    Column("outcome", "accepted | none | slower | cleared (a guarded cell) | open | conflict"),
    Column("tier", "the cell's tier, when accepted"),
)
_MS = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
# a serving matrix's cells are loads: each build's tail latencies beside its throughput
SERVED_COLUMNS = (
    Column("ttft_p99_main", "main's TTFT p99 in the cell, ms (median over its counted blocks)", _MS),
    Column("ttft_p99_candidate", "the candidate's TTFT p99 in the cell, ms", _MS),
    Column("itl_p99_main", "main's ITL p99 in the cell, ms", _MS),
    Column("itl_p99_candidate", "the candidate's ITL p99 in the cell, ms", _MS),
    Column("latency", "the cell's latency guards: pass | uncertain | breach | unmeasured, per guard"),
)


def cells_of(verdict: VerdictRecord) -> tuple[CellPart, ...]:
    """The cells of a matrix verdict, or () for any other round."""
    return verdict.speed.cells


def axes_of(cells: Sequence[CellPart]) -> list[str]:
    """The axes, in the profile's order; those with a single value are left out, as
    compare-llama-bench leaves out what does not vary. Every cell holds every axis (a matrix is
    every combination of its axes' values)."""
    names = list(dict.fromkeys(a for c in cells for a in c.axes))
    varying = [a for a in names if len({c.axes[a] for c in cells}) > 1]
    return varying or names


def row_of(c: CellPart, axes: Sequence[str]) -> dict[str, Any]:
    """One cell as a row (an unbounded end of its interval is None)."""
    low, high = c.interval or (None, None)
    tier = c.tier
    if tier and c.span and c.span[0] != c.span[-1]:
        tier = f"{tier} (spans {c.span[0]}–{c.span[-1]})"
    row = {**{a: c.axes[a] for a in axes}, "metric": c.metric, "role": c.role,
           "main": c.main_median, "candidate": c.candidate_median, "gain": c.gain,
           "low": low, "high": high, "pairs": c.pairs, "outcome": c.state, "tier": tier}
    if served(c):
        (tm, tc), (im, ic) = c.ttft_p99_ms or (None, None), c.itl_p99_ms or (None, None)
        row.update(ttft_p99_main=tm, ttft_p99_candidate=tc, itl_p99_main=im, itl_p99_candidate=ic,
                   latency=" ".join(f"{g.metric}:{g.status}" for g in c.latency or ()) or "-")
    return row


def served(c: CellPart) -> bool:
    """Whether the cell is a serving load's (it carries latencies)."""
    return c.ttft_p99_ms is not None


def matrix_table(verdict: VerdictRecord) -> Table:
    """The cells as an exported table: one column per varying axis, then MATRIX_COLUMNS."""
    cells = cells_of(verdict)
    axes = axes_of(cells)
    columns = [Column(a, "a matrix axis: the cell's value on it") for a in axes] + list(MATRIX_COLUMNS)
    if any(served(c) for c in cells):
        columns += SERVED_COLUMNS
    return Table("matrix", "Matrix: each cell decided at the family's rates", columns,
                 [row_of(c, axes) for c in cells])


def summary_line(verdict: VerdictRecord) -> str:
    """How the cells were decided and why the verdict is what it is, in one line."""
    m = verdict.speed.matrix
    if m is None:
        return ""
    fa = m.false_accept_per_cell
    rate = f" ({fa:.3%} false accept per cell)" if fa is not None else ""
    return f"{m.cells_n} cells, {m.family}{rate}; rule {m.rule}: {m.sentence}"
