"""The queue's edges: resolving a submission, and the worker that runs booked rounds.

The rules are in console/core/queue.py; the file in console/queueing/store.py. Here sources are
snapshotted (to find what a candidate changes and whether it can be scored at all), rounds run,
their verdicts become queue states, and images of sealed rounds are removed.
"""
from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..engine import sources
from ..results import store
from ..core.decisions import apparatus
from ..core.decisions import queue as policy
from ..core.decisions.queue import State
from ..core.records.receipt import Receipt
from ..core.records.verdict import VerdictRecord, stage_of, unsealed_status
from ..errors import ConsoleError, ExitCode
from ..paths import DEMO_CANDIDATES, DEMO_PROFILE
from ..profile import Profile, ProfileError, load_profile
from .store import QueueStore, Row, here

TEXT_LIMIT = 2 * 2**20          # files larger than this are not read for the fingerprint


@dataclass
class Resolution:
    files: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)     # the diff's added lines, for the fingerprint
    refused: str = ""


def candidate_spec(profile: Profile, text: str) -> Any:
    """SRC as `console run --candidate` takes it; on the demo profile also a candidate's name."""
    if Path(profile.path) == DEMO_PROFILE.resolve() and not Path(text).exists():
        named = DEMO_CANDIDATES / f"{text}.patch"
        if named.is_file():
            return sources.parse_spec(str(named), profile.source)
    return sources.parse_spec(text, profile.source)


def resolve(profile: Profile, spec: Any) -> Resolution:
    """Snapshot main and the candidate: what it changes, its added lines, or why it cannot be scored."""
    with tempfile.TemporaryDirectory(prefix="bench-console-submit-") as tmp:
        try:
            main = sources.snapshot(profile.source, Path(tmp) / "main", exclude=profile.exclude)
            cand = sources.snapshot(spec, Path(tmp) / "candidate", main=main, exclude=profile.exclude)
        except ConsoleError as e:
            return Resolution(refused=f"its sources do not resolve: {e.message}")
        files = apparatus.changed_paths(main.files, cand.files)
        if not files:
            return Resolution(refused="it changes nothing relative to main")
        touched = apparatus.touched_protected(main.files, cand.files, profile.protected, cand.links, main.links)
        if touched:
            return Resolution(files, refused=f"it changes the measuring apparatus: {', '.join(touched)}")
        added: list[str] = []
        for f in files:
            added += _added_lines(main.dir / f, cand.dir / f)
        return Resolution(files, added)


def _added_lines(old: Path, new: Path) -> list[str]:
    def lines(p: Path) -> list[str]:
        if not p.is_file() or p.stat().st_size > TEXT_LIMIT:
            return []
        try:
            return p.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            return []           # binary: not fingerprinted
    return [line[1:] for line in difflib.unified_diff(lines(old), lines(new), lineterm="", n=0)
            if line.startswith("+") and not line.startswith("+++")]


def submit(store: QueueStore, profile_path: Path, src: str, author: str, draft: bool) -> Row:
    """Record a submission: refused with the reason, in review, a draft, or queued."""
    if not author.strip():
        raise policy.Refusal("--author must name someone: one open candidate per author is a rule here")
    try:
        profile = load_profile(profile_path)
    except ProfileError as e:
        cid = store.submit(author=author, source=src, profile=str(profile_path), state=State.REFUSED,
                           reason=f"no usable profile: {e}", files=[], fingerprint=frozenset())
        return store.get(cid)
    try:
        spec = candidate_spec(profile, src)
    except ConsoleError as e:
        res = Resolution(refused=f"its sources do not resolve: {e.message}")
    else:
        res = resolve(profile, spec)
        # stored so that a worker started anywhere finds it: a patch or directory by its absolute path
        src = spec[1] if isinstance(spec, tuple) else (spec.path or src)
    fp = policy.fingerprint(res.added)
    detail: dict[str, Any] = {"files": res.files}
    if res.refused:
        state, reason = State.REFUSED, f"cannot be scored: {res.refused}"
    else:
        check = policy.judge_copy(fp, store.merged_fingerprints(), profile.queue)
        detail["copy"] = {"containment": round(check.containment, 4), "of": check.of}
        if check.state is not None:
            state, reason = check.state, check.reason
        elif draft:
            state, reason = State.DRAFT, "draft: `console queue ready ID` queues it"
        else:
            state, reason = State.QUEUED, "queued"
    cid = store.submit(author=author, source=src, profile=profile.path, state=state, reason=reason,
                       files=res.files, fingerprint=fp, detail=detail)
    return store.get(cid)


# --- the worker ----------------------------------------------------------------------

@dataclass
class WorkerOptions:
    results: Path                   # results root: each profile's ledger is results/<profile name>
    keep_images: bool = False
    verbose: bool = False
    once: bool = False
    runtime: str = "docker"
    reps: int | None = None


