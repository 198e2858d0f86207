"""``console lock verify``: every non-zero pin in reference.lock re-derived, exactly, from a sealed
receipt in the ledger (read once, ``ledger.Receipts``), on the node and under the experiment identity
it records; and each pin against the newest round of its own node and identity (stale pins).
Problems name the file, the slot and the receipt; a pin is never trusted for being in the lock."""

from __future__ import annotations

from typing import Any, Mapping
from console.core.provenance import identity
from console.core.records.figures import finite
from console.core.provenance.fingerprint import Fingerprint, differences, of_facts, of_receipt
from console.core.provenance.ledger import Problem, Receipts
from console.core.records import kinds
from console.core.records.receipt import SCHEMA_1, Receipt
from console.core.provenance.lock import (KINDS, LOCK_FILE, LockError, Slot, baselines, measure, noise_spread_of,
                                          parse_slot, pooled_noise, recorded_node, significance_of, slots_of,
                                          split_key, stale_findings, wanted_identity)


def verify_lock(lock: Mapping[str, Any], ledger_receipts: Receipts,
                file: str = LOCK_FILE) -> list[Problem]:
    """Every non-zero pin must be re-derivable, exactly, from a sealed receipt in the ledger.

    ``ledger_receipts`` maps id -> receipt for receipts the ledger holds, in
    ledger order (the last that measures a slot is used for staleness).
    """
    problems: list[Problem] = []
    for name, t in baselines(lock).items():
        problems += _check_baseline(name, t, ledger_receipts, file)
    for node, t in (lock.get("noise") or {}).items():
        problems += _check_noise(node, t, ledger_receipts, file)
    return problems + _stale_problems(lock, ledger_receipts, file)


def _check_baseline(name: str, t: Any, receipts: Receipts, file: str) -> list[Problem]:
    def p(code: str, msg: str, rid: str | None = None) -> list[Problem]:
        return [Problem(code, msg, file, None, rid, name)]
    base, digest, ident = split_key(name)
    try:
        slot = parse_slot(base)
    except LockError as e:
        return p("bad-slot", str(e))
    if not isinstance(t, Mapping):
        return p("bad-entry", "expected a table")
    if bad := _node_record_problem(t, digest):
        return p("bad-fingerprint", bad)
    if bad := _identity_record_problem(t, ident):
        return p("bad-identity", bad)
    value = t.get("value", 0)
    if not finite(value) or value < 0:
        return p("bad-value", f"value {value!r} must be a finite number >= 0")
    if t.get("kind") not in KINDS:
        return p("bad-kind", f"kind {t.get('kind')!r} must be one of {', '.join(KINDS)}")
    if "attested" in t and not (isinstance(t["attested"], Mapping) and finite(t["attested"].get("value"))):
        return p("bad-attested", "attested must be a table with a numeric value")
    if value == 0:
        return []
    rid = t.get("receipt")
    if not rid or not isinstance(rid, str):
        return p("unsourced", f"value {value:g} cites no receipt: a hand-filled pin is indistinguishable "
                              "from a measured one")
    if missing := _cited(rid, receipts, "receipt", p):
        return missing
    return (_check_against(slot, t["kind"], float(value), rid, receipts[rid], p) or _check_node(t, rid, receipts[rid], p)
            or _check_identity(t, rid, receipts[rid], p))


def _node_record_problem(t: Mapping[str, Any], digest: str) -> str:
    """What is wrong with the node an entry records, on its own: a key kept apart for one node
    must record that node, and recorded facts must hash to the recorded fingerprint."""
    fp, facts = t.get("fingerprint"), t.get("node_facts")
    if "fingerprint" in t and not (isinstance(fp, str) and fp):
        return f"fingerprint {fp!r} must be a non-empty string"
    if digest and fp != digest:
        return f"the key is kept apart for node {digest}, but the entry records {fp!r}"
    if facts is not None and (not isinstance(facts, Mapping) or of_facts(facts).digest != fp):
        return f"node_facts do not hash to the recorded fingerprint {fp!r}"
    return ""


