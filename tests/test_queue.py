"""The embedded queue: submissions resolved for real (demo sources, git apply), SQLite on disk.

No round runs here (tests/integration/test_queue_rounds.py runs them); this is the queue's
bookkeeping: who is refused and why, the order of booking, history, crash and concurrency safety.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from console.queueing import worker as queueing
from console.cli import main
from console.core.decisions.queue import Refusal, State
from console.paths import DEMO_CANDIDATES, DEMO_PROFILE
from console.queueing.store import FILE, QueueStore

FAST, NOISE, INFLATE = (str(DEMO_CANDIDATES / f"{n}.patch") for n in ("fast", "noise", "inflate"))


@pytest.fixture
def store(tmp_path):
    s = QueueStore(tmp_path)
    yield s
    s.close()


def _submit(store, src, author, draft=False, profile=DEMO_PROFILE):
    return queueing.submit(store, profile, src, author, draft)


def test_three_candidates_of_two_authors_book_in_order_and_the_second_of_one_author_waits(store):
    a1 = _submit(store, FAST, "alice")
    a2 = _submit(store, NOISE, "alice")
    b1 = _submit(store, "inflate", "bob")           # the demo's candidates go by name too
    assert [r.candidate.state for r in (a1, a2, b1)] == [State.QUEUED] * 3
    assert a1.candidate.files == ("src/model.c",) and a1.source == FAST
    first = store.book("w:1")
    assert first.id == a1.id and first.candidate.state is State.RUNNING
    # alice's second waits for her first (running); bob's is next
    assert store.book("w:1").id == b1.id
    assert store.book("w:1") is None
    store.move(a1.id, State.NOT_MERGEABLE, "no gain beyond noise")
    assert store.book("w:1").id == a2.id
    states = [(h["candidate"], h["state"]) for h in store.history()]
    assert states == [(1, "queued"), (2, "queued"), (3, "queued"), (1, "running"), (3, "running"),
                      (1, "not-mergeable"), (2, "running")]
    assert all(h["at"].endswith("Z") for h in store.history())


def test_a_draft_made_ready_is_booked_from_when_it_became_ready(store):
    draft = _submit(store, FAST, "alice", draft=True)
    assert draft.candidate.state is State.DRAFT and draft.candidate.ready_at is None
    later = _submit(store, NOISE, "bob")
    assert store.book("w:1").id == later.id            # the draft is never booked
    ready = store.move(draft.id, State.QUEUED, "made ready", expect=frozenset({State.DRAFT}))
    assert ready.candidate.ready_at > later.candidate.ready_at
    assert store.book("w:1").id == draft.id


@pytest.mark.parametrize("src, why", [
    ("touch-apparatus", "it changes the measuring apparatus: src/bench.c"),
    ("/no/such.patch", "its sources do not resolve: patch /no/such.patch does not exist"),
    (str(DEMO_PROFILE.parent / "demo" / "reference.lock"), "its sources do not resolve"),
])
def test_candidates_that_cannot_be_scored_are_refused_at_submission_with_the_reason(store, src, why):
    row = _submit(store, src, "carol")
    assert row.candidate.state is State.REFUSED and why in row.candidate.reason, row.candidate.reason
    assert store.book("w:1") is None


def test_a_submission_without_a_usable_profile_is_refused_and_kept(store, tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text("name = 'x'\n[gate]\nsignificance = 'high'\n")
    row = _submit(store, FAST, "dan", profile=bad)
    assert row.candidate.state is State.REFUSED and "no usable profile" in row.candidate.reason
    assert str(bad) in row.candidate.reason


def test_a_copy_of_a_merged_candidate_is_refused(store):
    orig = _submit(store, FAST, "alice")
    store.move(orig.id, State.MERGEABLE, "accepted, tier XL")
    store.move(orig.id, State.MERGED, "merged", merged_commit="abc123")
    copy = _submit(store, FAST, "mallory")
    assert copy.candidate.state is State.REFUSED
    assert f"is in merged #{orig.id}" in copy.candidate.reason and "100%" in copy.candidate.reason
    other = _submit(store, NOISE, "bob")
    assert other.candidate.state is State.QUEUED
    detail = store.history(other.id)[0]["detail"]
    assert detail["copy"]["containment"] < 0.7


def test_an_author_is_required(store):
    with pytest.raises(Refusal, match="--author"):
        _submit(store, FAST, " ")


def test_a_worker_that_died_mid_round_gives_its_candidate_back(store):
    row = _submit(store, FAST, "alice")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = queueing.here().split(":")[0]
    store.book(f"{host}:{dead.pid}")
    said = []
    queueing.reclaim(store, said.append)
    back = store.get(row.id)
    assert back.candidate.state is State.QUEUED and "ended mid-round" in back.candidate.reason, said


def _book_in(directory: str, n: int, out: "multiprocessing.Queue") -> None:
    s = QueueStore(Path(directory))
    got = []
    for _ in range(n):
        r = s.book(f"proc:{os.getpid()}")
        if r is not None:
            got.append(r.id)
    out.put(got)


def test_concurrent_workers_never_book_the_same_candidate(tmp_path):
    s = QueueStore(tmp_path)
    authors = [f"a{i}" for i in range(12)]
    for a in authors:
        s.submit(author=a, source=FAST, profile=str(DEMO_PROFILE), state=State.QUEUED, reason="queued",
                 files=["src/engine.c"], fingerprint=frozenset())
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_book_in, args=(str(tmp_path), 6, out)) for _ in range(4)]
    for p in procs:
        p.start()
    booked = [i for _ in procs for i in out.get(timeout=60)]
    for p in procs:
        p.join(timeout=60)
    assert sorted(booked) == list(range(1, 13)), booked      # each once, none twice
    assert len(s.history()) == 24


def test_a_writer_killed_mid_transaction_leaves_the_last_committed_state(tmp_path):
    s = QueueStore(tmp_path)
    cid = s.submit(author="a", source=FAST, profile=str(DEMO_PROFILE), state=State.QUEUED, reason="queued",
                   files=[], fingerprint=frozenset())
    code = (f"import sqlite3, os, signal; db = sqlite3.connect({str(tmp_path / FILE)!r}, isolation_level=None); "
            "db.execute('BEGIN IMMEDIATE'); db.execute(\"UPDATE candidates SET state='merged'\"); "
            "db.execute(\"INSERT INTO history (candidate, at, state, reason) VALUES (1, 'x', 'merged', 'x')\"); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    r = subprocess.run([sys.executable, "-c", code])
    assert r.returncode == -signal.SIGKILL
    again = QueueStore(tmp_path)
    assert again.get(cid).candidate.state is State.QUEUED and len(again.history()) == 1
    assert again.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert again.book("w:1").id == cid          # and the queue takes writes again


def test_a_file_that_is_not_a_queue_is_named(tmp_path):
    (tmp_path / FILE).write_bytes(b"not a database at all" * 100)
    code = main(["queue", "list", "--dir", str(tmp_path)])
    assert code == 2


def test_the_command_line_round_trip(tmp_path, capsys):
    d = str(tmp_path)
    assert main(["queue", "submit", "fast", "--author", "alice", "--dir", d]) == 0
    assert main(["queue", "submit", "noise", "--author", "alice", "--dir", d, "--draft"]) == 0
    assert main(["queue", "submit", "touch-apparatus", "--author", "bob", "--dir", d]) == 1
    capsys.readouterr()
    assert main(["queue", "list", "--dir", d, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["queue"]
    assert [(r["id"], r["state"]) for r in rows] == [(1, "queued"), (2, "draft"), (3, "refused")]
    assert rows[1]["waiting"].startswith("draft") and rows[0]["waiting"] == ""
    assert main(["queue", "ready", "2", "--dir", d]) == 0
    capsys.readouterr()
    assert main(["queue", "list", "--dir", d, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["queue"]
    assert rows[1]["waiting"].startswith("waits for #1 by the same author")
    assert rows[0]["conflicts"] == [2] and rows[1]["conflicts"] == [1]      # both change src/model.c
    assert main(["queue", "list", "--dir", d]) == 0
    assert "waits for #1 by the same author" in capsys.readouterr().out
    assert main(["queue", "merged", "1", "--commit", "c0ffee", "--dir", d]) == 1   # never measured
    assert "did not beat main" in capsys.readouterr().err
    assert main(["queue", "cancel", "2", "--dir", d]) == 0
    assert main(["queue", "show", "2", "--dir", d]) == 0
    shown = capsys.readouterr().out
    assert "draft" in shown and "queued" in shown and "cancelled" in shown
    assert main(["queue", "show", "9", "--dir", d]) == 2
    conn = sqlite3.connect(tmp_path / FILE)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_followed_round_asks_the_queue_from_the_viewers_thread(tmp_path):
    """`queue watch` follows a running round on a worker thread; asking whether the candidate still
    runs must work there (a connection made in another thread would fail) and see changes."""
    import threading
    from console.commands import _still_running
    store = QueueStore(tmp_path)
    cid = store.submit(author="ada", source="fast", profile=str(DEMO_PROFILE), state=State.QUEUED,
                       reason="queued", files=[], fingerprint=frozenset())
    store.book("w:1")
    seen: list[bool] = []
    for change in (None, State.QUEUED):
        if change is not None:
            store.move(cid, change, "requeued: its worker was killed")
        t = threading.Thread(target=lambda: seen.append(_still_running(tmp_path, cid)))
        t.start()
        t.join()
    assert seen == [True, False]


def test_a_candidate_an_earlier_round_decided_is_recorded_as_decided_not_requeued(tmp_path):
    from types import SimpleNamespace

    from console.results import store as results
    from core.receipts import OUTCOME_RECEIPTS
    rid = results.seal_into(tmp_path, OUTCOME_RECEIPTS["slower"]())
    rnd = SimpleNamespace(decided_by=(rid, "r1", "slower", 1))
    said: list[str] = []
    done = queueing._decided_before(SimpleNamespace(id=7), rnd, tmp_path, "decided by round r1 (receipt …)",
                                    said.append)
    assert done.state is State.NOT_MERGEABLE and done.code == 1 and "slower than main" in done.reason
    assert said and said[0].startswith("#7: ")
    assert done.fields["receipt_id"] == rid


def test_the_worker_takes_parity_from_the_gates_stages():
    # one definition of which reason codes are parity's (core.verdict): an accuracy refusal is one
    from console.core.records.verdict import VerdictRecord
    from console.queueing.worker import _parity_passed

    def verdict(*codes: str) -> VerdictRecord:
        return VerdictRecord.from_dict({"outcome": "rejected", "reasons": [{"code": c, "message": c} for c in codes]})
    assert _parity_passed(verdict("claim-unsupported", "guard-rss"))
    for code in ("parity-kl", "scored-path-kl", "timed-path-kl", "accuracy-score"):
        assert not _parity_passed(verdict(code)), code


def test_the_worker_reads_a_sealed_receipts_images_typed_and_keeps_mains():
    # a candidate built to main's very image (a no-op change) keeps it: nothing is removed
    from console.core.records.receipt import Receipt
    from console.queueing.worker import remove_images
    from core.receipts import make_receipt
    d = make_receipt()
    same = {"source": {}, "image_id": "sha256:" + "a" * 64, "base_image_id": "sha256:" + "b" * 64}
    d["builds"] = {"main": same, "candidate": dict(same)}
    sealed = Receipt.from_dict({**d, "seal": {"prev": None, "sealed_at": "x"}})
    assert sealed.frozen
    assert remove_images(sealed) == ["kept main's image sha256:aaaaaaaaaaaa: the next round of this main reuses it"]
