"""The handover: the console's own clock times a bench run's section (docs/PROTOCOL.md, "The handover").

The engine sets itself up (model, context) and opens the ``go`` FIFO; only then does the console
start its monotonic clock and hand over the section's first chunk of token ids. The engine answers
each chunk with the argmax of its last position, and after the last chunk with the final row's
logits; the console stops its clock when the last byte of those logits arrives. A decode section
goes one token per chunk, in lock-step: the engine never holds token i+1 before it has answered
token i, so nothing in its process (a library included) can look ahead, and nothing it reports
is the figure the verdict decides on.

This module is the edge: pipes, file descriptors and the clock. What to hand over is drawn in
``console.core.records.section``; how the figure is judged is ``console.core.decisions``.
"""
from __future__ import annotations

import errno
import fcntl
import os
import select
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

GO, DONE = "go", "done"
ACK_MAX = 32                # bytes an ack line may take: a decimal token id and its newline
OPEN_POLL_S = 0.001         # how often the console looks for the engine at the ``go`` end


@dataclass
class Handover:
    """What the console saw of one section: its own clock, the engine's answers, or why it failed."""
    chunks: list[list[int]]
    vocab: int
    section_s: float | None = None      # the console's clock: first chunk written to last logit read
    acks: list[int] = field(default_factory=list)
    logits: bytes = b""
    error: str | None = None


def make_fifos(directory: Path) -> Path:
    """A fresh handover directory with its two FIFOs, writable by the run's (non-root) user."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    for name in (GO, DONE):
        path = directory / name
        if path.exists() or path.is_symlink():
            path.unlink()
        os.mkfifo(path, 0o666)
        os.chmod(path, 0o666)       # the umask is not the run's to decide
    return directory


class _Closed(Exception):
    """The engine ended, or the run's deadline passed, before the section was done."""


def drive(directory: Path, chunks: list[list[int]], vocab: int, exited: Callable[[], bool],
          deadline: float) -> Handover:
    """Hand ``chunks`` to the engine one at a time and time the section on the console's clock.

    ``exited`` says whether the engine's process has ended; ``deadline`` (time.monotonic) bounds the
    whole exchange. Never raises for anything the engine does: a failure is ``Handover.error``."""
    h = Handover(chunks=chunks, vocab=vocab)
    done_fd = go_fd = -1
    try:
        # O_RDWR: the console is a writer too, so a read never sees end-of-file before the engine
        # writes, and the engine's own open of ``done`` never waits
        done_fd = os.open(directory / DONE, os.O_RDWR | os.O_NONBLOCK)
        _widen(done_fd, 4 * vocab)
        go_fd = _open_go(directory / GO, exited, deadline)
        reader = _Reader(done_fd, exited, deadline)
        t0 = time.monotonic()
        for chunk in chunks:
            _write_all(go_fd, (" ".join(str(int(t)) for t in chunk) + "\n").encode())
            h.acks.append(reader.ack())
        h.logits = reader.exactly(4 * vocab)
        h.section_s = time.monotonic() - t0
    except _Closed as e:
        h.error = str(e)
    except BrokenPipeError:
        h.error = "the engine closed its end of the handover before the section was handed over"
    except OSError as e:
        h.error = f"the handover failed: {e.strerror or e}"
    finally:
        for fd in (go_fd, done_fd):
            if fd >= 0:
                os.close(fd)
    return h


def _widen(fd: int, size: int) -> None:
    """A pipe that holds the final logits whole, so the engine writes them in one go rather than in
    64 KiB turns with the console (up to the node's pipe-max-size; a smaller pipe still works)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(size + 4096, 1 << 20))
    except (OSError, AttributeError):
        pass


def _open_go(path: Path, exited: Callable[[], bool], deadline: float) -> int:
    """The ``go`` end opens once the engine opens it for reading (set up, waiting for its section)."""
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            if exited():
                raise _Closed("the engine ended without opening the handover (did its bench take --handover?)")
            if time.monotonic() > deadline:
                raise _Closed("the engine did not open the handover before the run's timeout")
            time.sleep(OPEN_POLL_S)
            continue
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Reader:
    """Reads the engine's answers from ``done`` without ever blocking past the deadline."""

    def __init__(self, fd: int, exited: Callable[[], bool], deadline: float):
        self.fd, self.exited, self.deadline = fd, exited, deadline
        self.buf = bytearray()
        self.poll = select.poll()
        self.poll.register(fd, select.POLLIN)

    def _more(self) -> None:
        while True:
            if self.poll.poll(50):
                try:
                    data = os.read(self.fd, 1 << 20)
                except BlockingIOError:
                    continue
                if data:
                    self.buf += data
                    return
            if self.exited() and not self.poll.poll(0):
                raise _Closed("the engine ended before it answered the whole section")
            if time.monotonic() > self.deadline:
                raise _Closed("the engine did not answer the section before the run's timeout")

    def ack(self) -> int:
        while b"\n" not in self.buf:
            if len(self.buf) > ACK_MAX:
                raise _Closed("the engine's answer to a chunk is not a token id and a newline")
            self._more()
        line, _, rest = bytes(self.buf).partition(b"\n")
        self.buf = bytearray(rest)
        text = line.decode("ascii", "replace")
        if not text.isdigit():
            raise _Closed(f"the engine's answer to a chunk is not a token id: {text[:20]!r}")
        return int(text)

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


class Driver:
    """One run's handover beside the runtime's own wait: the runtime starts the engine, calls
    ``start`` and, once the engine has exited, ``finish``; the exchange runs in a thread meanwhile."""

    def __init__(self, directory: Path, chunks: list[list[int]], vocab: int):
        self.directory, self.chunks, self.vocab = make_fifos(directory), chunks, vocab
        self._exited = threading.Event()
        self._thread: threading.Thread | None = None
        self.result: Handover | None = None

    def start(self, timeout_s: float) -> None:
        started = time.monotonic()

        def run() -> None:
            self.result = drive(self.directory, self.chunks, self.vocab, self._exited.is_set, started + timeout_s)
        self._thread = threading.Thread(target=run, name="handover", daemon=True)
        self._thread.start()

    def finish(self) -> Handover:
        """Called once the engine has exited (or was killed): what the section came to."""
        self._exited.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.result is None:
            self.result = Handover(chunks=self.chunks, vocab=self.vocab,
                                   error="the handover did not finish after the engine exited")
        return self.result
