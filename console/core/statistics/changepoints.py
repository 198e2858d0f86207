"""Change points in a series of rounds: where main's level moved, at a stated false-alarm rate.

**The method.** Binary segmentation with a t-test on log values, as Apache Otava (formerly Hunter)
settles its candidates, with the multiplicity handled exactly rather than by permutation:

1. In a segment of n points, every split that leaves at least ``min_segment`` points on each
   side is a candidate; each gets Student's two-sided t-test (pooled variance) of the two sides'
   mean log value: exact when nothing changed, which is when a false alarm is counted.
2. The best split's p-value is multiplied by the number of candidate splits (Bonferroni).
   It is a change point when that is at most ``alpha`` and the estimated size,
   exp(mean after − mean before) − 1, is at least ``min_change`` either way.
3. Each side is searched again the same way, until no split qualifies.

What is guaranteed: in a series with no change (independent, roughly Gaussian log values), the
chance that any change point is reported is at most ``alpha``; the first test is the only one
that runs and it is Bonferroni-corrected over every split it looks at. A true change is then
searched around at the same level. ``benchmarks/history.py`` measures both rates through
``detect`` itself.

Why this and not E-divisive with permutations (MongoDB's): permutations make the answer depend
on a random seed, and users of those tools ask for the same answer twice. The t-test also gives
the size of each change with an interval (Welch's, since the spread may change with the level). ``min_segment`` keeps one odd round (a spike) from being
a segment of its own; ``min_change`` keeps a real but tiny shift from being worth a bisection.

Pure: scipy's t distribution, no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy import stats as sps

METHOD = ("binary segmentation, Student t-test on log values, Bonferroni over the splits tested "
          "(false alarm in a flat series <= alpha)")


@dataclass(frozen=True)
class Rules:
    """How sure, how big and how long: what a change point must clear."""
    alpha: float = 0.01         # chance of any change point in a series with none
    min_change: float = 0.02    # smallest relative change worth reporting (either way)
    min_segment: int = 4        # points at least on each side of a change

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not self.min_change >= 0.0:
            raise ValueError(f"min_change must be >= 0, got {self.min_change}")
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be at least 2 (a t-test needs two points a side), "
                             f"got {self.min_segment}")


@dataclass(frozen=True)
class ChangePoint:
    """The level changes between point ``at - 1`` and point ``at``."""
    at: int                     # index of the first point after the change
    start: int                  # the segment the split was found in: [start, end)
    end: int
    change: float               # exp(mean log after − mean log before) − 1
    low: float                  # its two-sided (1 − alpha) interval, Welch
    high: float
    p: float                    # the split's Bonferroni-corrected p-value
    splits: int                 # candidate splits it was corrected over
    before: int                 # points in the segment before and after
    after: int

    @property
    def direction(self) -> str:
        return "down" if self.change < 0 else "up"


def _moments(xs: Sequence[float]) -> tuple[int, float, float]:
    """(n, mean, sum of squared deviations)."""
    n = len(xs)
    m = sum(xs) / n
    return n, m, sum((x - m) ** 2 for x in xs)


def _pooled_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Student's two-sided p for mean(b) ≠ mean(a), pooled variance: exact when there is no change
    (both sides then have one distribution), which is what the false-alarm rate is stated under.
    Welch's approximate p is anti-conservative this far in the tail with four points a side."""
    na, ma, ssa = _moments(a)
    nb, mb, ssb = _moments(b)
    df = na + nb - 2
    se2 = (ssa + ssb) / df * (1.0 / na + 1.0 / nb)
    if se2 <= 0.0:
        return 1.0 if mb == ma else 0.0
    return float(2.0 * sps.t.sf(abs(mb - ma) / math.sqrt(se2), df))


def _welch_half(a: Sequence[float], b: Sequence[float], level: float) -> float:
    """Half the two-sided ``level`` Welch interval of mean(b) − mean(a): once there is a change, the
    two sides' spreads need not be equal."""
    na, _, ssa = _moments(a)
    nb, _, ssb = _moments(b)
    va, vb = ssa / (na - 1) / na, ssb / (nb - 1) / nb
    se2 = va + vb
    if se2 <= 0.0:
        return 0.0
    df = se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1))      # Welch–Satterthwaite
    return float(sps.t.ppf(0.5 + level / 2.0, max(df, 1.0))) * math.sqrt(se2)


def best_split(logs: Sequence[float], start: int, end: int, rules: Rules) -> ChangePoint | None:
    """The most significant admissible split of ``logs[start:end]``, corrected; None when the
    segment is too short to split into two of ``min_segment``."""
    k = rules.min_segment
    splits = range(start + k, end - k + 1)
    if len(splits) == 0:
        return None
    p, at = min((_pooled_p(logs[start:a], logs[a:end]), a) for a in splits)
    before, after = logs[start:at], logs[at:end]
    change, low, high = sized(before, after, 1.0 - rules.alpha)
    return ChangePoint(at=at, start=start, end=end, change=change, low=low, high=high,
                       p=min(1.0, p * len(splits)), splits=len(splits), before=len(before), after=len(after))


def sized(before: Sequence[float], after: Sequence[float], level: float) -> tuple[float, float, float]:
    """exp(mean after − mean before) − 1 of two runs of log values, with its two-sided ``level``
    Welch interval (each side needs two points)."""
    diff = sum(after) / len(after) - sum(before) / len(before)
    half = _welch_half(before, after, level)
    return math.expm1(diff), math.expm1(diff - half), math.expm1(diff + half)


def detect(values: Sequence[float], rules: Rules = Rules()) -> list[ChangePoint]:
    """Every change point in ``values`` (positive figures, in time order), sorted by position."""
    if any(not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for v in values):
        raise ValueError("a series' values must be positive finite numbers")
    logs = [math.log(v) for v in values]
    found: list[ChangePoint] = []
    todo = [(0, len(logs))]
    while todo:
        start, end = todo.pop()
        cp = best_split(logs, start, end, rules)
        if cp is None or cp.p > rules.alpha or abs(cp.change) < rules.min_change:
            continue
        found.append(cp)
        todo += [(start, cp.at), (cp.at, end)]
    return sorted(found, key=lambda c: c.at)
