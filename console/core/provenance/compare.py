"""Comparing sealed rounds: medians per metric and depth, gains with their intervals,
parity side by side, and whether two rounds' figures may be compared at all.

Pure: receipts in, typed rows out. Two kinds of gain, never mixed up:

- **paired**: candidate against main *within* one round (the k-th rep of each build in
  the interleaved schedule form a pair): the node's drift cancels, as in the gate.
- **unpaired**: a build in one round against the same build in the first round (main
  over time, one candidate on two nodes). Welch's t on log values: no pairing exists
  across rounds, so the interval is wider and honest about it.

Figures of two rounds are *comparable* only when they come from the same node, the same
profile (its hash) and the same model files; otherwise no cross-round gain is computed and
the reason is said. The rows report; only the gate decides.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from console.core.decisions import counting, gate, parity_grade
from console.core.statistics import stats
from console.core.records.receipt import BUILDS, Receipt
from console.core.records.verdict import VerdictRecord

LEVEL = 0.95     # the descriptive intervals here are two-sided 95 % (the gate's own are in its verdict)


@dataclass(frozen=True)
class Source:
    """One receipt being compared, and how to name it in a table."""
    label: str                  # the receipt id's first 12 characters, or the file's name when unsealed
    receipt: Receipt
    receipt_id: str | None = None

    @property
    def sealed_at(self) -> str:
        return str(self.receipt.sealed_at or self.receipt.ended_at or self.receipt.started_at)


@dataclass(frozen=True)
class Identity:
    """What must match for two rounds' figures to be compared."""
    node: str                   # the machine: host name, CPU, cores, GPUs
    profile_sha256: str
    model_sha256: str           # the model files' hashes, joined; "" when the profile has none

    @classmethod
    def of(cls, r: Receipt) -> "Identity":
        h = r.host
        node = f"{h.hostname or '?'} ({h.cpu_line()}, {'+'.join(h.gpu_names()) or 'no GPU'})"
        model = ",".join(str(m.get("sha256", "?")) for m in (r.inputs.model if r.inputs else []))
        return cls(node=node, profile_sha256=r.profile.sha256, model_sha256=model)


def not_comparable(a: Identity, b: Identity) -> tuple[str, ...]:
    """Why the figures of ``b`` may not be set against ``a``'s; empty when they may."""
    why = []
    if a.node != b.node:
        why.append(f"node differs: {b.node} vs {a.node}")
    if a.profile_sha256 != b.profile_sha256:
        why.append(f"profile differs: {b.profile_sha256[:12]} vs {a.profile_sha256[:12]}")
    if a.model_sha256 != b.model_sha256:
        why.append(f"model differs: {(b.model_sha256 or 'none')[:12]} vs {(a.model_sha256 or 'none')[:12]}")
    return tuple(why)


@dataclass(frozen=True)
class Gain:
    """A gain (ratio − 1) with its two-sided interval at ``LEVEL``; bounds are None when
    there are too few values to bound it."""
    value: float
    low: float | None
    high: float | None
    kind: str                   # "paired" | "unpaired"
    n: int                      # pairs, or the smaller of the two samples

    def to_dict(self) -> dict[str, Any]:
        return {"gain": self.value, "low": self.low, "high": self.high, "kind": self.kind, "n": self.n}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def paired_gain(ratios: Sequence[float]) -> Gain | None:
    """Candidate over main within a round, from its pairs' ratios (Student t on the logs)."""
    if not ratios:
        return None
    low, high = stats.ratio_interval(ratios, LEVEL)
    centre = math.expm1(math.fsum(math.log(r) for r in ratios) / len(ratios))
    return Gain(centre, _finite(low), _finite(high), "paired", len(ratios))


def unpaired_gain(base: Sequence[float], values: Sequence[float]) -> Gain | None:
    """``values`` over ``base`` (geometric means), Welch's t on the logs of two independent samples."""
    if not base or not values:
        return None
    terms = [(1.0, [math.log(v) for v in values]), (-1.0, [math.log(v) for v in base])]
    tail = (1.0 - LEVEL) / 2.0
    lo = stats.linear_bound(terms, tail, "lower")
    hi = stats.linear_bound(terms, tail, "upper")
    return Gain(math.expm1(lo["estimate"]), _finite(math.expm1(lo["bound"])), _finite(math.expm1(hi["bound"])),
                "unpaired", min(len(base), len(values)))


# --- rows ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoundRow:
    """One compared round: who, where, and what the gate decides of it now."""
    source: str
    receipt_id: str | None
    round_id: str
    kind: str
    sealed_at: str
    profile: str
    identity: Identity
    outcome: str
    tier: str | None
    gain: float | None          # the gate's gain and its interval (its own method and level)
    low: float | None
    high: float | None
    pairs: int | None
    not_comparable: tuple[str, ...]     # against the first round; empty when comparable


