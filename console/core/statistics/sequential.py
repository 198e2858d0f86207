"""Decisions at stated error rates: one paired estimand, a confidence sequence, a stopping rule.

**The estimand.** θ, the mean of log(candidate / main) over adjacent pairs of timed reps in
the round's drift-cancelling order (A B B A …): the gain is exp(θ) − 1. The gain, its
interval, the tier and the stopping rule all come from these pairs and nothing else.

**The method.** Lai's scale-invariant t-mixture confidence sequence for a Gaussian mean
with unknown variance (Lai 1976; Wang & Ramdas 2023, "Anytime-valid t-tests and confidence
sequences for Gaussian means with unknown variance"). For one round's pairs x₁…xₙ and a
candidate mean μ, with S = Σ(x − μ) and V = Σ(x − μ)²,

    E(μ) = sqrt(c² / (n + c²)) · (V / (V − S² / (n + c²)))^(n/2)

is a nonnegative martingale when μ is the true mean, whatever σ is. By Ville's inequality
the chance that it *ever* reaches 1/α is at most α, so {μ : E(μ) < 1/α} covers θ at every
n simultaneously: the round may look after every pair and stop when it likes. Reruns of
the same candidate multiply their rounds' e-values (optional continuation), so one
sequence runs across reruns and rerunning until lucky buys nothing.

Why this one: it needs no estimate of σ (a plug-in σ would break the guarantee, and σ is
exactly what differs between nodes and rounds), it has a closed form, it has no fixed look
schedule, and reruns compose by multiplication. The price is width at small n against a
fixed-n t interval (about 1.4× at 16 pairs); c² tunes where it is tightest (c² = 1: 8-30
pairs). The sequence is intersected over n, so its ends only ever tighten.

**The decision** (levels from the profile: ``false_accept`` α, ``false_slower`` α_s, ``miss`` β),
three one-sided questions about the same sequence, each at its own rate:

- ``accepted`` when the tier basis' lower end (level α) clears ``significance``;
- ``slower`` when the gain's upper end (level α_s) is below zero;
- ``none`` when, at level β, the basis' upper end is below ``min_gain`` and the gain's lower
  end above −``min_gain``: neither a worthwhile gain nor a worthwhile regression;
- else still ``open``; a round whose budget is spent while open is ``undecided``.

A round looks only after its own ``min_pairs``, whatever earlier rounds it pools. An
intersection that empties is a ``conflict``. The tier is the band of the basis' lower end;
the round may spend ``settle_pairs`` more pairs narrowing it (the runner's budget), then
reports the span. Schema-2 receipts re-derive under ``Design.rules = 2``.

Pure: numpy and scipy only, no I/O.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
from scipy import special

from console.core.statistics import robust

METHOD = "t-mixture confidence sequence (Lai 1976), e-values multiplied across reruns"
_GRID = 256            # points scanned between round means (several rounds only)
_EMPTY = 1e-9          # log scale: ends this close are one point (identical pairs), not an empty set


# --- the e-value of one round --------------------------------------------------------

def log_evalue(xs: Sequence[float], mu: Any, c2: float) -> Any:
    """log E(μ) for one round's pairs (0 for fewer than two pairs: no evidence); μ may be an array."""
    x = np.asarray(xs, dtype=float)
    return _log_e(len(x), float(x.sum()), float((x * x).sum()), np.asarray(mu, dtype=float), c2)


def _log_e(n: int, sx: float, sxx: float, mu: np.ndarray, c2: float) -> np.ndarray:
    """log E(μ) from a round's sufficient statistics (n, Σx, Σx²)."""
    if n < 2:
        return np.zeros_like(mu)
    s = sx - n * mu
    v = np.maximum(sxx - 2.0 * mu * sx + n * mu * mu, 1e-300)
    rest = np.maximum(1.0 - s * s / ((n + c2) * v), 1e-300)
    return 0.5 * math.log(c2 / (n + c2)) - 0.5 * n * np.log(rest)


