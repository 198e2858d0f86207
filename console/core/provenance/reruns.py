"""Reruns of the same candidate: which earlier rounds pool with this one.

A candidate is known by its source tree hash, and so is main. Rounds of the same
profile on the same node, scoring the same metric at the same depth, with the same two
trees and the same experiment identity (runtime, the profile's measured sections, model,
harness, GPU: ``core.identity``) measure the same paired quantity: they are one experiment.
A rerun pools with the experiment's earlier sealed rounds: their pairs enter the confidence
sequence first (``sequential``: e-values multiply across rounds), so however often a
candidate is rerun, the false-accept rate stays the stated one, and the receipt lists every
round it pooled. A round sealed before the identity keeps the experiment it recorded: it
pools with its like, never with a round sealed since.

Pure: the ledger's receipts come in as a mapping.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from console.core.provenance import identity
from console.core.records import kinds
from console.core.decisions.counting import counted, log_ratios
from console.core.decisions.gate import decide
from console.core.provenance.identity import Identity
from console.core.provenance.ledger import Problem, Receipts, receipt_file
from console.core.records.receipt import SCHEMA_1, PriorRound, ProfileRecord, Receipt

# Outcomes whose pairs the gate read: anything else never reached the speed decision.
POOLED_OUTCOMES = frozenset({"accepted", "none", "slower", "undecided", "implausible"})
# Outcomes that settle an experiment: a rerun after one of these has nothing left to decide.
DECIDED_OUTCOMES = frozenset({"accepted", "none", "slower"})


def experiment_key(profile: ProfileRecord, trees: Mapping[str, str | None], ident: Identity,
                   kind: str = "round") -> dict[str, Any]:
    """What must be equal for rounds to pool, field by field: the profile, node, scored shape, both
    trees and the experiment identity's parts. Rounds of another kind (a bisection's steps) are
    experiments of their own: a step never decides, or is decided by, an ordinary round."""
    bench = profile.bench
    key = {"profile": profile.name, "node": profile.node, "metric": bench.get("metric"),
           "depth": bench.get("depth"), "tokens": bench.get("tokens"), "main": trees.get("main"),
           "candidate": trees.get("candidate")}
    if ident.recorded:      # a round sealed before the identity is keyed as it was
        key.update(ident.parts)
    return {**key, "kind": kind} if kinds.of(kind).own_experiment else key   # an ordinary round's names no kind


def experiment(profile: ProfileRecord, trees: Mapping[str, str | None], ident: Identity, kind: str = "round") -> str:
    """The identity of what a round measures: what must be equal for rounds to pool."""
    return hashlib.sha256(json.dumps(experiment_key(profile, trees, ident, kind), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class LookBack:
    """What a new round of an experiment finds in the ledger before it measures anything."""
    prior: list[PriorRound]                 # rounds whose pairs pool with this one, in ledger order
    decided_by: tuple[str, str, str, int] | None  # (ledger id, round id, outcome, its exit code) when decided
    others: list[str]                       # why rounds of the same profile here do not pool
    pools: bool = True                      # a matrix round's cells pool nothing (each round stands alone)
    experiment: str = ""                    # the experiment looked for: what this round seals

    def decided_sentence(self) -> str:
        rid, round_id, outcome, _ = self.decided_by or ("", "", "", 0)
        own = "" if not self.pools or any(p.receipt == rid for p in self.prior) else \
            " (its own pairs changed level mid-round, so they pool with nothing; its outcome stood)"
        return (f"decided by round {round_id} (receipt {rid[:12]}, {outcome}){own}, with {len(self.prior)} round(s) "
                f"and {sum(len(p.log_ratios) for p in self.prior)} pairs pooled: nothing new was measured or sealed. "
                "Rerun with --fresh to measure again (a fresh round does not pool with them)")


def look_back(ledger: Receipts, profile: ProfileRecord, trees: Mapping[str, str | None],
              ident: Identity, fresh: bool = False, kind: str = "round") -> LookBack:
    """The experiment's earlier rounds: those that pool (from its latest --fresh round on), whether
    they already decided it, and why other rounds of this profile in the same ledger do not pool."""
    exp, key = experiment(profile, trees, ident, kind), experiment_key(profile, trees, ident, kind)
    others = [_why_apart(rid, r, key, ident) for rid, r in ledger.items()
              if _complete_round(r, kind) and r.profile.name == profile.name and not _of_experiment(r, exp, kind)]
    if fresh:
        return LookBack([], None, others, experiment=exp)
    prior, last = _pooled(ledger, exp, kind)
    decided = last if last is not None and last[2] in DECIDED_OUTCOMES else None
    return LookBack(prior, decided, others, pools=kinds.of(kind).pools, experiment=exp)


def prior_rounds(ledger: Receipts, exp: str, kind: str = "round") -> list[PriorRound]:
    """The experiment's earlier sealed rounds whose pairs the gate read, in ledger order."""
    return _pooled(ledger, exp, kind)[0]


