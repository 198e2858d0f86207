"""The queue's policy: who is measured next, who waits and why, and what a finished round means.

Pure: works on typed candidates and returns decisions; the store (console/queueing/store.py) keeps
them and the worker runs the rounds. The rules, and why each exists:

- **Oldest first.** Candidates are booked in the order they became ready, not the order they
  were submitted, and never newest first: a late candidate may not overtake a waiting one.
- **Drafts are not booked.** A draft that is made ready joins at the time it became ready, so
  parking an early draft cannot reserve a place ahead of candidates that were ready sooner.
- **One open candidate per author.** Two open candidates of one author are both measured
  against a main the other is about to move, so neither marginal gain means anything. An
  author's later candidates wait, with that reason, until the earlier one is merged or closed.
- **Only scorable candidates are booked**, and every scorable one is: no profile, sources that
  do not resolve and a touched protected path are refused at submission with the reason.
- **Conflicts are labelled, not skipped.** Open candidates that change the same files are shown
  as conflicting; each is still measured in its turn.
- **Mergeable means measured.** Only a round that passed parity and was accepted with a tier makes
  a candidate mergeable; anything else is not mergeable, and an infrastructure failure puts the
  candidate back in its place to be measured again, with the diagnosis.
- **Copies are refused, the doubtful sent to a person.** A diff largely contained in one already
  merged (normalised token shingles, containment ≥ the profile's refuse bar) is refused; a middle
  band goes to review. A false block costs a real contributor far more than a missed copy costs
  the project, so the band errs towards a person.
- **Main moves only by merges.** When a candidate is merged, candidates that were mergeable against
  the old main go back to the queue: their gain was measured against a main that no longer exists.
"""
from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence


class State(str, enum.Enum):
    DRAFT = "draft"                 # submitted, not ready: never booked
    QUEUED = "queued"               # waiting for its turn
    RUNNING = "running"             # its round is running (on this node or as a batch job)
    MERGEABLE = "mergeable"         # passed parity and beat main with a tier
    NOT_MERGEABLE = "not-mergeable"  # its round ended without a tier (or was rejected)
    REVIEW = "review"               # a person must look first (copy band, held verdict)
    REFUSED = "refused"             # cannot be scored, or a copy; never booked
    CANCELLED = "cancelled"
    MERGED = "merged"


# An author's open candidates: the ones that still stand to move main.
OPEN = frozenset({State.QUEUED, State.RUNNING, State.MERGEABLE, State.REVIEW})
CLOSED = frozenset({State.NOT_MERGEABLE, State.REFUSED, State.CANCELLED, State.MERGED})


@dataclass(frozen=True)
class QueueRules:
    """The profile's ``[queue]`` table."""
    copy_refuse: float = 0.8        # containment in a merged diff at or above this: refused as a copy
    copy_review: float = 0.7        # at or above this (and below copy_refuse): a person reviews it
    min_free_gb: float = 5.0        # a worker books no round with less free disk than this
    time_limit_minutes: int = 120   # a batch job's time limit
    gpus: int = 0                   # GPUs a batch job asks for (gres); 0 for CPU profiles


@dataclass(frozen=True)
class Candidate:
    id: int
    author: str
    state: State
    submitted_at: str               # ISO UTC; times compare as strings
    ready_at: str | None            # when it became ready (None while a draft)
    files: tuple[str, ...] = ()     # paths it changes relative to main
    reason: str = ""                # why it is in its state


@dataclass(frozen=True)
class Waiting:
    id: int
    reason: str


@dataclass(frozen=True)
class Plan:
    """The queue's order now: who is booked next (in order) and why each other one waits."""
    bookable: tuple[int, ...]
    waiting: tuple[Waiting, ...]
    conflicts: dict[int, tuple[int, ...]] = field(default_factory=dict)


def plan(candidates: Sequence[Candidate]) -> Plan:
    """Oldest ready first; one open candidate per author; drafts and review never booked."""
    open_ = sorted((c for c in candidates if c.state in OPEN), key=_age)
    first_of: dict[str, Candidate] = {}
    for c in open_:
        first_of.setdefault(c.author, c)
    bookable: list[int] = []
    waiting: list[Waiting] = []
    for c in sorted((c for c in candidates if c.state in (State.QUEUED, State.DRAFT, State.REVIEW)), key=_age):
        if c.state is State.DRAFT:
            waiting.append(Waiting(c.id, "draft: not booked until it is made ready"))
        elif c.state is State.REVIEW:
            waiting.append(Waiting(c.id, f"in review: {c.reason}" if c.reason else "in review"))
        elif first_of[c.author].id != c.id:
            ahead = first_of[c.author]
            waiting.append(Waiting(c.id, f"waits for #{ahead.id} by the same author ({ahead.state.value}): "
                                         "one open candidate per author"))
        else:
            bookable.append(c.id)
    return Plan(tuple(bookable), tuple(waiting), conflicts(open_))


def _age(c: Candidate) -> tuple[str, int]:
    # Drafts sort by submission only to list them; they are never booked.
    return (c.ready_at or c.submitted_at, c.id)


def conflicts(candidates: Iterable[Candidate]) -> dict[int, tuple[int, ...]]:
    """For each open candidate, the other open candidates that change one of its files."""
    by_file: dict[str, list[int]] = {}
    for c in candidates:
        if c.state in OPEN:
            for f in c.files:
                by_file.setdefault(f, []).append(c.id)
    out: dict[int, set[int]] = {}
    for ids in by_file.values():
        for i in ids:
            out.setdefault(i, set()).update(j for j in ids if j != i)
    return {i: tuple(sorted(js)) for i, js in sorted(out.items()) if js}


# --- after a round -----------------------------------------------------------------