def _log_evalue_limit(n: int, c2: float) -> float:
    """log E as μ runs to ±∞: the most evidence n pairs can ever give against any μ."""
    return 0.0 if n < 2 else 0.5 * (n - 1) * math.log((n + c2) / c2)


def _closed_form(n: int, sx: float, sxx: float, alpha: float, c2: float) -> tuple[float, float]:
    """{μ : E(μ) < 1/α} for one round: x̄ ± sqrt(q·SS / (n(n − q)))."""
    if n < 2:
        return (-math.inf, math.inf)
    mean = sx / n
    ss = max(sxx - sx * mean, 0.0)
    k = math.sqrt((n + c2) / c2) / alpha
    q = (n + c2) * (1.0 - k ** (-2.0 / n))
    if q >= n:
        return (-math.inf, math.inf)
    half = math.sqrt(q * ss / (n * (n - q)))
    return (mean - half, mean + half)


Stats = tuple[float, float, float]    # (n, Σx, Σx²) of one round's log ratios


def stats_of(xs: Sequence[float]) -> Stats:
    x = np.asarray(xs, dtype=float)
    return (len(x), float(x.sum()), float((x * x).sum()))


def sequence_at(rounds: Sequence[Stats], alpha: float, c2: float) -> tuple[float, float]:
    """The confidence set for θ (log scale) given every round's pairs so far, at level α.

    One round has a closed form. Several rounds multiply their e-values; each round's
    log E is monotone away from its own mean, so outside the span of the round means the
    sum is monotone and the bounds are found by root finding; inside it, by a scan. The
    hull of the set is returned. (nan, nan) when the rounds contradict each other (no μ
    is consistent with all of them: the rounds did not measure the same thing).
    """
    rounds = [r for r in rounds if r[0] > 0]
    if not rounds:
        return (-math.inf, math.inf)
    if len(rounds) == 1:
        return _closed_form(*rounds[0], alpha, c2)
    bar = math.log(1.0 / alpha)

    def f(mu: Any) -> Any:
        m = np.asarray(mu, dtype=float)
        return sum(_log_e(n, sx, sxx, m, c2) for n, sx, sxx in rounds) - bar

    means = [sx / n for n, sx, _ in rounds]
    a, b = min(means), max(means)
    grid = np.linspace(a, b, _GRID) if b > a else np.array([a])
    inside = grid[f(grid) < 0]
    if not len(inside):
        return (math.nan, math.nan)
    limit = sum(_log_evalue_limit(n, c2) for n, _, _ in rounds) - bar
    pooled_n = sum(n for n, _, _ in rounds)
    pooled_var = max(sum(sxx for _, _, sxx in rounds) / pooled_n - (sum(sx for _, sx, _ in rounds) / pooled_n) ** 2,
                     1e-12)

    def edge(start: float, step: float) -> float:
        # walk outward from a point inside until f turns non-negative, then bisect
        if limit <= 0:
            return math.copysign(math.inf, step)
        lo, dist = start, abs(step)
        while dist < 1e6:
            hi = start + math.copysign(dist, step)
            if float(f(hi)) >= 0:
                from scipy.optimize import brentq   # several rounds only: not paid at import
                return brentq(lambda m: float(f(m)), *sorted((lo, hi)), xtol=1e-12)
            lo, dist = hi, dist * 2.0
        return math.copysign(math.inf, step)

    step = math.sqrt(pooled_var)
    return (edge(float(inside[0]), -step), edge(float(inside[-1]), step))


# --- serially correlated pairs ---------------------------------------------------------------
#
# The e-value above assumes independent pairs. Pairs on a VM are not quite: the node's state
# carries from one pair to the next (more so in a matrix round, where several cells share it).
# With lag-1 autocorrelation ρ > 0 the mean's variance is about (1 + ρ)/(1 − ρ) times the
# independent one, so the spread the sequence reads is scaled by that factor, n and the mean kept
# (``serial = "lag1"``; an effective sample of fewer pairs would also charge the mixture's price
# for small n again, which at 6–8 pairs leaves nothing decidable). ρ is estimated from the
# round's own pairs, with the small-sample bias of the lag-1 estimator added back (Kendall:
# E ρ̂ ≈ ρ − (1 + 4ρ)/n) and half its standard error (0.5/√n) on top, clipped to [0, SERIAL_MAX]:
# the correction only ever widens. Measured in benchmarks/decision_quality.py (the ar1 cells) and
# benchmarks/matrix_quality.py; receipts sealed before it re-derive with ``serial = "none"``.

