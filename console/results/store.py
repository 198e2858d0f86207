"""The file layer under the ledger and the lock: durable writes, locked appends, reads.

Ordering is the whole point: a receipt file is complete and on disk before a
ledger line names it, so a crash at any instant leaves either nothing, or an
orphan receipt (harmless, reported and ignored), or a fully sealed round.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import tomlkit

from console.clock import utc_now  # noqa: F401 - the seal's time; older callers import it from here
from console.core.provenance import ledger as L
from console.core.records.receipt import Receipt
from console.core.records.untrusted import loads
from console.core.provenance.reruns import prior_problems
from console.errors import UsageError
from console.files import MAX_FILE_BYTES, read_file


# --- reading the console's JSON files (receipts, records) ---------------------------

def read_json(path: str | os.PathLike[str], what: str, hint: str, limit: int = MAX_FILE_BYTES) -> tuple[bytes, Any]:
    """The bytes of a JSON file and the document they hold, or a usage error naming the file."""
    data = read_file(path, what, hint, limit)
    try:
        return data, loads(data)
    except ValueError as e:
        raise UsageError(f"cannot read {path} as {what}: {e}", hint) from None


# --- durable writes ------------------------------------------------------------

def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``path`` survive a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


# --- the ledger ----------------------------------------------------------------

def seal_into(out_dir: str | os.PathLike[str], receipt: Mapping[str, Any], sealed_at: str | None = None) -> str:
    """Seal ``receipt`` as the next round of ``out_dir``'s ledger; return its id.

    The flock serialises concurrent rounds writing to the same directory, so
    each sees the true previous id.
    """
    out = Path(out_dir)
    (out / L.RECEIPTS_DIR).mkdir(parents=True, exist_ok=True)
    with _locked_ledger(out) as f:
        data = _drop_torn_tail(f)
        prev = _last_id(data)
        sealed = L.find_round(L.parse_ledger(data.decode("utf-8", "replace"))[0], receipt.get("round_id"))
        if sealed:
            # One round, one line: a resumed or retried round must not be banked twice.
            raise AlreadySealed(f"round {receipt.get('round_id')} is already sealed in {out / L.LEDGER_FILE} "
                                f"as receipt {sealed.id[:12]}")
        s = L.seal(receipt, prev, sealed_at or utc_now())
        path = out / L.receipt_file(s.id)
        if not (path.exists() and path.read_bytes() == s.data):
            atomic_write(path, s.data)
        f.seek(0, os.SEEK_END)
        _write_all(f.fileno(), s.entry.to_line())
        os.fsync(f.fileno())
    return s.id


class _LockedFile:
    def __init__(self, path: Path):
        new = not path.exists()
        self.f = open(path, "a+b")
        if new:
            fsync_dir(path.parent)

    def __enter__(self):
        fcntl.flock(self.f.fileno(), fcntl.LOCK_EX)
        return self.f

    def __exit__(self, *exc: Any) -> None:
        fcntl.flock(self.f.fileno(), fcntl.LOCK_UN)
        self.f.close()


def _locked_ledger(out: Path) -> _LockedFile:
    return _LockedFile(out / L.LEDGER_FILE)


def _drop_torn_tail(f: Any) -> bytes:
    """Cut a half-written last line (a crash mid-append) so the next line starts clean.

    Nothing sealed is lost: that line's receipt file stays, as an orphan.
    """
    f.seek(0)
    data = f.read()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        f.truncate(keep)
        os.fsync(f.fileno())
        data = data[:keep]
    return data


class AlreadySealed(RuntimeError):
    pass


def _last_id(data: bytes) -> str | None:
    lines = data.splitlines()
    if not lines:
        return None
    try:
        return json.loads(lines[-1])["id"]
    except (ValueError, KeyError, TypeError):
        # Chaining onto an unreadable line would hide the damage; make the operator look.
        raise RuntimeError("the last ledger line is malformed; run `console ledger verify` first") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_ledger(out_dir: str | os.PathLike[str]) -> tuple[list[L.Entry], list[L.Problem]]:
    path = Path(out_dir) / L.LEDGER_FILE
    if not path.exists():
        return [], []
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        return [], [L.Problem("malformed-line", f"not UTF-8: {e}", str(path))]
    entries, problems = L.parse_ledger(text)
    return entries, [_absolute(p, Path(out_dir)) for p in problems]


def load_receipt(out_dir: str | os.PathLike[str], rid: str) -> bytes | None:
    path = Path(out_dir) / L.receipt_file(rid)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def receipt_ids(out_dir: str | os.PathLike[str]) -> list[str]:
    d = Path(out_dir) / L.RECEIPTS_DIR
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def verify_dir(out_dir: str | os.PathLike[str]) -> list[L.Problem]:
    """Every problem in ``out_dir``'s ledger and receipts, files named by full path."""
    out = Path(out_dir)
    entries, problems = read_ledger(out)
    loaded: dict[str, bytes | None] = {}        # each receipt is read once for every check

    def load(rid: str) -> bytes | None:
        if rid not in loaded:
            loaded[rid] = load_receipt(out, rid)
        return loaded[rid]
    problems += [_absolute(p, out) for p in L.verify(entries, load)]
    problems += [_absolute(p, out) for p in L.orphans(entries, receipt_ids(out))]
    problems += [_absolute(p, out) for p in prior_problems(L.Receipts.read(_receipts(entries, load)))]
    latest = out / L.LATEST_FILE
    problems += [_absolute(p, out) for p in L.check_latest(entries, latest.read_bytes() if latest.exists() else None)]
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def _absolute(p: L.Problem, out: Path) -> L.Problem:
    if not p.file or os.path.isabs(p.file):
        return p
    return L.Problem(p.code, p.message, str(out / p.file), p.line, p.receipt, p.slot, p.fatal)


