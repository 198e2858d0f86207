"""Bisection over an ordered range of sources, each step a decided round: which to try next, what the
steps say together, and at what error rate.

The range is items 0 … n−1: item 0 is the good end, item n−1 the bad end (a regression: slower than
good; or, bisecting an improvement, faster). Each step is a round of one item against the good end,
decided with three outcomes at the step's rates, and read here as a ``Mark``:

- ``GOOD``: like the good end (``none``: no change of ``min_gain`` either way);
- ``BAD``: like the bad end (``slower``, or ``accepted`` when bisecting an improvement);
- ``SKIP``: could not be judged: it failed to build, failed parity, or was held (as ``git bisect``'s
  exit 125);
- ``UNDECIDED``: measured to its pair budget without a decision; never guessed either way, so it
  is treated as a skip.

``next_probe`` picks the untried item nearest the middle of what is still open (``git bisect``'s
rule with skips); ``conclude`` says what the marks show: one first bad item, several that could be
it (skipped or undecided neighbours), or marks that contradict a single step.

**The error rate of the whole bisection.** A step errs when it marks an item GOOD that is truly
changed by ``min_gain`` or more (at most the step's ``miss``) or BAD when it is truly unchanged (at
most ``false_slower``, or ``false_accept`` for an improvement). The answer can only be wrong if some
step erred, so by Bonferroni the bisection errs with probability at most the sum of its decided
steps' rates. ``split`` gives each planned step ``total / planned``, planned = ⌈log₂(n − 1)⌉ probes
(the most a range of n items needs with no skips) + 2 (the endpoints' round and the culprit's
check against the bad end). The rates actually spent are summed in the result: skips can add
steps, and a sum above the target is said, never hidden.

Pure: no I/O.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

from console.core.provenance.reruns import DECIDED_OUTCOMES

DIRECTIONS = ("slower", "faster")       # bisecting a regression, or an improvement


class Mark(enum.StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    UNDECIDED = "undecided"


UNJUDGED = (Mark.SKIP, Mark.UNDECIDED)


def changed_outcome(direction: str) -> str:
    """The outcome that says an item carries the change being bisected."""
    return "slower" if direction == "slower" else "accepted"


def rate_of(outcome: str, rules: Any) -> float:
    """The error rate a round's outcome was decided at, under the rules it was sealed with (0: it
    decided nothing)."""
    return {"none": rules.miss, "slower": rules.false_slower, "accepted": rules.false_accept}.get(outcome, 0.0)


def mark_of(outcome: str, direction: str) -> Mark:
    """A step's mark from its round's outcome. Outcomes that are not a speed decision about the
    item (rejected: parity or claims; implausible, uncheckable) are skips; ``infra`` never gets here
    (the node failed: the bisection stops)."""
    if outcome == "none":
        return Mark.GOOD
    if outcome == "undecided":
        return Mark.UNDECIDED
    if outcome == changed_outcome(direction):
        return Mark.BAD
    if outcome in ("slower", "accepted"):
        return Mark.GOOD        # changed the other way: not like the bad end (said as a second change)
    return Mark.SKIP


def planned_steps(n: int) -> int:
    """Decided rounds a bisection of ``n`` items plans for: the probes of the open interior, the
    endpoints' round and the check of the first bad item against the bad end."""
    if n < 2:
        raise ValueError(f"a range needs at least two items (good and bad), got {n}")
    return (math.ceil(math.log2(n - 1)) if n > 2 else 0) + 2


def split(total: float, n: int) -> float:
    """Each decided step's rate when the whole bisection may err with probability ``total``."""
    if not 0.0 < total < 1.0:
        raise ValueError(f"the bisection's error rate must be in (0, 1), got {total}")
    return total / planned_steps(n)


def step_rules(rules: Any, rate: float, min_gain: float = 0.0) -> Any:
    """A profile's gate rules for a step: every error rate at ``rate`` (never looser than the
    profile's own); ``min_gain`` at least the profile's; no anchor (a step's basis is its gain over
    the good end); no guards and no pairs spent settling a tier: a step asks one question, like good
    or like bad."""
    return replace(rules, false_accept=min(rules.false_accept, rate), false_slower=min(rules.false_slower, rate),
                   miss=min(rules.miss, rate), min_gain=max(rules.min_gain, min_gain), anchor=0.0, guards=(),
                   latency=(), settle_pairs=0)


def step_min_gain(ends_gain: float | None, floor: float) -> float:
    """The change a probe must rule out to be like the good end: half the change the ends' round
    measured (its point estimate), and never less than the profile's ``min_gain``.

    A probe asks which end an item is like, not whether it moved at all: an item that is like the
    good end within half the ends' change does not carry that change. Deciding against the profile's
    smallest gain instead (3.5 % on the demo) would need hundreds of pairs at a step's split rate on
    a noisy node, and leave probes undecided. The threshold comes from the ends' round, whose pairs
    no probe reuses, so each probe's rates hold given it."""
    if ends_gain is None or not math.isfinite(ends_gain):
        return floor
    return max(floor, abs(ends_gain) / 2.0)