def reclaim(store: QueueStore, say: Callable[[str], None]) -> None:
    """Candidates left `running` by a worker of this host that is gone go back to the queue."""
    host = here().split(":")[0]
    for row in store.rows():
        w = row.worker or ""
        if row.candidate.state is not State.RUNNING or not w.startswith(host + ":"):
            continue
        pid = int(w.split(":")[1])
        if not _alive(pid):
            store.move(row.id, State.QUEUED, f"requeued: its worker {w} ended mid-round; nothing was sealed for it",
                       expect=frozenset({State.RUNNING}), worker=None)
            say(f"#{row.id}: its worker {w} is gone; back in the queue")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_gb(results: Path) -> tuple[float, str]:
    """The least free space where a round writes: its results, and Docker's data root when local."""
    results.mkdir(parents=True, exist_ok=True)
    places = [results] + [p for p in (Path("/var/lib/docker"),) if p.is_dir()]
    return min((shutil.disk_usage(p).free / 2**30, str(p)) for p in places)


def work(store: QueueStore, opts: WorkerOptions, say: Callable[[str], None] = print) -> int:
    """Book, run, record, repeat, until nothing is bookable (or once). Returns an exit code."""
    reclaim(store, say)
    ran = 0
    while True:
        plan = policy.plan([r.candidate for r in store.rows()])
        if plan.bookable:
            nxt = store.get(plan.bookable[0])
            try:
                need = load_profile(nxt.profile).queue.min_free_gb
            except ProfileError as e:
                store.move(nxt.id, State.REFUSED, f"cannot be scored: its profile no longer loads: {e}",
                           expect=frozenset({State.QUEUED}))
                say(f"#{nxt.id}: refused, its profile no longer loads")
                continue
            free, where = free_gb(opts.results)
            if free < need:     # checked before booking: a full disk is the node's problem, not the candidate's
                say(f"not booking #{nxt.id}: {free:.1f} GB free on {where}, the profile asks {need:g} GB; "
                    "free some space (`console cleanup --images`) and run the worker again")
                return int(ExitCode.INFRA)
        row = store.book(here())
        if row is None:
            say(f"nothing {'more ' if ran else ''}to book" + (f" after {ran} round(s)" if ran else "") +
                f": {_idle_summary(store)}")
            return int(ExitCode.OK)
        profile = load_profile(row.profile)
        say(f"== #{row.id} by {row.candidate.author}: {row.source} under {profile.name}")
        code = run_booked(store, row, profile, opts, say)
        ran += 1
        if code == ExitCode.INTERRUPTED or opts.once:
            return code if code == ExitCode.INTERRUPTED else int(ExitCode.OK)


def _idle_summary(store: QueueStore) -> str:
    plan = policy.plan([r.candidate for r in store.rows()])
    if not plan.waiting:
        return "nothing waits"
    return "; ".join(f"#{w.id} {w.reason}" for w in plan.waiting)


@dataclass(frozen=True)
class Finished:
    """What a booked round made of its candidate, before it is recorded in the queue.

    A batch job writes this to a file (the queue's SQLite file stays on the submit host:
    SQLite's WAL does not work across hosts sharing a network file system); the worker that
    runs rounds itself records it at once."""
    state: State
    reason: str
    code: int
    fields: dict[str, Any] = field(default_factory=dict)     # receipt_id, results, node
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state.value, "reason": self.reason, "code": self.code,
                "fields": self.fields, "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Finished":
        return cls(State(d["state"]), str(d["reason"]), int(d["code"]), dict(d.get("fields") or {}),
                   dict(d.get("detail") or {}))


def record(store: QueueStore, cid: int, done: Finished) -> tuple[bool, str]:
    """The outcome into the queue, only if the candidate is still the booked one (a person may
    have cancelled it meanwhile: that stands, and the round's receipt stays in the ledger).
    Returns whether it was recorded, and a line that says so."""
    try:
        store.move(cid, done.state, done.reason, expect=frozenset({State.RUNNING}), worker=None,
                   detail=done.detail or None, **done.fields)
        return True, f"#{cid}: {done.state.value}: {done.reason}"
    except policy.Refusal as e:
        return False, f"#{cid}: its round ended ({done.state.value}: {done.reason}) but it was not recorded: {e}"


def run_booked(store: QueueStore, row: Row, profile: Profile, opts: WorkerOptions,
               say: Callable[[str], None]) -> int:
    """A booked candidate's round on this node, recorded in the queue."""
    store.annotate(row.id, results=str((opts.results / profile.name).resolve()), node=here().split(":")[0])
    done = run_round_of(row, profile, opts, say)
    recorded, line = record(store, row.id, done)
    if not recorded:        # run_round_of already said the outcome
        say(line)
    return done.code


