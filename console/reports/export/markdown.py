"""``--format md``: each table as GitHub Markdown under a heading of its title."""
from __future__ import annotations

from typing import Sequence

from ..tables import Table, shown
from .base import TABLES, Exporter


def render(tables: Sequence[Table], table: str | None = None) -> str:
    out = []
    for i, t in enumerate(tables):
        if i:
            out.append("\n")
        heads = [c.key for c in t.columns]
        out.append(f"### {t.title}\n\n| " + " | ".join(heads) + " |\n|" + "---|" * len(heads) + "\n")
        cells = shown(t)
        for row in cells:
            out.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |\n")
        if not cells:
            out.append("\n(none)\n")
    return "".join(out)


EXPORTER = Exporter("md", ".md", TABLES, render)