SERIAL_MAX = 0.6
SERIAL_MARGIN = 0.5         # half the estimator's standard error (1/√n) added: a one-sided ~70 % bound
SERIAL_MIN_PAIRS = 6        # fewer pairs say nothing about their correlation


def serial_factors(xs: Sequence[float], margin: float = SERIAL_MARGIN) -> np.ndarray:
    """Entry k: (1 + ρ)/(1 − ρ) for the first k + 1 pairs (1 where no correlation is seen);
    ``margin`` standard errors of the estimate are added to it."""
    x = np.asarray(xs, dtype=float)
    n = len(x)
    out = np.ones(n)
    if n < SERIAL_MIN_PAIRS:
        return out
    k = np.arange(1, n + 1, dtype=float)
    sx, sxx = np.cumsum(x), np.cumsum(x * x)
    lag = np.concatenate([[0.0], np.cumsum(x[1:] * x[:-1])])       # Σ_{i<k} x_i x_{i+1}
    first = np.concatenate([[0.0], sx[:-1]])                        # Σ of all but the last
    tail = sx - x[0]                                                # Σ of all but the first
    m = sx / k
    c0 = sxx - k * m * m
    c1 = lag - m * (first + tail) + (k - 1) * m * m
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(c0 > 0, c1 / np.where(c0 > 0, c0, 1.0), 0.0)
    rho = np.clip(rho + (1 + 4 * rho) / k + margin / np.sqrt(k), 0.0, SERIAL_MAX)
    f = (1 + rho) / (1 - rho)
    out[SERIAL_MIN_PAIRS - 1:] = f[SERIAL_MIN_PAIRS - 1:]
    return out


def effective(n: float, sx: float, sxx: float, factor: float) -> Stats:
    """(n, Σx, Σx²) of ``n`` pairs with the spread about their mean scaled by ``factor``: the
    variance of the mean of correlated pairs, as the sequence reads it (n and the mean are kept)."""
    if factor <= 1.0 or n < 2:
        return (n, sx, sxx)
    m = sx / n
    ss = max(sxx - sx * m, 0.0)
    return (n, sx, factor * ss + n * m * m)


def running_sequence(rounds: Sequence[Sequence[float]], alpha: float, c2: float,
                     min_pairs: int = 2, own_minimum: bool = False,
                     serial: str = "none") -> list[tuple[float, float]]:
    """The sequence after each pair of the last round (earlier rounds whole), intersected
    over n: entry k is the set after the last round's (k+1)-th pair. Looks before
    ``min_pairs`` pairs are skipped (the set is unbounded there anyway): pairs in all, or with
    ``own_minimum`` this round's own pairs, so a rerun never stops on its earlier rounds alone.
    An intersection that has become empty (lower end above upper end) is returned as it is.
    ``serial = "lag1"`` widens each round's set for the correlation its own pairs show."""
    rounds = [list(r) for r in rounds] or [[]]
    lag1 = serial == "lag1"
    before = [effective(*stats_of(r), serial_factors(r)[-1]) if lag1 and r else stats_of(r) for r in rounds[:-1]]
    last = np.asarray(rounds[-1], dtype=float)
    factors = serial_factors(last) if lag1 else np.ones(len(last))
    prior_n = 0 if own_minimum else sum(n for n, _, _ in before)
    sx, sxx = np.cumsum(last), np.cumsum(last * last)
    out: list[tuple[float, float]] = []
    lo, hi = -math.inf, math.inf
    for k in range(1, len(last) + 1):
        if prior_n + k >= min_pairs:
            now = effective(k, float(sx[k - 1]), float(sxx[k - 1]), float(factors[k - 1]))
            a, b = sequence_at(before + [now], alpha, c2)
            if math.isnan(a):
                return out + [(math.nan, math.nan)] * (len(last) - k + 1)
            lo, hi = max(lo, a), min(hi, b)
        out.append((lo, hi))
    return out


