"""Capacity at the SLO, pure: whether a block's queue stayed bounded (the saturation guard), whether
the profile's latency targets hold at one load level for one build, each build's capacity as an
interval over the levels measured, the candidate's change in capacity, and the search that picks
the next level. docs/CAPACITY.md says why each rule is what it is.

Every call is made at a stated error rate, and the search fixes its budget of levels before it
starts, so the rate of any wrong call over the whole search is bounded in advance (Bonferroni over
the budget: ``Search.alpha_per_call``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

from console.core.decisions.sweep import Level, parse_levels
from console.core.statistics import stats

HOLDS, FAILS, UNSURE = "holds", "fails", "unsure"
BUILDS = ("main", "candidate")
# each target the profile may set (server.slo) and the per-block figure it is read from
FIGURES = {"ttft_ms": "p99_ttft_ms", "tpot_ms": "p99_tpot_ms", "e2el_ms": "p99_e2el_ms"}

# --- the saturation guard -----------------------------------------------------------------

# A block is saturated when the wait from a request's scheduled arrival to its first token grows by at
# least this many seconds per second of the schedule: arrivals outran completions by a quarter or more.
GROWTH = 0.25
MIN_REQUESTS = 6        # fewer timed requests than this say nothing about a trend
# A saturated block is never an observation of a load the server sustains: one keeps its level from
# holding. A burst can push one block of a level near capacity over GROWTH, so the level fails for
# saturation only when most of its blocks are saturated (benchmarks/capacity_quality.py measures both).
SATURATED_SHARE = 0.5


@dataclass(frozen=True)
class Saturation:
    """One block's guard. ``growth``: the robust slope of each request's wait (first token less its
    due time) against its due time; ``kept_pace``: the rate completions came at over the rate the
    schedule offered (near 1 when the queue is bounded, about 1 / (1 + growth) when it is not)."""
    saturated: bool
    judged: bool
    open_loop: bool
    requests: int
    growth: float | None = None
    kept_pace: float | None = None
    said: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def saturation(requests: Sequence[Mapping[str, Any]]) -> Saturation:
    """The guard over one block's requests (the receipt's ``reported["requests"]``: ``due_s``,
    ``first_token_s``, ``end_s``). A closed loop (every ``due_s`` 0) keeps at most its cap in flight
    and sends the next request only when one ends: its queue is bounded by construction, never marked."""
    if not isinstance(requests, Sequence) or isinstance(requests, (str, bytes)):
        raise ValueError(f"expected a block's list of request records, got {type(requests).__name__}")
    dues = [_number(q, "due_s") for q in requests]
    if not any(d > 0 for d in dues):
        return Saturation(False, True, False, len(requests),
                          said="closed loop: the next request waits for a free slot, so the queue is bounded")
    timed = sorted((_number(q, "due_s"), _number(q, "first_token_s"), q.get("end_s")) for q in requests
                   if q.get("first_token_s") is not None)
    if len(timed) < MIN_REQUESTS:
        return Saturation(False, False, True, len(timed),
                          said=f"{len(timed)} requests with a first token: too few to see a trend "
                               f"(at least {MIN_REQUESTS})")
    due = [t[0] for t in timed]
    growth = theil_sen(due, [first - d for d, first, _ in timed])
    pace = _kept_pace(due, [float(t[2]) for t in timed if t[2] is not None])
    if growth is None:
        return Saturation(False, False, True, len(timed), None, pace, said="every request was due at once")
    saturated = growth >= GROWTH
    said = (f"the wait to a first token grew {growth:.2f} s per s of the schedule "
            f"({'at least' if saturated else 'under'} {GROWTH:g}: the queue "
            f"{'grew without bound' if saturated else 'stayed bounded'})")
    return Saturation(saturated, True, True, len(timed), growth, pace, said)


def _number(q: Mapping[str, Any], key: str) -> float:
    v = q.get(key) if isinstance(q, Mapping) else None
    v = 0.0 if v is None and key == "due_s" else v
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise ValueError(f"a request record's {key} must be a finite number of seconds, got {v!r}")
    return float(v)


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The median of the slopes between every two points with distinct x: a trend that one burst of
    arrivals, or one slow request, cannot set on its own. None when every x is the same."""
    slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs))
                    if xs[j] != xs[i])
    return stats.median(slopes) if slopes else None


