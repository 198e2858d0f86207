"""The verdict, re-derived from a receipt's raw measurements alone, and the rules it uses.

``decide`` is the one entry: the verdict of a receipt of any kind. Its stages live in modules of
their own, which every reader (the round, replay, the lock, the reports, the screens) calls rather
than keeping a copy:

- ``parity_grade``: per-depth grades (ratchet against main), the parity verdict, the path bars and
  task accuracy;
- ``counting``: which reps count and why the others don't (``counted``), per-build figures over
  exactly those reps (``summarize``), the paired estimand (``log_ratios``);
- the kind's decider (``DECIDERS``, named by its record in ``records.kinds``): ``speed`` (guards, then
  the sequential decision and its tier; ``speed.progress`` is the round's stopping rule), ``cells``
  (a matrix's cells as a family), ``noise`` (a build against itself).

Order: apparatus → parity → claims → guards → the sequential decision (and its tier) →
plausibility. Each stage can end the decision; later stages never soften an earlier one.
Each receipt is decided under the rules it was sealed under (``Ruleset``, at the end): schema-1
receipts reach the same stages and are then judged by ``legacy``.

Who is blamed for what:

- The candidate's own problems (parity failures, refused or failed runs, claims the
  wall clock contradicts, a guard breach) reject it.
- Main's problems make the round ``infra``: main is the yardstick, and a yardstick
  that fails its own claims usually means the node (its clock, its memory meter) is
  at fault, so nothing is recorded against the candidate; the round is retried.
  Main's claim problems take precedence over the candidate's for the same reason.
- Reps marked ``suspect`` (node trouble seen by telemetry) or ``aborted`` are left out
  of every statistic; too few valid reps left is ``infra`` with a diagnosis.
- A receipt whose status is ``infra`` is ``infra``, whatever it measured.

Outcomes and exit codes: accepted/none/undecided 0, rejected 1, slower 1 (0 when the profile
records it), infra 3, implausible and uncheckable 4 (held for review). Noise receipts give
``noise`` (0) or ``infra``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from console.core.decisions import cells, noise, speed
from console.core.decisions.counting import Counted, counted, long_runs, node_fault, typed
from console.core.decisions.parity_grade import grade_accuracy, grade_parity
from console.core.decisions.speed import ruleset
from console.core.records import kinds
from console.core.records.receipt import BUILDS, Receipt, Rep
from console.core.records.rules import GateRules
from console.core.records.verdict import Caveat, Reason, Speed, Verdict, reason, warning

# A kind's decider, by the name its record gives (records.kinds): what follows parity and counting.
Decider = Callable[[Receipt, Counted, GateRules, list, Callable[..., Verdict]], Verdict]
DECIDERS: dict[str, Decider] = {"speed": speed.decide_timed, "cells": cells.decide_matrix}


def _apparatus_touched(r: Receipt) -> Reason:
    touched = tuple(r.apparatus.touched) if r.apparatus else ()
    return Reason("apparatus-touched", "the candidate changes the measuring apparatus: " + ", ".join(touched)
                  + ". Those paths are protected by the profile; propose harness changes on main instead.",
                  files=touched)


def decide(receipt: Receipt, rules: GateRules) -> Verdict:
    """The verdict of one round (or noise round), from its receipt's raw measurements.

    Stages in order, the first that stops the round giving the verdict: the apparatus, parity
    and task accuracy, the reps that count, the guards, then the speed decision."""
    r = typed(receipt)
    kind = kinds.of(r.kind)
    if kind.decider == "pair-noise":    # a build against itself: no candidate, no parity to grade
        return noise.decide_noise(r, rules)
    if kind.decider not in DECIDERS:
        raise kinds.KindError(f"a {kind.name} ({kind.what}) seals no verdict")
    sealed = ruleset(r)
    said = list(sealed.said)
    if r.apparatus is not None and r.apparatus.touched:
        # Refused before anything was built: the candidate cannot supply its own ruler.
        return Verdict("rejected", reasons=[_apparatus_touched(r)], warnings=said,
                       suppressed="the candidate touched the apparatus")
    graded = grade_parity(r, rules)
    parity, parity_reasons = dict(graded.table), list(graded.reasons)
    accuracy_table, accuracy_reasons = grade_accuracy(r, rules)
    if accuracy_table is not None:
        parity["accuracy"] = accuracy_table
    warnings = said + list(graded.warnings)     # the stages below add theirs: every verdict carries them all
    verdict = _verdicts(warnings, parity)
    if (stopped := _before_timing(r, rules, parity, parity_reasons, accuracy_reasons, verdict)) is not None:
        return stopped
    c = counted(r, rules)
    warnings.extend(c.warnings)
    if (stopped := _reps_invalid(c, verdict, long_runs(c.valid, r))) is not None:
        return stopped
    return self_timed(r, DECIDERS[kind.decider](r, c, rules, warnings, verdict))


def self_timed(r: Receipt, v: Verdict) -> Verdict:
    """A bench that times itself (its command takes no ``{handover}``) reports the figure it is judged
    by: the verdict says so, and it earns no tier unless its profile opts in (``bench.self_timed_tier``).
    Receipts sealed before the handover existed carry no such key and are decided as they were."""
    bench = r.profile.bench
    opted = bench.get("self_timed_tier")
    if opted is None or bench.get("mode") == "serve" or any("{handover}" in a for a in bench.get("command") or ()):
        return v
    said = warning("self-timed", "self-timed: the bench reports its own timing and the console's clock did not time "
                                 "the section (its command takes no {handover}); the figure is the engine's claim, "
                                 "bounded by the wall-clock checks only")
    if opted or v.tier is None:
        return replace(v, warnings=[*v.warnings, said])
    return replace(v, tier=None, tier_span=None, would_be_tier=v.tier,
                   warnings=[*v.warnings, said, warning("self-timed-no-tier", f"no tier for a self-timed bench (it "
                            f"would be {v.tier}): its profile does not opt in with bench.self_timed_tier")])


def _verdicts(warnings: list[Caveat], parity: dict[str, Any]) -> Callable[..., Verdict]:
    """A maker of this round's verdicts: each carries the round's warnings and parity table."""
    def verdict(outcome: str, reasons: list, speed: Speed | None = None, **kw: Any) -> Verdict:
        return Verdict(outcome=outcome, reasons=reasons, warnings=warnings, parity=parity, speed=speed, **kw)
    return verdict


def _before_timing(r: Receipt, rules: GateRules, parity: dict[str, Any], parity_reasons: list[Reason],
                   accuracy_reasons: list[Reason], verdict: Callable[..., Verdict]) -> Verdict | None:
    """The verdict when the round stops before its timed reps count: a node fault, the reference's
    side of task accuracy, a parity or accuracy failure, or parity that cannot be checked."""
    if r.status == "infra":
        return verdict("infra", [node_fault(r)], suppressed="infra")
    if any(x.build is None for x in accuracy_reasons):
        return verdict("infra", [x for x in accuracy_reasons if x.build is None],
                       suppressed="the reference side of task accuracy failed")
    if any(x.build is None for x in parity_reasons):    # the yardstick failed (served tokens ungraded)
        return verdict("infra", [x for x in parity_reasons if x.build is None], suppressed="parity not graded")
    parity_reasons = parity_reasons + accuracy_reasons
    if parity_reasons:
        # Every reason is listed: what the candidate's timed reps claimed, where they ran, too.
        refused = counted(r, rules).problems["candidate"]
        return verdict("rejected", parity_reasons + refused, suppressed="parity failed: no speed credit is computed")
    if parity["all_uncheckable"]:
        return verdict("uncheckable", [reason("parity-uncheckable",
                                              "every depth has a near-uniform reference: parity cannot "
                                              "be checked, held for review", build=None)],
                       suppressed="parity uncheckable")
    return None


def _reps_invalid(c: Counted, verdict: Callable[..., Verdict],
                  valid: dict[tuple[str, str], list[Rep]]) -> Verdict | None:
    """The verdict when the reps that count cannot be compared: main's invalid, the candidate's
    claims refused, or too few valid timed reps (a matrix round's: its home cell's) on a side."""
    if c.problems["main"]:
        main_invalid = [x.prefixed("main invalid: ") for x in c.problems["main"]]
        return verdict("infra", main_invalid + c.problems["candidate"], suppressed="main invalid")
    if c.problems["candidate"]:
        return verdict("rejected", c.problems["candidate"], suppressed="claims refused")
    short = [b for b in BUILDS if len(valid.get((b, "timed"), [])) < 2]
    if short:
        return verdict("infra", [reason("too-few-reps",
                                        f"{b}: {len(valid.get((b, 'timed'), []))} valid timed rep(s); "
                                        "at least 2 are needed (the rest failed the node, not the build)",
                                        build=b) for b in short], suppressed="too few valid reps")
    return None
