"""The speed decision of a round that compares two builds on one shape: the guards, then the
sequential decision on the paired gain (accepted, slower, none or undecided) and its tier, unless the
result is implausible or its pairs conflict or shift; and the rules each receipt schema decides it by
(``Ruleset``). ``progress`` is the same decision so far: the round's stopping rule."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from console.core.decisions.counting import Counted, counted, log_ratios, pairs_of, typed, unresolved_claim
from console.core.decisions import legacy, serving
from console.core.statistics import sequential, stats
from console.core.records.receipt import Pins, Receipt, Sequential, plain
from console.core.records.rules import GateRules
from console.core.records.verdict import Caveat, Reason, Speed, Verdict
from console.core.records.verdict import num as _num, pct as _pct, reason, warning





def decide_timed(r: Receipt, c: Counted, rules: GateRules, warnings: list[Caveat],
                 verdict: Callable[..., Verdict]) -> Verdict:
    """The gate's last stage for a round on one shape: a breached guard rejects before any gain is
    read; an unmeasured one is infra; then the speed decision, by the receipt's own rules."""
    sealed = ruleset(r)
    guard_reasons: list[Reason] = []
    guard_infra: list[Reason] = []
    guards = check_guards(c, r.lock, rules, guard_reasons, warnings, guard_infra, sealed.guard)
    check_latency(c, rules, guards, guard_reasons, warnings)
    if guard_reasons:
        return verdict("rejected", guard_reasons, suppressed="guard breached", guards=guards)
    if guard_infra:
        return verdict("infra", guard_infra, suppressed="guard not measured", guards=guards)
    return sealed.speed(r, c, rules, guards, warnings, verdict)


def check_guards(c: Counted, lock: Pins, rules: GateRules,
                  reasons: list, warnings: list, infra: list,
                  judge: Callable[..., Reason | Caveat | None]) -> dict[str, Any]:
    out = {}
    for g in rules.guards:
        pinned = float(lock.guards.get(g.name) or 0.0)
        cand = c.values("candidate", f"guard:{g.name}")
        main = c.values("main", f"guard:{g.name}")
        main_med = stats.median(main) if main else None
        # With no pinned floor yet, main measured on this box in this round is the floor:
        # a guard is never switched off merely because the lock is new.
        floor, source = (pinned, "lock") if pinned > 0 else (main_med or 0.0, "main this round")
        row: dict[str, Any] = {"floor": floor, "floor_source": source, "max_drop": g.max_drop, "depth": g.depth,
                               "min_allowed": floor * (1 - g.max_drop), "enforced": floor > 0,
                               "candidate_median": stats.median(cand) if cand else None,
                               "main_median": main_med}
        out[g.name] = row
        if floor <= 0:
            warnings.append(warning("guard-unmeasured", f"guard {g.name}: no pinned floor and no valid main "
                                                        "reps this round; not enforced"))
            continue
        if not cand:
            infra.append(reason("guard-no-reps", f"guard {g.name}: no valid candidate reps to compare "
                                                 f"with its floor {_num(floor)}", build="candidate"))
            continue
        if (found := judge(c, g, floor, source, rules, row)) is not None:
            (reasons if isinstance(found, Reason) else warnings).append(found)
        if source == "lock" and main_med is not None and main_med > floor * (1 + rules.significance):
            warnings.append(warning("guard-floor-stale",
                                    f"guard {g.name}: main measures {_pct(row['main_median'] / floor - 1)} above "
                                    f"the floor {_num(floor)}; a stale-low floor admits regressions"))
    return out


def check_latency(c: Counted, rules: GateRules, guards: dict[str, Any], reasons: list, warnings: list) -> None:
    """Serving latencies read from the timed blocks, the candidate's over main's in the same pair:
    a decided rise past the allowed share rejects, a possible one is said."""
    if not rules.latency:
        return
    pairs = [((m.reported or {}), (cand.reported or {})) for m, cand in pairs_of(c)]
    rows = serving.latency_rows(pairs, rules.latency, rules.false_accept)
    guards.update({f"latency:{metric}": row for metric, row in rows.items()})
    latency_findings(rows.values(), reasons, warnings)


