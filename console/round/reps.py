"""Running one rep: a quiet start, the engine timed from outside, its output read, the node judged.

A rep the node may have moved (``suspect``) is retried while the round's retry budget
lasts; then the round is an infrastructure failure with a diagnosis, never a regression.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import events as ev
from ..engine import protocol
from ..engine.adapters import ADAPTERS
from ..core.decisions import health
from ..core.records.receipt import Rep
from ..errors import InfraError
from ..profile import Profile
from ..telemetry.base import Telemetry
from ..runtime.base import INPUTS_ROOT, OUT_ROOT, BuildResult, RunResult, Runtime
from ..runtime.handover import Driver, Handover
from .schedule import DOC_NAME, Item, fill
from .sections import Sections

SCORED_PATH = "scored_path"     # the phase of the scored-path check's run (round.parity)


@dataclass
class Bench:
    """What every rep of a round runs on: the runtime, the builds, the node's telemetry."""
    rt: Runtime
    builds: dict[str, BuildResult]
    src_dirs: dict[str, Path]
    inputs: Path
    work: Path
    gpus: bool
    tele: Telemetry
    preflight: dict
    profile: Profile
    models: dict[str, str] | None = None    # model file name -> host path, mounted read-only
    # a serving round's reps are blocks of requests through the build's server (round.serving.blocks)
    blocks: Callable[[Item, int, Path], tuple[Rep, RunResult]] | None = None
    keep_work: bool = False         # --keep-work: large outputs (parity logits) are kept after grading
    sections: Sections | None = None    # a console-timed bench: what each run is handed (round.sections)


def rep_record(item: Item, attempt: int, res: RunResult, p: Profile) -> Rep:
    """What the console saw of one run: its status, its wall clock, and its result line if valid. A
    console-timed run's figure is the console's clock over the section it handed over; the engine's
    own line is then a cross-check (``core.decisions.counting``)."""
    tokens = item.tokens * item.repeat
    parse = ADAPTERS[p.bench.adapter].parse(res.stdout, metric=item.metric or p.bench.metric,
                                            tokens=tokens, depth=item.depth, context=item.context)
    h = res.handover
    refusals = list(parse.refusals) if res.exit_code == 0 else []
    if h is not None and h.error and res.exit_code == 0 and not res.killed_reason:
        refusals.append(f"the handover failed: {h.error}")
    if res.killed_reason == "timeout":
        status = "timeout"
    elif res.killed_reason == "aborted":
        status = "aborted"
    elif res.killed_reason or res.exit_code != 0:
        status = "failed"
    elif not parse.ok or refusals:
        status = "refused"
    else:
        status = "ok"
    section = round(h.section_s, 9) if h is not None and h.section_s and status == "ok" else None
    value = None if status != "ok" else (tokens / section if section else parse.result["value"])
    tail = parse.log_tail + protocol.log_tail(res.stderr)[-10:]
    if res.killed_reason == "output limit":
        refusals.append(f"the output directory passed its limit of {p.run.output_limit_mb} MB")
    return Rep(build=item.build, phase=item.phase, index=item.index, position=item.position, attempt=attempt,
               depth=item.depth, tokens=tokens, context=item.context, status=status,
               exit_code=res.exit_code, wall_s=round(res.wall_s, 6), value=value,
               reported=parse.result, refusals=refusals, peak_mem_bytes=res.peak_mem_bytes,
               log_tail=tail[-protocol.LOG_TAIL_LINES:], repeat=item.repeat, section_s=section)


def _driver(b: Bench, item: Item, out_dir: Path) -> Driver | None:
    """The handover for a console-timed run: the drawn section (the scored path: the document's)."""
    if b.sections is None:
        return None
    chunks = b.sections.document(item) if item.phase == SCORED_PATH else b.sections.chunks(item)
    return Driver(out_dir.with_name(out_dir.name + ".handover"), chunks, b.profile.parity.vocab)


