"""The bisection's loop: confirm the ends, probe until nothing is open, check the first bad item
against the bad end, and say what the steps show. Which item is next and what the marks mean are
``core.bisection``'s; running one step is a ``StepRunner``'s (real rounds in ``rounds``; the
decision benchmark's simulated rounds go through this same loop)."""
from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Protocol

from ..clock import utc_now
from ..core.provenance import bisection as B
from ..core.provenance.bisection import Mark, Step
from ..engine.ranges import Item
from ..engine.sources import spec_text
from ..profile import Profile
from ..errors import ConsoleError
from .record import BisectRecord, read

STOPS = ("infra", "interrupted")        # a step that ends the bisection: the node, or a person


class StepRunner(Protocol):
    def __call__(self, profile: Profile, main: Item, candidate: Item, title: str) -> Step:
        """One round of ``candidate`` against ``main`` under ``profile``; the Step's outcome, figures,
        rate and receipt (role, items and mark are the loop's)."""


@dataclass
class Config:
    profile: Profile
    items: list[Item]
    out_dir: Path
    error_rate: float = 0.05
    runtime: str = "docker"
    write: bool = True              # keep OUT/bisect/<id>.json (the benchmark's simulated runs do not)
    fresh: bool = False             # try again what earlier bisections here could not build


def step_profile(p: Profile, rate: float, min_gain: float = 0.0) -> Profile:
    """The profile a step runs under: its rules at the step's rate (``core.bisection.step_rules``);
    no accuracy stage (a step asks about speed; parity still comes first)."""
    return replace(p, gate=B.step_rules(p.gate, rate, min_gain), accuracy=None)


