"""The wall-clock claim checks that rest on noisy figures, at a stated false-refusal rate.

A build's rate is checked against what the console's own clock says the extra tokens cost: the
long (timed) runs minus the short runs, whose fixed costs cancel. Where the console handed the
section over (``Rep.section_s``) its clock spans the section alone, so the fixed costs are those of
the section (the handover's) and the overhead margin is a share of the timed work; where the bench
times itself the clock spans the whole run (start, load, warm-up, teardown). Both are samples of noisy wall times, so the slope is an
estimate with an interval, and a check refuses only when the claim is implausible at the
profile's ``claim_false_refusal`` level (one-sided Welch bounds on the means,
``stats.linear_bound``): an honest build is refused by each check with at most that chance
(under roughly normal wall times; heavy tails only widen the bounds).

- **differential**: the upper bound of the console's rate, (tokens − short tokens) over the
  lower bound of (mean long wall − mean short wall), must reach the reported median rate
  less ``differential_margin``;
- **overhead**: a run padded with idle time on short token counts flattens the slope; what
  padding cannot hide is a fixed cost per run (the wall clock extrapolated to zero tokens)
  above main's. The lower bound of (candidate's − main's) fixed cost must stay within
  ``overhead_margin`` of main's mean long run.

The per-rep checks (reported elapsed within the wall clock, the seek's memory) compare one
run's claim with a hard bound, not a noisy estimate: they stay in ``gate``.
"""
from __future__ import annotations

from typing import Any

from console.core.statistics import stats
from console.core.records.receipt import Rep
from console.core.records.rules import GateRules
from console.core.records.verdict import num as _num


def _walls(reps: list[Rep]) -> list[float]:
    """The console's clock of each run: over the section it handed over (the timed work alone), or
    from start to exit where the bench times itself."""
    return [float(r.section_s if r.section_s is not None else r.wall_s or 0.0) for r in reps]


def _unit(reps: list[Rep]) -> str:
    return "section" if reps and all(r.console_timed for r in reps) else "run"


def differential(timed: list[Rep], short: list[Rep], rules: GateRules) -> tuple[dict[str, Any], str | None]:
    """The console's own rate from the long-minus-short wall clock, against the claim."""
    if len(timed) < 2:
        return {}, None     # too few timed reps: the gate says so (infra), not the claim
    if len(short) < 2:
        return ({"checked": False},
                f"{len(short)} valid short rep(s): at least 2 are needed to check the reported rate against "
                "the wall clock")
    n_long = stats.median(float(r.tokens) for r in timed)
    n_short = stats.median(float(r.tokens) for r in short)
    reported = stats.median(float(r.value or 0.0) for r in timed)
    need = reported / (1 + rules.differential_margin)
    level = rules.claim_false_refusal
    cost = stats.linear_bound([(1.0, _walls(timed)), (-1.0, _walls(short))], level, "lower")
    extra = n_long - n_short
    out: dict[str, Any] = {"checked": True, "tokens": n_long, "short_tokens": n_short,
                           "wall_s": stats.mean(_walls(timed)), "short_wall_s": stats.mean(_walls(short)),
                           "reported_median": reported, "required_rate": need, "level": level,
                           "extra_s": cost["estimate"], "extra_s_lower": cost["bound"],
                           "rate": extra / cost["estimate"] if cost["estimate"] > 0 else None,
                           "rate_upper": extra / cost["bound"] if cost["bound"] > 0 else None}
    if out["rate"] is not None:
        out["overhead_s"] = out["short_wall_s"] - n_short / out["rate"]
    if extra <= 0:
        return out, f"rate not supported by wall clock: the short runs ({n_short:g} tokens) are not shorter"
    longest = stats.linear_bound([(1.0, _walls(timed)), (-1.0, _walls(short))], level, "upper")["bound"]
    if longest <= 0:
        return out, (f"rate not supported by wall clock: {n_long:g} tokens took {out['wall_s']:.4g} s on average, "
                     f"no longer than {n_short:g} tokens ({out['short_wall_s']:.4g} s), beyond what noise explains "
                     f"at the {1 - level:.1%} level")
    upper = out["rate_upper"]
    if upper is not None and upper < need:
        return out, (f"rate not supported by wall clock: the extra {extra:g} tokens cost {cost['estimate']:.4g} s "
                     f"(at least {cost['bound']:.4g} s at the {1 - level:.1%} level), so at most {_num(upper)}/s, "
                     f"below the reported {_num(reported)}/s (allowed down to {_num(need)}/s with a "
                     f"{rules.differential_margin:.0%} margin)")
    return out, None


def _intercept_terms(timed: list[Rep], short: list[Rep], sign: float) -> list[tuple[float, list[float]]]:
    """The wall clock at zero tokens as a combination of the two means: w̄S·(1 + r) − w̄L·r."""
    n_long = stats.median(float(r.tokens) for r in timed)
    n_short = stats.median(float(r.tokens) for r in short)
    r = n_short / (n_long - n_short)
    return [(sign * (1 + r), _walls(short)), (-sign * r, _walls(timed))]


def overhead_problem(main: tuple[list[Rep], list[Rep]], cand: tuple[list[Rep], list[Rep]],
                     rules: GateRules) -> tuple[dict[str, Any], str | None]:
    """The candidate's fixed cost per run over main's, against main's long run."""
    (m_long, m_short), (c_long, c_short) = main, cand
    if min(len(m_long), len(m_short), len(c_long), len(c_short)) < 2:
        return {}, None
    if any(stats.median(float(r.tokens) for r in lg) <= stats.median(float(r.tokens) for r in sh)
           for lg, sh in ((m_long, m_short), (c_long, c_short))):
        return {}, None
    level = rules.claim_false_refusal
    excess = stats.linear_bound(_intercept_terms(c_long, c_short, 1.0) + _intercept_terms(m_long, m_short, -1.0),
                                level, "lower")
    allowed = rules.overhead_margin * stats.mean(_walls(m_long))
    unit = _unit(m_long + c_long)
    out = {"excess_s": excess["estimate"], "excess_s_lower": excess["bound"], "allowed_s": allowed, "level": level,
           "per": unit}
    if excess["bound"] <= allowed:
        return out, None
    return out, (f"its fixed cost per {unit} is {excess['estimate']:.3g} s above main's (at least "
                 f"{excess['bound']:.3g} s at the {1 - level:.1%} level; allowed {allowed:.3g} s, "
                 f"{rules.overhead_margin:.0%} of main's timed {unit}): a {unit} that idles on short token counts "
                 "could be propping up its differential, so its rate is not vouched for")
