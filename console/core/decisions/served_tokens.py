"""The timed blocks' served tokens, graded: did each server answer, under load, what the reference
model would have? Pure: the grades come in (``ServedGrade``), a ruling goes out.

A served token *departs* when it is not the reference's own argmax given the request's full prompt
and the tokens served before it, and its logit is more than ``margin`` nats below that argmax (a
near-tie within the margin is what an honest batched server does; a token that is not a finite gap
departs). A request departs when any of its tokens does. The candidate is rejected when its share
of departing requests is decidedly above main's under the same load: a one-sided Fisher exact test
on the two builds' counts, at ``false_reject`` (an honest candidate whose servers behave like
main's is rejected at most that often). Main's own departures are a warning and a figure, never a
pass for the candidate. The ruling states the smallest share of cheating requests that the drawn
sample catches 99 % of the time.

Two more rules, for receipts that record them:

- *What was served is the console's to establish.* Every response of a build's counted timed
  blocks must be gradable: its stream carried the ids of what it served, those ids are the text it
  streamed, and each is in the model's vocabulary. A build with fewer gradable responses than
  counted ones is the build's fault, said with both counts: the candidate is rejected, main makes
  the round ``infra`` (the yardstick is broken).
- *Served tokens are graded as parity grades.* Each build's agreement (the share of its served
  tokens that are the reference's argmax) and mean gap (nats below the argmax, 0 where they agree)
  meet absolute bars, and the candidate's mean gap is ratcheted against main's under the same load
  with a floor (a ratio of two tiny gaps is rounding): a candidate whose tokens are systematically
  worse than main's, each within the margin, does not pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from scipy import stats as sps

from console.core.records.figures import finite
from console.core.records.served import GradedRequest, ServedGrade
from console.core.statistics import stats

CATCH_POWER = 0.99


def departures(r: GradedRequest, margin: float) -> list[int]:
    """The positions at which ``r``'s served token departs from the reference's choice."""
    if not (len(r.served) == len(r.best) == len(r.gap)):
        return list(range(max(len(r.served), len(r.best), len(r.gap))))
    return [i for i, (s, b, g) in enumerate(zip(r.served, r.best, r.gap))
            if s != b and not (finite(g) and 0 <= g <= margin)]


@dataclass
class Side:
    requests: int = 0
    departed: int = 0
    tokens: int = 0
    near_ties: int = 0              # served tokens that are not the argmax, within the margin
    largest_gap: float = 0.0        # the largest finite gap of any served token
    gap_sum: float = 0.0            # the gaps of every served token (a departure's: at most its cap)
    agreed: int = 0                 # served tokens that are the reference's argmax
    first: dict[str, Any] | None = None     # the first departure: request, position, tokens

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.tokens if self.tokens else None

    @property
    def mean_gap(self) -> float | None:
        return self.gap_sum / self.tokens if self.tokens else None

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "departed": self.departed,
                "rate": self.departed / self.requests if self.requests else None, "tokens": self.tokens,
                "near_ties": self.near_ties, "largest_gap": round(self.largest_gap, 5),
                "agreement": None if self.agreement is None else round(self.agreement, 6),
                "mean_gap": None if self.mean_gap is None else round(self.mean_gap, 6), "first": self.first}


# a served token whose gap is not a finite number (or is negative) counts as this far below the
# argmax in the mean: far beyond any margin, yet a single one cannot swamp a whole round's mean
GAP_CAP = 20.0


def _gap(served: int, best: int, gap: float) -> float:
    if served == best:
        return 0.0
    return gap if finite(gap) and 0 <= gap <= GAP_CAP else GAP_CAP


def sides(grade: ServedGrade) -> dict[str, Side]:
    out = {"main": Side(), "candidate": Side()}
    for r in grade.requests:
        s = out.setdefault(r.build, Side())
        bad = departures(r, grade.margin)
        s.requests += 1
        s.departed += bool(bad)
        s.tokens += len(r.served)
        s.near_ties += sum(a != b for a, b in zip(r.served, r.best)) - len(bad)
        s.largest_gap = max([s.largest_gap] + [g for g in r.gap if finite(g)])
        s.agreed += sum(a == b for a, b in zip(r.served, r.best))
        s.gap_sum += sum(_gap(a, b, g) for a, b, g in zip(r.served, r.best, r.gap)) + GAP_CAP * max(
            0, len(r.served) - min(len(r.best), len(r.gap)))
        if bad and s.first is None:
            i = bad[0]
            s.first = {"phase": r.phase, "block": r.block, "attempt": r.attempt, "request": r.request,
                       "position": i, "served": r.served[i] if i < len(r.served) else None,
                       "reference": r.best[i] if i < len(r.best) else None,
                       "gap": r.gap[i] if i < len(r.gap) and finite(r.gap[i]) else None}
    return out


def p_value(cand: tuple[int, int], main: tuple[int, int]) -> float:
    """One-sided Fisher exact p: how likely so many of the candidate's requests depart if its
    rate were main's. ``cand`` and ``main`` are (departed, graded)."""
    (kc, nc), (km, nm) = cand, main
    if nc == 0 or kc == 0:
        return 1.0
    return float(sps.fisher_exact([[kc, nc - kc], [km, nm - km]], alternative="greater").pvalue)


