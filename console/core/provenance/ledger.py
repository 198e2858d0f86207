"""Sealed receipts and the chained ledger: canonical bytes, ids, links, checks.

Pure: no file access and no clock. ``console.results.store`` reads and writes the
files; everything here takes bytes, dicts and callables.

A receipt's id is the sha256 of its canonical JSON, seal included. The seal
names the previous receipt's id, so changing, dropping, inserting or
reordering any sealed round breaks a link that ``verify`` reports.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from console.core.records import kinds
from console.core.records.receipt import Receipt, ReceiptError
from console.core.records.untrusted import loads

LEDGER_FILE = "ledger.jsonl"
RECEIPTS_DIR = "receipts"
ENTRY_KEYS = ("id", "prev", "kind", "profile", "round_id", "sealed_at", "outcome", "tier")


class CanonicalError(ValueError):
    """A value that has no single canonical JSON form (NaN, a non-string key …)."""


# --- canonical JSON ----------------------------------------------------------

def canonical_json(obj: Any) -> bytes:
    """The one byte string for ``obj``: sorted keys, no spaces, UTF-8.

    Floats use Python's shortest round-trip repr, so a float read back from
    the bytes re-encodes to the same bytes. Anything JSON cannot carry
    exactly is refused with the path to it rather than coerced.
    """
    _check(obj, "$")
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CanonicalError(f"string is not valid Unicode (lone surrogate): {e}") from None


def _check(obj: Any, path: str) -> None:
    if obj is None or isinstance(obj, (bool, str, int)):
        return
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise CanonicalError(f"{path}: {obj!r} has no JSON form; record a missing value as null")
        return
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if not isinstance(k, str):
                # json.dumps would turn 1 into "1": the bytes would not read back as the same object
                raise CanonicalError(f"{path}: key {k!r} is not a string")
            _check(v, f"{path}.{k}")
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check(v, f"{path}[{i}]")
        return
    raise CanonicalError(f"{path}: {type(obj).__name__} is not a JSON value")


def receipt_id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- sealing -----------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One ledger line. ``outcome``/``tier`` are the stored verdict, for display only."""
    line: int
    id: str
    prev: str | None
    kind: str
    profile: str
    round_id: str
    sealed_at: str
    outcome: str | None = None
    tier: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ENTRY_KEYS}

    def to_line(self) -> bytes:
        return canonical_json(self.to_dict()) + b"\n"


@dataclass(frozen=True)
class Sealed:
    id: str
    data: bytes                 # canonical bytes, exactly what the receipt file holds
    receipt: dict[str, Any]     # the receipt with its seal
    entry: Entry                # the ledger line to append (line number not yet known: 0)


def seal(receipt: Mapping[str, Any], prev: str | None, sealed_at: str) -> Sealed:
    """Add the seal to a copy of ``receipt`` and compute its id and ledger line."""
    if "seal" in receipt:
        raise ValueError("receipt is already sealed; a sealed receipt is never re-sealed")
    sealed = dict(receipt)
    sealed["seal"] = {"prev": prev, "sealed_at": sealed_at}
    data = canonical_json(sealed)
    rid = receipt_id(data)
    return Sealed(rid, data, sealed, entry_for(rid, sealed, line=0))


def entry_for(rid: str, receipt: Mapping[str, Any], line: int) -> Entry:
    """The ledger line a sealed receipt implies; ``verify`` compares lines against it."""
    verdict = receipt.get("verdict") if isinstance(receipt.get("verdict"), Mapping) else {}
    profile = receipt.get("profile") if isinstance(receipt.get("profile"), Mapping) else {}
    s = receipt.get("seal") if isinstance(receipt.get("seal"), Mapping) else {}
    return Entry(line=line, id=rid, prev=s.get("prev"), kind=str(receipt.get("kind", "")),
                 profile=str(profile.get("name", "")), round_id=str(receipt.get("round_id", "")),
                 sealed_at=str(s.get("sealed_at", "")), outcome=verdict.get("outcome"), tier=verdict.get("tier"))


# --- reading the ledger ------------------------------------------------------

