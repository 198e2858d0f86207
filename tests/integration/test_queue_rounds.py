"""A queue worked through on one node: real demo rounds (the local runtime: the queue's
bookkeeping is under test here; tests/integration/test_queue_slurm.py runs the same with Docker
on a SLURM cluster), one of them interrupted.

Three candidates from two authors; the second of one author waits for the first; a worker
interrupted mid-round (SIGINT) seals nothing and gives its candidate back with the reason; one
killed outright (SIGKILL) seals nothing either, and the next worker gives its candidate back;
at the end the ledger verifies and holds every finished round exactly once.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.queueing import worker as queueing
from console.results import store
from console.core.decisions import queue as policy
from console.core.decisions.queue import State
from console.queueing.store import QueueStore

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = [sys.executable, "-m", "console.cli"]
WORK = ["--reps", "2", "--runtime", "local"]     # the queue is under test, not the decision


def _console(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    r = subprocess.run(CONSOLE + list(args), cwd=ROOT, capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, NO_COLOR="1"))
    if check is not None:
        assert r.returncode == check, f"{args}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _bookings(q: QueueStore) -> list[int]:
    return [h["candidate"] for h in q.history() if h["state"] == "running"]


def test_a_queue_worked_on_one_node(tmp_path):
    d = str(tmp_path / "results")
    for src, author in (("fast", "alice"), ("noise", "alice"), ("corrupt-deep", "bob")):
        _console("queue", "submit", src, "--author", author, "--dir", d)

    # a worker interrupted during #1's round: nothing sealed, #1 back in its place with the reason
    worker, seen = _worker_in_parity(d)
    q = QueueStore(Path(d))
    waiting = {w.id: w.reason for w in policy.plan([r.candidate for r in q.rows()]).waiting}
    assert waiting.get(2, "").startswith("waits for #1 by the same author (running)"), waiting
    worker.send_signal(signal.SIGINT)
    rest, _ = worker.communicate(timeout=180)
    assert worker.returncode == 130, (seen + rest)[-3000:]
    first = q.get(1)
    assert first.candidate.state is State.QUEUED and "requeued after interrupted" in first.candidate.reason
    assert not (Path(d) / "demo" / "ledger.jsonl").exists() or not store.read_ledger(Path(d) / "demo")[0]

    # a worker killed outright (SIGKILL) during #1's next round: the next worker finds it gone and
    # gives #1 back before booking; nothing of the killed round is sealed
    worker, seen = _worker_in_parity(d)
    worker.kill()
    worker.wait(timeout=30)
    assert q.get(1).candidate.state is State.RUNNING            # nobody could record anything
    time.sleep(3)                                               # its orphaned engine run ends

    # the worker again: #1 first (its place is kept); alice's second is older than bob's, so it is
    # next once #1 is closed, but waits while #1 is mergeable (open) until #1 is merged
    out = _console("queue", "work", "--dir", d, *WORK).stdout
    assert f"its worker {queueing.here().split(':')[0]}:{worker.pid} is gone; back in the queue" in out, out
    reasons = [h["reason"] for h in q.history(1) if h["state"] == "queued"]
    assert "requeued after interrupted" in reasons[1] and "ended mid-round; nothing was sealed" in reasons[2]
    assert _bookings(q)[:3] == [1, 1, 1], q.history()
    if q.get(1).candidate.state is State.MERGEABLE:
        assert q.get(2).candidate.state is State.QUEUED and "waits for #1" in out
        _console("queue", "merged", "1", "--commit", "c0ffee", "--dir", d)
        _console("queue", "work", "--dir", d, *WORK)
        assert _bookings(q) == [1, 1, 1, 3, 2]
    else:
        assert _bookings(q) == [1, 1, 1, 2, 3]
    assert q.get(3).candidate.state is State.NOT_MERGEABLE and "rejected" in q.get(3).candidate.reason

    # every finished round is in the ledger exactly once, and the ledger verifies
    entries, problems = store.read_ledger(Path(d) / "demo")
    assert not problems and not [p for p in store.verify_dir(Path(d) / "demo") if p.fatal]
    recorded = [q.get(i).receipt_id for i in (1, 2, 3)]
    assert sorted(e.id for e in entries) == sorted(recorded) and len(set(recorded)) == 3


def _worker_in_parity(d: str) -> tuple[subprocess.Popen, str]:
    """`console queue work` started, and read until its round reaches parity."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1")
    worker = subprocess.Popen(CONSOLE + ["queue", "work", "--dir", d, *WORK], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    t0 = time.monotonic()
    while "== parity" not in seen and time.monotonic() - t0 < 600:
        line = worker.stdout.readline()
        if not line:
            break
        seen += line
    assert "== parity" in seen, seen[-3000:]
    return worker, seen
