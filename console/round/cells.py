"""The timed stage of a matrix round (round.kinds.matrix): the speed stage's warm-up, sizing and
checks, with pairs over the cells still open in place of the one-cell loop (``CellPairs(stage)``
installs itself on the stage; the runner does so for a kind whose pairs run ``per_cell``)."""
from __future__ import annotations

import time
from typing import Any, Callable

from .. import events as ev
from ..core.decisions import cells
from ..core.records import matrix
from ..core.records.receipt import Receipt
from ..core.records.verdict import json_safe
from .plan import pair_budget
from .schedule import Item, cell_pair
from .speed import Speed


class CellPairs:
    """The timed loop of a matrix round (benchmarks/matrix_quality.py drives it too)."""

    def __init__(self, stage: Speed):
        self.stage = stage
        stage.timed_pairs = self.timed_pairs    # type: ignore[method-assign]  # the stage runs this loop
        spec = stage.p.matrix
        stage.long_phase = spec.cell(spec.home).phase

    def timed_pairs(self, receipt: Receipt, run: Callable[[list[Item]], None], start: int, done: dict,
                    repeat: int = 1) -> int:
        stage = self.stage
        p, cfg = stage.p, stage.cfg
        spec, rules = p.matrix, p.gate
        limit = pair_budget(cfg)
        open_keys = [c.key for c in spec.cells]
        decided_at: dict[str, int] = {}
        started, k, pos, stopped = time.monotonic(), 0, start, "budget-pairs"
        while k < limit:
            items = cell_pair(p, [spec.cell(key) for key in matrix.rotation(open_keys, k)], k, pos, repeat)
            run(items)
            pos, k = pos + len(items), k + 1
            found = cells.matrix_progress(receipt, rules)
            if found is None:
                stopped, stage.claims_refused = "claims", True
                stage._notice("warn", "claims-refused", "a build's runs or claims were refused: no more timed pairs "
                              "are run (the verdict says which and why)")
                break
            stage._emit(ev.CellsStep.of(k, [_live(c, d, rules.min_gain) for c, d in found]))
            open_keys = [c.key for c, d in found if not self._finished(c, d, k, decided_at, rules)]
            if not open_keys:
                stopped = "decided"
                break
            if rules.max_minutes and time.monotonic() - started > 60 * rules.max_minutes and k < limit:
                stopped = "budget-minutes"
                break
        if receipt.sequential is not None:
            receipt.sequential.stopped = stopped
            receipt.sequential.minutes = round((time.monotonic() - started) / 60, 3)
            if stopped == "decided":
                receipt.sequential.decided_at = k
        return k

    def _finished(self, cell: matrix.Cell, d: Any, k: int, decided_at: dict[str, int], rules: Any) -> bool:
        """Decided (an accepted tier settled, or its settle budget spent), or a guarded cell cleared."""
        if matrix.done(cell, d, rules.min_gain):
            return True
        if cell.scored and d.decided and not d.pending:
            at = decided_at.setdefault(cell.key, k)
            return k - at >= rules.settle_pairs
        return False


def _live(cell: matrix.Cell, d: Any, min_gain: float) -> dict[str, Any]:
    return json_safe({"key": cell.key, "role": cell.role, "state": matrix.state_of(cell, d, min_gain),
                      "pairs": d.pairs, "gain": d.gain, "interval": list(d.interval), "tier": d.tier})
