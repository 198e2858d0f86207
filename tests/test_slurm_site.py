"""What the SLURM scheduler writes and reads, without a cluster: the site file, the job script.
(tests/integration/test_queue_slurm.py runs real jobs on a real cluster.)"""
from __future__ import annotations

import json

import pytest

from console.queueing import jobs, slurm
from console.core.decisions.queue import State
from console.errors import InfraError, UsageError
from console.paths import DEMO_PROFILE
from console.queueing.store import QueueStore, Row


@pytest.mark.parametrize("text, says", [
    ("", "key 'partition': expected the partition's name"),
    ('partition = "p"\nnodes = 3\n', "key 'nodes': unknown; expected one of"),
    ('partition = "p"\nsbatch = "--account=x"\n', "key 'sbatch': expected a list of strings"),
    ('partition = "p"\nmax_jobs = 0\n', "key 'max_jobs': expected a whole number ≥ 1"),
    ("partition = \n", "not valid TOML"),
])
def test_a_broken_site_file_names_the_file_and_the_key(tmp_path, text, says):
    site = tmp_path / "site.toml"
    site.write_text(text)
    with pytest.raises(UsageError) as e:
        slurm.load_site(site)
    assert str(site) in e.value.message and says in e.value.message


def test_the_job_script_asks_for_an_exclusive_node_with_the_profiles_limits(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('partition = "bench"\npython = "/opt/py/bin/python"\nsbatch = ["--account=perf"]\n')
    s = slurm.load_site(site)
    store = QueueStore(tmp_path / "q")
    cid = store.submit(author="ada", source="/p/fast.patch", profile=str(DEMO_PROFILE), state=State.QUEUED,
                       reason="queued", files=[], fingerprint=frozenset())
    script = slurm.job_script(store.get(cid), s, tmp_path / "results", reps=3, runtime="docker", keep_images=False)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/sh" and "#SBATCH --exclusive" in lines and "#SBATCH --partition=bench" in lines
    assert "#SBATCH --time=120" in lines and not any("--gres" in x for x in lines)     # demo: CPU only
    spec = tmp_path / "results" / "queue-jobs" / f"{cid}.spec.json"
    assert lines[-1] == (f"exec /opt/py/bin/python -m console.cli queue run-job {spec} --dir "
                         f"{tmp_path / 'results'} --runtime docker --reps 3")
    # the job reads its candidate from the spec, never from the queue's SQLite file
    assert json.loads(spec.read_text()) == store.get(cid).to_dict()
    assert Row.from_dict(json.loads(spec.read_text())).to_dict() == store.get(cid).to_dict()


def test_job_states_that_have_ended():
    assert not jobs.JobState("RUNNING").ended and not jobs.JobState("PENDING").ended
    assert all(jobs.JobState(s).ended for s in ("COMPLETED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "FAILED"))


def test_without_slurm_on_path_the_worker_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    site = tmp_path / "site.toml"
    site.write_text('partition = "bench"\n')
    with pytest.raises(InfraError, match="not a SLURM submit host"):
        slurm.partition_nodes(slurm.load_site(site))


def test_an_outcome_file_is_recorded_and_a_job_without_one_is_requeued(tmp_path, monkeypatch):
    from console.queueing.worker import Finished
    store = QueueStore(tmp_path / "q")
    ids = [store.submit(author=a, source=f"/p/{a}.patch", profile=str(DEMO_PROFILE), state=State.QUEUED,
                        reason="queued", files=[], fingerprint=frozenset()) for a in ("ada", "bo")]
    for cid, job in zip(ids, ("11", "12")):
        store.book("slurm:pending")
        store.move(cid, State.RUNNING, f"batch job {job}", worker=f"slurm:{job}")
    results = tmp_path / "results"
    (results / "queue-jobs").mkdir(parents=True)
    done = Finished(State.MERGEABLE, "accepted, tier L", 0, fields={"receipt_id": "ab" * 32, "node": "n1"})
    slurm.outcome_path(results, ids[0], "11").write_text(json.dumps(done.to_dict()))
    monkeypatch.setattr(slurm, "job_state", lambda job: jobs.JobState("COMPLETED" if job == "11" else "FAILED",
                                                                     "NonZeroExitCode", "n2"))
    said: list[str] = []
    assert slurm.watch(store, results, said.append) == 0
    a, b = store.get(ids[0]), store.get(ids[1])
    assert a.candidate.state is State.MERGEABLE and a.receipt_id == "ab" * 32 and a.node == "n1" and a.worker is None
    assert b.candidate.state is State.QUEUED
    assert b.candidate.reason.startswith("requeued: batch job 12 ended FAILED (NonZeroExitCode) on n2")
    assert "nothing was sealed" in b.candidate.reason and len(said) == 2
