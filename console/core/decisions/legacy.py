"""Schema-1 receipts, judged by the rules they were sealed under.

Before receipts carried a sequential decision (schema 2) a round ran a fixed number of
reps and the gate decided on point figures: the median gain against a threshold (the
profile's significance, raised to the node's largest single-pair noise), a paired t
interval that had to clear zero, and a wall-clock differential from medians. Those
rules live here, unchanged, so that ``ledger rescore`` and ``lock verify`` give old
receipts the verdict and the pins they were sealed with. Nothing new is decided here.
"""
from __future__ import annotations

import math
from typing import Any

from console.core.statistics import stats
from console.core.records.receipt import Pins, Rep
from console.core.records.rules import GateRules
from console.core.statistics.sequential import band
from console.core.records.verdict import Reason, Speed, num as _num, pct as _pct, reason, warning

NOTE = ("judged by the schema-1 rules it was sealed under: a fixed number of reps, the median gain "
        "against a threshold and a paired interval (no stated error rates)")


def decide_speed(c: Any, lock: Pins, rules: GateRules, warnings: list) -> tuple[Speed, Reason | None, str | None]:
    """(speed figures, why not significant or None, tier or None). The caller adds the pin warnings."""
    s = speed(c, lock, rules, warnings)
    not_significant = significance(s, rules)
    s.significant = not_significant is None
    s.band = band(s.basis, rules.bands) if not_significant is None else None
    return s, not_significant, s.band


def overhead_problem(main: dict[str, Any], cand: dict[str, Any], rules: GateRules) -> str | None:
    """A short run padded with idle time flattens the long-minus-short slope and so props up
    an inflated rate. What the padding cannot hide is a fixed cost per run (the wall clock at
    zero tokens) well above main's, whose fixed work (start, load, seek) is the same."""
    a_main, a_cand = main.get("overhead_s"), cand.get("overhead_s")
    if a_main is None or a_cand is None:
        return None
    allowed = a_main + rules.overhead_margin * main["wall_s"]
    if a_cand <= allowed:
        return None
    return (f"its fixed cost per run is {a_cand:.3g} s against main's {a_main:.3g} s (allowed up to "
            f"{allowed:.3g} s, +{rules.overhead_margin:.0%} of main's run): a run that idles on short "
            "token counts could be propping up its wall-clock differential, so its rate is not vouched for")




def differential(timed: list[Rep], short: list[Rep], rules: GateRules) -> tuple[dict[str, Any], str | None]:
    """The console's own rate from the long-minus-short wall clock, against the claim.

    Load, warm-up and teardown cost the same in both runs, so they cancel; what is
    left is what the extra tokens really cost.
    """
    if not timed:
        return {}, None
    if not short:
        return {"checked": False}, "no valid short reps: the reported rate cannot be checked against the wall clock"
    n_long = stats.median(float(r.tokens) for r in timed)
    n_short = stats.median(float(r.tokens) for r in short)
    w_long = stats.median(float(r.wall_s or 0.0) for r in timed)
    w_short = stats.median(float(r.wall_s or 0.0) for r in short)
    reported = stats.median(float(r.value or 0.0) for r in timed)
    need = reported / (1 + rules.differential_margin)
    out = {"checked": True, "tokens": n_long, "short_tokens": n_short, "wall_s": w_long,
           "short_wall_s": w_short, "reported_median": reported, "required_rate": need, "rate": None}
    if w_long <= w_short or n_long <= n_short:
        return out, (f"rate not supported by wall clock: {n_long:g} tokens took {w_long:.4g} s, "
                     f"no longer than {n_short:g} tokens ({w_short:.4g} s)")
    rate = (n_long - n_short) / (w_long - w_short)
    out["rate"] = rate
    out["overhead_s"] = w_short - n_short / rate      # the wall clock extrapolated to zero tokens
    if rate < need:
        return out, (f"rate not supported by wall clock: the extra {n_long - n_short:g} tokens cost "
                     f"{w_long - w_short:.4g} s, {_num(rate)}/s, below the reported {_num(reported)}/s "
                     f"(allowed down to {_num(need)}/s with a {rules.differential_margin:.0%} margin)")
    return out, None




