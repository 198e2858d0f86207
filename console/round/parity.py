"""The round's correctness checks: logits at the declared depths, the scored path, the timed path.

Figures are computed here on the host (``core.parity``); every judgement of them is the
gate's (``grade_depths``, ``parity_ok``, ``path_ok``), the same rules the verdict uses.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from .. import events as ev
from ..engine import protocol, reffile
from ..core.decisions import parity_grade
from ..core.records import parity, topk
from ..core.provenance.backend import BackendCheck
from ..core.records.adjudication import Adjudication
from ..core.records.facts import ReferenceFacts
from ..core.records.receipt import ParityRecord, ParitySide, PathFigures, Rep, TimedPath, TimedPathRep
from ..errors import UsageError
from .plan import sha256_file
from .schedule import DOC_NAME, Item, logits_argv
from .reps import Bench, run_rep

LOGITS_MAX_BYTES = 1 << 30


def read_reference(b: Bench) -> topk.Reference:
    """The pinned reference in the profile's format (``parity.reference_format``): full logits, or
    the compact top-k form, whose rows' next tokens must be the round's document's."""
    p = b.profile
    try:
        ref = reffile.read_reference(p.parity.reference, p.parity.reference_format, depths=len(p.parity.depths),
                                     rows=p.parity.rows, vocab=p.parity.vocab, k=p.parity.top_k,
                                     max_bytes=LOGITS_MAX_BYTES)
        if isinstance(ref, topk.TopK) and not np.array_equal(ref.next_token, next_tokens(b)):
            raise parity.ParityInputError("its rows' next tokens are not the document's: it was captured over "
                                          "another document")
        return ref
    except parity.ParityInputError as e:
        raise UsageError(f"{p.path}: key 'parity.reference': the reference does not fit the profile: {e}",
                         "Recapture the reference (`console reference capture`) or fix "
                         "parity.depths/rows/vocab/reference_format/top_k.") from None


def next_tokens(b: Bench) -> np.ndarray:
    """Each parity row's true next token, from the round's copy of the pinned document (checked
    before the round copied it) for Δp."""
    p = b.profile
    doc = [int(w) for w in (b.inputs / DOC_NAME).read_bytes().split()]
    return parity.next_token_ids(doc, p.parity.depths, p.parity.rows)


def logits_side(b: Bench, build: str, ref: topk.Reference, check_abort: ev.CheckAbort) -> ParitySide:
    """Run one build's logits command over the document and grade it against the reference."""
    p = b.profile
    argv = logits_argv(p.parity.command, p)
    out_dir = b.work / "runs" / f"parity-{build}"
    res = b.rt.run(b.builds[build], argv, src_dir=b.src_dirs[build], inputs_dir=b.inputs,
                   out_dir=out_dir, run=p.run, label=f"{build}/logits", gpus=b.gpus, models=b.models)
    check_abort()
    wall = round(res.wall_s, 4)
    if res.exit_code != 0:
        why = res.killed_reason or f"exit status {res.exit_code}"
        tail = protocol.log_tail(res.stderr or res.stdout)
        return ParitySide(error=f"the logits command failed ({why}): " + " | ".join(tail[-3:]), wall_s=wall)
    try:
        arr = protocol.read_logits(out_dir / p.parity.output, depths=len(p.parity.depths),
                                   rows=p.parity.rows, vocab=p.parity.vocab, max_bytes=LOGITS_MAX_BYTES)
        figs = topk.grade_logits(ref, arr, p.parity.depths, p.parity.rows, p.parity.vocab,
                                 next_tokens=next_tokens(b))
    except parity.ParityInputError as e:
        return ParitySide(error=str(e), wall_s=wall)
    sha = sha256_file(out_dir / p.parity.output)
    drop_logits(b, out_dir / p.parity.output)
    return ParitySide(logits_sha256=sha, depths=list(figs), wall_s=wall)


def drop_logits(b: Bench, path: Path) -> None:
    """Graded logits are not kept (201 MB a build for llama.cpp's 32 rows): the receipt holds their
    figures and sha256, and nothing is copied to the results; ``--keep-work`` keeps the file."""
    if not b.keep_work:
        path.unlink(missing_ok=True)


