"""What the round tests read from a round's events."""
from __future__ import annotations

from console import events as ev


def verdict_of(events) -> dict:
    """The verdict a round ended with (failing with its notices when there was none)."""
    v = [e for e in events if isinstance(e, ev.VerdictReady)]
    assert v, [e.to_dict() for e in events if isinstance(e, ev.Notice)]
    return v[-1].verdict


def codes(v: dict) -> set[str]:
    return {r["code"] for r in v["reasons"]}