# --- the rules of a decision -----------------------------------------------------------

@dataclass(frozen=True)
class Design:
    """What a sequential decision needs from the profile (``GateRules``).

    ``rules`` is the version of the decision rules: 3 (this one) decides three ways and looks
    only after a round's own ``min_pairs``; 2 is how schema-2 receipts were decided (``none``
    on the upper end alone, looks counted over pooled pairs), kept so they re-derive."""
    false_accept: float = 0.01      # α: chance of accepting a candidate no faster than ``significance``
    miss: float = 0.05              # β: chance of ``none`` on a true gain (or regression) of ``min_gain``
    significance: float = 0.02      # the least gain that can be accepted
    min_gain: float = 0.035         # the smallest gain (and regression) the profile cares about
    min_pairs: int = 4
    max_pairs: int = 32
    mixture: float = 1.0            # c²
    false_slower: float = 0.01      # chance of calling ``slower`` a candidate that is not slower
    rules: int = 3
    serial: str = "none"            # "lag1": widened for the pairs' serial correlation (see serial_factors)
    sequence: str = "t-mixture"     # "huber": the robust sequence (console.core.statistics.robust)
    prior_sd: float = 0.05          # the planning noise: the robust sequence's scale before any pair

    @classmethod
    def of(cls, rules: Any, version: int = 3) -> "Design":
        return cls(false_accept=rules.false_accept, miss=rules.miss, significance=rules.significance,
                   min_gain=rules.min_gain, min_pairs=rules.min_pairs, max_pairs=rules.max_pairs,
                   mixture=rules.mixture, false_slower=getattr(rules, "false_slower", rules.false_accept),
                   rules=version, serial=getattr(rules, "serial", "none"),
                   sequence=getattr(rules, "sequence", "t-mixture") if version >= 3 else "t-mixture",
                   prior_sd=getattr(rules, "planning_noise", 0.05))

    @property
    def method(self) -> str:
        return robust.METHOD if self.sequence == "huber" else METHOD


@dataclass(frozen=True)
class Basis:
    """How a gain against main this round becomes the tier basis: against the higher of main's
    level and the pinned frontier, and against the anchor when one is set, whichever is
    smaller. ``main_level`` is main's median this round; with no pin above it and no anchor
    the basis is the gain itself, and it is never above it."""
    main_level: float
    frontier: float = 0.0           # the lock's pin (0 = none)
    anchor: float = 0.0

    @property
    def reference(self) -> float:
        return max(self.frontier, self.main_level)

    def of(self, gain: float) -> float:
        if not math.isfinite(gain):
            return gain
        ref = self.reference
        delta = (1.0 + gain) * self.main_level - ref
        out = gain if ref == self.main_level else delta / ref     # exact when main is the frontier
        if self.anchor > 0:
            out = min(out, delta / self.anchor)
        return out

    @property
    def kind(self) -> str:
        """Which denominator binds for a gain: "anchor" when it is the larger denominator
        (the smaller basis), else "frontier" (the higher of the pin and main this round)."""
        return "anchor" if self.anchor > self.reference else "frontier"


def _gain(log_x: float) -> float:
    """exp(x) − 1; an unbounded end stays unbounded (±inf), it is not a −100 % gain."""
    return math.expm1(log_x) if math.isfinite(log_x) else log_x


def band(basis: float, bands: Any) -> str:
    """xs < s ≤ s-band < m ≤ m-band < l ≤ l-band < xl ≤ xl-band."""
    for name in ("xl", "l", "m", "s"):
        if basis >= getattr(bands, name):
            return name
    return "xs"


