"""Reruns of the same candidate: which earlier rounds pool with this one.

A candidate is known by its source tree hash, and so is main. Rounds of the same
profile on the same node, scoring the same metric at the same depth, with the same two
trees, measure the same paired quantity: they are one experiment. A rerun pools with the
experiment's earlier sealed rounds: their pairs enter the confidence sequence first
(``sequential``: e-values multiply across rounds), so however often a candidate is rerun,
the false-accept rate stays the stated one, and the receipt lists every round it pooled.

Pure: the ledger's receipts come in as a mapping.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from console.core.gate import counted, decide, log_ratios
from console.core.ledger import Problem, receipt_file
from console.core.receipt import SCHEMA_1, PriorRound, ProfileRecord, as_receipt

# Outcomes whose pairs the gate read: anything else never reached the speed decision.
POOLED_OUTCOMES = frozenset({"accepted", "none", "slower", "undecided", "implausible"})


def experiment(profile: ProfileRecord, trees: Mapping[str, str | None]) -> str:
    """The identity of what a round measures: what must be equal for rounds to pool."""
    bench = profile.bench
    key = {"profile": profile.name, "node": profile.node, "metric": bench.get("metric"),
           "depth": bench.get("depth"), "tokens": bench.get("tokens"), "main": trees.get("main"),
           "candidate": trees.get("candidate")}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def prior_rounds(ledger: Mapping[str, Mapping[str, Any]], exp: str) -> list[PriorRound]:
    """The experiment's earlier sealed rounds whose pairs the gate read, in ledger order."""
    out = []
    for rid, d in ledger.items():
        if d.get("kind") != "round" or d.get("schema") == SCHEMA_1 or d.get("status") != "complete":
            continue
        if (d.get("sequential") or {}).get("experiment") != exp:
            continue
        r = as_receipt(d)
        if decide(r, r.rules).outcome not in POOLED_OUTCOMES:
            continue
        xs = log_ratios(counted(r, r.rules))
        if xs:
            out.append(PriorRound(receipt=rid, round_id=r.round_id, log_ratios=xs))
    return out


def prior_problems(ledger: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """Every pooled round a receipt cites must be sealed before it in the same ledger, be of
    the same experiment, and give the pairs the receipt copied: a verdict cannot pool pairs
    that no sealed round measured."""
    out: list[Problem] = []
    seen: set[str] = set()
    for rid, d in ledger.items():
        seq = d.get("sequential") or {}
        for p in seq.get("prior") or []:
            cited = str(p.get("receipt") or "")

            def bad(code: str, msg: str) -> None:
                out.append(Problem(code, f"pooled round {cited[:12]}: {msg}", receipt_file(rid), None, rid))
            if cited not in seen:
                bad("prior-not-in-ledger", "is not sealed earlier in this ledger")
                continue
            earlier = ledger[cited]
            if (earlier.get("sequential") or {}).get("experiment") != seq.get("experiment"):
                bad("prior-other-experiment", "measured another experiment (other trees, node or profile)")
                continue
            r = as_receipt(earlier)
            if [float(x) for x in p.get("log_ratios") or []] != log_ratios(counted(r, r.rules)):
                bad("prior-pairs-differ", "the pairs copied into this receipt are not the ones that round measured")
        seen.add(rid)
    return out
