"""A matrix round's cells as a table shaped like llama.cpp's compare-llama-bench.py: the axes that
vary, then each build's value, then the gain with its interval, its pairs and its outcome. It only
lays out what the gate decided (the verdict's ``speed.matrix``); the text lines, the exports, the
HTML heat map and the live view all read these rows."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

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


def cells_of(verdict: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The cells of a matrix verdict (a verdict's JSON), or [] for any other round."""
    m = (verdict.get("speed") or {}).get("matrix") or {}
    return list(m.get("cells") or [])


def axes_of(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """The axes, in the profile's order; those with a single value are left out, as
    compare-llama-bench leaves out what does not vary."""
    names = list(dict.fromkeys(a for c in cells for a in (c.get("axes") or {})))
    varying = [a for a in names if len({(c.get("axes") or {}).get(a) for c in cells}) > 1]
    return varying or names


def row_of(c: Mapping[str, Any], axes: Sequence[str]) -> dict[str, Any]:
    """One cell as a row (from the verdict's JSON, where an unbounded end is already None)."""
    iv = list(c.get("interval") or [None, None])
    tier = c.get("tier")
    span = c.get("span")
    if tier and span and span[0] != span[-1]:
        tier = f"{tier} (spans {span[0]}–{span[-1]})"
    return {**{a: (c.get("axes") or {}).get(a) for a in axes}, "metric": c.get("metric"), "role": c.get("role"),
            "main": c.get("main_median"), "candidate": c.get("candidate_median"), "gain": c.get("gain"),
            "low": iv[0], "high": iv[1], "pairs": c.get("pairs"), "outcome": c.get("state"),
            "tier": tier}


def matrix_table(verdict: Mapping[str, Any]) -> Table:
    """The cells as an exported table: one column per varying axis, then MATRIX_COLUMNS."""
    cells = cells_of(verdict)
    axes = axes_of(cells)
    columns = [Column(a, "a matrix axis: the cell's value on it") for a in axes] + list(MATRIX_COLUMNS)
    return Table("matrix", "Matrix: each cell decided at the family's rates", columns,
                 [row_of(c, axes) for c in cells])


def summary_line(verdict: Mapping[str, Any]) -> str:
    """How the cells were decided and why the verdict is what it is, in one line."""
    m = (verdict.get("speed") or {}).get("matrix") or {}
    if not m:
        return ""
    fa = m.get("false_accept_per_cell")
    rate = f" ({fa:.3%} false accept per cell)" if isinstance(fa, (int, float)) else ""
    return f"{m.get('cells_n', 0)} cells, {m.get('family', '')}{rate}; rule {m.get('rule', '')}: {m.get('sentence', '')}"
