"""Borderline KL, settled against the reference's own kernel-to-kernel spread (pure).

Two correct implementations differ in accumulation order and fused rounding, and on a small
model with four rows per depth that alone can push a depth's mean KL just past the bar. A
depth is *borderline* when its KL is over ``kl_max`` but at most ``borderline_kl``, and KL is
its only failure (top-1 is within its bar). Then:

1. The reference build is run again with each of its alternative kernel settings the profile
   names (flash attention on/off, batch size, threads): settings that should not change the
   result. Each variant's KL against the pinned reference, per depth, is the reference's own
   *spread*; at a depth it is the largest over the variants.
2. The candidate's KL must be at most ``spread_factor`` (2) × the spread at every borderline depth.
3. Completions: the reference continues the document greedily from the profile's positions;
   the candidate, and each variant, are then forced along those tokens and say their own argmax
   at every position (teacher forcing, so one early difference does not decide the rest).
   The candidate passes when it disagrees with the reference's tokens at no more than
   ``agreement_factor`` (2) × the positions the worst variant disagrees at.

Passing both makes the depth ``adjudicated`` (a pass, said as a warning with the evidence);
failing either keeps the rejection, with the figures that decided it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from console.core.records.figures import finite, shown
from console.core.records.rules import GateRules
from console.core.records.verdict import Reason


@dataclass
class Variant:
    """One alternative kernel setting of the reference build, and what it measured."""
    name: str
    args: list[str]
    kl: dict[int, float] = field(default_factory=dict)    # depth -> mean KL against the reference, nats
    followed: list[list[int]] | None = None                # its argmax along the reference's completions (None:
                                                           # not run, its logits were bit-identical)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kl"] = {str(k): v for k, v in self.kl.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Variant":
        return cls(name=str(d["name"]), args=[str(a) for a in d.get("args") or []],
                   kl={int(k): float(v) for k, v in (d.get("kl") or {}).items()},
                   followed=d.get("followed"), error=d.get("error"))


@dataclass
class Adjudication:
    """What the round measured to settle borderline depths (the receipt's parity.adjudication)."""
    depths: list[int]                                      # the borderline depths that asked for it
    variants: list[Variant] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)     # where the completions start in the document
    tokens: int = 0                                        # tokens per completion
    reference: list[list[int]] | None = None               # the reference's greedy completions
    candidate: list[list[int]] | None = None               # the candidate's argmax along them
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["variants"] = [v.to_dict() for v in self.variants]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Adjudication":
        return cls(depths=[int(x) for x in d.get("depths") or []],
                   variants=[Variant.from_dict(v) for v in d.get("variants") or []],
                   positions=[int(x) for x in d.get("positions") or []], tokens=int(d.get("tokens") or 0),
                   reference=d.get("reference"), candidate=d.get("candidate"), error=d.get("error"))


def is_borderline(kl: float, top1: float, rules: GateRules) -> bool:
    """Over the KL bar but inside the band, with top-1 within its bar."""
    return rules.kl_max < kl <= rules.borderline_kl and top1 >= rules.top1_min


def variant_kls(adj: Adjudication, depth: int) -> list[float]:
    return [v.kl[depth] for v in adj.variants if not v.error and depth in v.kl]


def spread(adj: Adjudication, depth: int) -> float | None:
    """The reference's own kernel-to-kernel spread at one depth: the largest variant KL (None when
    none ran, or one is not a finite number: an infinite spread would excuse any KL)."""
    kls = variant_kls(adj, depth)
    return max(kls) if kls and all(finite(k) for k in kls) else None


def disagreements(reference: Sequence[Sequence[int]], followed: Sequence[Sequence[int]] | None) -> int | None:
    """Positions at which a forced build's argmax is not the reference's token; None if absent
    or not the same shape (then nothing can be concluded from it)."""
    if followed is None or len(followed) != len(reference):
        return None
    if any(len(a) != len(b) for a, b in zip(reference, followed)):
        return None
    return sum(1 for a, b in zip(reference, followed) for x, y in zip(a, b) if int(x) != int(y))