def keep_section(h: Handover | None, out_dir: Path) -> None:
    """What the engine answered, where the path checks read a run's output: its final row's logits
    (``bench_logits.npy``) and its argmax per chunk (``acks.txt``)."""
    if h is None or h.error or h.section_s is None:
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / "bench_logits.npy", np.frombuffer(h.logits, dtype="<f4"))
    (out_dir / "acks.txt").write_text(" ".join(str(a) for a in h.acks) + "\n")


def run_rep(b: Bench, item: Item, attempt: int, emit: ev.Emit) -> tuple[Rep, Path, RunResult]:
    """One run of the bench, judged: ``ok`` reps the node may have moved become ``suspect``."""
    p = b.profile
    out_dir = b.work / "runs" / f"{item.position:04d}-{item.build}-{item.phase.replace(':', '_')}-{item.index}-{attempt}"
    settled = b.tele.settle(p.health.settle_cores, p.health.settle_max_s)
    emit(ev.RepStarted(build=item.build, index=item.index, position=item.position, phase=item.phase))
    if b.blocks is not None:
        rep, res = b.blocks(item, attempt, out_dir)
    else:
        argv = fill(p.bench.command, p, depth=str(item.depth), tokens=str(item.tokens), context=item.context,
                    doc=f"{INPUTS_ROOT}/{DOC_NAME}", out=OUT_ROOT, metric=item.metric or p.bench.metric,
                    repeat=str(item.repeat), **dict(item.args))
        driver = _driver(b, item, out_dir)
        # The runtime opens the telemetry window when the engine starts and closes it when it
        # exits: container start and teardown are the apparatus, not a neighbour.
        res = b.rt.run(b.builds[item.build], argv, src_dir=b.src_dirs[item.build], inputs_dir=b.inputs,
                       out_dir=out_dir, run=p.run, label=item.label, gpus=b.gpus,
                       watch=lambda **kw: b.tele.monitor(0.1, **kw), models=b.models, handover=driver)
        keep_section(res.handover, out_dir)
        rep = rep_record(item, attempt, res, p)
    summary = res.telemetry or {}
    rep.settle = settled
    # Under Docker the engine is outside the console's process tree, so its CPU time
    # would read as "other processes"; under the local runtime it is a waited-for child
    # and is already counted as the console's own.
    rep.telemetry = (health.attribute_engine_cpu(summary, res.cpu_s, p.run.cpus) if b.rt.engine_outside
                     else summary)
    if rep.status == "ok":
        rep.suspect = health.classify_rep(summary, b.preflight, p.health)
        if rep.suspect:
            rep.status = "suspect"
    emit(ev.TelemetrySample(source=summary.get("source", "host"), values=latest(summary),
                            build=item.build, index=item.index))
    emit(ev.RepDone(rep=rep))
    return rep, out_dir, res


def run_until_trusted(b: Bench, item: Item, attempt: int, budget: health.RetryBudget,
                      emit: ev.Emit, notice: ev.Notify,
                      record: Callable[[Rep, Path], None]) -> None:
    """Run ``item``, retrying while the node is suspect and the budget lasts; every attempt is recorded."""
    while True:
        rep, out_dir, _ = run_rep(b, item, attempt, emit)
        record(rep, out_dir)
        decision = budget.decide(rep.suspect if rep.status == "suspect" else [], rep.label)
        if decision.action == "accept":
            return
        if decision.action == "infra":
            raise InfraError(str(decision.diagnosis),
                             "This is a node fault, not a regression: fix the node and resume or rerun.")
        notice("warn", "rep-suspect", f"{item.build} {item.phase} #{item.index} is suspect "
               f"({'; '.join(rep.suspect)}); retrying")
        attempt += 1


def latest(summary: dict) -> dict:
    """A telemetry summary flattened to one value per metric (its median), for live viewers."""
    return {k: (v.get("median") if isinstance(v, dict) and "median" in v else v)
            for k, v in (summary.get("metrics") or summary).items()
            if isinstance(v, (int, float, str)) or (isinstance(v, dict) and "median" in v)}
