"""The crash-safe journal of a running round: one fsynced JSON line per event.

``DIR/journal/<round_id>.jsonl`` holds every event a round emitted, in order.
A line reaches the disk before the round moves on, so after a crash (or a
SIGKILL) the journal holds every finished event and at most one torn last
line; a resumed round reads the plan and the finished reps back from it.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from console import events
from console.core.records.untrusted import loads
from console.files import read_file
from console.results.store import fsync_dir

JOURNAL_DIR = "journal"


class JournalDamaged(RuntimeError):
    """A bad line that is not the last one: not a crash, so nothing is repaired."""


def journal_path(out_dir: str | os.PathLike[str], round_id: str) -> Path:
    if not round_id or "/" in round_id or round_id.startswith("."):
        raise ValueError(f"round id {round_id!r} cannot name a journal file")
    return Path(out_dir) / JOURNAL_DIR / f"{round_id}.jsonl"


# --- reading -------------------------------------------------------------------

@dataclass(frozen=True)
class JournalRead:
    events: list[dict[str, Any]]    # every complete event, in order (Event.to_dict() form)
    complete: bool                  # a round_ended event is present
    torn_tail: bool                 # the last line was cut short (dropped from events)
    damaged_line: int | None = None # a bad line before the end: reading stopped there
    good_bytes: int = 0             # length of the intact prefix

    def typed(self) -> list[events.Event]:
        """The events read typed (``events.event_from_dict``), up to the first one this version cannot
        read (a newer or damaged journal shows what came before it)."""
        out: list[events.Event] = []
        for d in self.events:
            try:
                out.append(events.event_from_dict(d))
            except (ValueError, TypeError, KeyError):
                break
        return out


def read_journal(path: str | os.PathLike[str]) -> JournalRead:
    """The intact prefix of a journal. Never raises on a torn or missing file; a device, a
    directory or a file too large to be a journal is a usage error naming it."""
    if not os.path.lexists(path):
        return JournalRead([], False, False)
    return parse_journal(read_file(path, "a round's journal", "Give results/<profile>/journal/<round>.jsonl."))


def parse_journal(data: bytes) -> JournalRead:
    events: list[dict[str, Any]] = []
    pos = 0
    n = 0
    while pos < len(data):
        n += 1
        end = data.find(b"\n", pos)
        ev = _event(data[pos:end]) if end >= 0 else None
        if ev is None:
            last = end < 0 or end + 1 >= len(data)
            return _result(events, torn=last, damaged=None if last else n, good=pos)
        events.append(ev)
        pos = end + 1
    return _result(events, torn=False, damaged=None, good=pos)


def _event(raw: bytes) -> dict[str, Any] | None:
    try:
        ev = loads(raw)
    except ValueError:
        return None
    return ev if isinstance(ev, dict) and isinstance(ev.get("kind"), str) else None


def _result(events: list[dict[str, Any]], torn: bool, damaged: int | None, good: int) -> JournalRead:
    complete = any(e["kind"] == "round_ended" for e in events)
    return JournalRead(events, complete, torn, damaged, good)


# --- writing -------------------------------------------------------------------

class Journal:
    """Appends events durably. Reopening an existing journal first cuts a torn tail."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        self._repair()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if new:
            fsync_dir(self.path.parent)

    def _repair(self) -> None:
        r = read_journal(self.path)
        if r.damaged_line is not None:
            raise JournalDamaged(f"{self.path}: line {r.damaged_line} is unreadable but is not the last "
                                 "line; refusing to append to a damaged journal")
        if r.torn_tail:
            os.truncate(self.path, r.good_bytes)

    def append(self, event: Any) -> None:
        """Write one event (an Event or its dict) and wait until it is on disk."""
        d = event.to_dict() if hasattr(event, "to_dict") else dict(event)
        if not isinstance(d.get("kind"), str):
            raise ValueError("a journal event needs a string 'kind'")
        # NaN is allowed: a journal must never stop a round; receipts, not journals, are canonical.
        line = json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
        view = memoryview(line)
        while view:                     # one write call in practice; loop for short writes
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --- resuming ------------------------------------------------------------------

def round_plan(events: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The plan the round started with (from ``round_started``), or None."""
    for e in events:
        if e.get("kind") == "round_started":
            return dict(e.get("plan") or {})
    return None


def completed_reps(events: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rep records already finished, in the order they ran (from ``rep_done``)."""
    return [dict(e["rep"]) for e in events if e.get("kind") == "rep_done" and isinstance(e.get("rep"), Mapping)]