@dataclass
class Decision:
    state: str                      # "accepted" | "none" | "slower" | "open" | "conflict"
    pairs: int                      # this round's pairs
    prior_pairs: int                # pairs pooled from earlier rounds of the same candidate
    gain: float                     # exp(pooled mean log ratio) − 1
    interval: tuple[float, float]   # the gain's sequence at level α
    upper_miss: float               # the gain's upper end at level β
    basis_interval: tuple[float, float]
    basis_upper_miss: float
    tier: str | None = None
    span: tuple[str, str] | None = None   # bands the basis interval spans when not settled
    settled: bool = False           # nothing left to learn within this design
    pending: str | None = None      # why the round must not stop yet although the speed is decided
    lower_miss: float = -math.inf   # the gain's lower end at level β (``none`` needs it above −min_gain)
    upper_slower: float = math.inf  # the gain's upper end at the false-slower level (``slower`` below 0)
    conflict: str | None = None     # "rounds": pooled rounds contradict; "narrowed": the interval emptied

    @property
    def decided(self) -> bool:
        """Whether the outcome is decided (an accepted tier may still be settling)."""
        return self.state != "open"

    @property
    def done(self) -> bool:
        """Whether the round can stop: decided, and for an accepted tier, settled; and nothing
        else (a claim the wall clock does not yet support) still needs more pairs."""
        if self.pending:
            return False
        return self.state in ("none", "slower", "conflict") or (self.state == "accepted" and self.settled)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def trajectory(rounds: Sequence[Sequence[float]], design: Design, basis: Basis, bands: Any) -> list[Decision]:
    """The decision after each pair of this round. ``rounds`` are earlier rounds' log ratios
    of the same candidate (pooled) and, last, this round's. The round's stopping rule and
    the verdict both read this; the verdict is its last entry."""
    rounds = [list(r) for r in rounds] or [[]]
    prior = sum(len(r) for r in rounds[:-1])
    steps = _robust_steps(rounds, design) if design.sequence == "huber" else _mixture_steps(rounds, design)
    return [_judge(k, prior, est, a, b, s, design, basis, bands) for k, (est, a, b, s) in enumerate(steps, start=1)]


Ends = tuple[float, float]
Step = tuple[float, Ends, Ends, Ends]     # (gain, ends at α, at β, at the false-slower level), log scale ends


def _mixture_steps(rounds: list[list[float]], design: Design) -> list[Step]:
    """The t-mixture's ends after each pair and the mean's gain."""
    prior = sum(len(r) for r in rounds[:-1])
    own = design.rules >= 3

    def seq(level: float) -> list[tuple[float, float]]:
        return running_sequence(rounds, level, design.mixture, design.min_pairs, own_minimum=own,
                                serial=design.serial)
    seq_a, seq_b = seq(design.false_accept), seq(design.miss)
    if design.false_slower == design.false_accept or not own:
        # rules 2 read the false-accept sequence's upper end for `slower`; its lower end is never read
        seq_s = seq_a if own else [(-math.inf, hi) for _, hi in seq_a]
    else:
        seq_s = seq(design.false_slower)
    total = np.cumsum(np.asarray(rounds[-1], dtype=float)) + math.fsum(x for r in rounds[:-1] for x in r)
    return [(_gain(float(total[k]) / (prior + k + 1)), a, b, s) for k, (a, b, s) in enumerate(zip(seq_a, seq_b, seq_s))]


