"""After the verdict: seal the receipt into the ledger, raise the lock's pins. The reports are
written by whoever drove the round, from the sealed receipt (``reports.export``)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from .. import events as ev
from ..results import lockfile, store
from ..core.records.receipt import Receipt
from ..profile import Profile


@dataclass
class Sealed:
    receipt_id: str
    path: Path
    document: dict          # the receipt as sealed (its bytes' JSON)
    receipt: Receipt        # the same, read back: frozen, as every later reader holds it


def seal(out: Path, receipt: Receipt, notice: ev.Notify) -> Sealed:
    """One ledger line per round; ``receipt.json`` is a copy of the newest sealed receipt."""
    rid = store.seal_into(out, receipt.to_dict())
    path = out / "receipts" / f"{rid}.json"
    data = path.read_bytes()
    store.atomic_write(out / "receipt.json", data)
    doc = json.loads(data)
    sealed = Sealed(rid, path, doc, Receipt.from_dict(doc))
    notice("info", "sealed", f"receipt {rid[:12]} sealed into {out / 'ledger.jsonl'}")
    return sealed


def raise_pins(lock_path: Path | None, sealed: Sealed, profile: Profile, notice: ev.Notify) -> None:
    """Move the lock's pins the sealed receipt supports (raise-only). A lock that cannot be
    written is said, not fatal: the round is sealed either way."""
    if not lock_path or not Path(lock_path).exists():
        return
    rid = sealed.receipt_id
    try:
        moved, stale = lockfile.update(Path(lock_path), rid, sealed.receipt, profile,
                                       ledger_dir=sealed.path.parent.parent)
    except Exception as e:
        notice("error", "lock-update-failed", f"{lock_path} was not updated: {e}. The receipt {rid[:12]} is "
               "sealed; fix the lock and verify it with `console lock verify`.")
        return
    for c in moved:
        notice("info", "lock-update", f"{c.key}: {c.old:g} -> {c.new:g} ({c.action}, receipt {rid[:12]}): {c.reason}")
    for f in stale:
        notice("warn", "pin-stale", f.message)