def _complete_round(r: Receipt, kind: str = "round") -> bool:
    return r.kind == kind and r.status == "complete"


def _of_experiment(r: Receipt, exp: str, kind: str = "round") -> bool:
    return (_complete_round(r, kind) and r.schema != SCHEMA_1
            and r.sequential is not None and r.sequential.experiment == exp)


def _pooled(ledger: Receipts, exp: str,
            kind: str = "round") -> tuple[list[PriorRound], tuple[str, str, str, int] | None]:
    """The rounds of ``exp`` that pool, from its latest fresh round on, and the outcome of the last
    round that pooled or decided. A round whose step check fired pools no pairs (they measured two
    things), but a decided one still decides: its outcome stood with the step said beside it, and a
    rerun measuring again could turn a decided regression into a pass."""
    rids: list[str] = []
    for rid, r in ledger.items():
        if _of_experiment(r, exp, kind):
            rids = [rid] if r.sequential is not None and r.sequential.fresh else rids + [rid]
    prior, last = [], None
    for rid in rids:
        r = ledger[rid]
        v = decide(r, r.rules)
        shifted = v.speed is not None and v.speed.shift is not None
        xs = log_ratios(counted(r, r.rules)) if v.outcome in POOLED_OUTCOMES and not shifted else []
        if xs:
            prior.append(PriorRound(receipt=rid, round_id=r.round_id, log_ratios=xs))
        if xs or v.outcome in DECIDED_OUTCOMES:
            last = (rid, r.round_id, v.outcome, v.exit_code)
    return prior, last


def _why_apart(rid: str, r: Receipt, key: Mapping[str, Any], ident: Identity) -> str:
    """Why a round of this profile is another experiment: each field that differs, the experiment
    identity's parts named by ``Identity.differences``."""
    theirs = identity.of_receipt(r)
    their_key = experiment_key(r.profile, {b: x.tree_sha256 for b, x in r.builds.items()}, theirs, r.kind)
    differ = [f"{k} {str(their_key.get(k))[:12]} not {str(key[k])[:12]}" for k in key
              if k not in identity.PARTS and their_key.get(k) != key[k]]
    if ident.recorded or theirs.recorded:       # rounds sealed before the identity were not told apart by it
        differ += ident.differences(theirs)
    if r.schema == SCHEMA_1:
        differ.append("sealed under schema 1 (fixed reps), which does not pool")
    return f"round {r.round_id} ({rid[:12]}): " + ("; ".join(differ) or "not sealed with an experiment")


def prior_problems(ledger: Receipts) -> list[Problem]:
    """Every pooled round a receipt cites must be sealed before it in the same ledger, be of
    the same experiment, and give the pairs the receipt copied: a verdict cannot pool pairs
    that no sealed round measured."""
    out: list[Problem] = []
    seen: set[str] = set()
    for rid, r in ledger.items():
        seq = r.sequential
        for p in seq.prior if seq is not None else []:
            cited = p.receipt

            def bad(code: str, msg: str) -> None:
                out.append(Problem(code, f"pooled round {cited[:12]}: {msg}", receipt_file(rid), None, rid))
            if cited not in seen:
                bad("prior-not-in-ledger", "is not sealed earlier in this ledger")
                continue
            earlier = ledger[cited]
            if earlier.sequential is None or earlier.sequential.experiment != seq.experiment:
                bad("prior-other-experiment", "measured another experiment (other trees, node, profile, "
                    "runtime or measured setup)")
                continue
            if [float(x) for x in p.log_ratios] != log_ratios(counted(earlier, earlier.rules)):
                bad("prior-pairs-differ", "the pairs copied into this receipt are not the ones that round measured")
        seen.add(rid)
    return out
