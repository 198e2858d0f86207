"""Sealed rounds as tables: ``console ledger show``'s lines and ``console verdict``'s re-derived
verdict of one receipt file (docs/EXPORTS.md, "Ledger" and "Verdict")."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..core.ledger import Entry
from .compare import GAIN_COLUMNS
from .tables import Column, Table, percent, short

LEDGER_COLUMNS = (
    Column("line", "line number in ledger.jsonl"),
    Column("id", "the receipt's id: sha256 of its sealed bytes", short(12)),
    Column("sealed_at", "when it was sealed (UTC, ISO 8601)"),
    Column("kind", "round | noise"),
    Column("profile", "the profile's name"),
    Column("round_id", "the round's own id"),
    Column("outcome", "the verdict stored when it was sealed (`console ledger rescore` re-derives)"),
    Column("tier", "its tier, when accepted"),
)

VERDICT_COLUMNS = (
    Column("file", "the receipt file judged"),
    Column("sealed", "sealed | sealed-reformatted | modified | unsealed | unverified: whether the file is a "
                     "ledger's sealed receipt"),
    Column("receipt_id", "the ledger id it matches (empty when none)", short(12)),
    Column("outcome", "the re-derived outcome"),
    Column("tier", "its tier, when accepted"),
    *GAIN_COLUMNS,
    Column("basis", "the conservative end against the frontier that sets the tier, a fraction", percent),
    Column("pairs", "timed pairs the decision used"),
    Column("false_accept", "the false-accept rate the decision holds, a fraction"),
    Column("method", "how the interval was computed"),
    Column("exit_code", "the exit code this verdict gives"),
    Column("reasons", "the reasons' codes, '; '-joined"),
    Column("warnings", "the warnings' codes, '; '-joined"),
)


def ledger_table(entries: Sequence[Entry]) -> Table:
    return Table("ledger", "Sealed rounds", LEDGER_COLUMNS, [e.to_dict() | {"line": e.line} for e in entries])


def verdict_table(v: Mapping[str, Any], file: str, identity: Mapping[str, Any]) -> Table:
    s = v.get("speed") or {}
    iv = s.get("interval") or [None, None]
    row = {"file": file, "sealed": identity.get("status"), "receipt_id": identity.get("receipt_id"),
           "outcome": v.get("outcome"), "tier": v.get("tier"), "gain": s.get("gain"), "low": iv[0], "high": iv[1],
           "basis": s.get("basis"), "pairs": (s.get("decision") or {}).get("pairs"),
           "false_accept": None if s.get("confidence") is None else round(1 - s["confidence"], 6),
           "method": s.get("method"), "exit_code": v.get("exit_code"),
           "reasons": [r.get("code") for r in v.get("reasons") or []],
           "warnings": [w.get("code") for w in v.get("warnings") or []]}
    return Table("verdict", "Verdict", VERDICT_COLUMNS, [row])