def latency_findings(rows: Iterable[Mapping[str, Any]], reasons: list, warnings: list, where: str = "",
                     figure: str = "latency:") -> None:
    """Each latency guard's row said: a breach or an unreadable figure is a reason, a possible breach
    or an unmeasured guard a warning. ``where`` names the matrix cell the rows are of, ``figure`` the
    prefix of the figure a reason names."""
    for row in rows:
        metric = row["metric"]
        said = (f"{metric}: the candidate's is {_pct(row['ratio'] - 1)} against main's in the same pair "
                f"[{_pct(row['lower'] - 1)}, {_pct(row['upper'] - 1)}] over {row['pairs']} pairs; at most "
                f"{_pct(row['max_rise'])} higher is allowed") if row["ratio"] is not None else ""
        if row["status"] == "unreadable":
            first = row["unreadable"][0]
            reasons.append(reason("latency-not-finite", f"{where}latency guard {metric}: the candidate's block in "
                                                        f"pair {first['pair']} reads {first['value']}, not a positive "
                                                        f"finite number ({len(row['unreadable'])} such block(s))",
                                  figure=f"{figure}{metric}", bar=row["allowed"]))
        elif row["status"] == "breach":
            reasons.append(reason("latency-breach", f"{where}latency guard {said}", figure=f"{figure}{metric}",
                                  bar=row["allowed"], value=row["lower"]))
        elif row["status"] == "uncertain":
            warnings.append(warning("latency-uncertain", f"{where}latency guard {said}: a breach is possible but "
                                                         "not decided: not rejected"))
        elif row["status"] == "unmeasured":
            warnings.append(warning("latency-unmeasured", f"{where}latency guard {metric}: fewer than 2 pairs with "
                                                          "the figure on both sides; not enforced"))


def _guard_median(c: Counted, g: Any, floor: float, source: str, rules: GateRules,
                  row: dict[str, Any]) -> Reason | None:
    """Schema 1: the candidate's median against the allowed minimum."""
    med = row["candidate_median"]
    if med >= row["min_allowed"]:
        return None
    return reason("guard-breach", f"guard {g.name} (depth {g.depth}): median {_num(med)} is {_pct(med / floor - 1)} "
                                  f"against its floor {_num(floor)}; at most {g.max_drop:.1%} below "
                                  f"({_num(row['min_allowed'])}) is allowed",
                  figure=f"guard:{g.name}", bar=row["min_allowed"], value=med)


def _guard_bound(c: Counted, g: Any, floor: float, source: str, rules: GateRules,
                 row: dict[str, Any]) -> Reason | Caveat | None:
    """A breach decided by the interval, or a warning while the interval still reaches below."""
    if (breach := _guard_breach(c, g, floor, source, rules, row)) is not None:
        return breach
    if row.get("lower") is None or row["lower"] >= row["min_allowed"]:
        return None
    med = row["candidate_median"]
    return warning("guard-uncertain", f"guard {g.name} (depth {g.depth}): {_pct(med / floor - 1)} "
                                      f"[{_pct(row['lower'] / floor - 1)}, {_pct(row['upper'] / floor - 1)}] against "
                                      f"its floor ({source}); the interval reaches below the {_pct(-g.max_drop)} "
                                      "allowed, so a breach is possible but not decided: not rejected")


