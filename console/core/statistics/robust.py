"""A confidence sequence for the pairs' centre that a few dipped reps cannot stretch.

**Why.** A neighbour's burst takes 5–45 % off one rep of one build now and then. Under the
t-mixture (``sequential``) each such pair enters the spread squared, so two or three of them
set the width of every later interval and the round waits for the mean to outgrow them.

**The estimand.** θ, the centre of the pairs' log ratios: the μ at which the clipped deviations
ψ((x − μ)/c) = clip((x − μ)/c, −1, 1) average zero (a Huber M-estimate of location). For pair noise symmetric about its centre
(a dip is as likely to hit either build; the interleaved order makes it so) this is the same
gain the mean estimated; a dipped pair still counts, as one pair that lies at least ``c`` above
or below μ, never as more.

**The method.** Lai's t-mixture sequence (``sequential``), read on clipped deviations: for a
candidate centre μ each pair enters as ψ_i(μ) = clip((x_i − μ)/c_i, −1, 1), and
E(μ) = sqrt(c² / (n + c²)) · (V / (V − S² / (n + c²)))^(n/2) with S = Σψ_i(μ), V = Σψ_i(μ)².
At μ = θ the clipped noise is symmetric and bounded; the mixture is exact for Gaussian pairs
none of which is clipped, and for symmetric noise clipped at a bound the t-statistic it rests
on is conservative (Efron 1969, "Student's t-test under symmetry conditions"). That is the one
step that is not a theorem here: ``benchmarks/decision_quality.py`` measures every stated rate
through the round's own loop on Gaussian, t3, dipped (contaminated), AR(1) and stepped pairs.
Validity at any stopping time is Ville's inequality, as for the raw sequence; reruns multiply.

A dipped pair moves S by at most 1 and V by at most 1, where the raw sequence let its
square set the spread for every later look.

**The scale without losing validity.** The clip c_i = ``CLIP`` · s_i must not look at pair i:
s_i is *predictable*, read from the pairs before it only (half the squared successive
differences, each capped at ``SCALE_CAP`` · s, pooled with the profile's planning noise counted
as ``PRIOR_WEIGHT`` pairs). Successive differences ignore a level, so a step in the pairs does
not inflate it, and the cap keeps a dipped pair from widening the clip for the ones after it. The
clip may depend on anything before pair i, never on pair i itself (that would make the
clipping chase the noise); a poor scale only costs power.

**Serial correlation** (``serial = "lag1"``): as for the raw sequence, the clipped deviations'
spread is scaled by (1 + ρ)/(1 − ρ), ρ the bounded lag-1 estimate of the pairs so far
(``sequential.serial_factors``), read on the pairs winsorized about their median so that a dip
is not taken for correlation; the correction only ever widens.

Bounds are read on a fixed lattice of μ (``STEP`` apart, linear in log E between points), so
the round's live loop and any later re-derivation of the same pairs give the same numbers.

Pure: numpy only, no I/O.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

METHOD = "t-mixture confidence sequence on Huber-clipped pairs, predictable scale; e-values multiplied across reruns"
CLIP = 1.0                              # a pair is clipped this many predicted scales from μ
PRIOR_WEIGHT = 0.5                      # the profile's planning noise counts as this many pairs of scale
SCALE_CAP = 2.5                         # a successive difference counts at most this many scales
STEP = 2.5e-4                           # lattice of candidate centres (log scale)
MAX_POINTS = 20_000
SERIAL_MARGIN = 0.0                      # standard errors added to the lag-1 estimate (bias-corrected only)


def scales(xs: Sequence[float], prior_sd: float) -> np.ndarray:
    """s_i for each pair, from the pairs before it only (predictable)."""
    x = np.asarray(xs, dtype=float)
    out = np.empty(len(x))
    ss, count = PRIOR_WEIGHT * prior_sd * prior_sd, PRIOR_WEIGHT
    for i in range(len(x)):
        s = math.sqrt(ss / count)
        out[i] = s
        if i >= 1:
            d2 = 0.5 * (x[i] - x[i - 1]) ** 2
            ss += min(d2, (SCALE_CAP * s) ** 2)
            count += 1
    return out


def winsorized(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The pairs pulled in to ``CLIP`` predicted scales of their median."""
    m = float(np.median(x))
    return m + np.clip(x - m, -CLIP * s, CLIP * s)


def lattice(lo: float, hi: float) -> np.ndarray:
    """Candidate centres on the fixed lattice covering [lo, hi] (coarser past MAX_POINTS)."""
    a, b = math.floor(lo / STEP), math.ceil(hi / STEP)
    step = 1
    while (b - a) // step > MAX_POINTS:
        step *= 2
    a, b = a - a % step, b + (-b) % step
    return np.arange(a, b + 1, step, dtype=float) * STEP