@dataclass(frozen=True)
class Open:
    """What the marks leave open: the last good item, the first bad one after it, between them."""
    good: int
    bad: int
    untried: tuple[int, ...]        # items strictly between with no mark yet
    unjudged: tuple[int, ...]       # items strictly between marked SKIP or UNDECIDED


def open_range(n: int, marks: Mapping[int, Mark]) -> Open:
    """The narrowest range the marks allow, read as one step: the highest GOOD item below the
    lowest BAD one (a GOOD above a BAD is a contradiction: see ``contradictions``)."""
    bads = [i for i, m in marks.items() if m is Mark.BAD] + [n - 1]
    bad = min(bads)
    good = max([i for i, m in marks.items() if m is Mark.GOOD and i < bad] + [0])
    between = range(good + 1, bad)
    return Open(good, bad, tuple(i for i in between if i not in marks),
                tuple(i for i in between if marks.get(i) in UNJUDGED))


def next_probe(n: int, marks: Mapping[int, Mark]) -> int | None:
    """The item to try next: the untried one nearest the middle of the open range (the lower of
    two equally near); None when nothing between the last good and the first bad is untried."""
    o = open_range(n, marks)
    if not o.untried:
        return None
    mid = (o.good + o.bad) / 2
    return min(o.untried, key=lambda i: (abs(i - mid), i))


def contradictions(marks: Mapping[int, Mark]) -> list[tuple[int, int]]:
    """(bad, good) pairs where an item marked BAD comes before one marked GOOD: the change came and
    went, or the range holds more than one; a single step cannot explain them."""
    bads = sorted(i for i, m in marks.items() if m is Mark.BAD)
    goods = sorted(i for i, m in marks.items() if m is Mark.GOOD)
    return [(b, g) for b in bads for g in goods if g > b][:5]


@dataclass(frozen=True)
class Conclusion:
    """What a finished bisection's marks show."""
    first_bad: int | None           # the first bad item, when exactly one is possible
    suspects: tuple[int, ...]       # every item that could be the first bad one, in order
    last_good: int

    @property
    def found(self) -> bool:
        return self.first_bad is not None


def conclude(n: int, marks: Mapping[int, Mark]) -> Conclusion:
    """The first bad item the marks allow: the open range's bad end, and the unjudged items before
    it, which could each be the first bad one instead."""
    o = open_range(n, marks)
    suspects = (*o.unjudged, o.bad)
    return Conclusion(first_bad=o.bad if len(suspects) == 1 else None, suspects=suspects, last_good=o.good)


# --- the steps and what they add up to ------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One round of a bisection, as the bisection reads it."""
    role: str                       # "endpoints" (good against bad), "probe", or "check" (first bad against bad)
    item: int                       # the item measured as the candidate (the good end is main, except in "check")
    against: int                    # the item measured as main
    outcome: str                    # the round's outcome, or "build-failed" / "infra" / "interrupted"
    mark: Mark | None = None        # probes: what the outcome says of the item
    rate: float = 0.0               # the rate the round decided at (0: it decided nothing)
    gain: float | None = None       # candidate against main, with its interval at the round's level
    low: float | None = None
    high: float | None = None
    pairs: int = 0
    minutes: float = 0.0
    receipt: str = ""               # the sealed receipt (or the earlier step that decided it)
    round_id: str = ""
    note: str = ""                  # why it was skipped, or that an earlier step decided it

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Mark) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Step":
        return cls(**{**d, "mark": Mark(d["mark"]) if d.get("mark") else None})


RESULTS = {   # what a bisection can end as, and its exit code (docs/BISECT.md)
    "found": 0,             # one first bad item, and it accounts for the whole change
    "suspects": 5,          # narrowed to several items (skipped or undecided neighbours)
    "not-one-step": 1,      # the ends are not decided apart, or the change is not one step
    "infra": 3,             # the node or its tooling failed: retry
    "interrupted": 130,
}


def spent(steps: list[Step]) -> float:
    """The bisection's error bound: the sum of its decided steps' rates (Bonferroni)."""
    return sum(s.rate for s in steps if s.rate > 0 and s.outcome in DECIDED_OUTCOMES)


def effect_of(steps: list[Step], i: int | None) -> Step | None:
    """The step that measured item ``i`` against the good end (a probe, or the ends' round): the
    size of its change, with its interval."""
    return next((s for s in reversed(steps) if s.item == i and s.against == 0), None) if i is not None else None


def direction_of(outcome: str) -> str | None:
    """The endpoints' round decides what is bisected: a regression, an improvement, or nothing."""
    return {"slower": "slower", "accepted": "faster"}.get(outcome)


def changed_the_other_way(steps: list[Step], direction: str) -> list[Step]:
    """Probes decided changed against good in the direction opposite to the one bisected: the range
    holds a second change."""
    other = changed_outcome("faster" if direction == "slower" else "slower")
    return [s for s in steps if s.role == "probe" and s.outcome == other]


def git_bisect_word(outcome: str) -> str:
    """What `git bisect run` is told of a step of a regression: good (0), bad (1), skip (125: cannot
    tell) or abort (128: the node failed or a person stopped it; git bisect stops)."""
    if outcome in ("infra", "interrupted"):
        return "abort"
    return {Mark.GOOD: "good", Mark.BAD: "bad"}.get(mark_of(outcome, "slower"), "skip")
