"""``console queue``'s tables: its candidates, and one candidate's history (docs/EXPORTS.md, "Queue")."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .tables import Column, Table, short

QUEUE_COLUMNS = (
    Column("id", "the candidate's number in this queue"),
    Column("author", "who submitted it (one open candidate per author)"),
    Column("state", "draft | queued | running | mergeable | not-mergeable | review | refused | cancelled | merged"),
    Column("ready_at", "when it became ready: its place in the queue (UTC, ISO 8601; empty for a draft)"),
    Column("source", "the candidate as submitted: a patch file, a directory, REPO@REF or pypi:NAME==VERSION"),
    Column("waiting", "why it is not booked next (empty: it is bookable, or not waiting)"),
    Column("conflicts", "other open candidates that change one of its files"),
    Column("reason", "why it is in its state: the refusal, the round's outcome, the requeue's diagnosis"),
    Column("receipt_id", "its last sealed round", short(12)),
    Column("rounds", "rounds booked for it so far"),
)

HISTORY_COLUMNS = (
    Column("seq", "order of the change in the whole queue"),
    Column("candidate", "the candidate's number"),
    Column("at", "when (UTC, ISO 8601)"),
    Column("state", "the state it moved to"),
    Column("reason", "why"),
)

def queue_table(rows: Sequence[Any], plan: Any) -> Table:
    waiting = {w.id: w.reason for w in plan.waiting}
    return Table("queue", "Queue", QUEUE_COLUMNS, [
        r.to_dict() | {"waiting": waiting.get(r.id, ""), "conflicts": list(plan.conflicts.get(r.id, ()))}
        for r in rows])


def history_table(history: Sequence[Mapping[str, Any]]) -> Table:
    return Table("history", "History", HISTORY_COLUMNS, [dict(h) for h in history])
