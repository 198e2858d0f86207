"""reference.lock on disk, as a round uses it: read the pins, raise them after sealing.

The rules (raise-only frontier, guard floors never lowered, measured vs attested)
live in the pure ``console.core.provenance.lock``; this is the thin file edge around it. The
file is a ``tomlkit`` document so that the comments people write next to a pin
survive every rewrite.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import tomlkit
from tomlkit.items import Table

from . import store
from ..core.provenance import lock as L
from ..core.provenance.lock_verify import verify_lock
from ..core.provenance.fingerprint import Fingerprint
from ..core.provenance.identity import Identity
from ..core.records import kinds
from ..core.records.receipt import Receipt
from ..errors import UsageError
from ..profile import Profile


# --- the TOML document ---------------------------------------------------------

HEADER = ("Pins a round is judged against. 0 = not measured (always legal).",
          "Every non-zero value is raised by a round from the receipt it sealed;",
          "`console lock verify` recomputes it from that receipt. Comments survive rewrites.")


def loads(text: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as e:
        raise L.LockError(f"reference.lock is not valid TOML: {e}") from None


# the lock's tables, each of tables (a slot, a node) but parity and reference: a hand-edited lock
# is refused here with the key, not deep inside a check
_TABLES = {"reference": False, "parity": False, "baselines": True, "noise": True}


def model(doc: tomlkit.TOMLDocument, path: str | Path = "reference.lock") -> dict[str, Any]:
    """The plain dict ``console.core.provenance.lock`` works on; a table of the wrong shape is a usage error."""
    m = doc.unwrap()
    for name, nested in _TABLES.items():
        t = m.get(name, {})
        bad = (f"key '{name}'" if not isinstance(t, dict) else
               next((f"key '{name}.{k}'" for k, v in t.items() if nested and not isinstance(v, dict)), None))
        if bad:
            raise UsageError(f"{path}: {bad}: expected a table", "Fix the lock by hand or restore it from "
                             "version control (`console lock verify` checks it).")
    return m


def apply_changes(doc: tomlkit.TOMLDocument, changes: Iterable[L.Change]) -> None:
    """Write moving changes into ``doc``, keeping every comment and unrelated key."""
    for ch in changes:
        if ch.moves:
            table = _table(_table(doc, ch.table, super_table=True), ch.key)
            for k, v in L.pin_fields(ch).items():
                _set_keep_comment(table, k, _inline(v) if isinstance(v, dict) else v)


def _inline(d: dict[str, Any]) -> Any:
    """A small table on its key's line (a pin's node facts), not a table header of its own."""
    t = tomlkit.inline_table()
    t.update(d)
    return t


def record_attested(doc: tomlkit.TOMLDocument, slot: str, value: float, source: str, at: str, note: str = "") -> None:
    """Record a figure seen but not sealed. It sits beside the pin and never moves it."""
    L.parse_slot(slot)
    table = _table(_table(doc, "baselines", super_table=True), slot)
    if "value" not in table:
        _set_keep_comment(table, "value", 0.0)
    att = tomlkit.inline_table()
    att.update({"value": float(value), "source": source, "at": at, **({"note": note} if note else {})})
    _set_keep_comment(table, "attested", att)


def _table(parent: Any, key: str, super_table: bool = False) -> Table:
    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=super_table)
    return parent[key]


def _set_keep_comment(table: Any, key: str, value: Any) -> None:
    """Replace a value; a trailing ``# comment`` on its line stays with it."""
    old = table.get(key) if key in table else None
    new = value if hasattr(value, "trivia") else tomlkit.item(value)
    if old is not None and hasattr(old, "trivia") and old.trivia.comment:
        new.trivia.comment_ws = old.trivia.comment_ws
        new.trivia.comment = old.trivia.comment
    table[key] = new