def critical(n_cand: int, main: tuple[int, int], alpha: float) -> int | None:
    """The fewest departing candidate requests (of ``n_cand``) that reject, given main's counts."""
    for k in range(1, n_cand + 1):
        if p_value((k, n_cand), main) <= alpha:
            return k
    return None


def smallest_caught(n_cand: int, main: tuple[int, int], alpha: float, power: float = CATCH_POWER) -> float | None:
    """The smallest share of the candidate's requests that, if each of them departed, the test
    rejects with probability ``power`` (None: no share would be caught with so few requests)."""
    k = critical(n_cand, main, alpha)
    if k is None:
        return None
    lo, hi = 0.0, 1.0
    if sps.binom.sf(k - 1, n_cand, hi) < power:
        return None
    for _ in range(40):         # bisection on a monotone tail probability
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sps.binom.sf(k - 1, n_cand, mid) < power else (lo, mid)
    return hi


@dataclass
class Ruling:
    table: dict[str, Any]
    candidate: list[str] = field(default_factory=list)     # why the candidate is rejected
    main: list[str] = field(default_factory=list)          # main's own departures (warnings)
    uncertain: list[str] = field(default_factory=list)     # departures too few to decide
    error: str = ""                                        # the yardstick failed: nothing graded
    main_broken: list[str] = field(default_factory=list)   # main served what cannot be graded (infra)


def rule(grade: ServedGrade) -> Ruling:
    """The ruling over both builds' graded requests."""
    s = sides(grade)
    m, c = s["main"], s["candidate"]
    p = p_value((c.departed, c.requests), (m.departed, m.requests))
    table = {"margin": grade.margin, "false_reject": grade.false_reject, "basis": grade.basis,
             "available": dict(grade.available), "counted": grade.counted,
             "ungradable": {b: len(v) for b, v in grade.ungradable.items()}, "seconds": grade.seconds,
             "p_value": p, "smallest_caught": smallest_caught(c.requests, (m.departed, m.requests), grade.false_reject),
             "main": m.to_dict(), "candidate": c.to_dict()}
    if grade.paired:
        table["paired"] = [x.to_dict() for x in paired(grade)]
    out = Ruling(table=table)
    if grade.error:
        out.error = grade.error
        return out
    if short := shortfall(grade, "main"):
        out.main_broken.append(short)
    if short := shortfall(grade, "candidate"):
        out.candidate.append(short)
    _grade_like_parity(grade, m, c, out)
    if m.departed:
        out.main.append(f"{m.departed} of {m.requests} graded requests depart from the reference's tokens "
                        f"({_where(m.first)})")
    if not c.departed:
        return out
    said = (f"{c.departed} of {c.requests} graded requests depart from the reference's tokens by more than "
            f"{grade.margin:g} nats, main's {m.departed} of {m.requests} under the same load (one-sided Fisher "
            f"p = {p:.2g}); first: {_where(c.first)}")
    (out.candidate if p <= grade.false_reject else out.uncertain).append(
        said if p <= grade.false_reject else f"{said}: not decidedly more than main's at {grade.false_reject:g}")
    return out