def _kept_pace(due: Sequence[float], ends: Sequence[float]) -> float | None:
    """Completions per second over the block's completions, against arrivals per second over its schedule."""
    if len(ends) < 2 or len(due) < 2 or due[-1] <= due[0]:
        return None
    ends = sorted(ends)
    span = ends[-1] - ends[0]
    return None if span <= 0 else ((len(ends) - 1) / span) / ((len(due) - 1) / (due[-1] - due[0]))


# --- one level, one build -------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """One target against the geometric mean over blocks of the block's p99, with one-sided bounds."""
    key: str
    figure: str
    target: float
    mean: float | None
    low: float | None
    high: float | None
    call: str


@dataclass(frozen=True)
class LevelCall:
    """Whether the targets hold at one level for one build: ``holds``, ``fails`` or ``unsure``, a wrong
    latency call at most ``alpha``; a saturated block keeps the level from holding whatever its
    latencies say, and most of its blocks saturated make it fail."""
    call: str
    alpha: float
    blocks: int
    bounds: tuple[Bound, ...] = ()
    saturation: tuple[Saturation, ...] = ()
    goodput: float | None = None           # requests/s meeting every target, geometric mean over blocks
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "alpha": self.alpha, "blocks": self.blocks,
                "bounds": [asdict(b) for b in self.bounds], "saturation": [s.to_dict() for s in self.saturation],
                "goodput": self.goodput, "reasons": list(self.reasons)}


def check_targets(slo: Mapping[str, Any]) -> dict[str, float]:
    """The profile's ``server.slo`` as targets in ms; a capacity search needs at least one."""
    if not isinstance(slo, Mapping) or not slo:
        raise ValueError("no SLO targets: a capacity search needs server.slo (ttft_ms, tpot_ms or e2el_ms)")
    unknown = sorted(set(slo) - set(FIGURES))
    if unknown:
        raise ValueError(f"unknown SLO key(s) {', '.join(unknown)} (expected {', '.join(FIGURES)})")
    out = {}
    for k, v in slo.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"server.slo.{k} must be a positive number of milliseconds, got {v!r}")
        out[k] = float(v)
    return out


def level_call(blocks: Sequence[Mapping[str, Any]], slo: Mapping[str, Any], alpha: float) -> LevelCall:
    """The call at one level for one build from its blocks' figures (each a receipt's ``reported``:
    ``p99_ttft_ms``…, ``requests``, optionally ``goodput``). A target holds when the upper bound on the
    geometric mean of its per-block p99 is under it, fails when the lower bound is over it."""
    targets = check_targets(slo)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    guards = tuple(saturation(b.get("requests") or []) for b in blocks)
    # the level holds only if every target holds (each at alpha: an intersection-union test needs no
    # split); it fails if any target fails, so each lower bound is at alpha / number of targets
    bounds = tuple(_bound(k, t, [b.get(FIGURES[k]) for b in blocks], alpha, alpha / len(targets))
                   for k, t in targets.items())
    reasons = [f"block {i + 1}: {g.said}" for i, g in enumerate(guards) if g.saturated or not g.judged]
    reasons += [f"{b.key}: {_bound_said(b)}" for b in bounds]
    saturated = sum(g.saturated for g in guards)
    if saturated > SATURATED_SHARE * len(guards) or any(b.call == FAILS for b in bounds):
        call = FAILS
    elif all(b.call == HOLDS for b in bounds) and len(blocks) >= 2 and all(g.judged and not g.saturated
                                                                           for g in guards):
        call = HOLDS
    else:
        call = UNSURE
    return LevelCall(call, alpha, len(blocks), bounds, guards, _geomean([b.get("goodput") for b in blocks]),
                     tuple(reasons))