def _identity_record_problem(t: Mapping[str, Any], ident: str) -> str:
    """A key kept apart for one experiment identity must record it, and recorded parts must hash to it."""
    got, parts = t.get("identity"), t.get("identity_parts")
    if "identity" in t and not (isinstance(got, str) and got):
        return f"identity {got!r} must be a non-empty string"
    if ident and got != ident:
        return f"the key is kept apart for experiment identity {ident}, but the entry records {got!r}"
    if parts is not None and (not isinstance(parts, Mapping) or identity.recorded_parts(t).digest != got):
        return f"identity_parts do not hash to the recorded identity {got!r}"
    return ""


def _check_identity(t: Mapping[str, Any], rid: str, r: Receipt, p: Any) -> list[Problem]:
    """A recorded experiment identity must be the cited receipt's, re-derived from it."""
    if not t.get("identity"):
        return []
    got = identity.of_receipt(r)
    if got.recorded and got.digest == t["identity"]:
        return []
    why = ("; ".join(got.differences(identity.recorded_parts(t))) if got.recorded
           else "the receipt was sealed before experiment identities")
    return p("identity-mismatch", f"lock says experiment identity {t['identity']}, the cited receipt gives "
                                  f"{got.digest if got.recorded else 'none'} ({why})", rid)


def _check_node(t: Mapping[str, Any], rid: str, r: Receipt, p: Any) -> list[Problem]:
    """A recorded fingerprint must be the cited receipt's node, re-derived from its host facts."""
    fp = t.get("fingerprint")
    got = of_receipt(r)
    if not fp or got.digest == fp:
        return []
    recorded = Fingerprint(str(fp), dict(t.get("node_facts") or {}))
    return p("fingerprint-mismatch", f"lock says node {fp}, the cited receipt's host facts give {got.digest} "
                                     f"({differences(recorded, got)})", rid)


def _cited(rid: str, receipts: Receipts, what: str, p: Any) -> list[Problem]:
    """Why a cited receipt cannot be checked: not sealed in the ledger, or sealed but unreadable."""
    if rid in receipts:
        return []
    if rid in receipts.unreadable:
        return p("receipt-unreadable", f"cited {what} {rid[:12]} is sealed but cannot be read: "
                                       f"{receipts.unreadable[rid]}", rid)
    return p("receipt-not-in-ledger", f"cited {what} {rid[:12]} is not sealed in the ledger", rid)


def _check_against(slot: Slot, kind: str, value: float, rid: str, r: Receipt, p: Any) -> list[Problem]:
    if kinds.of(r.kind).raises != "pins":
        return p("wrong-receipt", f"cited receipt is a {r.kind!r} receipt, not a round", rid)
    if r.status != "complete":
        return p("wrong-receipt", f"cited round has status {r.status!r}, not 'complete'", rid)
    try:
        specs = slots_of(r.profile.to_dict())
    except (KeyError, TypeError, LockError) as e:
        return p("wrong-receipt", f"cited receipt's profile cannot name slots: {e}", rid)
    spec = specs.get(slot.name)
    if spec is None:
        return p("axis-mismatch", f"cited receipt measured {', '.join(sorted(specs))} "
                                  f"(profile {r.profile.name!r}, node {r.profile.node!r}), not this slot", rid)
    if spec.kind != kind:
        return p("kind-mismatch", f"slot is a {kind} but the receipt measured it as a {spec.kind}", rid)
    m = measure(r, spec)
    if m.value is None:
        return p("not-measured", f"cited receipt does not give a value: {m.reason}", rid)
    if m.value != value:
        return p("value-mismatch", f"lock says {value:g}, the cited receipt gives main median {m.value:g}", rid)
    return []


