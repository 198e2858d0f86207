"""The served tokens of a serving round: kept per block while the blocks run, graded after them.

Every block's requests are written to the round's work directory as they were answered (each
request's prompt ids and the ids the server streamed); the block's rep carries the file's sha256.
Once the timed blocks are done and the servers stopped, a sample of each build's served requests
is drawn (its seed made only then, so no server could know which requests would count) and
teacher-forced through the harness's ``grade`` command on main's build, the reference's own
release when the reference was captured from main's source: at each served token, the
reference's argmax and how far below it the served token is. The ruling is the gate's
(``core.served_tokens``); this module only gathers, runs and records.
"""
from __future__ import annotations

import hashlib
import json
import random
import secrets
import time
from pathlib import Path

from .. import events as ev
from ..core.receipt import BUILDS, Receipt
from ..core.served import GradedRequest, ServedGrade
from ..engine import protocol
from ..serving import client
from ..serving import workload as wl
from .plan import INPUTS_ROOT, OUT_ROOT, Item, fill
from .reps import Bench

SERVED_DIR = "served"
REQUESTS_FILE = "served-requests.txt"


def _file(work: Path, build: str, phase: str, index: int, attempt: int) -> Path:
    return work / SERVED_DIR / f"{build}-{phase}-{index}-{attempt}.json"


def keep_served(work: Path, item: Item, attempt: int, reqs: list[wl.Request], blk: client.Block) -> str:
    """Write a block's prompts and served ids where the grading reads them; the file's sha256."""
    prompts = {r.index: r.prompt for r in reqs}
    # a text prompt (a workload file's) has no ids to replay: None, and it is not graded
    rows = [{"request": r.index, "ok": r.ok, "served": r.token_ids,
             "prompt": list(prompts[r.index]) if isinstance(prompts.get(r.index), tuple) else None}
            for r in blk.records]
    data = json.dumps({"build": item.build, "phase": item.phase, "block": item.index, "attempt": attempt,
                       "requests": rows}, separators=(",", ":")).encode()
    path = _file(work, item.build, item.phase, item.index, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _pool(work: Path, receipt: Receipt) -> dict[str, list[GradedRequest]]:
    """Each build's served requests that can be graded: answered in full, with an id prompt, from
    a block file whose bytes are the ones its rep sealed."""
    out: dict[str, list[GradedRequest]] = {b: [] for b in BUILDS}
    for rep in receipt.reps:
        path = _file(work, rep.build, rep.phase, rep.index, rep.attempt)
        sha = (rep.reported or {}).get("served_sha256")
        if rep.build not in out or not sha or not path.exists():
            continue
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            continue
        for row in json.loads(data)["requests"]:
            if row["ok"] and row["prompt"] and row["served"]:
                out[rep.build].append(GradedRequest(build=rep.build, phase=rep.phase, block=rep.index,
                                                    attempt=rep.attempt, request=row["request"],
                                                    served=row["served"], best=[], gap=[],
                                                    prompt=row["prompt"]))
    return out


def grade(b: Bench, receipt: Receipt, emit: ev.Emit, same_as_main: bool) -> ServedGrade:
    """Draw, teacher-force and record both builds' served requests (``receipt.parity.server.graded``)."""
    spec = b.profile.server.grade
    record = ServedGrade(margin=spec.margin, false_reject=spec.false_reject,
                         basis="reference" if same_as_main else "main", seed=secrets.token_hex(8))
    pool = _pool(b.work, receipt)
    record.available = {k: len(v) for k, v in pool.items()}
    rng = random.Random(record.seed)
    drawn = [r for build in BUILDS for r in (rng.sample(pool[build], min(spec.requests, len(pool[build])))
                                              if spec.requests else pool[build])]
    t0 = time.monotonic()
    served = {r.build for r in receipt.reps if (r.reported or {}).get("served_sha256")}
    if bare := [build for build in BUILDS if build in served and not pool[build]]:
        # nothing to grade is not a pass: the timed stream must carry the ids it served
        record.error = (f"{bare[0]}'s served requests carry no token ids: the timed endpoint "
                        f"({b.profile.server.endpoint}) must stream them (llama-server's /completion does)")
    elif drawn:
        record.error = _teacher_force(b, drawn)
    record.requests = [] if record.error else drawn
    record.seconds = round(time.monotonic() - t0, 3)
    if not record.error:
        emit(ev.Notice(level="info", code="served-tokens", message=(
            f"graded {len(drawn)} served requests ({record.available.get('main', 0)} and "
            f"{record.available.get('candidate', 0)} available) against the {record.basis}'s tokens in "
            f"{record.seconds:.0f} s")))
    receipt.parity.server.graded = record
    return record


def _teacher_force(b: Bench, drawn: list[GradedRequest]) -> str:
    """Run the harness's grade command over ``drawn`` on main's build; fill in each request's
    ``best`` and ``gap``; an error message when the yardstick failed ("" when it did not)."""
    p = b.profile
    (b.inputs / REQUESTS_FILE).write_text("".join(
        " ".join(map(str, r.prompt)) + "\t" + " ".join(map(str, r.served)) + "\n" for r in drawn))
    out_dir = b.work / "runs" / "served-grade"
    argv = fill(p.server.grade.command, p, requests=f"{INPUTS_ROOT}/{REQUESTS_FILE}", out=OUT_ROOT)
    res = b.rt.run(b.builds["main"], argv, src_dir=b.src_dirs["main"], inputs_dir=b.inputs, out_dir=out_dir,
                   run=p.run, label="served/grade", gpus=b.gpus, models=b.models)
    if res.exit_code != 0:
        return f"the grade command exited {res.killed_reason or res.exit_code}: " + " | ".join(
            protocol.log_tail(res.stderr or res.stdout)[-2:])
    try:
        lines = (out_dir / "graded.txt").read_text().splitlines()
        if len(lines) != len(drawn):
            return f"graded.txt holds {len(lines)} lines for {len(drawn)} requests"
        for r, line in zip(drawn, lines):
            cells = [c.split(":") for c in line.split()]
            if len(cells) != len(r.served) or any(len(c) != 2 for c in cells):
                return f"graded.txt: a line of {len(cells)} cells for {len(r.served)} served tokens"
            r.best, r.gap = [int(c[0]) for c in cells], [float(c[1]) for c in cells]
    except (OSError, ValueError) as e:
        return f"graded.txt could not be read: {e}"
    return ""
