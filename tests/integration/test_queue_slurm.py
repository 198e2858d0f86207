"""The queue on a real SLURM cluster (munged, slurmctld, two slurmd on this host): real batch jobs
running real demo rounds on the real daemon, one of them cancelled with `scancel` mid-round."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from console.results import store
from console.core.decisions import queue as policy
from console.core.decisions.queue import State
from console.queueing.store import QueueStore
from slurm_cluster import NODES, Cluster

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = [sys.executable, "-m", "console.cli"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = Cluster.missing()
    if missing:
        pytest.fail(f"this test needs a real SLURM cluster; missing: {', '.join(missing)}. `make test` installs "
                    "slurm-wlm and munge with apt.", pytrace=False)
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
    except RuntimeError as e:
        c.stop()
        pytest.fail(str(e), pytrace=False)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)
    yield c
    c.stop()
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous


def _console(*args: str, check: int | None = 0, timeout: float = 1800) -> subprocess.CompletedProcess:
    r = subprocess.run(CONSOLE + list(args), cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NO_COLOR="1"))
    if check is not None:
        assert r.returncode == check, f"{args}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _bookings(q: QueueStore) -> list[int]:
    """Candidates in the order their rounds were handed to the scheduler."""
    return [h["candidate"] for h in q.history() if h["state"] == "running" and "batch job" in h["reason"]]


def test_three_candidates_as_batch_jobs_with_one_scancel(cluster, tmp_path, base_image, docker_client):
    d = tmp_path / "results"
    for src, author in (("fast", "alice"), ("noise", "alice"), ("corrupt-deep", "bob")):
        _console("queue", "submit", src, "--author", author, "--dir", str(d))
    site = cluster.site_file(tmp_path / "site.toml", sys.executable, max_jobs=1)
    work = ["queue", "work", "--scheduler", "slurm", "--site", str(site), "--dir", str(d), "--reps", "2"]
    worker = subprocess.Popen(CONSOLE + work, cwd=ROOT, env=dict(os.environ, NO_COLOR="1", PYTHONUNBUFFERED="1"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    q = QueueStore(d)
    # cancel #1's job once its round is under way (past its builds)
    job, t0 = None, time.monotonic()
    while time.monotonic() - t0 < 600:
        w = q.get(1).worker or ""
        if w.startswith("slurm:") and w != "slurm:pending":
            job = w.split(":", 1)[1]
            log = d / "queue-jobs" / f"1-{job}.log"
            if log.exists() and "== parity" in log.read_text():
                break
        assert worker.poll() is None, worker.stdout.read()
        time.sleep(0.5)
    else:
        pytest.fail(f"#1 never reached parity in a batch job:\n{cluster.logs()}")
    # while #1 runs, alice's second waits for it, and says so
    waiting = {w.id: w.reason for w in policy.plan([r.candidate for r in q.rows()]).waiting}
    assert waiting.get(2, "").startswith("waits for #1 by the same author (running)"), waiting
    subprocess.run(["scancel", job], env=cluster.env, check=True)
    # #1 is booked again; this time its job's process is killed outright (SIGKILL, as the OOM
    # killer or a crash would) while one of its containers runs: it cannot record anything itself
    killed = _kill_outright_in_a_container(q, d, 1, {job}, docker_client, worker)
    out, _ = worker.communicate(timeout=2400)
    assert worker.returncode == 0, out[-4000:]

    hist = q.history(1)
    requeued = [h["reason"] for h in hist if h["state"] == "queued" and "requeued" in h["reason"]]
    assert len(requeued) == 2, hist
    assert "interrupted" in requeued[0], requeued          # the job aborted its own round on SIGTERM
    assert f"batch job {killed} ended FAILED" in requeued[1] and "nothing was sealed" in requeued[1], requeued
    # the next job on the node removed the killed job's container before its own round
    logs = "".join(p.read_text() for p in (d / "queue-jobs").glob("*.log"))
    assert f"left by batch job {killed} (failed)" in logs, logs[-3000:]
    if q.get(1).candidate.state is State.MERGEABLE:         # alice's second waits for her first
        assert q.get(2).candidate.state is State.QUEUED
        _console("queue", "merged", "1", "--commit", "c0ffee", "--dir", str(d))
        _console(*work)
    # oldest ready first: #2 (alice's, submitted before bob's) goes next once #1 is closed; while #1 is
    # mergeable it stays open and #2 waits until #1 is merged
    merged_first = any(h["state"] == "merged" for h in q.history(1))
    assert _bookings(q) == ([1, 1, 1, 3, 2] if merged_first else [1, 1, 1, 2, 3]), q.history()
    assert q.get(3).candidate.state is State.NOT_MERGEABLE

    # nothing of the cancelled job was sealed; every finished round is in the one ledger exactly once
    ledger = d / "demo"
    entries, problems = store.read_ledger(ledger)
    assert not problems and not [p for p in store.verify_dir(ledger) if p.fatal]
    recorded = [q.get(i).receipt_id for i in (1, 2, 3)]
    assert sorted(e.id for e in entries) == sorted(recorded) and len(set(recorded)) == 3
    # each receipt names its batch job and the node it ran on
    receipts = store.ledger_receipts(ledger)
    jobs = set()
    for rid in recorded:
        slurm = receipts[rid].host.slurm
        assert slurm is not None and slurm.node in NODES and slurm.partition == cluster.partition
        jobs.add(slurm.job_id)
    assert len(jobs) == 3 and not {job, killed} & jobs
    # the jobs removed the candidates' images of the rounds they sealed (the IDs stay in the
    # receipts) and kept main's, which every next round of this main reuses by its build key
    mains = {receipts[rid].builds["main"].image_id for rid in recorded}
    assert len(mains) == 1 and docker_client.images.get(mains.pop())
    for rid in recorded:
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(receipts[rid].builds["candidate"].image_id)
    logs = "".join(p.read_text() for p in (d / "queue-jobs").glob("*.log"))
    assert "removed image sha256:" in logs and "kept main's image sha256:" in logs
    assert not docker_client.containers.list(all=True, filters={"label": "bench-console"})
    listed = json.loads(_console("queue", "list", "--dir", str(d), "--format", "json").stdout)["queue"]
    assert [r["state"] for r in listed][2] == "not-mergeable"


def _kill_outright_in_a_container(q: QueueStore, d: Path, cid: int, before: set[str], client, worker) -> str:
    """SIGKILL the batch job of candidate ``cid`` (not one of ``before``) while a run container of
    that job is up; returns the job id."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 600:
        w = q.get(cid).worker or ""
        job = w.split(":", 1)[1] if w.startswith("slurm:") and w != "slurm:pending" else None
        if job and job not in before and client.containers.list(
                filters={"label": f"bench-console.slurm-job={job}", "status": "running"}):
            spec = d / "queue-jobs" / f"{cid}.spec.json"
            pids = subprocess.run(["pgrep", "-f", f"queue run-job {spec} "], capture_output=True, text=True)
            assert pids.stdout.split(), "the job's console process is not to be found"
            for pid in pids.stdout.split():
                os.kill(int(pid), signal.SIGKILL)
            return job
        assert worker.poll() is None, worker.stdout.read()
        time.sleep(0.2)
    pytest.fail(f"#{cid}'s second job never started a container")
