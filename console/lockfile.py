"""reference.lock on disk, as a round uses it: read the pins, raise them after sealing.

The rules (raise-only frontier, guard floors never lowered, measured vs attested)
live in the pure ``console.core.lock``; this is the thin file edge around it.
"""
from __future__ import annotations

from pathlib import Path

from . import store
from .core import lock as L
from .errors import UsageError
from .profile import Profile


def ensure(path: Path, profile: Profile, template: Path | None = None) -> Path:
    """Create ``path`` from a template, or with every slot unmeasured."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = template.read_text() if template and template.exists() else L.new_lock_text(profile)
        store.atomic_write(path, text.encode())
    return path


def pins_for(path: Path, profile: Profile, ledger_dir: Path | None = None) -> dict:
    """The pins a round is judged against (0 = not measured).

    With ``ledger_dir``, every non-zero pin must first trace to a sealed receipt there:
    a hand-edited floor or frontier would otherwise judge the round unseen.
    """
    model = L.model(store.read_lock(path))
    if ledger_dir is not None:
        bad = [p for p in L.verify_lock(model, store.ledger_receipts(ledger_dir), file=str(path)) if p.fatal]
        if bad:
            raise UsageError(f"{path} does not trace to the ledger in {ledger_dir}: "
                             + "; ".join(str(p) for p in bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""),
                             f"Every non-zero pin must cite a sealed receipt of {ledger_dir}. Restore the lock, "
                             "or set the slot to 0 (not measured) and let a sealed round measure it; "
                             f"`console lock verify {path} --ledger {ledger_dir}` lists every problem.")
    for key, pinned in (("document_sha256", profile.parity.document_sha256),
                        ("reference_sha256", profile.parity.reference_sha256)):
        locked = (model.get("parity") or {}).get(key)
        if locked and locked != pinned:
            raise UsageError(f"{path}: key 'parity.{key}': the lock pins {locked}, the profile {pinned}",
                             "A reference moved: recapture it deliberately and update both, or restore the pinned one.")
    guards = L.guard_slots(profile)
    noise = (model.get("noise") or {}).get(profile.node) or {}
    spread = noise.get("spread")
    return {"frontier": L.value_of(model, L.frontier_slot(profile)), "frontier_slot": L.frontier_slot(profile),
            "guards": {g: L.value_of(model, slot) for g, slot in guards.items()},
            "guard_slots": guards, "noise_spread": float(spread) if spread not in (None, "") else None,
            "lock_path": str(path)}


def update(path: Path, receipt_id: str, sealed: dict, verdict: dict, profile: Profile):
    """Apply a sealed receipt's raise-only changes; return (changes that moved, stale findings)."""
    doc = store.read_lock(path)
    model = L.model(doc)
    findings = L.stale_findings(model, sealed, profile.gate.significance) if sealed.get("kind") == "round" else []
    changes = L.update_from_receipt(model, receipt_id, sealed, verdict, profile.gate.significance)
    L.apply_changes(doc, changes)
    store.write_lock(path, doc)
    return [c for c in changes if c.moves], findings