@dataclass(frozen=True)
class SpeedRow:
    """One build's counted reps at one metric and depth, in one round."""
    source: str
    metric: str                 # the profile's bench metric, e.g. decode_tok_s
    phase: str                  # "timed" | "short" | "guard:<name>" | "cell:<axes>" (a matrix cell)
    depth: int
    build: str
    n: int
    median: float | None
    paired: Gain | None         # candidate rows: against main in the same round
    versus_first: Gain | None   # against the same build, metric and depth in the first round
    not_comparable: tuple[str, ...]
    refused: tuple[str, ...] = ()   # the gate refused this build's claims: no median, no gain is shown


@dataclass(frozen=True)
class ParityRow:
    """One build's parity figures at one depth, in one round."""
    source: str
    depth: int
    build: str
    kl: float | None
    top1: float | None
    status: str                 # console.core.records.parity.STATUSES, or "not graded"
    extra: dict[str, Any]       # further per-depth figures the receipt holds (KL quantiles, Δp …)


@dataclass(frozen=True)
class Comparison:
    rounds: list[RoundRow]
    speed: list[SpeedRow]
    parity: list[ParityRow]


def _counted_values(r: Receipt) -> tuple[dict[tuple[str, str, int], list], dict[str, tuple[str, ...]]]:
    """(build, phase, depth) -> the counted reps in schedule order; and per build, the codes of
    the gate's reasons for refusing its claims (a refused build's figures are not shown)."""
    c = counting.counted(r, r.rules)
    out: dict[tuple[str, str, int], list] = {}
    for (build, phase), reps in c.valid.items():
        for rep in reps:
            out.setdefault((build, phase, rep.depth), []).append(rep)
    refused = {b: tuple(dict.fromkeys(x.code for x in c.problems.get(b, []))) for b in BUILDS}
    return out, refused


def compare(sources: Sequence[Source]) -> Comparison:
    """Rows for every round in ``sources``; the first is the baseline of every unpaired gain."""
    if not sources:
        return Comparison([], [], [])
    first = Identity.of(sources[0].receipt)
    base_values: dict[tuple[str, str, int], list[float]] = {}
    rounds, speed, parity = [], [], []
    for i, s in enumerate(sources):
        r, ident = s.receipt, Identity.of(s.receipt)
        why = not_comparable(first, ident)
        v = VerdictRecord.of(gate.decide(r, r.rules))
        low, high = v.interval or (None, None)
        pairs = v.decision.pairs if v.decision is not None and v.decision.held("pairs") else None
        rounds.append(RoundRow(s.label, s.receipt_id, r.round_id, r.kind, s.sealed_at, r.profile.name, ident,
                               v.outcome.value, v.tier, v.gain, low, high, pairs, why))
        reps, refused = _counted_values(r)
        for (build, phase, depth), rs in sorted(reps.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
            key, values = (build, phase, depth), [float(x.value) for x in rs]
            metric = _metric_of(r, phase)
            if refused[build]:
                speed.append(SpeedRow(s.label, metric, phase, depth, build, len(values), None, None, None, why,
                                      refused[build]))
                continue
            paired = None
            if build == "candidate" and not refused["main"]:
                paired = paired_gain(stats.paired_ratios(reps.get(("main", phase, depth), []) + rs))
            if i == 0:
                base_values[key] = values
            versus = None if i == 0 or why else unpaired_gain(base_values.get(key, []), values)
            speed.append(SpeedRow(s.label, metric, phase, depth, build, len(values), stats.median(values),
                                  paired, versus, why))
        parity.extend(_parity_rows(s.label, r))
    return Comparison(rounds, speed, parity)


def _metric_of(r: Receipt, phase: str) -> str:
    """The metric a phase's reps measure: a matrix cell's own (cells are lined up across rounds by
    their phase, which names every axis), else the profile's."""
    spec = r.profile.matrix
    if spec is not None and phase.startswith("cell:"):
        key = phase[len("cell:"):]
        if any(c.key == key for c in spec.cells):
            return spec.cell(key).metric
    return str(r.profile.bench.get("metric", "value"))


def _parity_rows(label: str, r: Receipt) -> list[ParityRow]:
    """Each build graded as the gate grades it: the candidate also against main (the ratchet)."""
    rows = []
    for b in BUILDS:
        side = r.parity.side(b)
        if side is None:
            continue
        cand = b == "candidate"
        status = {st.depth: st.status for st in
                  parity_grade.grade_depths(side, r.parity.main if cand else None, r.rules,
                                    r.parity.adjudication if cand else None)}
        for f in side.depths:
            extra = {k: x for k, x in f.to_dict().items() if k not in ("depth", "kl", "top1")}
            rows.append(ParityRow(label, f.depth, b, f.kl, f.top1, status.get(f.depth, "not graded"), extra))
    return rows