def run_round_of(row: Row, profile: Profile, opts: WorkerOptions, say: Callable[[str], None]) -> Finished:
    """Run the candidate's round and say what it made of the candidate; touches no queue."""
    from .. import events as ev
    from ..results import lockfile
    from ..round.follow import follow
    from ..reports.export import export_notice
    from ..reports.text import LineReporter
    from ..round import Round, RoundConfig

    out = (opts.results / profile.name).resolve()
    try:
        cand = candidate_spec(profile, row.source)
    except ConsoleError as e:
        return Finished(State.REFUSED, f"cannot be scored: its sources do not resolve: {e.message}",
                        int(ExitCode.USAGE))
    if os.environ.get("SLURM_JOB_ID") and opts.runtime == "docker":
        from ..runtime.docker import connect
        from .jobs import remove_containers_of_ended_jobs
        for line in remove_containers_of_ended_jobs(connect(), os.environ["SLURM_JOB_ID"]):
            say(f"#{row.id}: {line}")
    rnd = Round(RoundConfig(profile=profile, main=profile.source, candidate=cand, out_dir=out,
                            runtime=opts.runtime, reps=opts.reps, lock_path=lockfile.lock_for(profile, out)))
    lines = LineReporter(verbose=opts.verbose)
    ended: list[ev.RoundEnded] = []

    def sink(e: ev.Event) -> None:
        lines(e)
        if isinstance(e, ev.RoundEnded):
            ended.append(e)

    follow(rnd, sink)
    if rnd.receipt is not None:         # its reports, from the sealed receipt, as `console run` writes them
        lines(export_notice(rnd.sealed or rnd.receipt, out))
    # the round's first line is the diagnosis; its hints are for a person at a terminal
    message = ((ended[-1].message if ended else "") or "").split("\n", 1)[0]
    if rnd.decided_by is not None and rnd.receipt is None:
        return _decided_before(row, rnd, out, message, say)
    if rnd.receipt is None or rnd.receipt_path is None:
        code = int(rnd.exit_code)
        kind = unsealed_status(code)
        say(f"#{row.id}: no sealed round ({kind}): {message}")
        if kind == "refused":
            return Finished(State.REFUSED, f"cannot be scored: {message}", code)
        then = policy.after_round(kind, None, False, message)
        return Finished(then.state, then.reason, code)
    sealed = rnd.sealed if rnd.sealed is not None else Receipt.from_dict(rnd.receipt)
    verdict = sealed.sealed_verdict()
    then = policy.after_round(verdict.outcome, verdict.tier, _parity_passed(verdict))
    rid = Path(rnd.receipt_path).stem
    node = sealed.host.node
    say(f"#{row.id}: {then.state.value}: {then.reason} (receipt {rid[:12]})")
    if not opts.keep_images and sealed.runtime.runs_in_docker:
        for line in remove_images(sealed):
            say(f"#{row.id}: {line}")
    return Finished(then.state, then.reason, int(rnd.exit_code),
                    fields={"receipt_id": rid, "results": str(out), "node": node},
                    detail={"receipt": rid, "results": str(out)})


def _parity_passed(verdict: VerdictRecord) -> bool:
    """No reason of the verdict comes from the gate's parity stage (``core.verdict.stage_of``)."""
    return not any(stage_of(code) == "parity" for code in verdict.codes)


def _decided_before(row: Any, rnd: Any, out: Path, message: str, say: Callable[[str], None]) -> Finished:
    """Earlier rounds of this very candidate against this main already decided it: the queue
    records that decision (nothing new was measured) instead of booking the candidate again."""
    rid, _round_id, outcome, code = rnd.decided_by
    earlier = store.ledger_receipts(out).get(rid)
    verdict = earlier.verdict if earlier is not None else None
    then = policy.after_round(outcome, verdict.tier if verdict else None, _parity_passed(verdict) if verdict else True)
    say(f"#{row.id}: {then.state.value}: {message}")
    return Finished(then.state, f"{then.reason} ({message.split(':', 1)[0]})", int(code),
                    fields={"receipt_id": rid, "results": str(out)}, detail={"receipt": rid, "results": str(out)})


def remove_images(receipt: Receipt) -> list[str]:
    """Remove the candidate images a sealed round used (their IDs stay in its receipt); never a base,
    and never main's: the next candidate against the same main reuses it by its build key."""
    from ..runtime.docker import connect, remove_images as remove
    said: list[str] = []
    seen: set[str] = set()
    doomed: dict[str, str] = {}         # image -> the build it was
    main = receipt.builds.get("main")
    for build, b in receipt.builds.items():
        image = b.image_id or ""
        if not image.startswith("sha256:") or image in seen or image == b.base_image_id:
            continue
        seen.add(image)
        if build == "main" or (main is not None and image == main.image_id):
            said.append(f"kept main's image {image[:19]}: the next round of this main reuses it")
            continue
        doomed[image] = build
    kept = remove(connect(), list(doomed)) if doomed else {}
    for image, build in doomed.items():     # already gone, or in use by another round: kept, and said
        said.append(f"kept image {image[:19]} ({build}): {kept[image]}" if image in kept
                    else f"removed image {image[:19]} ({build}; its ID stays in the receipt)")
    return said
