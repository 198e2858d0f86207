"""Real demo rounds interrupted by Ctrl-C and by SIGKILL: nothing left behind, nothing lost."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.results import journal, store

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = [sys.executable, "-m", "console.cli"]
pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _console_containers(docker_client):
    return docker_client.containers.list(all=True, filters={"label": "bench-console"})


def _start(args, out: Path):
    env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1")
    return subprocess.Popen(CONSOLE + args + ["--headless", "--out", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _journal(out: Path) -> Path:
    files = sorted((out / "journal").glob("*.jsonl"))
    return files[-1] if files else out / "journal" / "none.jsonl"


def _wait_for_timed_reps(out: Path, n: int, proc, timeout=400) -> list[dict]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            pytest.fail(f"the round ended early:\n{proc.stdout.read()}")
        if _journal(out).exists():
            reps = [r for r in journal.completed_reps(journal.read_journal(_journal(out)).events)
                    if r["phase"] == "timed"]
            if len(reps) >= n:
                return reps
        time.sleep(0.2)
    pytest.fail("no timed reps in time")


def test_ctrl_c_during_reps_leaves_no_container_and_marks_the_round_incomplete(tmp_path, base_image, docker_client):
    out = tmp_path / "out"
    proc = _start(["demo", "--candidate", "noise", "--reps", "4"], out)
    _wait_for_timed_reps(out, 1, proc)
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, text
    assert "round incomplete" in text
    assert _console_containers(docker_client) == []
    jr = journal.read_journal(_journal(out))
    ended = [e for e in jr.events if e["kind"] == "round_ended"]
    assert ended and ended[-1]["status"] == "incomplete"
    assert not (out / "ledger.jsonl").exists() or (out / "ledger.jsonl").read_text() == ""


def test_sigkill_mid_reps_then_resume_gives_a_sealed_receipt_with_the_earlier_reps(tmp_path, base_image):
    out = tmp_path / "out"
    proc = _start(["demo", "--candidate", "noise", "--reps", "4"], out)
    before = _wait_for_timed_reps(out, 3, proc)
    proc.kill()                       # SIGKILL: no cleanup, no final event
    proc.wait()
    jr = journal.read_journal(_journal(out))
    assert not any(e["kind"] == "round_ended" for e in jr.events)
    assert not (out / "ledger.jsonl").exists()   # never a ledger line for an unfinished round

    r = subprocess.run(CONSOLE + ["resume", str(_journal(out)), "--headless"], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, NO_COLOR="1"), timeout=600)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    receipt = json.loads((out / "receipt.json").read_text())
    timed = [x for x in receipt["reps"] if x["phase"] == "timed" and x["status"] == "ok"]
    kept = {(x["build"], x["index"], x["wall_s"]) for x in timed}
    assert {(x["build"], x["index"], x["wall_s"]) for x in before} <= kept
    assert len({(x["build"], x["index"]) for x in timed}) == 8
    assert store.verify_dir(out) == [] or all(not p.fatal for p in store.verify_dir(out))
    # the resumed round warmed each build up again before its remaining reps
    warm = [x for x in receipt["reps"] if x["phase"] == "warmup"]
    assert {x["build"] for x in warm if x["attempt"] >= 1} == {"main", "candidate"}
    # and a sealed round is never resumed into the ledger a second time
    again = subprocess.run(CONSOLE + ["resume", str(_journal(out)), "--headless"], cwd=ROOT, capture_output=True,
                           text=True, env=dict(os.environ, NO_COLOR="1"), timeout=120)
    assert again.returncode == 2 and "already sealed" in again.stdout + again.stderr
    assert len((out / "ledger.jsonl").read_text().splitlines()) == 1