def level_calls(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], slo: Mapping[str, Any],
                alpha: float) -> dict[str, LevelCall]:
    """Both builds' calls at one level from its pairs of blocks (main's figures, the candidate's)."""
    return {b: level_call([p[i] for p in pairs], slo, alpha) for i, b in enumerate(BUILDS)}


def _bound(key: str, target: float, values: Sequence[Any], alpha_hold: float, alpha_fail: float) -> Bound:
    v = [float(x) for x in values if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
    if len(v) < 2 or len(v) < len(values):
        # a block without the figure (no request came back whole) cannot be left out as if it were fast
        return Bound(key, FIGURES[key], target, _geomean(v), None, None, UNSURE)
    high = stats.geometric_bound(v, alpha_hold, "upper")
    low = stats.geometric_bound(v, alpha_fail, "lower")
    call = HOLDS if high < target else FAILS if low > target else UNSURE
    return Bound(key, FIGURES[key], target, _geomean(v), _finite(low), _finite(high), call)


def _geomean(values: Sequence[Any]) -> float | None:
    v = [float(x) for x in values if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
    return math.exp(stats.mean([math.log(x) for x in v])) if v else None


def _finite(x: float) -> float | None:
    return x if 0 < x < math.inf else None


def _bound_said(b: Bound) -> str:
    if b.mean is None:
        return "no figure"
    iv = f" [{b.low:.0f}, {b.high:.0f}]" if b.low is not None and b.high is not None else ""
    rel = {HOLDS: "under", FAILS: "over", UNSURE: "not decidedly under or over"}[b.call]
    return f"p99 {b.mean:.0f}{iv} ms, {rel} {b.target:g}"


def call_sentence(build: str, c: LevelCall) -> str:
    """One build's call at a level, with its figures: what the live line and the page say."""
    figs = "; ".join(f"{b.key.removesuffix('_ms').upper()} {_bound_said(b)}" for b in c.bounds)
    sat = [i + 1 for i, g in enumerate(c.saturation) if g.saturated]
    flag = f"; saturated block(s) {', '.join(map(str, sat))}" if sat else ""
    return f"{build} {c.call} ({figs}{flag})"


# --- a build's capacity ------------------------------------------------------------------

@dataclass(frozen=True)
class Bracket:
    """A build's capacity: ``low`` the highest level that decidedly holds below ``high``, the lowest
    that decidedly fails. When every call is right and the targets hold below some load and fail above
    it, that load lies in [low, high). None: no such level was measured (capacity under the search's
    low end, or not reached by its high end). ``contradicted``: levels that held at or above ``high``."""
    low: float | None
    high: float | None
    contradicted: tuple[float, ...] = ()

    @property
    def ratio(self) -> float:
        return self.high / self.low if self.low and self.high else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"capacity": self.low, "low": self.low, "high": self.high,
                "contradicted": list(self.contradicted), "said": bracket_said(self)}


def bracket(calls: Mapping[float, str]) -> Bracket:
    """A build's bracket from its calls by level."""
    fails = [x for x, c in calls.items() if c == FAILS]
    high = min(fails) if fails else None
    holds = [x for x, c in calls.items() if c == HOLDS and (high is None or x < high)]
    over = tuple(sorted(x for x, c in calls.items() if c == HOLDS and high is not None and x >= high))
    return Bracket(max(holds) if holds else None, high, over)


def bracket_said(b: Bracket) -> str:
    if b.low is None and b.high is None:
        return "no level decided"
    if b.low is None:
        return f"under {b.high:g} (no level measured held)"
    if b.high is None:
        return f"at least {b.low:g} (no level measured failed)"
    return f"{b.low:g}, in [{b.low:g}, {b.high:g})"


# --- the change -----------------------------------------------------------------------------

HIGHER, LOWER, UNDECIDED = "higher", "lower", "undecided"


@dataclass(frozen=True)
class Change:
    direction: str
    alpha: float
    said: str


def capacity_change(main: Bracket, cand: Bracket, alpha: float) -> Change:
    """Higher when the candidate's bracket lies wholly above main's (its lowest capacity is at or over
    main's highest), lower when wholly below, else undecided. Wrong at most when some call was wrong:
    at most ``alpha`` over the whole search."""
    if cand.low is not None and main.high is not None and cand.low >= main.high:
        return Change(HIGHER, alpha, f"candidate's capacity is higher: it held at {cand.low:g}, "
                                     f"main failed at {main.high:g}")
    if cand.high is not None and main.low is not None and cand.high <= main.low:
        return Change(LOWER, alpha, f"candidate's capacity is lower: it failed at {cand.high:g}, "
                                    f"main held at {main.low:g}")
    return Change(UNDECIDED, alpha, f"undecided: main {bracket_said(main)}, candidate {bracket_said(cand)}")


# --- the search -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Search:
    """Bisection over levels between ``low`` and ``high`` (arrival rates, or whole concurrencies when
    ``whole``), at most ``budget`` levels, each measured for both builds; it stops when every build's
    bracket is narrower than ``resolution`` (a ratio) or cannot be narrowed further."""
    low: float
    high: float
    whole: bool = False
    budget: int = 8
    resolution: float = 1.25
    alpha: float = 0.05

    def __post_init__(self) -> None:
        for name in ("low", "high"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"the search's {name} end must be a positive number, got {v!r}")
        if not self.low < self.high:
            raise ValueError(f"the search's low end ({self.low:g}) must be under its high end ({self.high:g})")
        if self.whole and (self.low != int(self.low) or self.high != int(self.high)):
            raise ValueError("a concurrency search's ends must be whole numbers")
        if not isinstance(self.budget, int) or self.budget < 2:
            raise ValueError(f"the budget must be at least 2 levels (both ends), got {self.budget!r}")
        if not (isinstance(self.resolution, (int, float)) and self.resolution > 1):
            raise ValueError(f"the resolution is a ratio over 1 (e.g. 1.25), got {self.resolution!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")

    @property
    def calls(self) -> int:
        """The most level calls the search can make: two builds at each level of the budget."""
        return len(BUILDS) * self.budget

    @property
    def alpha_per_call(self) -> float:
        return self.alpha / self.calls


def parse_search(concurrency: str | None, rate: str | None, cap: int, budget: int = 8,
                 resolution: float = 1.25, alpha: float = 0.05) -> tuple[Search, tuple[Level, Level]]:
    """``--rate LOW,HIGH`` (under the cap ``cap``) or ``--concurrency LOW,HIGH``: the search and its two
    ends as load levels (the servers are started to hold the larger); ValueError says what is wrong."""
    ends = parse_levels(concurrency, rate, cap)
    if len(ends) != 2:
        raise ValueError(f"a capacity search takes two levels, its low and high ends, got {len(ends)}")
    values = [float(lv.concurrency) if concurrency else lv.rate for lv in ends]
    search = Search(values[0], values[1], whole=bool(concurrency), budget=budget, resolution=resolution,
                    alpha=alpha)
    return search, (ends[0], ends[1])


@dataclass(frozen=True)
class Step:
    level: float | None          # the next level to measure; None: the search is over
    said: str


def step(search: Search, calls: Mapping[float, Mapping[str, str]]) -> Step:
    """The next level given the calls so far (level -> build -> call): the low end, the high end, then
    the geometric midpoint of the widest gap between measured levels that still holds some build's
    capacity; None once every such gap is within the resolution, or the budget is spent."""
    for end in (search.low, search.high):
        if end not in calls:
            return Step(end, "an end of the search") if len(calls) < search.budget else \
                Step(None, f"the budget of {search.budget} levels is spent")
    if len(calls) >= search.budget:
        return Step(None, f"the budget of {search.budget} levels is spent")
    gaps = [g for b in BUILDS for g in _open_gaps(search, {x: c.get(b, UNSURE) for x, c in calls.items()})]
    if not gaps:
        return Step(None, f"every build's capacity is bracketed as finely as the levels allow "
                          f"(resolution {search.resolution:g})")
    lo, hi = max(gaps, key=lambda g: (g[1] / g[0], -g[0]))
    return Step(_midpoint(search, lo, hi), f"bisecting [{lo:g}, {hi:g})")


def _open_gaps(search: Search, calls: Mapping[float, str]) -> list[tuple[float, float]]:
    """Adjacent measured levels between a build's bracket ends that bisection can still split."""
    b = bracket(calls)
    levels = sorted(calls)
    lo = b.low if b.low is not None else levels[0]
    hi = b.high if b.high is not None else levels[-1]
    inside = [x for x in levels if lo <= x <= hi]
    return [(a, z) for a, z in zip(inside, inside[1:])
            if z / a > search.resolution and _midpoint(search, a, z) not in (a, z)]


def _midpoint(search: Search, a: float, z: float) -> float:
    m = math.sqrt(a * z)
    if search.whole:
        return float(round(m))
    return float(f"{m:.3g}")      # three figures: levels a person can read and type again


def next_level(search: Search, calls: Mapping[float, Mapping[str, str]]) -> float | None:
    return step(search, calls).level


# --- the document's section ----------------------------------------------------------------------

@dataclass
class CapacityResult:
    """What a capacity search found: every level's calls, each build's bracket, the change."""
    search: Search
    targets: dict[str, float]
    levels: dict[float, dict[str, LevelCall]] = field(default_factory=dict)
    stopped: str = ""

    def calls(self) -> dict[float, dict[str, str]]:
        return {x: {b: c.call for b, c in by.items()} for x, by in self.levels.items()}

    def brackets(self) -> dict[str, Bracket]:
        return {b: bracket({x: by[b].call for x, by in self.levels.items() if b in by}) for b in BUILDS}

    def change(self) -> Change:
        br = self.brackets()
        return capacity_change(br["main"], br["candidate"], self.search.alpha)

    def said(self) -> str:
        br = self.brackets()
        return (f"capacity at the SLO: main {bracket_said(br['main'])}, candidate {bracket_said(br['candidate'])}; "
                f"{self.change().said} (any wrong call over the search at most {self.search.alpha:g}; "
                f"{len(self.levels)} of {self.search.budget} levels measured)")

    def to_dict(self, name=lambda x: f"{x:g}") -> dict[str, Any]:
        s = self.search
        return {"targets_ms": dict(self.targets), "axis": "concurrency" if s.whole else "rate",
                "low": s.low, "high": s.high, "budget": s.budget, "resolution": s.resolution,
                "alpha": s.alpha, "alpha_per_call": s.alpha_per_call, "measured": len(self.levels),
                "stopped": self.stopped,
                "levels": [{"level": x, "name": name(x), **{b: c.to_dict() for b, c in by.items()}}
                           for x, by in sorted(self.levels.items())],
                "capacity": {b: br.to_dict() for b, br in self.brackets().items()},
                "change": asdict(self.change())}


Pairs = Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]


def run(search: Search, slo: Mapping[str, Any], measure: Callable[[float], Pairs],
        heard: Callable[[float, dict[str, LevelCall]], None] = lambda level, calls: None) -> CapacityResult:
    """The whole search: ``measure(level)`` times both builds' pairs of blocks at a level (the sweep's
    servers, or a simulation), each level is called for both builds at ``alpha_per_call`` and told to
    ``heard``, until the stepper stops."""
    result = CapacityResult(search, check_targets(slo))
    while (s := step(search, result.calls())).level is not None:
        calls = level_calls(measure(s.level), result.targets, search.alpha_per_call)
        result.levels[s.level] = calls
        heard(s.level, calls)
    result.stopped = s.said
    return result