def _check_noise(key: str, t: Any, receipts: Receipts, file: str) -> list[Problem]:
    def p(code: str, msg: str, rid: str | None = None) -> list[Problem]:
        return [Problem(code, msg, file, None, rid, f"noise.{key}")]
    node, digest, _ = split_key(key)
    if isinstance(t, Mapping) and (bad := _node_record_problem(t, digest)):
        return p("bad-fingerprint", bad)
    if isinstance(t, Mapping) and "sd" in t:
        return _check_pooled_noise(node, t, receipts, p)
    if not isinstance(t, Mapping) or not finite(t.get("spread", 0)) or t.get("spread", 0) < 0:
        return p("bad-value", "noise entry needs a finite spread >= 0")
    spread = float(t.get("spread", 0))
    if spread == 0:
        return []
    rid = t.get("receipt")
    if not isinstance(rid, str) or not rid:
        return p("receipt-not-in-ledger", f"spread {spread:g} cites no sealed noise receipt in the ledger")
    if bad := _noise_receipt_problem(rid, receipts, node, p):
        return bad
    r = receipts[rid]
    if (got := noise_spread_of(r)) != spread:
        return p("value-mismatch", f"lock says {spread:g}, the cited receipt gives {got}", rid)
    return _check_node(t, rid, r, p)


def _noise_receipt_problem(rid: str, receipts: Receipts, node: str, p: Any) -> list[Problem]:
    """A cited noise receipt must be sealed and readable, of a kind that measures node noise, on ``node``."""
    if missing := _cited(rid, receipts, "noise receipt", p):
        return missing
    r = receipts[rid]
    if kinds.of(r.kind).raises != "node-noise":
        return p("wrong-receipt", f"cited receipt is a {r.kind!r} receipt, not a noise round", rid)
    if r.profile.node != node:
        return p("axis-mismatch", f"cited noise receipt was measured on node {r.profile.node!r}", rid)
    return []


def _check_pooled_noise(node: str, t: Mapping[str, Any], receipts: Receipts,
                        p: Any) -> list[Problem]:
    """Pooled pair noise: every cited noise receipt is sealed, on this node, and pooling them
    again gives exactly the recorded SD and degrees of freedom."""
    sd, df, cited = t.get("sd"), t.get("df"), t.get("receipts")
    if not finite(sd) or sd < 0 or not isinstance(df, int) or isinstance(df, bool) or df < 0:
        return p("bad-value", "noise entry needs a finite sd >= 0 and an integer df >= 0")
    if sd == 0:
        return []
    if not isinstance(cited, list) or not cited or not all(isinstance(x, str) for x in cited):
        return p("unsourced", f"sd {sd:g} cites no noise receipts (receipts = [...])")
    for rid in cited:
        if bad := _noise_receipt_problem(rid, receipts, node, p):
            return bad
        r = receipts[rid]
        if r.schema == SCHEMA_1:
            return p("wrong-receipt", "cited noise receipt is schema 1 (a spread, not pair noise)", rid)
        if bad := _check_node(t, rid, r, p):
            return bad
    try:
        pooled = pooled_noise([receipts[x] for x in cited])
    except Exception as e:  # a receipt the rules cannot judge is a problem to report, not a crash
        return p("not-measured", f"the cited noise receipts cannot be pooled: {e}")
    if pooled != (sd, df):
        return p("value-mismatch", f"lock says sd {sd:g} on {df} df, its receipts pool to "
                                   f"{pooled[0] if pooled else None} on {pooled[1] if pooled else 0} df")
    return []


def _stale_problems(lock: Mapping[str, Any], receipts: Receipts, file: str) -> list[Problem]:
    """Each pin against the newest round of its own node and experiment identity that measured its slot."""
    latest: dict[tuple[str, str, str], tuple[str, Receipt]] = {}
    for rid, r in receipts.items():
        if not kinds.of(r.kind).checks_pins or r.status != "complete":
            continue
        try:
            digest, ident = of_receipt(r).digest, wanted_identity(identity.of_receipt(r))
            for name in slots_of(r.profile.to_dict()):
                latest[(name, digest, ident)] = (rid, r)
        except (KeyError, TypeError, LockError):
            continue
    out = []
    for name, t in baselines(lock).items():
        there = recorded_node(t, receipts) if isinstance(t, Mapping) else None
        at = (split_key(name)[0], there.digest if there else "", str(t.get("identity") or "") if there else "")
        if there is None or at not in latest:
            continue
        rid, sealed = latest[at]
        for f in stale_findings(lock, sealed, significance_of(sealed, None), receipts):
            if f.slot == name:
                out.append(Problem(f.code, f.message, file, None, rid, name, fatal=False))
    return out
