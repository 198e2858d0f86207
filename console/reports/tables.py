"""The tables the console shows: one definition of each table's columns, with each column's
meaning and how text shows its value. The formats that render them are the exporters
(``reports.export``: table, md, csv, json); every column is documented in docs/EXPORTS.md
(a test keeps the two in agreement).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.records.untrusted import printable


def _plain(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, tuple)):
        return "; ".join(map(str, x)) or "-"
    return str(x)


def percent(x: Any) -> str:
    return "-" if x is None else f"{x:+.1%}"


def fraction(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def sci(x: Any) -> str:
    return "-" if x is None else f"{x:.2e}"


def short(n: int) -> Callable[[Any], str]:
    return lambda x: "-" if x is None else str(x)[:n]


@dataclass(frozen=True)
class Column:
    key: str
    doc: str                                    # what the value is, with its unit
    show: Callable[[Any], str] = _plain         # text and Markdown only


@dataclass
class Table:
    name: str
    title: str
    columns: Sequence[Column]
    rows: list[dict[str, Any]]


def shown(t: Table) -> list[list[str]]:
    """Each row's cells as text shows them (table and md)."""
    # cells may hold what someone wrote (a queue's authors and sources): never terminal controls
    return [[printable(c.show(r.get(c.key))) for c in t.columns] for r in t.rows]