def new_lock_text(profile: Any) -> str:
    """A fresh reference.lock for a profile (``core.lock.fresh_lock``), with its header comment."""
    doc = tomlkit.document()
    for line in HEADER:
        doc.add(tomlkit.comment(line))
    for key, value in L.fresh_lock(profile).items():
        if key in ("baselines", "noise"):       # one [key."entry"] table each, under a bare [key]
            t = tomlkit.table(is_super_table=True)
            for name, entry in value.items():
                t[name] = _plain_table(entry)
        else:
            t = _plain_table(value)
        doc[key] = t
    return tomlkit.dumps(doc)


def _plain_table(d: dict[str, Any]) -> Table:
    t = tomlkit.table()
    t.update(d)
    return t


# --- the file, as a round uses it -------------------------------------------------

def ensure(path: Path, profile: Profile, template: Path | None = None) -> Path:
    """Create ``path`` from a template, or with every slot unmeasured."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = template.read_text() if template and template.exists() else new_lock_text(profile)
        store.atomic_write(path, text.encode())
    return path


def lock_for(profile: Profile, out: Path, given: Path | None = None) -> Path:
    """The lock a round reads and raises: ``given`` (--lock), else OUT/reference.lock, seeded from the
    profile's committed template (<profile dir>/<name>/reference.lock) or made unmeasured."""
    return ensure(given or out / "reference.lock", profile, profile.dir / profile.name / "reference.lock")


def pins_for(path: Path, profile: Profile, node: Fingerprint, ledger_dir: Path | None = None,
             ident: Identity | None = None) -> dict:
    """The pins a round on ``node`` under the experiment identity ``ident`` is judged against (0 = not
    measured), and the pins of other nodes or identities it passed over (``core.lock.node_pins``).

    With ``ledger_dir``, every non-zero pin must first trace to a sealed receipt there:
    a hand-edited floor or frontier would otherwise judge the round unseen.
    """
    m = model(store.read_lock(path), path)
    receipts = store.ledger_receipts(ledger_dir) if ledger_dir is not None else None
    if receipts is not None:
        bad = [p for p in verify_lock(m, receipts, file=str(path)) if p.fatal]
        if bad:
            raise UsageError(f"{path} does not trace to the ledger in {ledger_dir}: "
                             + "; ".join(str(p) for p in bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""),
                             f"Every non-zero pin must cite a sealed receipt of {ledger_dir}. Restore the lock, "
                             "or set the slot to 0 (not measured) and let a sealed round measure it; "
                             f"`console lock verify {path} --ledger {ledger_dir}` lists every problem.")
    for key, pinned in (("document_sha256", profile.parity.document_sha256),
                        ("reference_sha256", profile.parity.reference_sha256)):
        locked = (m.get("parity") or {}).get(key)
        if locked and locked != pinned:
            raise UsageError(f"{path}: key 'parity.{key}': the lock pins {locked}, the profile {pinned}",
                             "A reference moved: recapture it deliberately and update both, or restore the pinned one.")
    return {**L.node_pins(m, profile, node, receipts, ident), "lock_path": str(path)}


def update(path: Path, receipt_id: str, sealed: Receipt, profile: Profile, ledger_dir: Path | None = None):
    """Apply a sealed receipt's raise-only changes, as its sealed verdict allows; return (changes
    that moved, stale findings).
    ``ledger_dir`` holds the earlier noise rounds a node's noise pools with, and the receipts
    that say which node measured a pin written before fingerprints."""
    kind = kinds.of(sealed.kind)
    if not kind.raises:         # a bisection step's good end is an old commit, not the node's main
        return [], []
    doc = store.read_lock(path)
    m = model(doc, path)
    ledger = store.ledger_receipts(ledger_dir) if ledger_dir is not None else None
    findings = L.stale_findings(m, sealed, profile.gate.significance, ledger) if kind.checks_pins else []
    changes = L.update_from_receipt(m, receipt_id, sealed, sealed.verdict, profile.gate.significance, ledger=ledger)
    apply_changes(doc, changes)
    store.write_lock(path, doc)
    return [c for c in changes if c.moves], findings
