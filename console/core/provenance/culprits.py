"""Which of history's change points `console history --bisect` can hand to a bisection, and which
it cannot, each with why. A change point can be bisected when main's sources on its two sides are
commits of one repository or releases of one package (``Change.bisect_command``) and its figure is
one `console bisect` decides: the profile's scored metric or a guard's. Change points of the same
profile, runtime, metric and range are one bisection (a serving round's throughput and its guard
stepping at the same round are one culprit to find).

Pure: a ``History`` in, plans out; running them is ``console.bisect.hunt``'s.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from console.core.provenance import watched
from console.core.provenance.history import Change, History, Series


@dataclass(frozen=True)
class Hunt:
    """One bisection to run: a range of main's sources, under the profile the rounds ran."""
    good: str                   # main's source in the last round before the change
    bad: str                    # and in the first round after it
    profile: str                # the profile's path as the rounds recorded it
    profile_sha256: str
    metric: str
    runtime: str
    receipt: str                # the first round after the change: the steps go to its results directory
    changes: tuple[tuple[Series, Change], ...]

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return self.profile, self.runtime, self.metric, self.good, self.bad


@dataclass(frozen=True)
class Culprit:
    """What one hunt's bisection found, as the culprits table says it."""
    hunt: Hunt
    result: str                 # the bisection's result (core.bisection.RESULTS), or "not run"
    culprit: str = ""           # the first item like the bad end (found), or "one of …" (suspects)
    steps: int = 0
    measured: int = 0           # steps measured now; the others were decided by earlier steps in the ledger
    minutes: float = 0.0
    sentence: str = ""          # the bisection's sentence, or why it was not run
    record: str = ""            # the bisection's record (OUT/bisect/ID.json)


@dataclass(frozen=True)
class Skipped:
    series: Series
    change: Change
    why: str


def _why_not(s: Series, c: Change) -> str:
    if c.bisect_command is None:
        if c.before.source == c.after.source:
            return "main's source is the same on both sides: the node or its load moved, not main"
        return "main was a directory on one side or both: there are no commits or releases to order"
    if not watched.bisectable(s.key.figure):
        return (f"{s.key.figure} is not a figure `console bisect` decides (it bisects the scored metric or a "
                "guard's): bisect the scored metric's change point at the same rounds, if there is one")
    return ""


def hunts(h: History, profiles: dict[str, tuple[str, str]]) -> tuple[list[Hunt], list[Skipped]]:
    """The bisections ``h``'s change points ask for (one per profile, runtime, metric and range, in
    the order of the series), and the change points that ask for none. ``profiles`` maps a change's
    first round after (its receipt id) to the profile's (path, sha256) that round recorded."""
    plans: dict[tuple[str, str, str, str, str], Hunt] = {}
    skipped: list[Skipped] = []
    for s in h.series:
        for c in s.changes:
            why = _why_not(s, c)
            if why:
                skipped.append(Skipped(s, c, why))
                continue
            path, sha = profiles.get(c.after.receipt, ("", ""))
            plan = Hunt(c.before.source, c.after.source, path, sha, s.key.metric, s.key.runtime, c.after.receipt,
                        ((s, c),))
            old = plans.get(plan.key)
            plans[plan.key] = replace(old, changes=old.changes + ((s, c),)) if old else plan
    return list(plans.values()), skipped
