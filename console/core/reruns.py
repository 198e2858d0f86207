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
