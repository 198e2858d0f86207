"""``--format table``: each table under its title, columns aligned for a terminal (the default)."""
from __future__ import annotations

from typing import Sequence

from ..tables import Table, shown
from .base import TABLES, Exporter


def render(tables: Sequence[Table], table: str | None = None) -> str:
    out = []
    for i, t in enumerate(tables):
        if i:
            out.append("\n")
        cells, heads = shown(t), [c.key for c in t.columns]
        widths = [max([len(h)] + [len(row[j]) for row in cells]) for j, h in enumerate(heads)]
        out.append(f"{t.title}\n")
        out.append("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip() + "\n")
        for row in cells:
            out.append("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() + "\n")
        if not cells:
            out.append("(none)\n")
    return "".join(out)


EXPORTER = Exporter("table", ".txt", TABLES, render)
