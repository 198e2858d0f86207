"""What `console reference capture` says when a capture does not reproduce its pin."""
from __future__ import annotations

from typing import Sequence

from ..core.provenance.refdiff import NEGLIGIBLE_NATS, Difference, Row


def _rows(rows: Sequence[Row], most: int = 6) -> str:
    shown = ", ".join(f"depth {d} row {r}" for d, r in rows[:most])
    return shown + (f" and {len(rows) - most} more" if len(rows) > most else "")


def difference_lines(diff: Difference, pin: str, compared_with: str) -> list[str]:
    """How a capture differs from the pin ``pin``, compared with ``compared_with`` over the first
    ``diff.k`` tokens of each row."""
    head = f"it differs from the pinned reference ({pin[:12]}…); compared with {compared_with}, " \
           f"the first {diff.k} tokens of each row:"
    if diff.identical:
        return [head, "  every compared figure is identical: the difference lies past the first "
                      f"{diff.k} tokens of some row (or in the file's other bytes); grading against the "
                      "pin's full file may still differ slightly"]
    at = diff.max_logp_at
    lines = [head,
             f"  rows that differ: {len(diff.changed)} of {diff.rows}, at depths "
             f"{', '.join(str(d) for d in diff.depths)}",
             f"  largest log-probability difference: {diff.max_logp:.3g} nats"
             + (f" (depth {at[0]} row {at[1]}, token {at[2]})" if at else "")
             + f"; entropy {diff.max_entropy:.3g} nats; next-token log-probability {diff.max_next_logp:.3g} nats",
             f"  the most likely token moved in {len(diff.argmax_moved)} rows"
             + (f" ({_rows(diff.argmax_moved)})" if diff.argmax_moved else "")
             + f"; another set of tokens kept in {len(diff.membership)}"
             + (f" ({_rows(diff.membership)})" if diff.membership else ""),
             f"  only tokens of equal log-probability trading places: {len(diff.ties_only)} of the "
             f"{len(diff.changed)} rows"]
    if diff.grading_can_change:
        why = ("top-1 agreement at those rows" if diff.argmax_moved else
               f"KL and Δp figures, by up to about {max(diff.max_logp, diff.max_next_logp):.3g} nats per row")
        lines.append(f"  grading could change: {why}; a build near a bar may be decided differently")
    else:
        lines.append(f"  grading cannot change: every figure a grading reads agrees within {NEGLIGIBLE_NATS:g} nats")
    return lines
