"""Main's history: one series per node, profile, runtime, metric and shape over sealed rounds, in time
order, with the pins in force and their raises, and the change points ``core.changepoints`` finds.

A round's point is main's geometric mean over its counted timed reps (the same reps its verdict
read). Rounds that did not measure main as main are left out and counted: a bisection's steps
(their main is an old commit), rounds that sealed no timed rep, infra rounds. A node is its
fingerprint (``core.fingerprint``): a round on another machine starts another series, so a node
change is never a change point; so does another runtime (Docker and host builds differ in speed)
or another profile file (its hash).

Pure: receipts in, typed series out.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from scipy import stats as sps

from . import changepoints as cp
from . import fingerprint, gate
from .compare import Source
from .receipt import Receipt

MAIN_KINDS = ("round", "noise")     # kinds whose main build is the node's main


@dataclass(frozen=True)
class SeriesKey:
    node: str           # fingerprint digest
    profile: str
    profile_sha256: str
    runtime: str
    metric: str
    depth: int
    tokens: int

    def label(self) -> str:
        return f"{self.profile} {self.metric} @ depth {self.depth} ({self.runtime}, node {self.node})"


@dataclass(frozen=True)
class Point:
    sealed_at: str
    round_id: str
    receipt: str                # the receipt id
    value: float                # main's geometric mean over its counted timed reps
    reps: int
    source: str                 # main's source identity: a commit, a release, a directory's tree
    tree: str                   # main's tree digest
    pin: float                  # the frontier pin in force for the round (0: none)
    ordered: bool = False       # main's source is a commit or a release (something `console bisect` orders)


@dataclass(frozen=True)
class Change:
    """A change point with the rounds and main's sources either side (the range to bisect)."""
    point: cp.ChangePoint
    before: Point               # the last round before the change
    after: Point                # the first round after it

    @property
    def bisect_command(self) -> str | None:
        """`console bisect` over main's sources either side, when both are commits or releases (a
        directory's trees have no order to bisect)."""
        if not (self.before.ordered and self.after.ordered) or self.before.source == self.after.source:
            return None
        return f"console bisect --good {self.before.source} --bad {self.after.source}"


@dataclass(frozen=True)
class Segment:
    """Rounds [start, end) between change points: their geometric mean and its two-sided 95 %
    Student t interval (the level the series held there)."""
    start: int
    end: int
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class Series:
    key: SeriesKey
    facts: Mapping[str, Any]
    points: tuple[Point, ...]
    changes: tuple[Change, ...]
    raises: tuple[int, ...]     # indices of points whose pin is above the one before
    segments: tuple[Segment, ...] = ()


def segments_of(values: list[float], cuts: list[int]) -> tuple[Segment, ...]:
    """The segments between ``cuts`` (change points' first rounds)."""
    out = []
    bounds = [0, *cuts, len(values)]
    for a, b in zip(bounds, bounds[1:]):
        logs = [math.log(v) for v in values[a:b]]
        m = sum(logs) / len(logs)
        half = 0.0
        if len(logs) > 1:
            sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
            half = float(sps.t.ppf(0.975, len(logs) - 1)) * sd / math.sqrt(len(logs))
        out.append(Segment(a, b, math.exp(m), math.exp(m - half), math.exp(m + half)))
    return tuple(out)


@dataclass(frozen=True)
class History:
    series: tuple[Series, ...]
    left_out: Mapping[str, int] = field(default_factory=dict)     # why -> rounds

    def left_out_sentence(self) -> str:
        return "; ".join(f"{n} {why}" for why, n in sorted(self.left_out.items()))


def source_identity(build_source: Mapping[str, Any], tree: str | None) -> str:
    """What a person names main's source by: REPO@commit, pypi:NAME==VERSION, or a directory and
    its tree digest (a directory's content is only known by its digest)."""
    s = build_source or {}
    if s.get("git"):
        return f"{s['git']}@{s.get('commit') or s.get('ref')}"
    if s.get("pypi"):
        return f"pypi:{s['pypi']}"
    if s.get("patch"):
        return f"{s['patch']} over {source_identity(s.get('over') or {}, None)}"
    return f"{s.get('path', '?')} (tree {str(tree or s.get('tree_sha256') or '?')[:12]})"


def point_of(src: Source) -> tuple[SeriesKey, Mapping[str, Any], Point] | str:
    """A round's point in main's series, or why it has none."""
    r: Receipt = src.receipt
    if r.kind not in MAIN_KINDS:
        return f"{r.kind} round(s) (their main is not the node's main)"
    if r.status != "complete":
        return "incomplete or infra round(s)"
    values = [v for v in gate.counted(r, r.rules).values("main") if v and v > 0 and math.isfinite(v)]
    if not values:
        return "round(s) with no counted timed rep of main"
    fp = fingerprint.of_receipt({"host": r.host, "preflight": r.preflight})
    bench = r.profile.bench
    key = SeriesKey(node=fp.digest, profile=r.profile.name, profile_sha256=r.profile.sha256,
                    runtime=str((r.runtime or {}).get("kind") or "docker"), metric=str(bench.get("metric") or ""),
                    depth=int(bench.get("depth") or 0), tokens=int(bench.get("tokens") or 0))
    main = r.builds.get("main")
    value = math.exp(sum(math.log(v) for v in values) / len(values))
    return key, fp.facts, Point(sealed_at=src.sealed_at, round_id=r.round_id, receipt=src.receipt_id or "",
                                value=value, reps=len(values),
                                source=source_identity(main.source if main else {}, main.tree_sha256 if main else None),
                                tree=str(main.tree_sha256 or "") if main else "", pin=float(r.lock.frontier or 0.0),
                                ordered=bool(main and (main.source.get("git") or main.source.get("pypi"))))


def series_of(sources: Iterable[Source], rules: cp.Rules, metric: str | None = None) -> History:
    """Every series of main in ``sources`` with its change points, longest first."""
    groups: dict[SeriesKey, list[Point]] = {}
    facts: dict[SeriesKey, Mapping[str, Any]] = {}
    left: Counter[str] = Counter()
    for src in sources:
        got = point_of(src)
        if isinstance(got, str):
            left[got] += 1
            continue
        key, f, point = got
        if metric and key.metric != metric:
            left[f"round(s) of another metric than {metric}"] += 1
            continue
        groups.setdefault(key, []).append(point)
        facts[key] = f
    out = []
    for key, pts in groups.items():
        pts.sort(key=lambda p: (p.sealed_at, p.round_id))
        found = cp.detect([p.value for p in pts], rules)
        changes = tuple(Change(c, pts[c.at - 1], pts[c.at]) for c in found)
        raises = tuple(i for i in range(1, len(pts)) if pts[i].pin > pts[i - 1].pin > 0 or
                       (pts[i].pin > 0 and pts[i - 1].pin == 0))
        segs = segments_of([p.value for p in pts], [c.at for c in found])
        out.append(Series(key, facts[key], tuple(pts), changes, raises, segs))
    out.sort(key=lambda s: (-len(s.points), s.key.label()))
    return History(tuple(out), dict(left))