def _where(first: dict[str, Any] | None) -> str:
    if not first:
        return "none"
    gap = first.get("gap")
    return (f"{first['phase']} block {first['block']} request {first['request']}, token {first['position']}: "
            f"served {first['served']}, the reference's {first['reference']}"
            + (f", {gap:.3g} nats below it" if isinstance(gap, (int, float)) and math.isfinite(gap) else ""))


def shortfall(grade: ServedGrade, build: str) -> str | None:
    """Why ``build``'s counted responses are not all gradable, with both counts (None when they are,
    or when the receipt predates the rule)."""
    if grade.counted is None:
        return None
    counted, bad = grade.counted.get(build, 0), grade.ungradable.get(build, [])
    gradable = grade.available.get(build, 0)
    if gradable >= counted and not bad:
        return None
    first = f"; first: {bad[0]}" if bad else ""
    return (f"{gradable} of the {counted} responses of its counted timed blocks could be graded "
            f"({len(bad)} carried no usable token ids{first})")


def _grade_like_parity(grade: ServedGrade, m: Side, c: Side, out: Ruling) -> None:
    """Agreement and mean gap against absolute bars (the candidate's failures reject it, main's are
    said), then the candidate's mean gap ratcheted against main's, above a floor."""
    if grade.agree_min is None or grade.gap_max is None:
        return      # sealed before the rule
    for side, said in ((c, out.candidate), (m, out.main)):
        if side.agreement is not None and side.agreement < grade.agree_min:
            said.append(f"{side.agreed} of {side.tokens} served tokens ({side.agreement:.1%}) are the reference's "
                        f"own choice, under the bar {grade.agree_min:.1%}")
        if side.mean_gap is not None and side.mean_gap > grade.gap_max:
            said.append(f"its served tokens are {side.mean_gap:.3g} nats below the reference's choice on "
                        f"average, over the bar {grade.gap_max:g}")
    # as in parity, the comparison with main speaks where the bar did not (over it, it has already failed)
    over_bar = c.mean_gap is not None and c.mean_gap > grade.gap_max
    if grade.paired:
        if not over_bar:
            out.candidate.extend(paired_problems(paired(grade), grade.false_reject, grade.ratchet or 2.0))
        return
    if not over_bar and regressed(c.mean_gap, m.mean_gap, grade):
        out.candidate.append(
            f"its served tokens are {c.mean_gap:.3g} nats below the reference's choice on average, "
            f"{_times(c.mean_gap, m.mean_gap)} under the same load (ratchet "
            f"{grade.ratchet:g}x, floor {grade.gap_floor:g} nats); agreement {_share(c)} against main's {_share(m)}")


def regressed(cand: float | None, main: float | None, grade: ServedGrade) -> bool:
    """The ratchet with its floor: at least ``gap_floor`` nats and at least ``ratchet`` times main's."""
    if cand is None or main is None or grade.gap_floor is None or grade.ratchet is None:
        return False
    return cand >= grade.gap_floor and cand >= grade.ratchet * main


def _times(c: float, m: float) -> str:
    return "where main's are exactly the reference's" if m == 0 else f"{c / m:.1f}x main's {m:.3g}"


def _share(side: Side) -> str:
    return "none" if side.agreement is None else f"{side.agreement:.1%}"


# --- against main, request by request -------------------------------------------------------------

