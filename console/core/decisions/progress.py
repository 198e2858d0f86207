"""How far a round is, and how long it may still take, from its events alone.

The headless lines and the live console show the same figures: reps done out of the
most the plan allows, and the time left at most, from the measured time per rep (the
gap between finished reps, so settling and container start are in it). A round stops
its timed pairs once decided, so the real end is usually sooner: the figure is an
upper bound, and the minutes budget caps the timed part of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from console.core.records.receipt import Rep

_STEP = re.compile(r"^Step (\d+)/(\d+)\s*:")


def build_step(line: str) -> tuple[int, int] | None:
    """(step, steps) from a Docker build line such as ``Step 3/19 : RUN make``."""
    m = _STEP.match(line)
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Progress:
    done: int                   # scheduled reps finished (a retried rep counts once)
    total: int | None           # reps the plan allows at most (None: the plan does not say)
    eta_s: float | None         # seconds left at most; None before a rep time is measured

    def text(self) -> str:
        if self.total is None:
            return f"rep {self.done}"
        return f"rep {self.done}/{self.total}, " + (f"≤ {duration(self.eta_s)} left" if self.eta_s is not None
                                                     else "time left not yet measured")


def build_how(seconds: float, reused_from: str = "") -> str:
    """How a build was obtained, said alike by the headless lines, the TUI and replay."""
    return f"reused from {reused_from}: same build key" if reused_from else f"built in {seconds:.1f} s"


def duration(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


class Tracker:
    """Folds a round's events into its ``Progress``."""

    def __init__(self) -> None:
        self.head = self.tail = self.pairs = 0
        self.per_pair = 2                   # reps in a timed pair: two, or two per cell of a matrix
        self.known = False                  # the plan says how many reps it allows
        self.max_minutes: float | None = None
        self.positions: set[int] = set()
        self.timed_positions: set[int] = set()
        self.times: list[float] = []        # event times of finished reps
        self.timed_started: float | None = None
        self.timed_closed = False          # a rep after the timed pairs ran: they are all known

    def start(self, plan: dict[str, Any]) -> None:
        pairs = plan.get("reps")
        self.known = "head_reps" in plan and isinstance(pairs, int)   # plans journaled before it say less
        if not self.known:
            return
        self.head, self.tail, self.pairs = int(plan["head_reps"]), int(plan.get("tail_reps") or 0), pairs
        self.per_pair = 2 * max(1, len((plan.get("matrix") or {}).get("cells") or ()))
        self.max_minutes = plan.get("max_minutes") if plan.get("sequential") else None

    def rep_done(self, rep: Rep, at: float) -> Progress | None:
        pos = rep.position
        if pos < 0:
            return None
        self.times.append(at)
        self.positions.add(pos)
        if rep.phase.startswith("guard:"):
            self.timed_closed = True
        if rep.phase == "timed" or rep.phase.startswith("cell:"):
            if self.timed_started is None:
                self.timed_started = self.times[-2] if len(self.times) > 1 else at
            self.timed_positions.add(pos)
        return self.progress(at)

    def progress(self, now: float) -> Progress:
        if not self.known:
            return Progress(len(self.positions), None, None)
        timed_total = len(self.timed_positions) if self.timed_closed else self.per_pair * self.pairs
        total = max(self.head + timed_total + self.tail, len(self.positions))
        left = total - len(self.positions)
        if len(self.times) < 2:
            return Progress(len(self.positions), total, None)
        per = (self.times[-1] - self.times[0]) / (len(self.times) - 1)
        timed_left = max(0, timed_total - len(self.timed_positions))
        other_left = left - timed_left
        timed_s = timed_left * per
        if self.max_minutes:
            # the timed pairs end once the minutes budget is spent (the pair under way finishes)
            spent = now - self.timed_started if self.timed_started is not None else 0.0
            timed_s = min(timed_s, max(0.0, 60 * self.max_minutes - spent) + 2 * per)
        return Progress(len(self.positions), total, other_left * per + timed_s)
