"""Following a round to its end from a process that may be signalled (a terminal, a batch job)."""
from __future__ import annotations

import signal

from ..errors import ExitCode


def follow(rnd, sink) -> None:
    """Feed a round's events to ``sink`` to its end. Ctrl-C or SIGTERM (a scheduler's cancel)
    aborts it: the round tears down its container and ends incomplete, sealing nothing."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # Ctrl-C aborts the round even when this process inherited SIGINT as ignored
    # (a background job of a non-interactive shell does).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        gen = rnd.events()
        while True:
            try:
                for e in gen:
                    sink(e)
                break
            except KeyboardInterrupt:
                rnd.abort()  # the round tears down its container and ends as incomplete
                if gen.gi_frame is None:        # a second Ctrl-C ended the stream: wait, bounded
                    rnd.wait(timeout=60)
                    rnd.exit_code = ExitCode.INTERRUPTED
                    return
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
