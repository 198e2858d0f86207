"""The wall clock as the console writes it: one format for every timestamp in a receipt, a journal
or the queue. An edge (it reads the time), so not in the pure core; below every layer that stamps."""
from __future__ import annotations

import time
from datetime import datetime, timezone


def utc_now(micro: bool = False) -> str:
    """ISO 8601 UTC; ``micro`` adds microseconds (a queue's order is its ready times, and seconds
    would tie within a burst of submissions)."""
    if micro:
        return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