def speed(c: Any, lock: Pins, rules: GateRules, warnings: list) -> Speed:
    main, cand = c.values("main"), c.values("candidate")
    main_med, cand_med = stats.median(main), stats.median(cand)
    lock_frontier = float(lock.frontier or 0.0)
    frontier, source = (lock_frontier, "lock") if lock_frontier > main_med else (main_med, "main this round")
    delta = cand_med - frontier
    gain = delta / frontier
    ratios = stats.paired_ratios(c.valid[("main", "timed")] + c.valid[("candidate", "timed")])
    interval = stats.ratio_interval(ratios, rules.confidence)
    basis_frontier = gain
    basis_anchor = delta / rules.anchor if rules.anchor > 0 else None
    if basis_anchor is not None and basis_anchor < basis_frontier:
        basis, basis_kind = basis_anchor, "anchor"
    else:
        basis, basis_kind = basis_frontier, "frontier"
    reference, reference_kind = (rules.anchor, "anchor") if rules.anchor > 0 else (frontier, "frontier")
    speed_warnings(main_med, lock, rules, warnings)
    # Significance is never smaller than the noise this node has shown: a threshold below
    # the measured spread would let noise alone earn a tier.
    noise = lock.noise_spread
    threshold, threshold_source = rules.significance, "profile"
    if noise is not None and math.isfinite(noise) and noise > rules.significance:
        threshold, threshold_source = float(noise), "measured noise"
    return Speed(
        main=stats.summary(main), candidate=stats.summary(cand), main_median=main_med, candidate_median=cand_med,
        frontier=frontier, frontier_source=source, frontier_slot=lock.frontier_slot,
        lock_frontier=lock_frontier, delta=delta, gain=gain,
        significance=rules.significance, threshold=threshold, threshold_source=threshold_source,
        confidence=rules.confidence, pairs=len(ratios), ratios=ratios, interval=list(interval),
        anchor=rules.anchor, basis_frontier=basis_frontier, basis_anchor=basis_anchor,
        basis=basis, basis_kind=basis_kind,
        bands={"s": rules.bands.s, "m": rules.bands.m, "l": rules.bands.l, "xl": rules.bands.xl},
        plausibility={"factor": rules.plausibility, "reference": reference, "reference_kind": reference_kind,
                      "ceiling": rules.plausibility * reference},
        differential=c.differential)


def speed_warnings(main_med: float, lock: Pins, rules: GateRules, warnings: list) -> None:
    noise = lock.noise_spread
    if noise is None:
        warnings.append(warning("noise-unmeasured", "this node's noise has not been measured (run a noise "
                                                    f"round); the {rules.significance:.1%} threshold is unverified"))
    elif noise > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the profile's significance threshold {rules.significance:.1%} is below this "
                                f"node's measured noise {noise:.1%}; this round requires a gain above "
                                f"{noise:.1%} instead"))


def significance(speed: Speed, rules: GateRules) -> Reason | None:
    """None when significant, else the reason it is not."""
    gain, (lo, hi) = speed.gain, speed.interval
    threshold = speed.threshold
    if gain <= threshold:
        source = "" if speed.threshold_source == "profile" else " (this node's measured noise)"
        return reason("below-significance",
                      f"gain {_pct(gain)} over the frontier {_num(speed.frontier)} is not above the "
                      f"significance threshold {threshold:.1%}{source}",
                      figure="gain", bar=threshold, value=gain)
    if not lo > 0:
        shown = "unbounded (fewer than two pairs)" if math.isinf(lo) else f"[{_pct(lo)}, {_pct(hi)}]"
        return reason("interval-includes-zero",
                      f"gain {_pct(gain)} but the {rules.confidence:.0%} paired interval {shown} "
                      "includes no change", figure="interval", bar=0.0, value=lo)
    return None


