"""Main's history: one series per node, profile, runtime, figure and shape over sealed rounds, in
time order, with the pins in force and their raises, and the change points ``core.changepoints`` finds.

Every figure a round measured main by is a series of its own (``watched``): the scored metric, each
matrix cell, each guard, and a serving round's TTFT p99 and ITL p99 per block. A round's point in
a series is main's geometric mean over that figure's counted values (the same reps its verdict
read). The change points of all series are found at one family-wise rate: each series is searched
at ``alpha / series`` (Bonferroni, whatever the series' dependence: a serving round's throughput and
latencies move together), so the chance of any change point anywhere in a history where nothing
changed is at most ``alpha``. Rounds that did not measure main as main are left out and counted: a
bisection's steps (their main is an old commit), rounds that sealed no counted rep, infra rounds. A node is its
fingerprint (``core.fingerprint``): a round on another machine starts another series, so a node
change is never a change point; so does another experiment identity (``core.identity``: runtime,
the profile's measured sections, model, harness, GPU), and the new series says which part changed.
Rounds sealed before identities are told apart as they were then: by runtime and profile file hash.

Pure: receipts in, typed series out.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from scipy import stats as sps

from console.core.statistics import changepoints as cp
from console.core.provenance import fingerprint, identity, watched
from console.core.provenance.compare import Source
from console.core.records import kinds
from console.core.records.facts import SourceRecord
from console.core.records.receipt import Receipt



@dataclass(frozen=True)
class SeriesKey:
    node: str           # fingerprint digest
    profile: str
    identity: str       # the experiment identity's digest (core.identity)
    runtime: str
    metric: str
    depth: int
    tokens: int
    figure: str = ""    # "" for the scored metric; else which figure (``watched.Reading.figure``)

    def label(self) -> str:
        return f"{self.name} ({self.runtime}, node {self.node}, identity {self.identity})"

    @property
    def name(self) -> str:
        """The series without its node and identity: what a person calls it."""
        what = f"{self.figure} {self.metric}" if self.figure and self.figure != self.metric else self.metric
        return f"{self.profile} {what} @ depth {self.depth}"

    @property
    def lower_is_better(self) -> bool:
        return watched.lower_is_better(self.metric)

    @property
    def shape(self) -> tuple[str, str, str, str, int, int]:
        """What two series share when only their experiment identity differs."""
        return self.node, self.profile, self.figure, self.metric, self.depth, self.tokens


@dataclass(frozen=True)
class Point:
    sealed_at: str
    round_id: str
    receipt: str                # the receipt id
    value: float                # main's geometric mean over its counted values of the series' figure
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
    since: str = ""             # what changed from the series of the same shape before it ("" if none)


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
    alpha: float = 0.01         # chance of any change point in the whole history when nothing changed
    series_alpha: float = 0.01  # each series' share of it (alpha / series: Bonferroni)

    def left_out_sentence(self) -> str:
        return "; ".join(f"{n} {why}" for why, n in sorted(self.left_out.items()))


def points_of(src: Source) -> list[tuple[SeriesKey, Mapping[str, Any], Point, identity.Identity]] | str:
    """A round's point in each of main's series it measured, or why it has none."""
    r: Receipt = src.receipt
    if not kinds.of(r.kind).main_series:       # its main is not the node's main
        return f"{r.kind} round(s) (their main is not the node's main)"
    if r.status != "complete":
        return "incomplete or infra round(s)"
    found = watched.readings(r)
    if not found:
        return "round(s) with no counted rep of main"
    fp = fingerprint.of_receipt(r)
    ident = identity.of_receipt(r)
    main = r.builds.get("main")
    source = (main.source if main else SourceRecord()).identity(main.tree_sha256 if main else None)
    out = []
    for x in found:
        key = SeriesKey(node=fp.digest, profile=r.profile.name, identity=ident.digest, runtime=ident.parts["runtime"],
                        metric=x.metric, depth=x.depth, tokens=x.tokens, figure=x.figure)
        value = math.exp(sum(math.log(v) for v in x.values) / len(x.values))
        out.append((key, fp.facts, Point(sealed_at=src.sealed_at, round_id=r.round_id, receipt=src.receipt_id or "",
                                         value=value, reps=len(x.values), source=source,
                                         tree=str(main.tree_sha256 or "") if main else "",
                                         pin=x.pin, ordered=bool(main and main.source.ordered)), ident))
    return out


def series_of(sources: Iterable[Source], rules: cp.Rules, metric: str | None = None) -> History:
    """Every series of main in ``sources`` with its change points (at ``rules.alpha`` over the whole
    family of series), longest first."""
    groups: dict[SeriesKey, list[Point]] = {}
    facts: dict[SeriesKey, Mapping[str, Any]] = {}
    idents: dict[SeriesKey, identity.Identity] = {}
    left: Counter[str] = Counter()
    for src in sources:
        got = points_of(src)
        if isinstance(got, str):
            left[got] += 1
            continue
        kept = [g for g in got if not metric or g[0].metric == metric]
        if not kept:
            left[f"round(s) of another metric than {metric}"] += 1
        for key, f, point, ident in kept:
            groups.setdefault(key, []).append(point)
            facts[key], idents[key] = f, ident
    for pts in groups.values():
        pts.sort(key=lambda p: (p.sealed_at, p.round_id))
    each = replace(rules, alpha=rules.alpha / max(1, len(groups)))
    out = []
    for key, pts in groups.items():
        found = cp.detect([p.value for p in pts], each)
        changes = tuple(Change(c, pts[c.at - 1], pts[c.at]) for c in found)
        raises = tuple(i for i in range(1, len(pts)) if pts[i].pin > pts[i - 1].pin > 0 or
                       (pts[i].pin > 0 and pts[i - 1].pin == 0))
        segs = segments_of([p.value for p in pts], [c.at for c in found])
        out.append(Series(key, facts[key], tuple(pts), changes, raises, segs, _since(key, groups, idents)))
    out.sort(key=lambda s: (-len(s.points), s.key.figure != "", s.key.label()))
    return History(tuple(out), dict(left), alpha=rules.alpha, series_alpha=each.alpha)


def _since(key: SeriesKey, groups: Mapping[SeriesKey, list[Point]],
           idents: Mapping[SeriesKey, identity.Identity]) -> str:
    """What changed at the start of ``key``'s series: its identity against that of the series of the
    same node, profile and shape whose last round came last before its first ("" when none did)."""
    first = groups[key][0].sealed_at
    before = [k for k in groups if k != key and k.shape == key.shape and groups[k][-1].sealed_at <= first]
    if not before:
        return ""
    prev = max(before, key=lambda k: (groups[k][-1].sealed_at, groups[k][-1].round_id))
    return "; ".join(idents[key].differences(idents[prev])) or "another experiment identity"