def _guard_breach(c: Counted, g: Any, floor: float, source: str, rules: GateRules,
                  row: dict[str, Any]) -> Reason | None:
    """A guard is breached only when the candidate is decidedly below the allowed minimum:
    the one-sided upper bound (Student t on the logs, at ``gate.false_accept``) of its level,
    paired with main's guard reps when main this round is the floor, is under it. A noisy
    rep or two cannot reject a candidate; a real drop on a quiet node still does."""
    cand = c.valid.get(("candidate", f"guard:{g.name}"), [])
    if source == "main this round":
        main = {r.index: r for r in c.valid.get(("main", f"guard:{g.name}"), [])}
        values = [float(r.value) / float(main[r.index].value) for r in cand if r.index in main]
        scale, what = floor, "paired with main's guard reps"
    else:
        values = [float(r.value) for r in cand]
        scale, what = 1.0, "its level"
    if len(values) < 2:
        row["upper"] = None
        return None
    level = rules.false_accept
    upper = scale * stats.geometric_bound(values, level, "upper")
    row.update(upper=upper, level=level, lower=scale * stats.geometric_bound(values, level, "lower"))
    if upper >= row["min_allowed"]:
        return None
    med = row["candidate_median"]
    return reason("guard-breach", f"guard {g.name} (depth {g.depth}): median {_num(med)} is {_pct(med / floor - 1)} "
                                  f"against its floor {_num(floor)} ({source}); {what}, at most {_num(upper)} at the "
                                  f"{1 - level:.0%} level, below the {_num(row['min_allowed'])} allowed "
                                  f"({g.max_drop:.1%} under the floor)",
                  figure=f"guard:{g.name}", bar=row["min_allowed"], value=upper)


def _decide_legacy_speed(r: Receipt, c: Counted, rules: GateRules, guards: dict[str, Any],
                         warnings: list[Caveat], verdict: Callable[..., Verdict]) -> Verdict:
    """A schema-1 receipt: the fixed-reps rules it was sealed under."""
    speed, not_significant, tier = legacy.decide_speed(c, r.lock, rules, warnings)
    pin_warnings(speed.main_median, r.lock, rules, warnings)
    speed.guards = guards
    if (held := implausible(speed)) is not None:
        return verdict("implausible", [held], speed, would_be_tier=tier)
    if not_significant is not None:
        return verdict("none", [not_significant], speed)
    return verdict("accepted", [], speed, tier=tier)


def _decide_speed(r: Receipt, c: Counted, rules: GateRules, guards: dict[str, Any],
                  warnings: list[Caveat], verdict: Callable[..., Verdict]) -> Verdict:
    """The sequential decision on the paired gain: accepted, slower, none or undecided, unless
    the result is implausible or its pairs conflict or shift."""
    speed, d = speed_of(r, c, rules, warnings)
    speed.guards = guards
    if (doubt := unresolved_claim(c)) is not None:
        warnings.append(warning("claim-unresolved", f"{doubt}; more timed pairs would decide it"))
    if (held := implausible(speed)) is not None:
        return verdict("implausible", [held], speed, would_be_tier=d.tier)
    if d.state == "conflict":
        return verdict("infra", [conflict(d, rules)], speed)
    sealed = ruleset(r)
    if (shifted := sealed.settle(r, c, d, speed, rules, warnings)) is not None:
        return verdict("infra", [shifted], speed)
    if d.state == "accepted":
        return verdict("accepted", [], speed, tier=d.tier, tier_span=list(d.span) if d.span else None)
    if d.state == "slower":
        return verdict("slower", [_slower(d, rules)], speed, slower_rejects=rules.slower == "reject")
    if d.state == "none":
        return verdict("none", [sealed.no_change(d, rules)], speed)
    return verdict("undecided", [_undecided(d, speed, rules)], speed)


