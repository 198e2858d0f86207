"""What flows into the app: the sources it accepts and the app's own messages.

The app never measures anything. It receives :mod:`console.events` objects from an
:class:`console.events.EventSource` (a live round, a replay) on a thread worker and renders them.

Events do not travel one message each: the worker appends them to an
:class:`Inbox` and posts one :class:`EventsPending` wake-up. The app drains the
inbox at most once per refresh interval, so a flood of build-log lines or
telemetry costs one screen update per interval instead of one per line.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Union

from textual.message import Message

from console.events import Event, EventSource


# a source not started yet: the app opens idle and calls it when the user presses ``s``
SourceFactory = Callable[[], EventSource]
SourceArg = Union[EventSource, SourceFactory, None]


@dataclass
class Arrival:
    """An event and the moment (``perf_counter``) the worker received it."""
    event: Event
    received: float


INBOX_LIMIT = 128  # events; a source faster than the screen waits (see Inbox.put)


class Inbox:
    """Thread-safe, bounded queue between the worker thread and the UI thread.

    The bound is backpressure: a replay at full speed (or a burst of log lines)
    waits for the screen instead of queueing seconds of events behind it, which
    keeps arrival-to-screen latency bounded. A live round never comes near it.
    """

    def __init__(self, limit: int = INBOX_LIMIT) -> None:
        self._cond = threading.Condition()
        self._items: deque[Arrival] = deque()
        self._limit = limit
        self._closed = False

    def put(self, event: Event) -> str | None:
        """Queue an event. Returns "wake" when the inbox was empty (the UI needs
        waking), "full" when it just filled up (the UI should drain now rather
        than wait for its next interval), else None."""
        with self._cond:
            while len(self._items) >= self._limit and not self._closed:
                self._cond.wait(0.1)
            was_empty = not self._items
            self._items.append(Arrival(event, time.perf_counter()))
            full = len(self._items) >= self._limit
        return "full" if full else "wake" if was_empty else None

    def drain(self) -> list[Arrival]:
        with self._cond:
            items = list(self._items)
            self._items.clear()
            self._cond.notify_all()
        return items

    @property
    def full(self) -> bool:
        with self._cond:
            return len(self._items) >= self._limit

    def close(self) -> None:
        """Stop applying backpressure (the app is going away)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)


class EventsPending(Message):
    """Wake-up: the inbox has events (``urgent``: it is full). Redundant wake-ups
    collapse into one; an urgent one is never replaced by a plain one."""

    def __init__(self, urgent: bool = False) -> None:
        super().__init__()
        self.urgent = urgent

    def can_replace(self, message: Message) -> bool:
        # ``message`` is the newer, pending one: it supersedes this one.
        return isinstance(message, EventsPending) and (message.urgent or not self.urgent)


class StreamClosed(Message):
    """The source's iterator finished (``error`` set when it raised)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error
