"""Tables the console exports: one definition of each table's columns, four renderings.

``--format table`` aligns columns for a terminal, ``md`` writes GitHub Markdown, ``csv``
one table with a header row (standard ``csv`` quoting), ``json`` every table's rows as
objects. CSV and JSON carry raw values (fractions, not percentages; ``null``/empty for a
figure that does not exist); the text renderings format them. Every column is documented
in docs/EXPORTS.md (a test keeps the two in agreement).
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from typing import IO, Any, Callable, Sequence

from ..core.untrusted import printable

FORMATS = ("table", "md", "csv", "json")


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


def render(tables: Sequence[Table], fmt: str, out: IO[str], table: str | None = None) -> None:
    """Write ``tables`` in ``fmt``; CSV holds one table: ``table`` names it (default the first)."""
    if fmt == "json":
        doc = {t.name: [_json_row(t, r) for r in t.rows] for t in tables}
        out.write(json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n")
        return
    if fmt == "csv":
        t = pick(tables, table)
        w = csv.writer(out, lineterminator="\n")
        w.writerow([c.key for c in t.columns])
        for r in t.rows:
            w.writerow(["" if r.get(c.key) is None else printable(_csv_value(r.get(c.key))) for c in t.columns])
        return
    for i, t in enumerate(tables):
        if i:
            out.write("\n")
        # cells may hold what someone wrote (a queue's authors and sources): never terminal controls
        cells = [[printable(c.show(r.get(c.key))) for c in t.columns] for r in t.rows]
        heads = [c.key for c in t.columns]
        if fmt == "md":
            out.write(f"### {t.title}\n\n| " + " | ".join(heads) + " |\n|" + "---|" * len(heads) + "\n")
            for row in cells:
                out.write("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |\n")
            if not cells:
                out.write("\n(none)\n")
            continue
        widths = [max([len(h)] + [len(row[j]) for row in cells]) for j, h in enumerate(heads)]
        out.write(f"{t.title}\n")
        out.write("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip() + "\n")
        for row in cells:
            out.write("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() + "\n")
        if not cells:
            out.write("(none)\n")


def pick(tables: Sequence[Table], name: str | None) -> Table:
    if name is None:
        return tables[0]
    for t in tables:
        if t.name == name:
            return t
    raise KeyError(name)


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _json_row(t: Table, r: dict[str, Any]) -> dict[str, Any]:
    return {c.key: _finite(r.get(c.key)) for c in t.columns}


def _csv_value(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ""
    if isinstance(x, (list, tuple)):
        return "; ".join(map(str, x))
    return str(x)