def _robust_steps(rounds: list[list[float]], design: Design) -> list[Step]:
    """The robust sequence's ends after each pair (intersected over n from this round's own
    ``min_pairs`` on) and the Huber centre's gain. Pooled rounds that leave no centre inside
    the sequence contradict each other: every end is nan from there on."""
    last = rounds[-1]
    if not last:
        return []
    lag1 = design.serial == "lag1"

    def of(r: list[float], whole: bool) -> robust.Round:
        x = np.asarray(r, dtype=float)
        s = robust.scales(x, design.prior_sd)
        f = np.ones(len(x))
        for k in range(SERIAL_MIN_PAIRS, len(x) + 1) if lag1 else ():
            if whole and k < len(x):
                continue
            # read on the pairs winsorized about their median: a dipped pair is no evidence of correlation
            f[k - 1] = serial_factors(robust.winsorized(x[:k], s[:k]), robust.SERIAL_MARGIN)[-1]
        return robust.Round(x, s, np.full(len(x), f[-1]) if whole else f)
    rs = [of(r, True) for r in rounds[:-1] if r] + [of(last, False)]
    levels = (design.false_accept, design.miss, design.false_slower)
    run = robust.running(rs, sorted(set(levels)), design.mixture)
    ends = {a: (-math.inf, math.inf) for a in levels}
    out: list[Step] = []
    for k in range(len(last)):
        if k + 1 >= design.min_pairs:
            for a in ends:
                lo, hi = (float(e[k]) for e in run.ends[a])
                if math.isnan(lo) or math.isnan(ends[a][0]):
                    ends[a] = (math.nan, math.nan)
                else:
                    ends[a] = (max(ends[a][0], lo), min(ends[a][1], hi))
        out.append((_gain(float(run.centre[k])), *(ends[a] for a in levels)))
    return out


def decide_pairs(rounds: Sequence[Sequence[float]], design: Design, basis: Basis, bands: Any) -> Decision:
    """The decision after every pair so far (see ``trajectory``)."""
    steps = trajectory(rounds, design, basis, bands)
    if steps:
        return steps[-1]
    prior = sum(len(r) for r in rounds[:-1]) if rounds else 0
    unbounded = (-math.inf, math.inf)
    return _judge(0, prior, math.nan, unbounded, unbounded, unbounded, design, basis, bands)


def _judge(pairs: int, prior: int, est: float, ends_a: Ends, ends_b: Ends, ends_s: Ends,
           design: Design, basis: Basis, bands: Any) -> Decision:
    (lo_a, hi_a), (lo_b, hi_b), (lo_s, hi_s) = ends_a, ends_b, ends_s
    g_lo, g_hi, g_hi_b = _gain(lo_a), _gain(hi_a), _gain(hi_b)
    b_lo, b_hi, b_hi_b = basis.of(g_lo), basis.of(g_hi), basis.of(g_hi_b)
    d = Decision("open", pairs, prior, est, (g_lo, g_hi), g_hi_b, (b_lo, b_hi), b_hi_b,
                 lower_miss=_gain(lo_b), upper_slower=_gain(hi_s))
    three = design.rules >= 3
    if any(math.isnan(x) for x in (lo_a, lo_b, lo_s, hi_s)):
        # at some level the decision reads, no gain is consistent with every pooled round
        d.state, d.settled, d.conflict = "conflict", True, "rounds"
    elif three and any(lo - hi > _EMPTY for lo, hi in (ends_a, ends_b, ends_s)):
        # the intersection over n emptied at a level the decision reads: no single centre fits
        # the round's pairs at every n
        d.state, d.settled, d.conflict = "conflict", True, "narrowed"
    elif (_gain(hi_s) if three else g_hi) < 0:
        d.state, d.settled = "slower", True
    elif b_lo > design.significance and not math.isclose(b_lo, design.significance, rel_tol=1e-12):
        # (a gain equal to the bar within floating-point error is not above it)
        d.state = "accepted"
        d.tier = band(b_lo, bands)
        top = band(b_hi, bands) if math.isfinite(b_hi) else "xl"
        d.settled = top == d.tier
        if not d.settled:
            d.span = (d.tier, top)
    elif b_hi_b < design.min_gain and (not three or d.lower_miss > -design.min_gain):
        d.state, d.settled = "none", True
    return d


# --- planning -----------------------------------------------------------------------

def half_width(n: int, sd: float, alpha: float, c2: float) -> float:
    """The sequence's half-width (log scale) after n pairs whose sample SD is ``sd``."""
    if n < 2:
        return math.inf
    lo, hi = _closed_form(n, 0.0, sd * sd * (n - 1), alpha, c2)     # mean 0, sum of squares (n − 1)·sd²
    return (hi - lo) / 2.0