def conflict(d: sequential.Decision, rules: GateRules) -> Reason:
    """An empty interval at any level the decision reads, said with both ends at each level."""
    levels = [(f"the {rules.false_accept:.0%} false-accept level", d.interval),
              (f"the {rules.miss:.0%} miss level", (d.lower_miss, d.upper_miss))]
    if d.conflict == "narrowed":
        lo, hi = next((ends for _, ends in levels if ends[0] > ends[1]), d.interval)
        return reason("interval-empty", f"the interval emptied after {d.pairs} pairs ({_levels(levels)}; each end "
                                        "the tightest seen so far), so no single gain fits this round's pairs: the "
                                        "node changed mid-round", build=None, figure="interval", bar=hi, value=lo)
    if math.isnan(d.upper_slower) and rules.false_slower != rules.false_accept:
        levels.append((f"the {rules.false_slower:.0%} false-slower level", (math.nan, d.upper_slower)))
    return reason("rounds-disagree", "this round's pairs contradict the earlier rounds of the same candidate pooled "
                                     f"with it ({d.prior_pairs} pairs): {_levels(levels)}; the node changed between "
                                     "them", build=None)


def _levels(levels: list[tuple[str, tuple[float, float]]]) -> str:
    """Each level's interval: its two ends, "empty" where no gain fits, or the ends that crossed."""
    said = []
    for name, (lo, hi) in levels:
        if math.isnan(lo) or math.isnan(hi):
            said.append(f"at {name} no gain is consistent with all of them")
        elif lo > hi:
            said.append(f"at {name} the lower end {_pct(lo)} is above the upper end {_pct(hi)}")
        else:
            said.append(f"at {name} {_shown((lo, hi))}")
    return "; ".join(said)


def _step_check(c: Counted, d: sequential.Decision, speed: Speed, lock: Pins, rules: GateRules,
                warnings: list) -> Reason | None:
    """The round's pairs split where they changed level most (rules 3). A change that bears on
    the outcome makes the round infra; one whose two sides each point to the decided outcome
    leaves it standing; an undecided round's shifted pairs stand but never pool. Both said."""
    if (shift := sequential.step_change(log_ratios(c), rules.step_level)) is None:
        return None
    speed.shift = shift.to_dict()
    if d.state == "open":
        warnings.append(warning("step-change", f"{shift.sentence()}: the node changed mid-round, so these pairs "
                                               "will not pool with a rerun of this candidate"))
    elif shift.agrees(d, design_of(rules, 3), basis_of(c, lock, rules)):
        warnings.append(warning("step-change", f"{shift.sentence()}: the node changed mid-round, but each side "
                                               f"alone points to `{d.state}` as well, so it stands"))
    else:
        return reason("step-change", f"{shift.sentence()}: the node changed mid-round and the two sides do not "
                                     "point to one outcome; run it again on a quiet node", build=None,
                      figure="shift", bar=rules.step_level, value=shift.p)
    return None


def _settled(r: Receipt, c: Counted, d: sequential.Decision, speed: Speed, rules: GateRules,
             warnings: list) -> Reason | None:
    """Rules 3 after a decision: the step check (a shift that bears on the outcome is returned),
    then what the verdict must say beside the outcome."""
    if (shifted := _step_check(c, d, speed, r.lock, rules, warnings)) is not None:
        return shifted
    _decision_warnings(r, d, speed, rules, warnings)
    return None


def _unchecked(r: Receipt, c: Counted, d: sequential.Decision, speed: Speed, rules: GateRules,
               warnings: list) -> Reason | None:
    """Rules 2 checked nothing after a decision."""
    return None


def _decision_warnings(r: Receipt, d: sequential.Decision, speed: Speed, rules: GateRules, warnings: list) -> None:
    """What the verdict must say beside a decided outcome (rules 3): an unsettled tier, a basis
    whose denominator was not measured with the stated rate, a round measured afresh."""
    if d.state == "accepted" and d.span:
        warnings.append(warning("tier-span", f"the tier is {d.span[0]} at least: the basis interval "
                                             f"{_shown(d.basis_interval)} spans {d.span[0]}–{d.span[1]} (the settle "
                                             f"budget of {rules.settle_pairs} pairs did not narrow it to one band)"))
    if d.state == "accepted" and (speed.frontier_source == "lock" or speed.basis_kind == "anchor"):
        what = "the anchor" if speed.basis_kind == "anchor" else "the lock's frontier pin"
        warnings.append(warning("basis-unmeasured", f"the tier basis is against {what}, through main's median this "
                                                    "round taken as exact: the stated false-accept rate covers the "
                                                    "gain against main, not main's own uncertainty in the basis"))
    seq = r.sequential or Sequential()
    if seq.fresh:
        warnings.append(warning("fresh", "measured afresh (--fresh): earlier rounds of this candidate were not "
                                         "pooled, so the false-accept rate holds for this round alone"))


