"""A matrix round's cells, filling in as each is decided: one row per cell, its state, gain and
interval at the family's rates (the gate decided them; this only shows them)."""
from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from textual.widgets import Static

from ...core.records.verdict_parts import CellPart

_STATE_STYLE = {"accepted": "green", "cleared": "green", "none": "blue", "slower": "red",
                "conflict": "yellow", "open": "dim"}


def _pct(x: Any) -> str:
    return "…" if x is None else f"{x:+.1%}"


class CellsPanel(Static):
    """Hidden until the round's first look at its cells (only matrix rounds have them)."""

    DEFAULT_CSS = "CellsPanel { height: auto; max-height: 12; display: none; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(id="cells", **kw)
        self.cells: list[CellPart] = []
        self.border_title = "matrix cells"

    def show(self, pair: int, cells: Sequence[CellPart]) -> None:
        self.cells = list(cells)
        t = Table(box=None, expand=True, padding=(0, 1))
        for name, just in (("cell", "left"), ("role", "left"), ("state", "left"), ("gain", "right"),
                           ("interval", "right"), ("pairs", "right")):
            t.add_column(name, justify=just)
        for c in self.cells:
            state = c.state + (f" {c.tier}" if c.tier and c.state == "accepted" else "")
            iv = c.interval or (None, None)
            t.add_row(c.key, c.role, f"[{_STATE_STYLE.get(c.state, '')}]{state}[/]",
                      _pct(c.gain), f"[{_pct(iv[0])}, {_pct(iv[1])}]", str(c.pairs))
        self.display = True
        self.border_subtitle = f"after pair {pair}"
        self.update(t)
