"""What SLURM says about jobs, and the cleanup that follows from it.

The worker (which removes the containers of batch jobs that died outright) and the batch
scheduler (which submits and watches jobs) both read it, so neither imports the other.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import InfraError


def run(argv: list[str], timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess:
    if shutil.which(argv[0]) is None:
        raise InfraError(f"`{argv[0]}` is not on PATH: this machine is not a SLURM submit host",
                         "Run the worker where sbatch, sinfo and scontrol work, or use `console queue work` "
                         "without --scheduler slurm.")
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin)


@dataclass
class JobState:
    state: str                      # PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL, FAILED, …
    reason: str = ""
    node: str = ""
    exit_code: str = ""
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED")


def job_state(job: str) -> JobState | None:
    """The scheduler's view of a job (scontrol keeps ended jobs for MinJobAge), or None if forgotten."""
    r = run(["scontrol", "-o", "show", "job", job])
    if r.returncode != 0:
        return None
    f = dict(kv.split("=", 1) for kv in r.stdout.split() if "=" in kv)
    return JobState(f.get("JobState", "UNKNOWN"), f.get("Reason", ""), f.get("NodeList", ""), f.get("ExitCode", ""), f)


def remove_containers_of_ended_jobs(client, this_job: str | None) -> list[str]:
    """Remove the run containers of batch jobs the scheduler says have ended (killed outright:
    SIGKILL, a failed node), so they do not compete with this job's reps. Another job's live
    containers on a shared daemon are left alone."""
    from ..runtime.docker import containers_by_job, remove_container
    said: list[str] = []
    for job, containers in containers_by_job(client).items():
        if job == this_job:
            continue
        st = job_state(job)
        if st is not None and not st.ended:
            continue
        for c in containers:
            why = remove_container(c)
            said.append(f"removed container {c.name} left by batch job {job} "
                        f"({'no longer known' if st is None else st.state.lower()})" if why is None else
                        f"could not remove container {c.name} of ended job {job}: {why}")
    return said