@dataclass(frozen=True)
class Paired:
    """One figure of the candidate's served tokens against main's on the same requests: per pair (a
    timed block of each build, the same prompts), the candidate's mean minus main's, with its lower
    bound; and main against itself: main's own figure (its server against its own build's
    teacher-forcing, what batching and kernels under load move it by) with its upper bound."""
    figure: str                     # "gap" (nats below the argmax; higher is worse) or "disagreement"
    pairs: int
    excess: float                   # mean over pairs of candidate − main
    bound: float                    # its lower bound at 1 − false_reject (Student t over the pairs)
    main: float                     # main's own mean figure over the same pairs
    main_upper: float               # its upper bound at 1 − false_reject

    def floor(self, ratchet: float) -> float:
        """The excess the candidate may have before it is worse: (ratchet − 1) × main's own figure at
        its upper bound, as parity's ratchet allows a depth up to ratchet × main's KL."""
        return (ratchet - 1.0) * max(self.main_upper, 0.0)

    def worse(self, ratchet: float) -> bool:
        return self.pairs >= 2 and self.bound > self.floor(ratchet)

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "pairs": self.pairs, "excess": self.excess, "bound": self.bound,
                "main": self.main, "main_upper": self.main_upper}


def _request_figures(r: GradedRequest) -> tuple[float, float]:
    """A graded request's mean gap (a departure's capped) and its share of tokens that are not the argmax."""
    n = max(len(r.served), 1)
    gaps = [_gap(a, b, g) for a, b, g in zip(r.served, r.best, r.gap)]
    gaps += [GAP_CAP] * max(0, len(r.served) - len(gaps))
    return sum(gaps) / n, sum(a != b for a, b in zip(r.served, r.best)) / n


def paired(grade: ServedGrade, level: float | None = None) -> list[Paired]:
    """The candidate's mean gap and disagreement against main's, pair by pair over the requests both
    builds served in that pair. Requests within a block share a server's state, so a pair (not a
    request) is the unit: the pairs are what is independent of each other."""
    level = grade.false_reject if level is None else level
    blocks: dict[tuple[str, int], dict[str, dict[int, GradedRequest]]] = {}
    for r in grade.requests:
        blocks.setdefault((r.phase, r.block), {}).setdefault(r.build, {})[r.request] = r
    per_pair: dict[str, list[tuple[float, float]]] = {"gap": [], "disagreement": []}
    for key in sorted(blocks):
        m, c = blocks[key].get("main", {}), blocks[key].get("candidate", {})
        common = sorted(m.keys() & c.keys())
        if not common:
            continue
        fm = [_request_figures(m[j]) for j in common]
        fc = [_request_figures(c[j]) for j in common]
        for i, name in enumerate(("gap", "disagreement")):
            per_pair[name].append((sum(x[i] for x in fm) / len(fm), sum(x[i] for x in fc) / len(fc)))
    return [_paired(name, rows, level) for name, rows in per_pair.items()]


def _paired(figure: str, rows: list[tuple[float, float]], level: float) -> Paired:
    n = len(rows)
    if n < 2:
        return Paired(figure, n, math.nan, math.nan, math.nan, math.nan)
    t = float(sps.t.ppf(1 - level, n - 1)) / math.sqrt(n)
    diffs, mains = [c - m for m, c in rows], [m for m, _ in rows]
    excess, sd = stats.mean(diffs), stats.stdev(diffs)
    main, main_sd = stats.mean(mains), stats.stdev(mains)
    return Paired(figure, n, excess, excess - t * sd, main, main + t * main_sd)


def paired_problems(rows: list[Paired], level: float, ratchet: float) -> list[str]:
    """Why the candidate's served tokens are decidedly worse than main's on the same requests."""
    out = []
    for p in rows:
        if not p.worse(ratchet):
            continue
        gap = p.figure == "gap"
        what = "further below the reference's choice per token" if gap else "more of its tokens off the reference's choice"
        k, unit = (1.0, " nats") if gap else (100.0, " points")
        out.append(f"on the same requests as main, {p.excess * k:.3g}{unit} {what} on average over "
                   f"{p.pairs} pairs (at least {p.bound * k:.3g}{unit} at the {1 - level:.0%} level), more than "
                   f"{ratchet:g}x main's own {p.main * k:.3g}{unit} (at most {p.main_upper * k:.3g}{unit}) allows "
                   f"({p.floor(ratchet) * k:.3g}{unit})")
    return out