@dataclass(frozen=True)
class Disposition:
    """What becomes of a candidate after a round: its next state, and why."""
    state: State
    reason: str


def after_round(outcome: str, tier: str | None, parity_passed: bool, message: str = "") -> Disposition:
    """What a sealed (or failed) round makes of its candidate.

    ``outcome`` is the verdict's outcome, or ``infra`` / ``interrupted`` when no verdict was
    sealed (a build failure on the node, a killed job, a sick node)."""
    if outcome in ("infra", "interrupted"):
        return Disposition(State.QUEUED, f"requeued after {outcome}: {message}" if message else f"requeued after {outcome}")
    if outcome == "accepted" and tier and parity_passed:
        return Disposition(State.MERGEABLE, f"accepted, tier {tier.upper()}")
    if outcome == "held":
        return Disposition(State.REVIEW, f"held for review: {message}" if message else "held for review")
    why = {"accepted": "accepted without a tier", "none": "no gain or regression worth a tier", "undecided": "undecided",
           "slower": "slower than main", "rejected": "rejected"}.get(outcome, outcome)
    if not parity_passed and outcome != "rejected":
        why += "; parity did not pass"
    return Disposition(State.NOT_MERGEABLE, why + (f": {message}" if message else ""))


def rebased(candidates: Sequence[Candidate], merged_id: int) -> list[int]:
    """Candidates to measure again now that ``merged_id`` moved main: every other mergeable one."""
    return [c.id for c in candidates if c.state is State.MERGEABLE and c.id != merged_id]


# --- copies --------------------------------------------------------------------------

SHINGLE = 8             # tokens per shingle: long enough that common idioms rarely match alone
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\S")
_COMMENT = ("#", "/*", "*")                   # a line that is only a comment (C, C++, Python, shell)
_DIRECTIVE = re.compile(r"#\s*(include|define|if|ifdef|ifndef|else|elif|endif|pragma|undef)\b")
_KEYWORDS = frozenset("""
    if else for while do return break continue switch case default goto struct union enum typedef
    const static inline extern void int float double char long short unsigned signed bool auto
    template typename class public private protected virtual override namespace using new delete
    def lambda import from as with try except finally raise yield pass None True False and or not
    in is sizeof nullptr this self
""".split())


def normalise(lines: Iterable[str]) -> list[str]:
    """Tokens of the added lines with names and numbers abstracted, so a renamed copy matches:
    identifiers become ``I`` (keywords stay), numbers ``N``; comments and blank lines are dropped."""
    out: list[str] = []
    for line in lines:
        line = line.split("//", 1)[0]
        stripped = line.strip()
        if not stripped or stripped.startswith(_COMMENT) and not _DIRECTIVE.match(stripped):
            continue
        for tok in _TOKEN.findall(line):
            if tok[0].isalpha() or tok[0] == "_":
                out.append(tok if tok in _KEYWORDS else "I")
            elif tok[0].isdigit():
                out.append("N")
            else:
                out.append(tok)
    return out


def fingerprint(added_lines: Iterable[str], k: int = SHINGLE) -> frozenset[int]:
    """The set of hashed k-token shingles of a diff's added lines."""
    toks = normalise(added_lines)
    return frozenset(int.from_bytes(hashlib.blake2b(" ".join(toks[i:i + k]).encode(), digest_size=8).digest(), "big")
                     for i in range(max(0, len(toks) - k + 1)))


def containment(candidate: frozenset[int], merged: frozenset[int]) -> float:
    """How much of the candidate's diff is in the merged one (0 when the diff is too small to tell)."""
    if not candidate:
        return 0.0
    return len(candidate & merged) / len(candidate)


@dataclass(frozen=True)
class CopyCheck:
    state: State | None             # REFUSED, REVIEW, or None (original enough)
    containment: float
    of: int | None                  # the merged candidate it is most contained in
    reason: str


def judge_copy(candidate: frozenset[int], merged: Sequence[tuple[int, frozenset[int]]],
               rules: QueueRules) -> CopyCheck:
    best, of = 0.0, None
    for mid, fp in merged:
        c = containment(candidate, fp)
        if c > best:
            best, of = c, mid
    if of is not None and best >= rules.copy_refuse:
        return CopyCheck(State.REFUSED, best, of, f"a copy: {best:.0%} of its diff is in merged #{of} "
                                                   f"(refused at ≥ {rules.copy_refuse:.0%})")
    if of is not None and best >= rules.copy_review:
        return CopyCheck(State.REVIEW, best, of, f"{best:.0%} of its diff is in merged #{of}: a person decides "
                                                  f"(review band {rules.copy_review:.0%}–{rules.copy_refuse:.0%})")
    return CopyCheck(None, best, of, f"original: at most {best:.0%} of its diff is in a merged one")


# --- transitions a person asks for -------------------------------------------------------

class Refusal(ValueError):
    """A transition the queue does not allow, with the reason to show."""


_ALLOWED: dict[str, tuple[frozenset[State], State]] = {
    "ready": (frozenset({State.DRAFT}), State.QUEUED),
    "approve": (frozenset({State.REVIEW}), State.QUEUED),
    "cancel": (frozenset({State.DRAFT, State.QUEUED, State.REVIEW, State.MERGEABLE, State.NOT_MERGEABLE}),
               State.CANCELLED),
    "merged": (frozenset({State.MERGEABLE}), State.MERGED),
}


def transition(c: Candidate, action: str) -> State:
    """The state ``action`` moves ``c`` to, or a Refusal saying why not."""
    allowed, to = _ALLOWED[action]
    if c.state not in allowed:
        extra = " (never merge a candidate that did not beat main)" if action == "merged" else ""
        raise Refusal(f"#{c.id} is {c.state.value}: cannot {action} it{extra}")
    return to