class Receipts(Mapping[str, Receipt]):
    """A ledger's sealed receipts, each read once into its typed value, in ledger order: what every
    reader of the ledger (pins, reruns, history, rescoring, the lock's checks) reads. A receipt that
    hashes to its id but cannot be read is kept aside with why (``unreadable``), never dropped in
    silence: the checks that cite it name it."""

    def __init__(self, typed: Mapping[str, Receipt], unreadable: Mapping[str, str] | None = None) -> None:
        self._typed = dict(typed)
        self.unreadable: dict[str, str] = dict(unreadable or {})

    @classmethod
    def read(cls, docs: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> "Receipts":
        typed: dict[str, Receipt] = {}
        bad: dict[str, str] = {}
        for rid, doc in (docs.items() if isinstance(docs, Mapping) else docs):
            try:
                typed[rid] = doc if isinstance(doc, Receipt) else Receipt.from_dict(doc)
            except (ReceiptError, TypeError, ValueError) as e:
                bad[rid] = f"{type(e).__name__}: {e}"
        return cls(typed, bad)

    def __getitem__(self, rid: str) -> Receipt:
        return self._typed[rid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._typed)

    def __len__(self) -> int:
        return len(self._typed)


@dataclass(frozen=True)
class Problem:
    """Something wrong in the ledger, a receipt or the lock, named precisely."""
    code: str                   # stable, e.g. "receipt-changed", "broken-link", "orphan"
    message: str
    file: str = ""
    line: int | None = None
    receipt: str | None = None
    slot: str | None = None
    fatal: bool = True          # False only for harmless findings (an orphan receipt)

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line is not None else "")
        rid = f" [{self.receipt[:12]}]" if self.receipt else ""
        slot = f" {self.slot}:" if self.slot else ""
        return f"{where}{rid}{slot} {self.code}: {self.message}".strip()


def receipt_file(rid: str) -> str:
    return f"{RECEIPTS_DIR}/{rid}.json"


def find_round(entries: list[Entry], round_id: str) -> Entry | None:
    """The entry that sealed ``round_id``, if any: a round is banked once."""
    return next((e for e in entries if e.round_id == round_id), None) if round_id else None


def parse_ledger(text: str) -> tuple[list[Entry], list[Problem]]:
    """Parse ``ledger.jsonl``; every line that is not a well-formed entry is a Problem."""
    entries: list[Entry] = []
    problems: list[Problem] = []
    lines = text.split("\n")
    torn = lines[-1] != ""          # a complete file ends with a newline
    if not torn:
        lines = lines[:-1]
    for n, raw in enumerate(lines, start=1):
        why = _entry_error(raw)
        if why is None:
            d = loads(raw)
            entries.append(Entry(line=n, **{k: d[k] for k in ENTRY_KEYS}))
            continue
        if torn and n == len(lines):
            why = f"torn last line (no newline; an interrupted append): {why or 'incomplete'}"
        problems.append(Problem("malformed-line", why or "no newline at end", LEDGER_FILE, n))
    return entries, problems


def _entry_error(raw: str) -> str | None:
    try:
        d = loads(raw)
    except ValueError as e:
        return str(e)
    if not isinstance(d, dict):
        return "not a JSON object"
    if set(d) != set(ENTRY_KEYS):
        return f"expected keys {sorted(ENTRY_KEYS)}, got {sorted(d)}"
    for k in ("id", "kind", "profile", "round_id", "sealed_at"):
        if not isinstance(d[k], str):
            return f"'{k}' is not a string"
    if not _is_id(d["id"]) or not (d["prev"] is None or _is_id(d["prev"])):
        return "'id' and 'prev' must be sha256 hex digests (prev may be null)"
    return None


def _is_id(s: Any) -> bool:
    return isinstance(s, str) and len(s) == 64 and all(c in "0123456789abcdef" for c in s)


# --- verification ------------------------------------------------------------

