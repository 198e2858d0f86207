"""Rounds as SLURM batch jobs: the queue books, `sbatch` places, the job runs the same round.

Each booked candidate becomes one exclusive batch job that runs ``console queue run-job SPEC``
on the node it lands on: the round and its seal (appended to the one ledger under its file
lock). The job writes what the round made of the candidate to an outcome file; the worker here
submits, watches, and records outcomes in the queue, which only the submit host opens. A job
the scheduler kills (``scancel``, its time limit, a failed node) is an infrastructure outcome:
a job that got SIGTERM aborts its round and writes "requeued after interrupted"; one killed
outright writes nothing, and the watcher gives the candidate back with the scheduler's own
account of why. Nothing of a killed job is sealed.

A site file (TOML) names where jobs go::

    partition = "bench"            # required
    python = "/opt/bench/bin/python"   # the interpreter with the console on the nodes (default: this one)
    max_jobs = 2                   # rounds at once (default: the partition's node count)
    sbatch = ["--account=perf"]    # extra sbatch arguments, verbatim
    poll_seconds = 2.0

Kubernetes Jobs could follow the same interface: submit one Job per booked candidate running the
same command, watch its status, and give the candidate back when the Job fails without recording
an outcome (docs/QUEUE.md).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..core.decisions.queue import Refusal, State
from ..errors import ExitCode, InfraError, UsageError
from ..profile import load_profile
from .jobs import job_state, run
from .store import QueueStore, Row
from ..files import read_file
from ..results.store import atomic_write, read_json

if TYPE_CHECKING:
    from .worker import Finished, WorkerOptions

PREFIX = "slurm:"


@dataclass(frozen=True)
class Site:
    partition: str
    python: str = sys.executable
    max_jobs: int | None = None
    sbatch: tuple[str, ...] = ()
    poll_seconds: float = 2.0
    path: str = ""


def load_site(path: Path) -> Site:
    try:
        data = tomllib.loads(read_file(path, "a SLURM site file", "Give --site FILE.", 1 << 20).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise UsageError(f"{path}: not valid TOML: {e}", "Fix the site file.") from None
    known = {"partition", "python", "max_jobs", "sbatch", "poll_seconds"}
    for k in data:
        if k not in known:
            raise UsageError(f"{path}: key '{k}': unknown; expected one of {', '.join(sorted(known))}",
                             "Fix the site file.")
    if not isinstance(data.get("partition"), str) or not data["partition"]:
        raise UsageError(f"{path}: key 'partition': expected the partition's name (a string)", "Fix the site file.")
    sb = data.get("sbatch", [])
    if not isinstance(sb, list) or not all(isinstance(x, str) for x in sb):
        raise UsageError(f"{path}: key 'sbatch': expected a list of strings", "Fix the site file.")
    mj = data.get("max_jobs")
    if mj is not None and (not isinstance(mj, int) or mj < 1):
        raise UsageError(f"{path}: key 'max_jobs': expected a whole number ≥ 1", "Fix the site file.")
    return Site(partition=data["partition"], python=str(data.get("python", sys.executable)), max_jobs=mj,
                sbatch=tuple(sb), poll_seconds=float(data.get("poll_seconds", 2.0)), path=str(path))


def partition_nodes(site: Site) -> int:
    r = run(["sinfo", "-h", "-p", site.partition, "-o", "%D"])
    if r.returncode != 0 or not r.stdout.strip():
        raise InfraError(f"partition '{site.partition}' is not known to SLURM: {r.stderr.strip() or 'sinfo said nothing'}",
                         f"Check `partition` in {site.path or 'the site file'} (`sinfo` lists the partitions).")
    return sum(int(x) for x in r.stdout.split() if x.isdigit())


def spec_path(results: Path, cid: int) -> Path:
    return results / "queue-jobs" / f"{cid}.spec.json"


def outcome_path(results: Path, cid: int, job: str) -> Path:
    return results / "queue-jobs" / f"{cid}-{job}.outcome.json"


def job_script(row: Row, site: Site, results: Path, *, reps: int | None, runtime: str, keep_images: bool) -> str:
    """The batch script; it also writes the candidate's spec beside the job logs. The job reads
    that spec and writes its outcome file there: it never opens the queue's SQLite file, which
    stays on the submit host (SQLite's WAL needs every user of the file on one host)."""
    profile = load_profile(row.profile)
    rules = profile.queue
    logs = results / "queue-jobs"
    logs.mkdir(parents=True, exist_ok=True)
    spec = spec_path(results, row.id)
    atomic_write(spec, json.dumps(row.to_dict(), indent=1).encode())
    args = [site.python, "-m", "console.cli", "queue", "run-job", str(spec), "--dir", str(results),
            "--runtime", runtime]
    if reps is not None:
        args += ["--reps", str(reps)]
    if keep_images:
        args.append("--keep-images")
    lines = ["#!/bin/sh",
             f"#SBATCH --job-name=bench-console-{row.id}",
             f"#SBATCH --partition={site.partition}",
             "#SBATCH --exclusive",
             "#SBATCH --nodes=1",
             f"#SBATCH --time={rules.time_limit_minutes}",
             f"#SBATCH --output={logs}/{row.id}-%j.log",
             *(["#SBATCH --gres=gpu:%d" % rules.gpus] if rules.gpus else []),
             "# one round of the queue's candidate; its outcome goes to a file the worker records",
             "export PYTHONUNBUFFERED=1 NO_COLOR=1",
             "exec " + " ".join(_quote(a) for a in args), ""]
    return "\n".join(lines)


def _finished(path: Path) -> "Finished":
    """A batch job's outcome file, or a usage error naming it (it was written by the job)."""
    from .worker import Finished
    hint = "A batch job writes it as it ends; move it aside and `console queue show ID`."
    _data, d = read_json(path, "a batch job's outcome", hint, 1 << 20)
    try:
        return Finished.from_dict(d)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{path}: not a batch job's outcome: {type(e).__name__}: {e}", hint) from None


def run_job(spec: Path, results: Path, opts: "WorkerOptions", say: Callable[[str], None]) -> int:
    """Inside the batch job: the round of the candidate in ``spec``, its outcome to a file."""
    from .worker import run_round_of
    hint = "The worker writes it when it submits the job; is the results directory shared?"
    _data, d = read_json(spec, "the job's candidate spec", hint, 1 << 20)
    try:
        row = Row.from_dict(d)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{spec}: not a candidate spec: {type(e).__name__}: {e}", hint) from None
    job = os.environ.get("SLURM_JOB_ID", "nojob")
    say(f"== #{row.id} by {row.candidate.author}: {row.source} (batch job {job} on "
        f"{os.environ.get('SLURMD_NODENAME', '?')})")
    done = run_round_of(row, load_profile(row.profile), opts, say)
    atomic_write(outcome_path(results, row.id, job), json.dumps(done.to_dict(), indent=1).encode())
    say(f"#{row.id}: outcome written for the worker to record: {done.state.value}: {done.reason}")
    return done.code


def _quote(s: str) -> str:
    return s if re.fullmatch(r"[A-Za-z0-9_./:=@+-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def submit(row: Row, script: str, site: Site) -> str:
    r = run(["sbatch", "--parsable", *site.sbatch], stdin=script)
    if r.returncode != 0:
        raise InfraError(f"sbatch refused #{row.id}'s job: {r.stderr.strip()[:400]}",
                         "Check the partition and the site file's sbatch arguments; the candidate is back in the queue.")
    return r.stdout.strip().split(";")[0]


def watch(store: QueueStore, results: Path, say: Callable[[str], None]) -> int:
    """Record the outcomes of jobs that ended; give back candidates whose job ended without one.
    Returns the number of jobs still running."""
    from .worker import record
    alive = 0
    for row in store.rows():
        w = row.worker or ""
        if row.candidate.state is not State.RUNNING or not w.startswith(PREFIX) or w == PREFIX + "pending":
            continue
        job = w[len(PREFIX):]
        st = job_state(job)
        if st is not None and not st.ended:
            alive += 1
            if st.node and st.node not in ("(null)", row.node or ""):
                store.annotate(row.id, node=st.node)
            continue
        done = outcome_path(results, row.id, job)
        if done.is_file():      # written atomically before the job ended
            _recorded, line = record(store, row.id, _finished(done))
            say(f"{line} (batch job {job})")
            continue
        what = "is no longer known to the scheduler" if st is None else \
            f"ended {st.state}" + (f" ({st.reason})" if st.reason and st.reason != "None" else "") + \
            (f" on {st.node}" if st.node and st.node != "(null)" else "")
        try:
            store.move(row.id, State.QUEUED, f"requeued: batch job {job} {what} before recording its round; "
                       "nothing was sealed for it", expect=frozenset({State.RUNNING}), worker=None,
                       detail={"job": job, "state": st.fields if st else {}})
            say(f"#{row.id}: batch job {job} {what}; back in the queue")
        except Refusal:     # a person moved it meanwhile
            pass
    return alive


def work(store: QueueStore, site: Site, results: Path, *, reps: int | None, runtime: str, keep_images: bool,
         once: bool, say: Callable[[str], None] = print, deadline_s: float | None = None) -> int:
    """Submit booked candidates as jobs (at most ``max_jobs`` at once), watch them, until drained."""
    slots = site.max_jobs or partition_nodes(site)
    submitted = 0
    t0 = time.monotonic()
    while True:
        alive = watch(store, results, say)
        while alive < slots and not (once and submitted):
            row = store.book(PREFIX + "pending")
            if row is None:
                break
            try:
                script = job_script(row, site, results, reps=reps, runtime=runtime, keep_images=keep_images)
                job = submit(row, script, site)
            except Exception as e:
                store.move(row.id, State.QUEUED, f"requeued: could not submit its job: {e}", worker=None)
                raise
            store.move(row.id, State.RUNNING, f"batch job {job} on partition {site.partition}",
                       worker=PREFIX + job, detail={"job": job, "partition": site.partition})
            say(f"#{row.id} by {row.candidate.author}: submitted as job {job}")
            submitted += 1
            alive += 1
        if alive == 0:
            say(f"queue drained: {submitted} job(s) submitted")
            return int(ExitCode.OK)
        if deadline_s is not None and time.monotonic() - t0 > deadline_s:
            say(f"stopped watching after {deadline_s:.0f} s with {alive} job(s) still running")
            return int(ExitCode.INFRA)
        time.sleep(site.poll_seconds)