def emit_grades(side: ParitySide, build: str, main: ParitySide | None, b: Bench, emit: ev.Emit,
                adj: Adjudication | None = None) -> None:
    """Show each depth as the gate grades it (the candidate with the ratchet against main, and
    its borderline depths as ``adj`` settles them)."""
    rules = b.profile.gate
    for f, st in zip(side.depths, parity_grade.grade_depths(side, main, rules, adj)):
        emit(ev.DepthGraded(build=build, depth=f.depth, top1=f.top1, kl=f.kl, ref_entropy=f.ref_entropy,
                            status=st.status, reasons=st.messages,
                            stats=f.stats))
    emit(ev.ParityDone(build=build, ok=parity_grade.parity_ok(side, main, rules, adj),
                       worst_depth=parity.worst_depth(side.depths, rules),
                       error=side.error))


def scored_path(b: Bench, build: str, ref: topk.Reference, emit: ev.Emit, record: Callable[[Rep, Path], None]) -> PathFigures:
    """Run the timed path over the real document and grade its final logits against the reference."""
    p = b.profile
    depth = p.parity.scored_path_depth - p.parity.scored_path_tokens
    item = Item(build=build, phase="scored_path", index=0, position=-1, depth=depth,
                tokens=p.parity.scored_path_tokens, context="doc", metric=p.bench.metric)
    rep, out_dir, _ = run_rep(b, item, 0, emit)
    record(rep, out_dir)
    result = PathFigures(depth=p.parity.scored_path_depth)
    if rep.status not in ("ok", "suspect"):  # a busy node does not change correctness
        result.error = f"the bench run over the document did not succeed ({rep.status}): " \
                       + "; ".join(rep.refusals or rep.log_tail[-2:])
    else:
        try:
            row = protocol.read_row_logits(out_dir / "bench_logits.npy", p.parity.vocab, LOGITS_MAX_BYTES)
            g = topk.grade_row(ref, p.parity.depths.index(p.parity.scored_path_depth), -1, row)
            result.top1, result.kl = g.top1, g.kl
        except parity.ParityInputError as e:
            result.error = f"bench_logits.npy: {e}"
    emit(ev.ScoredPathChecked(build=build, depth=result.depth, top1=result.top1, kl=result.kl,
                              ok=parity_grade.path_ok(result, p.gate), error=result.error))
    return result


def timed_path(b: Bench, outputs: dict[str, list[tuple[Rep, Path]]],
               notice: ev.Notify) -> TimedPath:
    """What the timed runs themselves computed: each candidate timed rep's final logits
    against main's first timed rep (same inputs, same depth, same shortcut).

    The parity depths and the scored-path check run over the document; the timed reps
    may take a shortcut (a seek) at another depth, and a candidate whose math is wrong
    only there would otherwise pass while its wall time really drops. There is no
    reference for a seeked context, so main measured in this round is the basis.
    """
    p = b.profile
    if b.sections is not None:
        return handed_over(b, outputs, notice)
    out = TimedPath(depth=p.bench.depth, tokens=p.bench.tokens)
    mains, cands = outputs.get("main") or [], outputs.get("candidate") or []
    if not mains or not cands:
        out.error = "no timed rep of " + ("main" if not mains else "the candidate") + " ran in this session"
        return out
    main_rep, main_dir = mains[0]
    out.main_rep = main_rep.index
    try:
        base = protocol.read_row_logits(main_dir / "bench_logits.npy", p.parity.vocab, LOGITS_MAX_BYTES)
    except parity.ParityInputError as e:
        out.error = f"main's timed rep {main_rep.index}: bench_logits.npy: {e}"
        return out
    for rep, d in cands:
        row = TimedPathRep(index=rep.index, attempt=rep.attempt)
        try:
            g = parity.grade_row(base, protocol.read_row_logits(d / "bench_logits.npy", p.parity.vocab,
                                                                 LOGITS_MAX_BYTES))
            row.kl, row.top1 = g.kl, g.top1
        except parity.ParityInputError as e:
            row.error = f"bench_logits.npy: {e}"
        out.candidate.append(row)
    bad = [r for r in out.candidate if not parity_grade.path_ok(PathFigures(out.depth, r.top1, r.kl, r.error), p.gate)]
    if bad:
        notice("error", "timed-path", f"{len(bad)} of {len(cands)} candidate timed rep(s) computed "
               f"something else than main at depth {p.bench.depth}: " + (bad[0].error or
               f"KL {bad[0].kl:.3g}, top-1 {bad[0].top1:.2f}"))
    else:
        notice("info", "timed-path", f"every candidate timed rep ({len(cands)}) agrees with main's "
               f"at depth {p.bench.depth}")
    return out


