"""Saved rounds as comparison sources: receipt files and results directories (ledgers)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from . import store
from ..core.provenance.compare import Source
from ..core.provenance.ledger import LEDGER_FILE, FileIdentity
from ..core.records.receipt import Receipt, ReceiptError
from ..errors import UsageError


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r} is not a date", "Give YYYY-MM-DD or an ISO time such as "
                         "2026-12-01T08:00:00Z.") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class ReceiptFile:
    """A receipt file read once: its typed receipt, and whether it is a sealed receipt of the ledger
    beside it (``identity``; ``ledger``: that results directory, if any)."""
    path: Path
    receipt: Receipt
    identity: FileIdentity
    ledger: Path | None


def read_receipt_file(path: Path, hint: str = "Give the path of a console receipt.json.") -> ReceiptFile:
    """The one reader of a receipt file named on the command line; a file that is not a receipt is
    a usage error that names it and what is wrong."""
    data, doc = store.read_json(path, "a receipt", hint)
    try:
        receipt = Receipt.from_dict(doc)
    except ReceiptError as e:
        raise UsageError(f"{path}: {e}", hint) from None
    ident, ledger = store.identify_file(path, data, doc)
    return ReceiptFile(Path(path), receipt, ident, ledger)


def _from_file(path: Path) -> Source:
    f = read_receipt_file(path, "Give receipt files or results directories of the console.")
    rid = f.identity.receipt_id
    return Source(rid[:12] if rid else path.name, f.receipt, rid)


def _from_dir(path: Path) -> list[Source]:
    if not (path / LEDGER_FILE).is_file():
        raise UsageError(f"{path} holds no {LEDGER_FILE}", "Give the --out directory of rounds, or receipt files.")
    sealed = store.ledger_receipts(path)
    if sealed.unreadable:
        rid, why = next(iter(sealed.unreadable.items()))
        raise UsageError(f"{path}: receipt {rid[:12]}: {why}", "Give receipt files or results directories of the console.")
    return [Source(rid[:12], r, rid) for rid, r in sealed.items()]


def select_sources(paths: Sequence[Path], node: str | None = None, since: str | None = None) -> list[Source]:
    """Every round named by ``paths`` (in order, each sealed receipt once), kept when it ran on
    ``node`` (host name or the profile's node class) and was sealed at or after ``since``."""
    after = _since(since)
    found: list[Source] = []
    seen: set[str] = set()
    for p in paths:
        if not p.exists():
            raise UsageError(f"{p} does not exist", "Give receipt files or results directories.")
        for s in (_from_dir(p) if p.is_dir() else [_from_file(p)]):
            if s.receipt_id and s.receipt_id in seen:
                continue
            if node and node not in (s.receipt.host.hostname, s.receipt.profile.node):
                continue
            if after and _sealed_time(s) < after:
                continue
            seen.add(s.receipt_id or "")
            found.append(s)
    if not found:
        raise UsageError("no round matches" + (f" --node {node}" if node else "") + (f" --since {since}" if since else ""),
                         "Check the filters; `console ledger show DIR` lists the sealed rounds.")
    return found


def _sealed_time(s: Source) -> datetime:
    try:
        t = datetime.fromisoformat(s.sealed_at)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)
