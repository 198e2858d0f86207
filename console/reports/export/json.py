"""``--format json``: every table's rows as objects, keyed by the table's name; raw values, ``null``
for a figure that does not exist (a non-finite float included: JSON has none)."""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

from ..tables import Table
from .base import TABLES, Exporter


def render(tables: Sequence[Table], table: str | None = None) -> str:
    doc = {t.name: [_row(t, r) for r in t.rows] for t in tables}
    return json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n"


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _row(t: Table, r: dict[str, Any]) -> dict[str, Any]:
    return {c.key: _finite(r.get(c.key)) for c in t.columns}


EXPORTER = Exporter("json", ".json", TABLES, render)
