"""The task accuracy stage: the reference's build and the candidate answer the task set greedily
through the profile's harness; every answer goes into the receipt, and the gate scores them.

The items go in chunks (``accuracy.chunk``), one container run each, so the screens can show
items done and the running score between runs.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from .. import events as ev
from ..engine import protocol
from ..core.decisions import accuracy as acc
from ..core.records.receipt import AccuracyRecord, AccuracySide
from ..runtime.base import INPUTS_ROOT, OUT_ROOT
from .schedule import fill
from .reps import Bench



def new_record(b: Bench) -> tuple[AccuracyRecord, list[acc.Task]]:
    spec = b.profile.accuracy
    assert spec is not None
    data = Path(spec.tasks).read_bytes()
    if hashlib.sha256(data).hexdigest() != spec.tasks_sha256:     # changed since the profile was loaded
        raise acc.TaskSetError(f"{spec.tasks} no longer has the pinned sha256 {spec.tasks_sha256}")
    tasks = acc.parse_tasks(data.decode("utf-8"))
    return AccuracyRecord(tasks_sha256=spec.tasks_sha256, ids=[t.id for t in tasks], answers=[t.answer for t in tasks],
                          kinds=[t.kind for t in tasks], tokens=spec.tokens), tasks


def answer(b: Bench, side: str, image: str, tasks: list[acc.Task], emit: ev.Emit,
           check_abort: ev.CheckAbort) -> AccuracySide:
    """One side's answers, chunk by chunk; the first failed chunk ends the side with its error."""
    spec = b.profile.accuracy
    assert spec is not None
    out = AccuracySide(build=image, outputs=[])
    t0 = time.monotonic()
    correct = 0
    for start in range(0, len(tasks), spec.chunk):
        check_abort()
        chunk = tasks[start:start + spec.chunk]
        name = f"accuracy-{side}-{start // spec.chunk}.txt"
        (b.inputs / name).write_text("".join(acc.escape(t.prompt) + "\n" for t in chunk), encoding="utf-8")
        out_dir = b.work / "runs" / f"accuracy-{side}-{start // spec.chunk}"
        argv = fill(spec.command, b.profile, prompts=f"{INPUTS_ROOT}/{name}", tokens=str(spec.tokens), out=OUT_ROOT)
        res = b.rt.run(b.builds[image], argv, src_dir=b.src_dirs[image], inputs_dir=b.inputs, out_dir=out_dir,
                       run=b.profile.run, label=f"{side}/accuracy", gpus=b.gpus, models=b.models)
        try:
            if res.exit_code != 0:
                why = res.killed_reason or f"exit status {res.exit_code}"
                raise acc.TaskSetError(f"the generate command failed ({why}): "
                                       + " | ".join(protocol.log_tail(res.stderr or res.stdout)[-3:]))
            made = out_dir / "generated.txt"
            if not made.is_file():
                raise acc.TaskSetError("the generate command wrote no generated.txt")
            got = acc.parse_generated(made.read_text(encoding="utf-8", errors="replace"), len(chunk))
        except acc.TaskSetError as e:
            out.error, out.outputs = f"items {start + 1}-{start + len(chunk)}: {e}", None
            emit(ev.AccuracyProgress(build=side, done=start, total=len(tasks), correct=correct, error=out.error))
            break
        out.outputs.extend(got)     # type: ignore[union-attr]
        correct += sum(acc.is_correct(o, t.answer) for o, t in zip(got, chunk))
        emit(ev.AccuracyProgress(build=side, done=start + len(chunk), total=len(tasks), correct=correct))
    out.wall_s = round(time.monotonic() - t0, 3)
    return out