def _no_gain(d: sequential.Decision, rules: GateRules) -> Reason:
    """Rules 2: `none` read on the upper end alone."""
    said = (f"decided: the gain is below {rules.min_gain:.1%}, the smallest the profile cares about (upper end "
            f"{_pct(d.basis_upper_miss)} at the {rules.miss:.0%} miss rate; estimate {_pct(d.gain)})")
    return reason("no-gain", said, figure="gain", bar=rules.min_gain, value=d.basis_upper_miss)


def _no_change(d: sequential.Decision, rules: GateRules) -> Reason:
    said = (f"decided: no gain of {rules.min_gain:.1%} or more and no regression of as much "
            f"({_miss_ends(d)} at the {rules.miss:.0%} miss rate; estimate {_pct(d.gain)})")
    return reason("no-gain", said, figure="gain", bar=rules.min_gain, value=d.basis_upper_miss)


def implausible(speed: Speed) -> Reason | None:
    p = speed.plausibility
    if speed.candidate_median <= p["ceiling"]:
        return None
    return reason("implausible", f"candidate median {_num(speed.candidate_median)} is above "
                                 f"{p['factor']:g}x the {p['reference_kind']} {_num(p['reference'])} "
                                 f"({_num(p['ceiling'])}): held for review, not recorded",
                  figure="candidate_median", bar=p["ceiling"], value=speed.candidate_median)


def _end(x: float) -> str:
    return "unbounded" if not math.isfinite(x) else _pct(x)


def _shown(iv: tuple[float, float]) -> str:
    return "[" + ", ".join(_end(x) for x in iv) + "]"


def _miss_ends(d: sequential.Decision) -> str:
    """The two ends `none` reads at the miss rate: the gain's lower end against main and the
    basis's upper end. They are one interval only while the basis is the gain itself; against a
    pin above main they are on two scales and can even cross, so each is named."""
    if d.basis_upper_miss == d.upper_miss:
        return f"interval {_shown((d.lower_miss, d.upper_miss))}"
    return f"gain against main at least {_end(d.lower_miss)}, basis at most {_end(d.basis_upper_miss)}"


def _slower(d: sequential.Decision, rules: GateRules) -> Reason:
    verb = "rejected" if rules.slower == "reject" else "recorded, not rejected (gate.slower = \"record\")"
    upper = d.upper_slower if math.isfinite(d.upper_slower) else d.interval[1]
    return reason("slower", f"decided: slower than main, gain {_pct(d.gain)}, at most {_pct(upper)} at the "
                            f"{rules.false_slower:.0%} false-slower level; {verb}",
                  figure="gain", bar=0.0, value=upper)


def _undecided(d: sequential.Decision, speed: Speed, rules: GateRules) -> Reason:
    pooled = f" (with {d.prior_pairs} pooled from earlier rounds)" if d.prior_pairs else ""
    need = (f"; at this noise a decision needs about {speed.needed_pairs} pairs in all" if speed.needed_pairs
            else "; at this noise and gain no budget decides it")
    within = f"nor decided within ±{rules.min_gain:.1%} ({_miss_ends(d)} at the {rules.miss:.0%} miss rate)"
    return reason("undecided", f"budget spent after {d.pairs + d.prior_pairs} pairs{pooled}: gain {_pct(d.gain)}, "
                               f"interval {_shown(d.interval)} at the {rules.false_accept:.0%} level, neither above "
                               f"{rules.significance:.1%} {within}{need}",
                  figure="interval", bar=rules.significance, value=d.basis_interval[0])