class Bisection:
    def __init__(self, cfg: Config, run_step: StepRunner, say: Callable[[str], None] = print):
        self.cfg, self._run_step, self.say = cfg, run_step, say
        n = len(cfg.items)
        self.n = n
        rate = B.split(cfg.error_rate, n)
        self.profile = step_profile(cfg.profile, rate)
        self.record = BisectRecord(
            bisect_id=utc_now().replace(":", "").replace("-", "") + "-" + secrets.token_hex(3),
            profile=cfg.profile.name, profile_sha256=cfg.profile.sha256, items=[{"label": it.label, "source": _source_dict(it.source)} for it in cfg.items],
            error_rate=cfg.error_rate, step_rate=rate, planned_steps=B.planned_steps(n), started_at=utc_now(),
            runtime=cfg.runtime, metric=cfg.profile.bench.metric)
        self.marks: dict[int, Mark] = {0: Mark.GOOD, n - 1: Mark.BAD}
        self.probing: int | None = None     # the item whose round runs now (the live view shows it)
        self.failed = {} if cfg.fresh or not cfg.write else failed_builds(cfg.out_dir, cfg.runtime, cfg.profile.sha256)

    # --- the loop ------------------------------------------------------------------------

    def run(self) -> BisectRecord:
        r = self.record
        self.say(f"bisecting {self.n} items of {r.profile} ({self.cfg.items[0].label} .. {self.cfg.items[-1].label}): "
                 f"each decided step at {r.step_rate:.2%}, {r.planned_steps} planned, so the whole bisection errs "
                 f"at most {r.error_rate:.0%} (Bonferroni)")
        try:
            self._ends() and self._probes() and self._check()
        finally:
            if r.result is None:
                r.result, r.sentence = "interrupted", "the steps finished so far are kept"
            r.ended_at = utc_now()
            self._save()
        self.say(f"{r.result}: {r.sentence}")
        return r

    def _ends(self) -> bool:
        s = self._step("endpoints", self.n - 1, 0)
        if s.outcome in STOPS:
            return self._stop(s)
        direction = B.direction_of(s.outcome)
        if direction is None:
            what = {"none": "no change of the profile's min_gain either way",
                    "undecided": "undecided within the pair budget"}.get(s.outcome, f"{s.outcome} ({s.note or 'no speed decision'})")
            return self._end("not-one-step", f"the ends were not decided apart: bad against good was {what}. "
                             "Nothing to bisect at these rates; give a wider range or more pairs (--reps).")
        self.record.direction = direction
        g = B.step_min_gain(s.gain, self.cfg.profile.gate.min_gain)
        self.profile = step_profile(self.cfg.profile, self.record.step_rate, g)
        self.record.step_min_gain = g
        self.say(f"the bad end is {direction} than the good end ({_gain(s)}): bisecting that change; an item is "
                 f"like the good end when it is within {g:.1%} of it either way (half the ends' change)")
        return True

    def _probes(self) -> bool:
        while (i := B.next_probe(self.n, self.marks)) is not None:
            s = self._step("probe", i, 0)
            if s.outcome in STOPS:
                return self._stop(s)
            mark = B.mark_of(s.outcome, self.record.direction or "slower")     # a failed build is a skip
            self.marks[i] = mark
            self.record.steps[-1] = replace(s, mark=mark)
            o = B.open_range(self.n, self.marks)
            self.say(f"item {i} is {mark.value}: open {o.good}..{o.bad} "
                     f"({len(o.untried)} untried, {len(o.unjudged)} skipped or undecided)")
            self._save()
        return True

    def _check(self) -> bool:
        r, marks = self.record, self.marks
        if bad := B.contradictions(marks):
            return self._end("not-one-step", "; ".join(
                f"item {b} is like the bad end but item {g} after it is like the good end" for b, g in bad)
                + ". The change comes and goes, or the range holds more than one.")
        if other := B.changed_the_other_way(r.steps, r.direction or "slower"):
            return self._end("not-one-step", ", ".join(f"item {s.item}" for s in other)
                             + " changed the other way against the good end; bisect each change on its own.")
        c = B.conclude(self.n, marks)
        r.first_bad, r.suspects, r.last_good = c.first_bad, list(c.suspects), c.last_good
        if not c.found:
            return self._end("suspects", f"the first {r.direction} item is one of {', '.join(map(str, c.suspects))} "
                             f"({self._labels(c.suspects)}): the others could not be judged")
        if c.first_bad == self.n - 1:
            return self._found("it is the bad end itself")
        s = self._step("check", self.n - 1, c.first_bad)
        if s.outcome in STOPS:
            return self._stop(s)
        if s.outcome == B.changed_outcome(r.direction or "slower"):
            return self._end("not-one-step", f"the bad end is {r.direction} than the first "
                             f"{r.direction} item {c.first_bad} too ({_gain(s)}): a second change lies in "
                             f"{c.first_bad}..{self.n - 1}; bisect it with --good {self._source(c.first_bad)}")
        return self._found("the bad end is like it" if s.outcome == "none"
                           else f"its check against the bad end was {s.outcome}, so that it is the whole change is "
                                "not confirmed")

    # --- steps and endings ---------------------------------------------------------------

    def _step(self, role: str, item: int, against: int) -> Step:
        k = len(self.record.steps) + 1
        title = (f"step {k} ({role}): item {item} [{self.cfg.items[item].label}] against item {against} "
                 f"[{self.cfg.items[against].label}]")
        self.probing = item
        self.say(title)
        pair = (_key(self.cfg.items[against].source), _key(self.cfg.items[item].source))
        if pair in self.failed:
            s = replace(self.failed[pair], minutes=0.0)
        else:
            s = self._run_step(self.profile, self.cfg.items[against], self.cfg.items[item], title)
        self.probing = None
        s = replace(s, role=role, item=item, against=against)
        self.record.steps.append(s)
        self._save()
        return s

    def _found(self, why: str) -> bool:
        r, i = self.record, self.record.first_bad
        assert i is not None
        s = B.effect_of(r.steps, i)
        return self._end("found", f"first {r.direction} item: {i} [{self.cfg.items[i].label}], "
                         f"{_gain(s) if s else 'size not measured'}; {why}")

    def _stop(self, s: Step) -> bool:
        return self._end(s.outcome, f"stopped at step {len(self.record.steps)}: {s.note or s.outcome}")

    def _end(self, result: str, sentence: str) -> bool:
        r = self.record
        total = B.spent(r.steps)
        rounds = len(r.steps)
        minutes = sum(s.minutes for s in r.steps)
        r.result = result
        r.sentence = (f"{sentence} ({rounds} round(s), {minutes:.1f} min; decided steps' rates sum to "
                      f"{total:.2%}" + (f", above the stated {r.error_rate:.0%}" if total > r.error_rate + 1e-12 else "")
                      + ")")
        return False

    def _labels(self, idx) -> str:
        return ", ".join(self.cfg.items[i].label for i in idx)

    def _source(self, i: int) -> str:
        return spec_text(self.cfg.items[i].source)

    def _save(self) -> None:
        if self.cfg.write:
            self.record.write(self.cfg.out_dir)


def failed_builds(out: Path, runtime: str, profile_sha256: str) -> dict[tuple[str, str], Step]:
    """Steps of earlier bisections in ``out`` (same runtime, same profile file) whose item failed to
    build, by (main's source, the item's source): a second bisection over the same range does not
    build them again."""
    found: dict[tuple[str, str], Step] = {}
    for path in sorted((out / "bisect").glob("*.json")) if (out / "bisect").is_dir() else []:
        try:
            rec = read(path)
        except ConsoleError:
            continue        # not a record this version reads: nothing is taken from it
        if (rec.runtime, rec.profile_sha256) != (runtime, profile_sha256):
            continue
        for s in rec.steps:
            if s.outcome == "build-failed" and 0 <= s.item < len(rec.items) and 0 <= s.against < len(rec.items):
                pair = (_key(rec.items[s.against]["source"]), _key(rec.items[s.item]["source"]))
                found[pair] = replace(s, note=f"{s.note} (in bisection {rec.bisect_id}; not built again: "
                                              "--fresh builds it again)")
    return found


def _key(source: Any) -> str:
    d = source if isinstance(source, dict) else _source_dict(source)
    return json.dumps(d, sort_keys=True)


def _source_dict(s) -> dict:
    return {k: v for k, v in asdict(s).items() if v is not None}


def _gain(s: Step) -> str:
    if s.gain is None:
        return s.outcome
    ends = "" if s.low is None or s.high is None else f" [{s.low:+.1%}, {s.high:+.1%}]"
    return f"{s.outcome}, {s.gain:+.1%}{ends} over {s.pairs} pairs"
