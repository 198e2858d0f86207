"""The alarm on main's history (``console history --fail-on regression``): does the newest segment of
any watched series sit decidedly on the wrong side of the one before?

**What is watched.** Every series of the history but those superseded: a series whose node, profile
and figure carry on in a later series of another experiment identity (an edited profile, another
runtime) is history, not main's present.

**When it fires.** A watched series' newest change point (the start of its newest segment) is a
regression when the newest segment is worse than the segment before it: lower for a throughput,
higher for a latency. The change point itself was found at ``History.series_alpha`` = alpha /
series (``core.provenance.history``), so in a history where nothing changed the chance that the
alarm fires is at most ``History.alpha`` over the whole family, whatever the dependence between
series (Bonferroni). Its size is the newest segment against the one before, with a two-sided
``1 − series_alpha`` Welch interval, and it names the rounds on either side.

Pure: a ``History`` in, an ``Alarm`` out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from console.core.statistics import changepoints as cp
from console.core.provenance.history import Change, History, Series

FAIL_ON = ("regression", "change")     # what --fail-on may name


@dataclass(frozen=True)
class Finding:
    """A watched series whose newest segment moved: which, by how much, between which rounds."""
    series: Series
    change: Change              # the change point that starts the newest segment
    size: float                 # newest segment against the one before: exp(mean log after − before) − 1
    low: float
    high: float
    before: int                 # rounds in the segment before and in the newest
    after: int

    @property
    def regression(self) -> bool:
        worse_up = self.series.key.lower_is_better
        return self.size > 0 if worse_up else self.size < 0

    @property
    def word(self) -> str:
        return "regression" if self.regression else "improvement"

    def sentence(self) -> str:
        c = self.change
        return (f"{self.series.key.name}: {self.word} {self.size:+.1%} [{self.low:+.1%}, {self.high:+.1%}] "
                f"({self.after} rounds since {c.after.round_id}, against {self.before} before, the last "
                f"{c.before.round_id}; main {c.before.source} then {c.after.source})")


@dataclass(frozen=True)
class Alarm:
    fail_on: str                # "regression" (a step the wrong way) or "change" (either way)
    watched: tuple[Series, ...]
    superseded: int             # series not watched: a later identity of the same node, profile and figure
    alpha: float                # the family's false-alarm rate
    series_alpha: float         # each series' share
    findings: tuple[Finding, ...]   # every watched series whose newest segment moved

    @property
    def firing(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.regression or self.fail_on == "change")

    @property
    def fired(self) -> bool:
        return bool(self.firing)

    def method(self) -> str:
        return (f"{len(self.watched)} series watched, each at {self.series_alpha:.3g} (alpha {self.alpha:g} over the "
                "family, Bonferroni): the chance of an alarm in a history with no change is at most "
                f"{self.alpha:g}")


def superseded(s: Series, h: History) -> bool:
    """Whether a series of the same node, profile and figure started after ``s`` ended."""
    return any(t is not s and t.key.shape == s.key.shape and t.points[0].sealed_at > s.points[-1].sealed_at
               for t in h.series)


def newest(s: Series, alpha: float) -> Finding | None:
    """The newest segment of ``s`` against the one before (None when the series has no change point)."""
    if not s.changes or len(s.segments) < 2:
        return None
    prev, last = s.segments[-2], s.segments[-1]
    logs = [math.log(p.value) for p in s.points]
    size, low, high = cp.sized(logs[prev.start:prev.end], logs[last.start:last.end], 1.0 - alpha)
    change = next(c for c in s.changes if c.point.at == last.start)
    return Finding(s, change, size, low, high, prev.end - prev.start, last.end - last.start)


def alarm_of(h: History, fail_on: str = "regression") -> Alarm:
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    kept = tuple(s for s in h.series if not superseded(s, h))
    found = tuple(f for s in kept if (f := newest(s, h.series_alpha)) is not None)
    return Alarm(fail_on, kept, len(h.series) - len(kept), h.alpha, h.series_alpha, found)
