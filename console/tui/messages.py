"""What flows into the app: the event-source protocol and the app's own messages.

The app never measures anything. It receives :mod:`console.events` objects from an
:class:`EventSource` (a live round, a replay) on a thread worker and renders them.

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
from typing import Callable, Iterator, Protocol, Union, runtime_checkable

from textual.message import Message

from console.events import Event


@runtime_checkable
class EventSource(Protocol):
    """A round's event stream, as the console app consumes it.

    ``events()`` is a blocking iterator (it may take minutes); the app runs it on a
    thread worker. ``abort()`` is called from the UI thread, must be thread-safe and
    return promptly; the source then tears down what it started and ends the stream,
    normally with ``RoundEnded(status="incomplete")``.

    A source that has not started yet is given to the app as a zero-argument
    factory (:data:`SourceFactory`): the app opens idle and calls it when the user
    presses ``s``.
    """

    def events(self) -> Iterator[Event]: ...

    def abort(self) -> None: ...


SourceFactory = Callable[[], EventSource]
SourceArg = Union[EventSource, SourceFactory, None]


@dataclass
class Arrival:
    """An event and the moment (``perf_counter``) the worker received it."""
    event: Event
    received: float


class Inbox:
    """Thread-safe queue between the worker thread and the UI thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: deque[Arrival] = deque()

    def put(self, event: Event) -> bool:
        """Queue an event; True when the inbox was empty (the UI needs waking)."""
        with self._lock:
            was_empty = not self._items
            self._items.append(Arrival(event, time.perf_counter()))
        return was_empty

    def drain(self) -> list[Arrival]:
        with self._lock:
            items = list(self._items)
            self._items.clear()
        return items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class EventsPending(Message):
    """Wake-up: the inbox has events. Redundant wake-ups collapse into one."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EventsPending)


class StreamClosed(Message):
    """The source's iterator finished (``error`` set when it raised)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error