def spread(n: int, sd: float, alpha: float, design: Design) -> float:
    """The design's half-width (log scale) after n pairs of Gaussian noise with SD ``sd``."""
    if design.sequence == "huber":
        return sd * robust.unit_half_width(n, alpha, design.mixture)
    return half_width(n, sd, alpha, design.mixture)


def pairs_to_decide(gain: float, sd: float, design: Design, basis: Basis | None = None,
                    limit: int = 10_000) -> int | None:
    """About how many pairs decide a true ``gain`` against main (accept when the tier basis
    clears ``significance``, ``slower`` below zero, or ``none`` inside ±``min_gain``) with chance
    1 − β, at pair-noise ``sd``; None beyond ``limit``. With a ``basis`` (a pin above main, an
    anchor) acceptance is read on it, as the decision reads it."""
    basis = basis or Basis(1.0)
    theta = math.log1p(gain)
    z = float(special.ndtri(1.0 - design.miss))
    n = max(2, design.min_pairs)
    while n <= limit:
        wobble = z * sd / math.sqrt(n)
        low = _gain(theta - wobble - spread(n, sd, design.false_accept, design))
        high = _gain(theta + wobble + spread(n, sd, design.miss, design))
        low_b = _gain(theta - wobble - spread(n, sd, design.miss, design))
        if (basis.of(low) > design.significance or theta + wobble + spread(n, sd, design.false_slower, design) < 0
                or (basis.of(high) < design.min_gain and low_b > -design.min_gain)):
            return n
        n += 1 if n < 64 else max(1, n // 16)
    return None


def smallest_decidable_gain(sd: float, design: Design, pairs: int | None = None) -> float:
    """The smallest gain that is accepted, with chance 1 − β, within ``pairs`` (the budget)."""
    n = pairs or design.max_pairs
    z = float(special.ndtri(1.0 - design.miss))
    return math.expm1(math.log1p(design.significance) + spread(n, sd, design.false_accept, design)
                      + z * sd / math.sqrt(n))


@dataclass(frozen=True)
class Preview:
    """What the round can decide before it spends a rep: from the node's recorded noise."""
    sd: float | None                # the pair noise planned for (log scale)
    sd_source: str                  # "node record" | "profile default"
    max_pairs: int
    decidable_gain: float | None    # smallest gain accepted within budget with chance 1 − β
    min_gain_pairs: int | None      # pairs to decide a true gain of ``min_gain``
    false_accept: float
    miss: float

    def sentence(self) -> str:
        if self.decidable_gain is None or not math.isfinite(self.decidable_gain) or self.sd is None:
            return (f"this node cannot decide any gain within {self.max_pairs} pairs at "
                    f"{self.false_accept:.0%} / {self.miss:.0%}")
        need = (f"; a gain of the profile's smallest size needs about {self.min_gain_pairs} pairs"
                if self.min_gain_pairs else "; the profile's smallest gain is not decidable within 10000 pairs")
        return (f"this node decides gains ≥ {self.decidable_gain:.1%} within {self.max_pairs} pairs at "
                f"{self.false_accept:.0%} / {self.miss:.0%} (pair noise {self.sd:.1%}, {self.sd_source}){need}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: a gain no budget can decide is null, not infinity."""
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in asdict(self).items()}


def preview(sd: float | None, design: Design, default_sd: float, source: str = "node record") -> Preview:
    if sd is None or not sd > 0:
        sd, source = default_sd, "profile default"
    return Preview(sd=sd, sd_source=source, max_pairs=design.max_pairs,
                   decidable_gain=smallest_decidable_gain(sd, design),
                   min_gain_pairs=pairs_to_decide(design.min_gain, sd, design),
                   false_accept=design.false_accept, miss=design.miss)


# --- noise on the pair scale ------------------------------------------------------------------

@dataclass(frozen=True)
class PairNoise:
    """The SD of paired log ratios of one build against itself, pooled over noise rounds."""
    sd: float
    df: int                         # pooled degrees of freedom (pairs − rounds)
    lower: float                    # its 95 % interval
    upper: float

    @classmethod
    def of(cls, sd: float, df: int) -> "PairNoise":
        ss = sd * sd * df
        # χ² quantiles: chdtri(df, p) is the value exceeded with chance p
        return cls(sd, df, math.sqrt(ss / float(special.chdtri(df, 0.025))),
                   math.sqrt(ss / float(special.chdtri(df, 0.975))))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pair_noise(rounds: Sequence[Sequence[float]]) -> PairNoise | None:
    """Pooled within-round SD of log ratios (each round about its own mean), with a χ² interval."""
    ss, df = 0.0, 0
    for r in rounds:
        x = np.asarray(r, dtype=float)
        if len(x) >= 2:
            ss += float(((x - x.mean()) ** 2).sum())
            df += len(x) - 1
    if df < 1:
        return None
    return PairNoise.of(math.sqrt(ss / df), df)


def noisier_than(xs: Sequence[float], node: PairNoise, level: float = 0.01) -> float | None:
    """The round's pair SD when it is significantly above the node's record (F test at
    ``level``), else None."""
    x = np.asarray(xs, dtype=float)
    if len(x) < 3 or node.df < 1 or node.sd <= 0:
        return None
    sd = float(x.std(ddof=1))
    f = (sd / node.sd) ** 2
    return sd if f > float(special.fdtri(len(x) - 1, node.df, 1.0 - level)) else None


# --- a change of level within a round -----------------------------------------------------

@dataclass(frozen=True)
class Shift:
    """Evidence that the paired ratio changed level mid-round: the node (or one build's
    environment) moved, so no single gain describes the round's pairs."""
    at: int                         # the change falls after this many pairs
    pairs: int
    before: float                   # gain over pairs 1..at
    after: float                    # gain over the rest
    t: float
    p: float                        # two-sided, Bonferroni over every split tried
    level: float

    def sentence(self) -> str:
        return (f"the paired ratio changed level after pair {self.at} of {self.pairs}: gain {self.before:+.1%} "
                f"before, {self.after:+.1%} after (t = {self.t:.2f}, p = {self.p:.2g} over every split, "
                f"below {self.level:.2g})")

    def agrees(self, d: Decision, design: Design, basis: Basis) -> bool:
        """Whether the pairs on each side of the change, taken alone, point to the outcome the
        whole round decided: a slowdown on both sides, a basis above the bar on both, a change
        inside ±min_gain on both. Only then does the shift not bear on the outcome."""
        sides = (self.before, self.after)
        if d.state == "slower":
            return all(g < 0 for g in sides)
        if d.state == "accepted":
            return all(basis.of(g) > design.significance for g in sides)
        if d.state == "none":
            return all(-design.min_gain < g < design.min_gain for g in sides)
        return False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_change(xs: Sequence[float], level: float, min_segment: int = 4) -> Shift | None:
    """The largest two-sample t over every split of the round's pairs into a before and an
    after of at least ``min_segment`` pairs each (pooled within-segment SD), Bonferroni
    corrected over the splits; a Shift when that p is below ``level``. One test per round (the
    verdict's), so on pairs of one level it fires at most at ``level``."""
    x = np.asarray(xs, dtype=float)
    n = len(x)
    splits = n - 2 * min_segment + 1
    if splits < 1 or level <= 0:
        return None
    best: tuple[float, int] | None = None
    for m in range(min_segment, n - min_segment + 1):
        a, b = x[:m], x[m:]
        ss = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
        if ss <= 0:
            continue
        t = float(b.mean() - a.mean()) / math.sqrt(ss / (n - 2) * (1.0 / m + 1.0 / (n - m)))
        if best is None or abs(t) > abs(best[0]):
            best = (t, m)
    if best is None:
        return None
    t, m = best
    p = min(1.0, splits * 2.0 * float(special.stdtr(n - 2, -abs(t))))
    if p >= level:
        return None
    return Shift(at=m, pairs=n, before=math.expm1(float(x[:m].mean())), after=math.expm1(float(x[m:].mean())),
                 t=t, p=p, level=level)
