"""The queue on disk: one SQLite file in the results directory, no server.

WAL mode, and every change in a ``BEGIN IMMEDIATE`` transaction: one writer at a time, readers
never blocked, and a process killed mid-write leaves the last committed state (SQLite's journal
is the crash safety; nothing here rewrites a file in place). Each state change is also a row in
``history`` with its time, so the queue's past is auditable.
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..core.decisions import queue as policy
from ..core.decisions.queue import Candidate, State
from ..errors import UsageError
from ..clock import utc_now

FILE = "queue.sqlite"
SCHEMA = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    author        TEXT NOT NULL,
    source        TEXT NOT NULL,              -- the candidate spec as submitted (DIR, REPO@REF, pypi:…, .patch)
    profile       TEXT NOT NULL,              -- the profile file it is measured under
    state         TEXT NOT NULL,
    reason        TEXT NOT NULL DEFAULT '',
    submitted_at  TEXT NOT NULL,
    ready_at      TEXT,                       -- NULL while a draft: its place is when it became ready
    files         TEXT NOT NULL DEFAULT '[]', -- paths it changes relative to main (JSON)
    fingerprint   BLOB,                       -- packed 64-bit shingle hashes of its diff
    worker        TEXT,                       -- host:pid of the worker running it, or slurm:JOBID
    node          TEXT,                       -- where its last round ran
    receipt_id    TEXT,                       -- its last sealed round
    results       TEXT,                       -- that round's results directory
    merged_commit TEXT,
    rounds        INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS history (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    candidate  INTEGER NOT NULL REFERENCES candidates(id),
    at         TEXT NOT NULL,
    state      TEXT NOT NULL,
    reason     TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '{}'
);
"""