def handed_over(b: Bench, outputs: dict[str, list[tuple[Rep, Path]]], notice: ev.Notify) -> TimedPath:
    """Every candidate run of a handed-over section against main's run of the same section: the final
    row's logits (KL, top-1) and the answer to every chunk (argmax agreement)."""
    p = b.profile
    out = TimedPath(depth=p.bench.depth, tokens=p.bench.tokens, basis="section")
    mains = {(rep.phase, rep.index): d for rep, d in outputs.get("main") or []}
    cands = outputs.get("candidate") or []
    if not mains or not cands:
        out.error = "no timed rep of " + ("main" if not mains else "the candidate") + " ran in this session"
        return out
    unpaired = [rep for rep, _ in cands if (rep.phase, rep.index) not in mains]
    if unpaired:    # main's run of that section was before an interruption (round.speed: sections-lost)
        notice("warn", "timed-path-unpaired", f"{len(unpaired)} candidate run(s) have no run of main's in this "
               "session to compare with (a resumed round): they are not checked")
    for rep, d in cands:
        base = mains.get((rep.phase, rep.index))
        if base is None:
            continue
        row = TimedPathRep(index=rep.index, attempt=rep.attempt, phase=rep.phase)
        try:
            g = parity.grade_row(protocol.read_row_logits(base / "bench_logits.npy", p.parity.vocab, LOGITS_MAX_BYTES),
                                 protocol.read_row_logits(d / "bench_logits.npy", p.parity.vocab, LOGITS_MAX_BYTES))
            row.kl, row.top1 = g.kl, g.top1
            row.acks_agree, row.chunks = _agreement(base / "acks.txt", d / "acks.txt")
        except (parity.ParityInputError, OSError, ValueError) as e:
            row.error = f"{rep.phase} rep {rep.index}: {e}"
        out.candidate.append(row)
    if bad := parity_grade.handed_over_problems(out.candidate, p.gate):
        notice("error", "timed-path", f"the candidate's runs computed something else than main's runs of the same "
               f"sections: {bad[0].message}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
    else:
        notice("info", "timed-path", f"the candidate's runs ({len(cands)}) answered their sections as main's did")
    return out


def _agreement(main_acks: Path, cand_acks: Path) -> tuple[float, int]:
    """The share of chunks whose answer (argmax) is main's, and how many chunks were answered."""
    a, c = main_acks.read_text().split(), cand_acks.read_text().split()
    if len(a) != len(c) or not a:
        raise ValueError(f"{len(c)} answers against main's {len(a)}")
    return sum(x == y for x, y in zip(a, c)) / len(a), len(a)


def new_record(b: Bench, meta: dict | None = None, backend: BackendCheck | None = None) -> ParityRecord:
    """The reference as the receipt names it; ``meta`` is how it was captured (its build, command,
    weights and backend), and whether that build was main's own source; ``backend`` is the round's
    backend against the reference's (core.backend.compare, re-derivable from its two sides)."""
    p = b.profile
    ref = {"sha256": p.parity.reference_sha256, "document_sha256": p.parity.document_sha256,
           "depths": list(p.parity.depths), "rows": p.parity.rows, "vocab": p.parity.vocab}
    if p.parity.reference_format != "full":
        ref.update(format=p.parity.reference_format, top_k=p.parity.top_k)
    if backend is not None:
        ref["backend"] = backend.to_dict()
    if meta:
        ref["captured"] = {k: v for k, v in meta.items() if k != "same_as_main"}
        ref["same_as_main"] = bool(meta.get("same_as_main"))
    return ParityRecord(reference=ReferenceFacts.from_dict(ref))
