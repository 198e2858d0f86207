"""`console history --bisect`: each bisection history's change points ask for
(``core.provenance.culprits``), run as `console bisect` runs one, in the results directory of the
round after the change. Every build is reused by its key and every step already decided in that
ledger is read back, not measured again (``round.kinds.bisect`` steps are experiments of their
own), so a nightly job that bisects the same change again measures nothing new."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..core.provenance.culprits import Culprit, Hunt
from ..engine.ranges import Item
from ..errors import ConsoleError, UsageError
from ..profile import Profile, load_profile
from .record import BisectRecord
from .rounds import REUSED
from .setup import items_of, with_metric

# One bisection, as `console bisect` runs it: the profile, the range's items, the results directory
# and the runtime in; its record out.
BisectOne = Callable[[Profile, list[Item], Path, str], BisectRecord]


def culprit_of(h: Hunt, r: BisectRecord, out: Path, note: str = "") -> Culprit:
    """The bisection's answer in the culprits table's terms."""
    found = ""
    if r.result == "found" and r.first_bad is not None:
        found = str(r.items[r.first_bad]["label"])
    elif r.result == "suspects":
        found = "one of " + ", ".join(str(r.items[i]["label"]) for i in r.suspects)
    measured = sum(1 for s in r.steps if s.receipt and not s.note.startswith(REUSED))
    return Culprit(h, r.result or "interrupted", found, len(r.steps), measured,
                   round(sum(s.minutes or 0.0 for s in r.steps), 2),
                   "; ".join(x for x in (r.sentence, note) if x), str(r.path(out)))


def _profile(h: Hunt) -> tuple[Profile | None, str, str]:
    """The profile the rounds ran, as its file is now; (None, why) when it cannot be read."""
    if not h.profile or not Path(h.profile).is_file():
        return None, (f"the profile the rounds ran ({h.profile or 'unrecorded'}) is not on this node: "
                      f"run `console bisect --profile P --good {h.good} --bad {h.bad}`"), ""
    try:
        p = with_metric(load_profile(Path(h.profile)), h.metric)
    except ConsoleError as e:
        return None, f"{h.profile}: {e.message}", ""
    edited = "" if p.sha256 == h.profile_sha256 else f"{h.profile} was edited since the rounds ran: bisected as it is now"
    return p, "", edited


def run_hunts(hunts: list[Hunt], dir_of: Callable[[str], Path], bisect_one: BisectOne,
              say: Callable[[str], None]) -> list[Culprit]:
    """Each hunt bisected in turn (one round at a time: the node measures one thing at once)."""
    out: list[Culprit] = []
    for h in hunts:
        profile, why, note = _profile(h)
        if profile is None:
            out.append(Culprit(h, "not run", sentence=why))
            continue
        try:
            items = items_of(profile, None, h.good, h.bad)
        except UsageError as e:
            out.append(Culprit(h, "not run", sentence=f"{h.good}..{h.bad}: {e.message}"))
            continue
        where = dir_of(h.receipt)
        say(f"bisecting {h.good} .. {h.bad} ({len(items)} items) for "
            + "; ".join(s.key.name for s, _ in h.changes) + (f" ({note})" if note else ""))
        out.append(culprit_of(h, bisect_one(profile, items, where, h.runtime), where, note))
    return out