@dataclass(frozen=True)
class Row:
    """A candidate as stored: the policy's view plus what the worker and the person need."""
    candidate: Candidate
    source: str
    profile: str
    fingerprint: frozenset[int]
    worker: str | None
    node: str | None
    receipt_id: str | None
    results: str | None
    merged_commit: str | None
    rounds: int

    @property
    def id(self) -> int:
        return self.candidate.id

    def to_dict(self) -> dict[str, Any]:
        c = self.candidate
        return {"id": c.id, "author": c.author, "state": c.state.value, "reason": c.reason,
                "source": self.source, "profile": self.profile, "submitted_at": c.submitted_at,
                "ready_at": c.ready_at, "files": list(c.files), "worker": self.worker, "node": self.node,
                "receipt_id": self.receipt_id, "results": self.results, "merged_commit": self.merged_commit,
                "rounds": self.rounds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Row":
        """The row of :meth:`to_dict` (a batch job's spec); the fingerprint is not in it."""
        c = Candidate(id=int(d["id"]), author=str(d["author"]), state=State(d["state"]),
                      submitted_at=d["submitted_at"], ready_at=d.get("ready_at"),
                      files=tuple(d.get("files") or ()), reason=str(d.get("reason", "")))
        return cls(c, d["source"], d["profile"], frozenset(), d.get("worker"), d.get("node"), d.get("receipt_id"),
                   d.get("results"), d.get("merged_commit"), int(d.get("rounds") or 0))


def pack(fp: frozenset[int]) -> bytes:
    return struct.pack(f">{len(fp)}Q", *sorted(fp))


def unpack(blob: bytes | None) -> frozenset[int]:
    if not blob:
        return frozenset()
    return frozenset(struct.unpack(f">{len(blob) // 8}Q", blob))


def here() -> str:
    """This worker's name in the queue: host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class QueueStore:
    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.db.row_factory = sqlite3.Row       # columns by name, without asking the schema per row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(_DDL)         # idempotent: IF NOT EXISTS, under SQLite's own lock
        except sqlite3.DatabaseError as e:
            raise UsageError(f"{self.path} is not a queue this console can read ({e})",
                             "Move it aside; the receipts and the ledger do not depend on it.") from None
        self._check_schema()

    def _check_schema(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None:
            with self.writing():
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
        elif int(row[0]) != SCHEMA:
            raise UsageError(f"{self.path} has queue schema {row[0]}; this console reads {SCHEMA}",
                             "Use the console version that made it.")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """One writer at a time: the lock is taken at BEGIN, not at the first write."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # --- reading ---------------------------------------------------------------------
    def rows(self) -> list[Row]:
        return [self._row(r) for r in self.db.execute("SELECT * FROM candidates ORDER BY id")]

    def get(self, cid: int) -> Row:
        r = self.db.execute("SELECT * FROM candidates WHERE id=?", (cid,)).fetchone()
        if r is None:
            raise UsageError(f"no candidate #{cid} in {self.path}", "`console queue list` shows the queue.")
        return self._row(r)

    def history(self, cid: int | None = None) -> list[dict[str, Any]]:
        q = "SELECT seq, candidate, at, state, reason, detail FROM history"
        args: tuple = ()
        if cid is not None:
            q, args = q + " WHERE candidate=?", (cid,)
        return [{**dict(h), "detail": json.loads(h["detail"])} for h in self.db.execute(q + " ORDER BY seq", args)]

    def merged_fingerprints(self) -> list[tuple[int, frozenset[int]]]:
        return [(i, unpack(fp)) for i, fp in
                self.db.execute("SELECT id, fingerprint FROM candidates WHERE state=?", (State.MERGED.value,))]

    @staticmethod
    def _row(d: sqlite3.Row) -> Row:
        c = Candidate(id=d["id"], author=d["author"], state=State(d["state"]), submitted_at=d["submitted_at"],
                      ready_at=d["ready_at"], files=tuple(json.loads(d["files"])), reason=d["reason"])
        return Row(c, d["source"], d["profile"], unpack(d["fingerprint"]), d["worker"], d["node"],
                   d["receipt_id"], d["results"], d["merged_commit"], d["rounds"])

    # --- writing ---------------------------------------------------------------------
    def submit(self, *, author: str, source: str, profile: str, state: State, reason: str,
               files: list[str], fingerprint: frozenset[int], detail: dict[str, Any] | None = None) -> int:
        now = utc_now(micro=True)
        with self.writing() as db:
            cur = db.execute(
                "INSERT INTO candidates (author, source, profile, state, reason, submitted_at, ready_at, files,"
                " fingerprint) VALUES (?,?,?,?,?,?,?,?,?)",
                (author, source, profile, state.value, reason, now,
                 now if state in (State.QUEUED, State.REVIEW) else None, json.dumps(files), pack(fingerprint)))
            cid = int(cur.lastrowid)
            self._log(db, cid, now, state, reason, detail)
        return cid

    def move(self, cid: int, state: State, reason: str, detail: dict[str, Any] | None = None,
             expect: frozenset[State] | None = None, **fields: Any) -> Row:
        """Change a candidate's state (and fields) and log it, in one transaction. With ``expect``,
        only from those states (another worker or person may have moved it meanwhile)."""
        now = utc_now(micro=True)
        with self.writing() as db:
            row = self.get(cid)
            if expect is not None and row.candidate.state not in expect:
                raise policy.Refusal(f"#{cid} is {row.candidate.state.value} now, not "
                                     f"{' or '.join(sorted(s.value for s in expect))}")
            sets = {"state": state.value, "reason": reason, **fields}
            if state is State.QUEUED and row.candidate.ready_at is None:
                sets["ready_at"] = now          # a draft made ready queues from now
            db.execute(f"UPDATE candidates SET {', '.join(f'{k}=?' for k in sets)} WHERE id=?",
                       (*sets.values(), cid))
            self._log(db, cid, now, state, reason, detail)
        return self.get(cid)

    def annotate(self, cid: int, **fields: Any) -> None:
        """Fields that say where a running round is (its results, its node); the state is unchanged."""
        with self.writing() as db:
            db.execute(f"UPDATE candidates SET {', '.join(f'{k}=?' for k in fields)} WHERE id=?", (*fields.values(), cid))

    def book(self, worker: str) -> Row | None:
        """Take the next bookable candidate for ``worker``: atomic, so two workers never take one."""
        with self.writing() as db:
            plan = policy.plan([r.candidate for r in self.rows()])
            if not plan.bookable:
                return None
            cid = plan.bookable[0]
            now = utc_now(micro=True)
            db.execute("UPDATE candidates SET state=?, reason=?, worker=?, rounds=rounds+1 WHERE id=?",
                       (State.RUNNING.value, f"booked by {worker}", worker, cid))
            self._log(db, cid, now, State.RUNNING, f"booked by {worker}", {})
        return self.get(cid)

    @staticmethod
    def _log(db: sqlite3.Connection, cid: int, at: str, state: State, reason: str,
             detail: dict[str, Any] | None) -> None:
        db.execute("INSERT INTO history (candidate, at, state, reason, detail) VALUES (?,?,?,?,?)",
                   (cid, at, state.value, reason, json.dumps(detail or {}, sort_keys=True)))