def design_of(rules: GateRules, version: int = 3) -> sequential.Design:
    """The sequential design of ``rules`` under decision rules ``version`` (the receipt's)."""
    return sequential.Design.of(rules, version)


def basis_of(c: Counted, lock: Pins, rules: GateRules) -> sequential.Basis:
    main = c.values("main")
    return sequential.Basis(stats.median(main) if main else 1.0, float(lock.frontier or 0.0), rules.anchor)


def progress(receipt: Receipt, rules: GateRules) -> sequential.Decision | None:
    """The decision so far, for the round's stopping rule: None once nothing can be decided
    from speed any more (a build's claims refused, a failed run)."""
    r = typed(receipt)
    c = counted(r, rules)
    if c.problems["main"] or c.problems["candidate"]:
        return None
    prior = [p.log_ratios for p in r.sequential.prior] if r.sequential else []
    d = sequential.decide_pairs(prior + [log_ratios(c)], design_of(rules, ruleset(r).design),
                                basis_of(c, r.lock, rules), rules.bands)
    d.pending = unresolved_claim(c)
    return d


def speed_of(r: Receipt, c: Counted, rules: GateRules, warnings: list) -> tuple[Speed, sequential.Decision]:
    main, cand = c.values("main"), c.values("candidate")
    lock = r.lock
    xs = log_ratios(c)
    seq = r.sequential or Sequential()
    prior = [p.log_ratios for p in seq.prior]
    basis = basis_of(c, lock, rules)
    design = design_of(rules, ruleset(r).design)
    d = sequential.decide_pairs(prior + [xs], design, basis, rules.bands)
    main_med, cand_med = stats.median(main), stats.median(cand)
    node = _node_noise(lock)
    pair_sd = stats.stdev(xs) if len(xs) >= 2 else None
    _sequential_warnings(r, xs, node, pair_sd, rules, warnings)
    pin_warnings(main_med, lock, rules, warnings)
    needed = None
    if d.state == "open" and pair_sd:
        needed = sequential.pairs_to_decide(d.gain, pair_sd, design, basis)
    reference, reference_kind = (rules.anchor, "anchor") if rules.anchor > 0 else (basis.reference, "frontier")
    speed = Speed(
        main=stats.summary(main), candidate=stats.summary(cand), main_median=main_med, candidate_median=cand_med,
        frontier=basis.reference, frontier_source="lock" if basis.frontier > main_med else "main this round",
        frontier_slot=lock.frontier_slot, lock_frontier=float(lock.frontier or 0.0),
        delta=cand_med - basis.reference, gain=d.gain,
        significance=rules.significance, threshold=rules.significance, threshold_source="profile",
        confidence=1.0 - rules.false_accept, pairs=len(xs), ratios=[math.exp(x) for x in xs],
        interval=list(d.interval), anchor=rules.anchor,
        basis_frontier=d.basis_interval[0], basis_anchor=None, basis=d.basis_interval[0], basis_kind=basis.kind,
        bands={"s": rules.bands.s, "m": rules.bands.m, "l": rules.bands.l, "xl": rules.bands.xl},
        plausibility={"factor": rules.plausibility, "reference": reference, "reference_kind": reference_kind,
                      "ceiling": rules.plausibility * reference},
        differential=c.differential, significant=d.state == "accepted", band=d.tier,
        method=design.method, decision=d.to_dict(), preview=plain(seq.preview),   # the verdict's own copy
        node_noise=node.to_dict() if node else None, pair_sd=pair_sd, needed_pairs=needed)
    return speed, d


