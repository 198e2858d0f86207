"""Real steps: each a round of kind ``bisect`` (``round.kinds.bisect``) on this node, its events shown
as any round's, its receipt sealed into the results directory's ledger."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable

from .. import events as ev
from ..core.decisions import gate
from ..core.provenance.bisection import Step, git_bisect_word, rate_of
from ..core.provenance.reruns import DECIDED_OUTCOMES
from ..core.records.receipt import Receipt
from ..engine.ranges import Item
from ..errors import ExitCode
from ..profile import Profile
from ..results import store
from ..round import Round, RoundConfig
from ..round.follow import follow
from ..round.kinds import Bisect


REUSED = "decided by the earlier step"     # a step's note when the ledger already decided it
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")     # a compiler's colours in its error line


class RoundSteps:
    """A ``StepRunner`` of real rounds: builds by key (a second bisection builds nothing), parity
    first, pairs until decided at the step's rates."""

    def __init__(self, out: Path, runtime: str, reps: int | None, fresh: bool, sink: Callable[[ev.Event], None]):
        self.out, self.runtime, self.reps, self.fresh, self.sink = out, runtime, reps, fresh, sink
        self.threaded = False           # followed on a worker thread (the live view): no signal handlers there
        self.current: Round | None = None
        self.aborted = False

    def abort(self) -> None:
        """Interrupt the running round (it ends incomplete) and every step after it."""
        self.aborted = True
        if self.current is not None:
            self.current.abort()

    def __call__(self, profile: Profile, main: Item, candidate: Item, title: str) -> Step:
        if self.aborted:
            return Step(role="", item=0, against=0, outcome="interrupted", note="interrupted")
        cfg = RoundConfig(profile=profile, main=main.source, candidate=candidate.source, out_dir=self.out,
                          runtime=self.runtime, kind=Bisect(), reps=self.reps, lock_path=None, fresh=self.fresh)
        rnd = self.current = Round(cfg)
        failed: list[ev.BuildFailed] = []

        def watch(e: ev.Event) -> None:
            if isinstance(e, ev.BuildFailed):
                failed.append(e)
            self.sink(e)
        t0 = time.monotonic()
        if self.threaded:
            for e in rnd.events():
                watch(e)
        else:
            follow(rnd, watch)
        self.current = None
        minutes = round((time.monotonic() - t0) / 60, 3)
        return _step_of(rnd, failed, minutes, self.out)


def _step_of(rnd: Round, failed: list[ev.BuildFailed], minutes: float, out: Path) -> Step:
    base = Step(role="", item=0, against=0, outcome="infra", minutes=minutes, round_id=rnd.round_id)
    if rnd.exit_code == ExitCode.INTERRUPTED:
        return Step(**{**base.to_dict(), "outcome": "interrupted", "note": "interrupted"})
    if rnd.decided_by is not None:
        rid, round_id, outcome, _ = rnd.decided_by
        earlier = store.ledger_receipts(out).get(rid)
        return _figures(earlier, base, rid, round_id, f"{REUSED} {round_id}: nothing measured again")
    if rnd.sealed is not None:
        rid = Path(rnd.receipt_path).stem if rnd.receipt_path else ""
        return _figures(rnd.sealed, base, rid, rnd.round_id, "")
    if failed:
        f = failed[-1]
        if f.build == "candidate":
            return Step(**{**base.to_dict(), "outcome": "build-failed", "note": f"failed to build: {_why(f)}"})
        return Step(**{**base.to_dict(), "note": f"{f.build} (the item measured as main) failed to build: {f.message[:200]}"})
    return Step(**{**base.to_dict(), "note": f"the round ended without a verdict (exit {rnd.exit_code}): retry"})


def _why(f: ev.BuildFailed) -> str:
    """The build's own error line (the compiler's), else the first line of the failure."""
    errors = [ANSI.sub("", x).strip() for x in f.log_tail if "error" in x.lower()]
    return (errors[0] if errors else (f.message or "").splitlines()[0] if f.message else "no message")[:200]


def _figures(r: Receipt | None, base: Step, rid: str, round_id: str, note: str) -> Step:
    """The step as its receipt says, re-derived by the gate (a receipt's verdict is never taken as written)."""
    if r is None:
        return Step(**{**base.to_dict(), "note": f"receipt {rid[:12]} is not in the ledger"})
    v = gate.decide(r, r.rules)
    sp = v.speed
    low, high = (tuple(sp.interval) + (None, None))[:2] if sp is not None else (None, None)
    why = "; ".join(x.message for x in v.reasons[:2]) if v.outcome.value not in DECIDED_OUTCOMES else ""
    return Step(role="", item=0, against=0, outcome=v.outcome.value, rate=rate_of(v.outcome.value, r.rules),
                gain=sp.gain if sp is not None else None, low=low, high=high,
                pairs=sp.pairs if sp is not None else 0, minutes=base.minutes, receipt=rid, round_id=round_id,
                note="; ".join(x for x in (note, why[:300]) if x))


# --- one step for `git bisect run` ----------------------------------------------------------------

GIT_BISECT = {"good": 0, "bad": 1, "skip": 125, "abort": 128}


def git_bisect_step(steps: RoundSteps, profile: Profile, main, candidate) -> int:
    """A round of ``candidate`` against ``main`` (the good end) as a bisection step, said and exited
    as `git bisect run` reads it: good, bad, skip (cannot tell) or abort."""
    step = steps(profile, Item(main, "good"), Item(candidate, "candidate"), "")
    word = git_bisect_word(step.outcome)
    print(f"git bisect: {word} ({step.outcome}{': ' + step.note if step.note else ''})", flush=True)
    return GIT_BISECT[word]
