import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console import events as E
from console.results import journal as J

ROOT = Path(__file__).resolve().parents[1]


def round_events(n_reps: int = 3, ended: bool = True) -> list[E.Event]:
    evs: list[E.Event] = [E.RoundStarted(round_id="R1", profile="demo", profile_sha256="s", runtime="local",
                                         host={"cores": 2}, plan={"order": ["main", "candidate"], "reps": n_reps})]
    evs.append(E.PhaseStarted(phase="reps"))
    for i in range(n_reps):
        for b in ("main", "candidate"):
            evs.append(E.RepStarted(build=b, index=i, position=2 * i, phase="timed"))
            evs.append(E.RepDone(rep={"build": b, "phase": "timed", "index": i, "position": 2 * i,
                                      "value": 200.0 + i, "status": "ok", "note": "ünïcode"}))
    if ended:
        evs.append(E.RoundEnded(status="complete", exit_code=0))
    return evs


def write(path: Path, evs) -> None:
    with J.Journal(path) as j:
        for e in evs:
            j.append(e)


def test_events_round_trip_in_order(tmp_path):
    path = J.journal_path(tmp_path, "R1")
    evs = round_events()
    write(path, evs)
    r = J.read_journal(path)
    assert r.events == [e.to_dict() for e in evs]
    assert r.complete and not r.torn_tail and r.damaged_line is None
    assert [type(E.event_from_dict(d)) for d in r.events] == [type(e) for e in evs]
    assert path == tmp_path / "journal" / "R1.jsonl"


def test_a_round_without_round_ended_is_incomplete(tmp_path):
    path = tmp_path / "j.jsonl"
    write(path, round_events(ended=False))
    assert not J.read_journal(path).complete


def test_a_missing_journal_reads_as_empty(tmp_path):
    assert J.read_journal(tmp_path / "nope.jsonl") == J.JournalRead([], False, False)


def test_every_truncation_of_the_last_line_gives_the_complete_prefix(tmp_path):
    full = tmp_path / "full.jsonl"
    evs = round_events()
    write(full, evs)
    data = full.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    prefix = [e.to_dict() for e in evs[:-1]]
    cut = tmp_path / "cut.jsonl"
    for offset in range(last_start, len(data) + 1):
        cut.write_bytes(data[:offset])
        r = J.read_journal(cut)
        if offset == len(data):
            assert r.events == prefix + [evs[-1].to_dict()] and r.complete and not r.torn_tail
        else:
            assert r.events == prefix, offset
            assert r.torn_tail == (offset > last_start), offset
            assert not r.complete and r.damaged_line is None


def test_every_truncation_anywhere_never_raises_and_is_a_prefix(tmp_path):
    full = tmp_path / "full.jsonl"
    evs = [e.to_dict() for e in round_events(2)]
    write(full, evs)
    data = full.read_bytes()
    for offset in range(len(data) + 1):
        r = J.parse_journal(data[:offset])
        assert r.events == evs[:len(r.events)]
        assert r.damaged_line is None
        assert r.good_bytes == len(b"".join(data.splitlines(keepends=True)[:len(r.events)]))


def test_reopening_cuts_a_torn_tail_before_appending(tmp_path):
    path = tmp_path / "j.jsonl"
    evs = round_events(ended=False)
    write(path, evs)
    with open(path, "ab") as f:
        f.write(b'{"kind":"rep_done","rep":{"ind')
    assert J.read_journal(path).torn_tail
    with J.Journal(path) as j:
        j.append(E.Notice(level="warn", code="killed", message="killed"))
    r = J.read_journal(path)
    assert not r.torn_tail and r.events[:-1] == [e.to_dict() for e in evs]
    assert r.events[-1]["kind"] == "notice" and r.events[-1]["code"] == "killed" and not r.complete


def test_damage_before_the_end_is_reported_and_not_repaired(tmp_path):
    path = tmp_path / "j.jsonl"
    write(path, round_events())
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"garbage\n"
    path.write_bytes(b"".join(lines))
    r = J.read_journal(path)
    assert r.damaged_line == 3 and len(r.events) == 2 and not r.torn_tail
    with pytest.raises(J.JournalDamaged, match="line 3"):
        J.Journal(path)


def test_resume_helpers_give_the_plan_and_the_finished_reps(tmp_path):
    path = tmp_path / "j.jsonl"
    evs = round_events(3, ended=False)[:-3]        # killed after main's last rep started
    write(path, evs)
    got = J.read_journal(path).events
    assert J.round_plan(got) == {"order": ["main", "candidate"], "reps": 3}
    reps = J.completed_reps(got)
    assert [(r["build"], r["index"]) for r in reps] == [("main", 0), ("candidate", 0), ("main", 1), ("candidate", 1)]
    assert J.round_plan([]) is None and J.completed_reps([]) == []


def test_events_need_a_kind(tmp_path):
    with J.Journal(tmp_path / "j.jsonl") as j, pytest.raises(ValueError):
        j.append({"no": "kind"})


def test_round_ids_cannot_escape_the_journal_dir(tmp_path):
    for bad in ("", "../x", ".hidden", "a/b"):
        with pytest.raises(ValueError):
            J.journal_path(tmp_path, bad)


CHILD = r"""
import sys
from console.results import journal as J
j = J.Journal(sys.argv[1])
i = 0
while True:
    j.append({"kind": "rep_done", "rep": {"index": i, "log_tail": ["x" * 500] * 8}})
    i += 1
    if i == 20:
        print("ready", flush=True)
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_sigkill_mid_round_leaves_a_readable_prefix(tmp_path, delay):
    path = tmp_path / "j.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout.readline() == b"ready\n"
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(10)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    r = J.read_journal(path)
    assert len(r.events) >= 20 and r.damaged_line is None and not r.complete
    assert [e["rep"]["index"] for e in r.events] == list(range(len(r.events)))
    # a resumed round can append after whatever the kill left
    with J.Journal(path) as j:
        j.append(E.Notice(level="warn", code="killed", message="SIGKILL"))
    after = J.read_journal(path)
    assert after.events[:len(r.events)] == r.events and after.events[-1]["code"] == "killed"
    assert not after.torn_tail


def test_a_torn_write_from_a_killed_writer_is_tolerated(tmp_path):
    # A writer killed between two halves of one line (what a short write or power cut leaves).
    path = tmp_path / "j.jsonl"
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
for i in range(5):
    os.write(fd, ('{"kind":"rep_done","rep":{"index":%d}}\n' % i).encode())
os.write(fd, b'{"kind":"rep_done","rep":{"ind')
os.fsync(fd)
print("ready", flush=True)
time.sleep(60)
os.write(fd, b'ex":5}}\n')
"""
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(10)
        child.stdout.close()
    r = J.read_journal(path)
    assert [e["rep"]["index"] for e in r.events] == [0, 1, 2, 3, 4] and r.torn_tail