def pin_warnings(main_med: float, lock: Pins, rules: GateRules, warnings: list) -> None:
    """A pin that main this round measures well above or below, and an anchor the lock disagrees with."""
    pin = float(lock.frontier or 0.0)
    if pin <= 0:
        return
    if pin > main_med:
        warnings.append(warning("pin-stale", f"pin stale: the lock's frontier {_num(pin)} is "
                                             f"{_pct(pin / main_med - 1)} above main measured this round "
                                             f"({_num(main_med)}); the frontier stays at the pin"))
    elif main_med > pin * (1 + rules.significance):
        warnings.append(warning("pin-stale", f"pin stale: main measures {_num(main_med)}, "
                                             f"{_pct(main_med / pin - 1)} above the lock's frontier {_num(pin)}"))
    lock_anchor = float(lock.anchor or 0.0)
    if rules.anchor > 0 and lock_anchor > 0 and not math.isclose(lock_anchor, rules.anchor, rel_tol=1e-9):
        warnings.append(warning("anchor-mismatch", f"the rules' anchor {_num(rules.anchor)} differs from "
                                                   f"the lock's {_num(lock_anchor)}"))


def _node_noise(lock: Pins) -> sequential.PairNoise | None:
    if lock.noise_sd is None or not lock.noise_df:
        return None
    return sequential.PairNoise.of(lock.noise_sd, lock.noise_df)


def _sequential_warnings(r: Receipt, xs: list[float], node: sequential.PairNoise | None, pair_sd: float | None,
                         rules: GateRules, warnings: list) -> None:
    seq = r.sequential or Sequential()
    if seq.prior:
        n = sum(len(p.log_ratios) for p in seq.prior)
        cited = ", ".join(p.round_id for p in seq.prior[-3:]) + (", …" if len(seq.prior) > 3 else "")
        warnings.append(warning("pooled", f"rerun: pooled with {len(seq.prior)} earlier round(s) of this candidate "
                                          f"({cited}; {n} pairs); one confidence sequence runs across them, so the "
                                          f"{rules.false_accept:.0%} false-accept rate holds however often it is rerun"))
    if node is None:
        warnings.append(warning("noise-unmeasured", "this node's pair noise has not been measured (run "
                                                    "`console noise`); the round was planned with the profile's "
                                                    f"{rules.planning_noise:.1%}. The decision does not depend on it"))
    elif (louder := sequential.noisier_than(xs, node)) is not None:
        warnings.append(warning("noisier-than-node",
                                f"this round's pairs are noisier than the node's record: SD {louder:.1%} against "
                                f"{node.sd:.1%} (95% {node.lower:.1%}–{node.upper:.1%}); something on the node may "
                                "have changed. The decision stands (it needs no noise figure), but it took more pairs"))


@dataclass(frozen=True)
class Ruleset:
    """What the decision rules of one receipt schema decide their own way. A receipt is decided
    under the rules it was sealed under (``Receipt.rules_version``); the stages call these and
    never ask which schema they hold."""
    said: tuple[Caveat, ...]                        # on every round verdict it gives
    guard: Callable[..., Reason | Caveat | None]    # one guard, once it has a floor and candidate reps
    speed: Callable[..., Verdict]                   # the speed decision, after the guards
    settle: Callable[..., Reason | None]            # after a sequential decision: a shift that undoes it
    no_change: Callable[[sequential.Decision, GateRules], Reason]
    design: int                                     # sequential.Design's rules (progress and speed)


_RULESETS = {
    1: Ruleset(said=(warning("legacy-rules", f"this receipt is {legacy.NOTE}"),),
               guard=_guard_median, speed=_decide_legacy_speed, settle=_settled, no_change=_no_change, design=3),
    2: Ruleset(said=(), guard=_guard_bound, speed=_decide_speed, settle=_unchecked,
               no_change=_no_gain, design=2),
    3: Ruleset(said=(), guard=_guard_bound, speed=_decide_speed, settle=_settled,
               no_change=_no_change, design=3),
}


def ruleset(r: Receipt) -> Ruleset:
    return _RULESETS[r.rules_version]