def ledger_beside(path: str | os.PathLike[str]) -> Path | None:
    """The results directory a receipt file belongs to: its own directory (``receipt.json``)
    or the one above ``receipts/``; None when neither holds a ledger."""
    p = Path(path).resolve()
    for d in (p.parent, p.parent.parent):
        if (d / L.LEDGER_FILE).is_file():
            return d
    return None


def identify_file(path: str | os.PathLike[str], data: bytes, doc: Any) -> tuple[L.FileIdentity, Path | None]:
    """Whether the receipt file at ``path`` is a sealed receipt of the ledger beside it."""
    out = ledger_beside(path)
    return L.identify(data, doc, read_ledger(out)[0] if out else None), out


def ledger_receipts(out_dir: str | os.PathLike[str]) -> L.Receipts:
    """Sealed receipts in ledger order, only those whose bytes still hash to their id, each read
    once into its typed value (``core.provenance.ledger.Receipts``)."""
    out = Path(out_dir)
    entries, _ = read_ledger(out)
    return L.Receipts.read(_receipts(entries, lambda rid: load_receipt(out, rid)))


def _receipts(entries: list[L.Entry], load: Callable[[str], bytes | None]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for e in entries:
        data = load(e.id)
        if data is not None and L.receipt_id(data) == e.id and e.id not in found:
            try:
                found[e.id] = loads(data)
            except ValueError:      # hashes to its id yet is not JSON: verify names it, nobody reads it
                continue
    return found


def rescore_dir(out_dir: str | os.PathLike[str], decide: Callable[[Any, Any], Any], rules: Any = None,
                rules_of: Callable[[Receipt], Any] | None = None) -> list[L.Row]:
    return L.rescore(ledger_receipts(out_dir), decide, rules, rules_of)


# --- reference.lock --------------------------------------------------------------

def read_lock(path: str | os.PathLike[str]) -> tomlkit.TOMLDocument:
    """The lock as a comment-keeping document; a malformed file is a usage error."""
    try:
        return _read_lock(path)
    except (tomlkit.exceptions.TOMLKitError, UnicodeDecodeError, OSError, RecursionError) as e:
        raise UsageError(f"{path}: not a readable reference.lock: {e}",
                         "Fix the TOML (comments are kept), or restore it from version control.") from None


def _read_lock(path: str | os.PathLike[str]) -> tomlkit.TOMLDocument:
    return tomlkit.parse(read_file(path, "a reference.lock", "Give the path of a reference.lock.",
                                   16 << 20).decode("utf-8"))


def write_lock(path: str | os.PathLike[str], doc: tomlkit.TOMLDocument) -> None:
    atomic_write(path, tomlkit.dumps(doc).encode("utf-8"))