def verify(entries: Iterable[Entry], load_receipt: Callable[[str], bytes | None]) -> list[Problem]:
    """Check every entry against its receipt file and the chain of prev links.

    ``load_receipt(id)`` returns the receipt file's bytes, or None when absent.
    A deleted, inserted or reordered line breaks a prev link; a changed byte
    changes the id; an edited line disagrees with the sealed receipt.
    """
    problems: list[Problem] = []
    expected_prev: str | None = None
    seen: dict[str, int] = {}
    for e in entries:
        p = _problem_factory(e)
        if e.id in seen:
            problems.append(p("duplicate", f"receipt already sealed at line {seen[e.id]}"))
        seen.setdefault(e.id, e.line)
        if e.prev != expected_prev:
            problems.append(p("broken-link", f"prev is {_short(e.prev)} but the line before holds "
                                             f"{_short(expected_prev)} (a line was deleted, inserted or moved)"))
        expected_prev = e.id
        problems.extend(_check_receipt(e, load_receipt(e.id), p))
    return problems


def _problem_factory(e: Entry) -> Callable[..., Problem]:
    def make(code: str, message: str, file: str = LEDGER_FILE) -> Problem:
        return Problem(code, message, file, e.line, e.id)
    return make


def _check_receipt(e: Entry, data: bytes | None, p: Callable[..., Problem]) -> list[Problem]:
    rf = receipt_file(e.id)
    if data is None:
        return [p("missing-receipt", f"{rf} does not exist")]
    actual = receipt_id(data)
    if actual != e.id:
        return [p("receipt-changed", f"content hashes to {_short(actual)}, not its id: the file was modified", rf)]
    try:
        receipt = loads(data)
    except ValueError as ex:
        return [p("receipt-malformed", str(ex), rf)]
    if not isinstance(receipt, dict):
        return [p("receipt-malformed", "not a JSON object", rf)]
    out: list[Problem] = []
    try:
        canonical = canonical_json(receipt) == data
    except CanonicalError:
        canonical = False
    if not canonical:
        out.append(p("not-canonical", "file bytes are not the canonical form of its content", rf))
    if not isinstance(receipt.get("seal"), dict):
        return out + [p("unsealed", "receipt has no seal", rf)]
    implied = entry_for(e.id, receipt, e.line)
    if implied.prev != e.prev:
        out.append(p("seal-mismatch", f"line says prev {_short(e.prev)}, the sealed receipt says {_short(implied.prev)}"))
    for k in ENTRY_KEYS[2:]:
        if getattr(implied, k) != getattr(e, k):
            out.append(p("line-mismatch", f"'{k}' is {getattr(e, k)!r} on the line but {getattr(implied, k)!r} in the receipt"))
    return out


def orphans(entries: Iterable[Entry], receipt_ids: Iterable[str]) -> list[Problem]:
    """Receipt files no ledger line names: a crash between the two writes. Harmless."""
    named = {e.id for e in entries}
    return [Problem("orphan", "receipt file has no ledger line; it is ignored", receipt_file(r), None, r, fatal=False)
            for r in sorted(set(receipt_ids) - named)]


def _short(rid: str | None) -> str:
    return "null" if rid is None else rid[:12]


# --- a receipt file outside the ledger's own files ------------------------------

LATEST_FILE = "receipt.json"    # the results directory's copy of its newest sealed receipt


@dataclass(frozen=True)
class FileIdentity:
    """Whether a receipt file is one a ledger sealed, and which."""
    status: str                 # "sealed" | "sealed-reformatted" | "modified" | "unsealed" | "unverified"
    receipt_id: str | None      # the ledger id its content matches
    head: bool                  # it is the ledger's newest receipt
    message: str

    @property
    def sealed(self) -> bool:
        return self.status in ("sealed", "sealed-reformatted")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "receipt_id": self.receipt_id, "head": self.head, "message": self.message}


