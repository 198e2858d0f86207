"""A sweep's figures, pure: per load level and build, the geometric mean of each block figure with
its two-sided interval over the blocks, goodput under the profile's targets, and the candidate's
paired gain in throughput. A sweep measures a curve; it decides nothing (a round does).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from console.core.statistics import stats

# block figures a sweep draws: throughput against the latencies people plot it against
CURVE = ("output_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
         "p99_itl_ms", "goodput")
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Level:
    """One load level: a concurrency cap, and an arrival rate (0: a closed loop at the cap)."""
    concurrency: int
    rate: float = 0.0

    @property
    def name(self) -> str:
        return f"c{self.concurrency}" if self.rate <= 0 else f"r{self.rate:g}"

    @property
    def said(self) -> str:
        return f"concurrency {self.concurrency}" if self.rate <= 0 else \
            f"{self.rate:g} requests/s (Poisson, at most {self.concurrency} in flight)"


@dataclass
class Estimate:
    mean: float | None
    low: float | None
    high: float | None
    n: int


@dataclass
class LevelFigures:
    level: Level
    builds: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    gain: Estimate | None = None        # candidate over main, output throughput, paired by block

    def to_dict(self) -> dict[str, Any]:
        return {"level": {**asdict(self.level), "name": self.level.name},
                "builds": {b: {k: asdict(e) for k, e in f.items()} for b, f in self.builds.items()},
                "gain": asdict(self.gain) if self.gain else None}


def estimate(values: Sequence[float]) -> Estimate:
    """The geometric mean with its two-sided 95 % interval (Student t on the logs: rates and latencies
    are positive and vary by ratios, so the interval never reaches below zero); none under two values."""
    v = [float(x) for x in values if x is not None and math.isfinite(float(x)) and float(x) > 0]
    if not v:
        return Estimate(None, None, None, 0)
    level = (1 - CONFIDENCE) / 2
    lo, hi = stats.geometric_bound(v, level, "lower"), stats.geometric_bound(v, level, "upper")
    gm = math.exp(stats.mean([math.log(x) for x in v]))
    return Estimate(gm, lo if 0 < lo < math.inf else None, hi if 0 < hi < math.inf else None, len(v))


def level_figures(level: Level, pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> LevelFigures:
    """``pairs`` are (main's block figures, the candidate's) for the same requests at ``level``."""
    out = LevelFigures(level)
    for i, build in enumerate(("main", "candidate")):
        out.builds[build] = {k: estimate([p[i].get(k) for p in pairs if p[i].get(k) is not None]) for k in CURVE}
    ratios = [c["output_throughput"] / m["output_throughput"] for m, c in pairs
              if (m.get("output_throughput") or 0) > 0 and (c.get("output_throughput") or 0) > 0]
    if ratios:
        g = math.exp(stats.mean([math.log(r) for r in ratios])) - 1
        lo, hi = stats.ratio_interval(ratios, CONFIDENCE)
        out.gain = Estimate(g, lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None, len(ratios))
    return out


MAX_CONCURRENCY = 1024             # as the profile's server.concurrency
MIN_RATE, MAX_RATE = 0.001, 1e5    # requests per second


def parse_levels(concurrency: str | None, rate: str | None, cap: int) -> list[Level]:
    """``--concurrency 1,2,4`` or ``--rate 0.5,1,2`` (under the cap ``cap``); ValueError names the bad item."""
    if bool(concurrency) == bool(rate):
        raise ValueError("give either --concurrency or --rate")
    items = (concurrency or rate or "").split(",")
    out: list[Level] = []
    for item in items:
        try:
            x = int(item) if concurrency else float(item)
        except ValueError:
            raise ValueError(f"{item!r} is not a {'whole number' if concurrency else 'number'}") from None
        if not (math.isfinite(x) and x > 0):
            raise ValueError(f"{item!r}: levels must be positive, finite numbers")
        if concurrency and x > MAX_CONCURRENCY:
            raise ValueError(f"{item!r}: at most {MAX_CONCURRENCY} requests in flight (server.concurrency's bound)")
        if rate and not MIN_RATE <= x <= MAX_RATE:
            raise ValueError(f"{item!r}: a rate is from {MIN_RATE} to {MAX_RATE:g} requests per second")
        out.append(Level(int(x)) if concurrency else Level(cap, float(x)))
    if len(set(out)) != len(out):
        raise ValueError("a level is listed twice")
    return out