@dataclass(frozen=True)
class Ruling:
    """The gate's reading of an adjudication: per depth, and over the completions."""
    passed: bool
    depths: dict[int, dict[str, Any]]          # depth -> kl, spread, line (factor x spread), within
    positions: int                             # completion positions compared
    candidate_disagree: int | None
    variant_disagree: int | None               # the worst variant's
    agreement_line: float | None               # agreement_factor x variant_disagree
    agrees: bool
    reasons: tuple[Reason, ...]
    summary: str

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["depths"] = {str(k): v for k, v in self.depths.items()}
        d["reasons"] = [r.to_dict() for r in self.reasons]
        return d


def rule(adj: Adjudication, cand_kl: dict[int, float], rules: GateRules) -> Ruling:
    """Whether the borderline depths ``cand_kl`` (depth -> the candidate's mean KL) pass."""
    reasons: list[Reason] = []
    depths: dict[int, dict[str, Any]] = {}
    for d, kl in sorted(cand_kl.items()):
        s = spread(adj, d)
        line = rules.spread_factor * s if s is not None else None
        within = line is not None and kl <= line
        depths[d] = {"kl": kl, "spread": s, "line": line, "within": within}
        if s is None:
            broken = [k for k in variant_kls(adj, d) if not finite(k)]
            why = adj.error or (f"a variant's KL there is {shown(broken[0])}, not a finite number" if broken
                                else "no variant ran")
            reasons.append(Reason("parity-adjudication", f"depth {d}: mean KL {kl:.3g} nats is borderline, but the "
                                  "reference's kernel spread was not measured: " + why, depth=d, figure="kl"))
        elif not within:
            reasons.append(Reason("parity-adjudication", f"depth {d}: mean KL {kl:.3g} nats is borderline, but over "
                                  f"{rules.spread_factor:g}x the reference's own kernel spread {s:.3g} "
                                  f"({line:.3g}): not a kernel difference", depth=d, figure="kl", bar=line, value=kl))
    total = sum(len(c) for c in adj.reference or [])
    cand = disagreements(adj.reference or [], adj.candidate) if adj.reference is not None else None
    var = [disagreements(adj.reference or [], v.followed) for v in adj.variants] if adj.reference is not None else []
    var_known = [x for x in var if x is not None]
    worst = max(var_known) if var_known else None
    agreement_line = rules.agreement_factor * worst if worst is not None else None
    agrees = cand is not None and agreement_line is not None and cand <= agreement_line
    if not reasons:     # the completions are only run, and only matter, once every depth is within
        if cand is None or worst is None:
            reasons.append(Reason("parity-adjudication", "the completions could not be compared: "
                                  + (adj.error or "a build's completions are missing"), figure="completions"))
        elif not agrees:
            reasons.append(Reason("parity-adjudication", f"completions: the candidate's argmax differs from the "
                                  f"reference's tokens at {cand} of {total} positions, more than "
                                  f"{rules.agreement_factor:g}x the {worst} of the reference's own kernels "
                                  f"({agreement_line:g})", figure="completions", bar=agreement_line, value=cand))
    passed = not reasons
    listed = ", ".join(f"depth {d}: KL {x['kl']:.3g} ≤ {rules.spread_factor:g}x spread {x['spread']:.3g}"
                       for d, x in depths.items() if x["within"])
    summary = (f"pass (adjudicated): {listed}; completions: {cand} of {total} positions differ from the "
               f"reference's tokens, the reference's own kernels {worst} (line {agreement_line:g})" if passed
               else "rejected: " + "; ".join(r.message for r in reasons))
    return Ruling(passed=passed, depths=depths, positions=total, candidate_disagree=cand, variant_disagree=worst,
                  agreement_line=agreement_line, agrees=agrees, reasons=tuple(reasons), summary=summary)


def positions(depths: Sequence[int], n: int) -> list[int]:
    """``n`` completion starts evenly over the parity depths' range (strictly increasing)."""
    lo, hi = int(depths[0]), int(depths[-1])
    if n <= 1 or hi <= lo:
        return [hi]
    out: list[int] = []
    for i in range(n):
        p = lo + round(i * (hi - lo) / (n - 1))
        if not out or p > out[-1]:
            out.append(p)
    return out


def parse_tokens(text: str, expected: int) -> list[list[int]]:
    """The token ids of a ``generate`` run's lines (ids, a tab, text); ValueError if malformed."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != expected:
        raise ValueError(f"expected {expected} completions, got {len(lines)}")
    return [[int(x) for x in line.split("\t", 1)[0].split()] for line in lines]