def identify(data: bytes, doc: Any, entries: list[Entry] | None) -> FileIdentity:
    """What ``data`` (a receipt file's bytes; ``doc`` its JSON) is, against a ledger's
    ``entries`` (None: no ledger was found beside the file)."""
    has_seal = isinstance(doc, Mapping) and isinstance(doc.get("seal"), Mapping)
    if entries is None:
        if has_seal:
            return FileIdentity("unverified", None, False, "it carries a seal, but no ledger was found beside it "
                                "to check the seal against")
        return FileIdentity("unsealed", None, False, "it was never sealed: no ledger vouches for these numbers")
    ids = {e.id for e in entries}
    head = entries[-1].id if entries else None
    rid = receipt_id(data)
    if rid not in ids and isinstance(doc, Mapping):
        try:
            canon = receipt_id(canonical_json(doc))
        except CanonicalError:
            canon = None
        if canon in ids:
            return FileIdentity("sealed-reformatted", canon, canon == head,
                                f"its content is sealed receipt {_short(canon)}, re-formatted (same values, other bytes)")
    if rid in ids:
        where = "the ledger's newest" if rid == head else "an earlier receipt of the ledger, not its newest"
        return FileIdentity("sealed", rid, rid == head, f"sealed receipt {_short(rid)}, {where}")
    if has_seal:
        return FileIdentity("modified", None, False, f"it carries a seal but hashes to {_short(rid)}, which no "
                            "ledger line names: it was changed after sealing, and its figures are not the sealed ones")
    return FileIdentity("unsealed", None, False, "it was never sealed: no ledger vouches for these numbers")


def check_latest(entries: list[Entry], data: bytes | None) -> list[Problem]:
    """``receipt.json``, when present, must be byte for byte the ledger's newest receipt
    (absent, it vouches for nothing and is not missed: the ledger is complete without it)."""
    if not entries or data is None:
        return []
    try:
        doc = loads(data)
    except ValueError:
        doc = None
    ident = identify(data, doc, entries)
    if ident.status == "sealed" and ident.head:
        return []
    return [Problem("latest-changed", f"it is not the ledger's newest receipt {_short(entries[-1].id)}: "
                    f"{ident.message}", LATEST_FILE, receipt=entries[-1].id)]


# --- re-scoring --------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    id: str
    round_id: str
    old_outcome: str | None     # as stored in the sealed receipt (informational)
    old_tier: str | None
    new_outcome: str | None     # recomputed now
    new_tier: str | None
    new_verdict: dict[str, Any] | None = None
    error: str | None = None

    @property
    def changed(self) -> bool:
        return (self.old_outcome, self.old_tier) != (self.new_outcome, self.new_tier)


def rescore(receipts: Receipts, decide: Callable[[Receipt, Any], Any], rules: Any = None,
            rules_of: Callable[[Receipt], Any] | None = None) -> list[Row]:
    """Re-derive the verdict of every round decided under its profile's rules, with
    ``decide(receipt, rules)``.

    ``receipts`` is the ledger read once, in ledger order. ``rules`` applies to every receipt; when
    None, ``rules_of(receipt)`` gives each receipt its own (by default the rules it was sealed under).
    Kinds decided under other rules (a bisection step's split rates, a matrix's family) and noise
    receipts give no row. Nothing is written: the stored verdict stays as sealed, and the rows say
    where the recomputation differs; a receipt that could not be read is a row with its error.
    """
    rows = [Row(id=rid, round_id="", old_outcome=None, old_tier=None, new_outcome=None, new_tier=None, error=why)
            for rid, why in receipts.unreadable.items()]   # one unreadable receipt must not hide the rest
    for rid, r in receipts.items():
        if not kinds.of(r.kind).profile_rules:
            continue
        old = r.verdict
        base = dict(id=rid, round_id=r.round_id, old_outcome=old.outcome if old else None,
                    old_tier=old.tier if old else None)
        try:
            v = decide(r, rules if rules is not None else (rules_of or _sealed_rules)(r))
        except Exception as e:  # one receipt the rules cannot judge must not hide the rest either
            rows.append(Row(**base, new_outcome=None, new_tier=None, error=f"{type(e).__name__}: {e}"))
            continue
        rows.append(Row(**base, new_outcome=v.outcome, new_tier=v.tier, new_verdict=v.to_dict()))
    return rows


def _sealed_rules(r: Receipt) -> Any:
    return r.rules
