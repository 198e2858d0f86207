"""``--format csv``: one table (``table`` names it; default the first), a header row of its column
keys, standard quoting, raw values: fractions, not percentages; empty for a figure that does not exist."""
from __future__ import annotations

import csv
import io
import math
from typing import Any, Sequence

from ...core.records.untrusted import printable
from ..tables import Table
from .base import TABLES, Exporter


def render(tables: Sequence[Table], table: str | None = None) -> str:
    t = pick(tables, table)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in t.columns])
    for r in t.rows:
        w.writerow(["" if r.get(c.key) is None else printable(_value(r.get(c.key))) for c in t.columns])
    return buf.getvalue()


def pick(tables: Sequence[Table], name: str | None) -> Table:
    if name is None:
        return tables[0]
    for t in tables:
        if t.name == name:
            return t
    raise KeyError(name)


def _value(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ""
    if isinstance(x, (list, tuple)):
        return "; ".join(map(str, x))
    return str(x)


EXPORTER = Exporter("csv", ".csv", TABLES, render)
