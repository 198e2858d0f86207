"""Small, exact statistics for timed reps: medians, spreads, paired ratios, intervals.

The Student t distribution comes from scipy.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Protocol, Sequence

from scipy import special as _special     # the distributions without scipy.stats' import cost

A, B = "main", "candidate"


class PairedRep(Protocol):
    """What pairing reads of a timed rep (the receipt's Rep has it); named here so that the
    statistics import nothing of the receipt, which itself reads them (its sizing's median)."""
    @property
    def build(self) -> str: ...
    @property
    def value(self) -> float | None: ...
    @property
    def schedule_key(self) -> tuple: ...


# --- location and spread -------------------------------------------------------

def median(values: Iterable[float]) -> float:
    v = sorted(float(x) for x in values)
    if not v:
        raise ValueError("median of no values")
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def mean(values: Iterable[float]) -> float:
    v = [float(x) for x in values]
    if not v:
        raise ValueError("mean of no values")
    return math.fsum(v) / len(v)


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (n − 1)."""
    m = mean(values)
    return math.sqrt(math.fsum((float(x) - m) ** 2 for x in values) / (len(values) - 1))


def spread(values: Sequence[float]) -> float:
    """(max - min) / median: the whole range as a share of the typical value."""
    m = median(values)
    return (max(values) - min(values)) / m if m else math.inf


def mad(values: Sequence[float]) -> float:
    m = median(values)
    return median(abs(x - m) for x in values)


def mad_spread(values: Sequence[float]) -> float:
    """1.4826 x MAD / median: a robust relative standard deviation (σ/μ for normal data)."""
    m = median(values)
    return 1.4826 * mad(values) / m if m else math.inf


def summary(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "spread": None, "mad_spread": None}
    return {"n": len(values), "median": median(values), "min": min(values), "max": max(values),
            "spread": spread(values), "mad_spread": mad_spread(values)}


# --- schedule and pairing --------------------------------------------------------

def interleaved_order(reps_per_build: int) -> list[str]:
    """A B B A A B B A …: each build sits first and second equally often, cancelling linear drift."""
    order: list[str] = []
    for k in range(reps_per_build):
        order += [A, B] if k % 2 == 0 else [B, A]
    return order


def paired_ratios(reps: Iterable[PairedRep]) -> list[float]:
    """candidate/main value ratios, pairing the k-th candidate rep with the k-th main rep.

    Reps are ordered by their place in the round's schedule, so the listing order
    does not matter. Pass the counted timed reps of both builds; unpaired extras are dropped.
    """
    reps = list(reps)
    mains = sorted((r for r in reps if r.build == A), key=lambda r: r.schedule_key)
    cands = sorted((r for r in reps if r.build == B), key=lambda r: r.schedule_key)
    return [float(c.value) / float(m.value) for m, c in zip(mains, cands)]


# --- Student t (scipy) -----------------------------------------------------------------

def t_cdf(t: float, df: float) -> float:
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    return float(_special.stdtr(df, t))


def t_quantile(p: float, df: float) -> float:
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    return float(_special.stdtrit(df, p))


def linear_bound(terms: Sequence[tuple[float, Sequence[float]]], level: float, side: str) -> dict[str, Any]:
    """A one-sided confidence bound on Σ coef·mean(values) over independent samples (Welch:
    each sample its own variance, Welch–Satterthwaite degrees of freedom).

    ``side`` "lower" gives a value the truth is above with chance 1 − ``level``; "upper" the
    reverse. Every sample needs at least two values; otherwise the bound is unbounded.
    """
    est = math.fsum(c * math.fsum(v) / len(v) for c, v in terms if len(v))
    parts = []
    for c, v in terms:
        if len(v) < 2:
            return {"estimate": est, "bound": -math.inf if side == "lower" else math.inf, "se": None, "df": None}
        m = math.fsum(v) / len(v)
        parts.append((c * c * math.fsum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v), len(v) - 1))
    var = math.fsum(p for p, _ in parts)
    se = math.sqrt(var)
    if se == 0.0:
        return {"estimate": est, "bound": est, "se": 0.0, "df": None}
    df = var * var / math.fsum(p * p / d for p, d in parts if p > 0)
    q = t_quantile(1.0 - level, df)
    return {"estimate": est, "bound": est - q * se if side == "lower" else est + q * se, "se": se, "df": df}


def geometric_bound(values: Sequence[float], level: float, side: str) -> float:
    """A one-sided bound on the geometric mean of positive values (Student t on their logs)."""
    return math.exp(linear_bound([(1.0, [math.log(v) for v in values])], level, side)["bound"])


# --- the paired interval --------------------------------------------------------------

def ratio_interval(ratios: Sequence[float], confidence: float) -> tuple[float, float]:
    """Two-sided interval for the typical cand/main ratio, as gains (ratio - 1).

    Student t on the log ratios (speed ratios are multiplicative, so logs make them
    symmetric); exponentiated back. Fewer than two pairs give (-inf, inf): a single
    pair carries no estimate of its own noise and can never be significant.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    if n < 2:
        return (-math.inf, math.inf)
    mean = math.fsum(logs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return (math.expm1(mean - half), math.expm1(mean + half))


def interval_excludes_zero(interval: tuple[float, float]) -> bool:
    lo, hi = interval
    return lo > 0.0 or hi < 0.0


# --- noise: a build measured against itself --------------------------------------------

def _significant(a: Sequence[float], b: Sequence[float], ratios: Sequence[float],
                 significance: float, confidence: float) -> bool:
    """Would the gate call this a change, in either direction? (A and B are the same build.)"""
    gain = median(b) / median(a) - 1.0
    lo, hi = ratio_interval(ratios, confidence)
    up = gain > significance and lo > 0.0
    down = -gain > significance and hi < 0.0
    return up or down


def noise_report(a_values: Sequence[float], b_values: Sequence[float],
                 significance: float, confidence: float) -> dict[str, Any]:
    """How noisy one build is against itself, and how often the gate would be fooled.

    ``a_values``/``b_values`` are the two interleaved copies' values, in schedule order,
    paired k-th with k-th. Reports:

    - ``spread``: max |b/a - 1| over pairs — the largest gain noise alone produced;
      the significance threshold should not be below it;
    - ``mad_spread``: 1.4826 x MAD of the log ratios — a robust σ of one pair's gain;
    - ``gain``: median(b)/median(a) - 1 and ``interval`` over all pairs (None ends
      when fewer than two pairs leave it unbounded);
    - ``false_positive_rate``: over every contiguous window of at least two pairs, the
      share in which the significance rule (gain beyond the threshold, interval clear
      of zero) fires in either direction — since both copies are the same build,
      every firing is a false positive;
    - ``suggested_significance``: the smallest threshold at which no window fires.
    """
    n = min(len(a_values), len(b_values))
    a, b = [float(x) for x in a_values[:n]], [float(x) for x in b_values[:n]]
    ratios = [y / x for x, y in zip(a, b)]
    report: dict[str, Any] = {"pairs": n, "ratios": ratios, "significance": significance,
                              "confidence": confidence}
    if n == 0:
        return {**report, "spread": None, "mad_spread": None, "gain": None,
                "interval": [None, None], "windows": 0, "false_positives": 0,
                "false_positive_rate": None, "suggested_significance": None}
    logs = [math.log(r) for r in ratios]
    windows = fired = 0
    needed = 0.0
    for i in range(n):
        for j in range(i + 2, n + 1):
            windows += 1
            wa, wb, wr = a[i:j], b[i:j], ratios[i:j]
            if _significant(wa, wb, wr, significance, confidence):
                fired += 1
            if interval_excludes_zero(ratio_interval(wr, confidence)):
                needed = max(needed, abs(median(wb) / median(wa) - 1.0))
    return {**report,
            "spread": max(abs(r - 1.0) for r in ratios),
            "mad_spread": 1.4826 * median(abs(x - median(logs)) for x in logs),
            "gain": median(b) / median(a) - 1.0,
            "interval": [x if math.isfinite(x) else None for x in ratio_interval(ratios, confidence)],
            "windows": windows, "false_positives": fired,
            "false_positive_rate": fired / windows if windows else None,
            "suggested_significance": needed}
