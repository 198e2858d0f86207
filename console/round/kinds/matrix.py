"""A matrix round: main against a candidate over every cell of the profile's [matrix] (core.matrix).

Parity runs once, as in any round (the matrix does not multiply it). Then each pair runs every
cell still open, both builds of a cell adjacent (main first on even pairs, the candidate first on
odd ones, so each cell's own pairs cancel linear drift), the cells in an order rotated by one each
pair so no cell always runs first or last. After each pair every cell is decided at the family's
rates (``core.decisions.cells.matrix_progress``); a decided cell costs no more pairs; the round stops when every
cell is decided or the budget ends. The verdict is the gate's (``gate.decide`` on the receipt).

Its receipt says ``kind = "matrix"``: an experiment of its own, so a rerun of a decided matrix
stops at once, as a round's does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.records import kinds
from .base import Kind


@dataclass(frozen=True)
class Matrix(Kind):
    record = kinds.MATRIX

    def plan(self, plan: dict[str, Any], p: Any) -> dict[str, Any]:
        return {**plan, "matrix": p.matrix.to_dict()}

    def slots(self, p: Any) -> int:
        # each server is started once, for the round: it must hold the largest cell's load
        return max([int(dict(c.args).get("concurrency", p.server.concurrency)) for c in p.matrix.cells]
                   + [p.server.concurrency])