def _clipped(x: np.ndarray, s: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """(pairs, centres): each pair's deviation from μ in its own predicted clip, cut to [−1, 1].
    In units of the clip, so that a round whose pairs all lie beyond it reads as one constant
    (the strongest evidence n pairs can give), however the predicted scale moved meanwhile."""
    return np.clip((x[:, None] - mu[None, :]) / (CLIP * s[:, None]), -1.0, 1.0)


def log_evalue(n: np.ndarray, s1: np.ndarray, s2: np.ndarray, factor: np.ndarray, c2: float) -> np.ndarray:
    """Lai's t-mixture log E from the clipped deviations' sums (Σψ, Σψ²) after ``n`` pairs, the
    spread about their mean scaled by the serial ``factor`` (as ``sequential.effective`` does)."""
    n = np.maximum(n, 1.0)
    spread = np.maximum(s2 - s1 * s1 / n, 0.0)
    v = np.maximum(factor * spread + s1 * s1 / n, 1e-300)
    rest = np.maximum(1.0 - s1 * s1 / ((n + c2) * v), 1e-300)
    return np.where(n >= 2, 0.5 * np.log(c2 / (n + c2)) - 0.5 * n * np.log(rest), 0.0)


@dataclass(frozen=True)
class Round:
    """One round's pairs, their predictable scales and serial factors (one per pair)."""
    x: np.ndarray
    s: np.ndarray
    factor: np.ndarray

    @classmethod
    def of(cls, xs: Sequence[float], prior_sd: float, factors: Sequence[float]) -> "Round":
        x = np.asarray(xs, dtype=float)
        return cls(x, scales(x, prior_sd), np.asarray(factors, dtype=float))


def _reach(rounds: Sequence[Round]) -> tuple[float, float]:
    """Centres beyond which every pair is clipped: the sequence is flat out there."""
    xs = np.concatenate([r.x for r in rounds])
    pad = CLIP * max(float(r.s.max()) for r in rounds)
    return float(xs.min()) - pad - STEP, float(xs.max()) + pad + STEP


def _hull(logk: np.ndarray, mu: np.ndarray, bar: float, centre: np.ndarray,
          at_centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of log E over the lattice: the hull of {μ : log E(μ) < bar}, its edges
    interpolated; ±∞ where the set reaches the lattice's end (every pair clipped there: the set
    is unbounded). A set narrower than the lattice (pairs all alike) is its centre when the
    centre is inside (``at_centre``: log E there), and (nan, nan) when nothing is."""
    lo, hi = np.full(logk.shape[0], math.nan), np.full(logk.shape[0], math.nan)
    for k, row in enumerate(logk):
        inside = np.nonzero(row < bar)[0]
        if not len(inside):
            if at_centre[k] < bar:
                lo[k] = hi[k] = centre[k]
            continue
        i, j = int(inside[0]), int(inside[-1])
        lo[k] = -math.inf if i == 0 else _edge(row[i - 1], row[i], mu[i - 1], mu[i], bar)
        hi[k] = math.inf if j == len(row) - 1 else _edge(row[j], row[j + 1], mu[j], mu[j + 1], bar)
    return lo, hi


def _edge(a: float, b: float, ma: float, mb: float, bar: float) -> float:
    return ma + (mb - ma) * (a - bar) / (a - b) if a != b else ma


def _root(score: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """For each row of Σψ (decreasing in μ): its zero, interpolated (the Huber centre)."""
    out = np.empty(score.shape[0])
    for k, row in enumerate(score):
        pos = np.nonzero(row > 0)[0]
        i = int(pos[-1]) if len(pos) else 0
        inside = len(pos) and i + 1 < len(row)
        out[k] = _edge(row[i], row[i + 1], mu[i], mu[i + 1], 0.0) if inside else mu[i]
    return out


@dataclass(frozen=True)
class Running:
    """After each pair of the last round (earlier rounds whole): the Huber centre and, per level,
    the sequence's ends (not yet intersected over n)."""
    centre: np.ndarray
    ends: dict[float, tuple[np.ndarray, np.ndarray]]


def running(rounds: Sequence[Round], levels: Sequence[float], c2: float) -> Running:
    """The sequence's ends after each pair of the last round, earlier rounds' e-values multiplied in."""
    mu = lattice(*_reach(rounds))
    logk, score = _evidence(rounds, mu, c2)
    centre = _root(score, mu)
    # log E at each row's own centre: the set is never empty while that is inside
    at_centre = np.asarray([_evidence(rounds, np.asarray([m]), c2, row=k)[0][0, 0] for k, m in enumerate(centre)])
    return Running(centre, {a: _hull(logk, mu, math.log(1.0 / a), centre, at_centre) for a in levels})


def _evidence(rounds: Sequence[Round], mu: np.ndarray, c2: float, row: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log E, Σψ) at each centre in ``mu``, after each pair of the last round (or only after
    pair ``row`` + 1); earlier rounds enter whole."""
    last = rounds[-1]
    rows = len(last.x) if row is None else 1
    logk, score = np.zeros((rows, len(mu))), np.zeros((rows, len(mu)))
    for r in rounds:
        upto = len(r.x) if r is not last or row is None else row + 1
        y = _clipped(r.x[:upto], r.s[:upto], mu)
        n = np.arange(1, upto + 1, dtype=float)[:, None]
        s1, s2 = np.cumsum(y, axis=0), np.cumsum(y * y, axis=0)
        e = log_evalue(n, s1, s2, r.factor[:upto, None], c2)
        if r is last:
            logk, score = logk + (e if row is None else e[-1:]), score + (s1 if row is None else s1[-1:])
        else:                                       # an earlier round enters whole
            logk, score = logk + e[-1], score + s1[-1]
    return logk, score


@functools.lru_cache(maxsize=4096)
def unit_half_width(n: int, alpha: float, c2: float) -> float:
    """How far from the centre the sequence's ends lie after n pairs of unit-SD Gaussian noise at
    level α, the scale known: in units of the pair SD (for planning; the bound is scale-free)."""
    if n < 2:
        return math.inf
    from scipy import special
    x = special.ndtri((np.arange(1, n + 1) - 0.5) / n)
    s, one = np.ones(n), np.ones(1)
    bar = math.log(1.0 / alpha)

    def evidence(d: float) -> float:
        y = _clipped(x, s, np.asarray([-d]))
        return float(log_evalue(np.asarray([float(n)]), y.sum(axis=0), (y * y).sum(axis=0), one, c2)[0])
    lo, hi = 0.0, 64.0
    if evidence(hi) < bar:
        return math.inf
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if evidence(mid) >= bar else (mid, hi)
    return hi
