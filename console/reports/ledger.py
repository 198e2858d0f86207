"""Sealed rounds as tables: ``console ledger show``'s lines and ``console verdict``'s re-derived
verdict of one receipt file (docs/EXPORTS.md, "Ledger" and "Verdict")."""
from __future__ import annotations

from typing import Sequence

from ..core.provenance.ledger import Entry, FileIdentity
from ..core.records.verdict import VerdictRecord
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


def verdict_table(v: VerdictRecord, file: str, identity: FileIdentity) -> Table:
    s = v.speed
    low, high = s.interval or (None, None)
    fa = v.false_accept
    row = {"file": file, "sealed": identity.status, "receipt_id": identity.receipt_id,
           "outcome": v.outcome.value, "tier": v.tier, "gain": s.gain, "low": low, "high": high,
           "basis": s.basis, "pairs": s.decision.pairs if s.decision is not None else None,
           "false_accept": None if fa is None else round(fa, 6),
           "method": s.method, "exit_code": v.exit_code,
           "reasons": [r.code for r in v.reasons], "warnings": [w.code for w in v.warnings]}
    return Table("verdict", "Verdict", VERDICT_COLUMNS, [row])
