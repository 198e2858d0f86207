"""Settling borderline KL in the round: the reference build's kernel variants, then completions.

The reference build is main's image when the reference was captured from main's own source
(the llama.cpp profile's case); a profile whose reference is another build cannot be
adjudicated in the round, and its borderline depths stay failures (said in the record).
What is measured goes into the receipt; the ruling is the gate's (console.core.records.adjudication).
"""
from __future__ import annotations


from .. import events as ev
from ..engine import protocol
from ..core.records import adjudication as adj
from ..core.records import parity, topk
from ..core.records.adjudication import Adjudication, Variant
from ..runtime.base import INPUTS_ROOT, OUT_ROOT
from .parity import LOGITS_MAX_BYTES, drop_logits, next_tokens
from .schedule import DOC_NAME, fill, logits_argv
from .reps import Bench



def settle(b: Bench, border: dict[int, float], ref: topk.Reference, same_as_main: bool, emit: ev.Emit,
           check_abort: ev.CheckAbort) -> Adjudication:
    p = b.profile
    spec = p.adjudication
    assert spec is not None
    record = Adjudication(depths=sorted(border), tokens=spec.tokens)
    listed = ", ".join(f"{d} (KL {k:.3g})" for d, k in sorted(border.items()))
    emit(ev.AdjudicationStep(step="started", message=f"borderline KL at depth {listed}: measuring the "
                             f"reference's own kernel spread ({len(spec.variants)} variant(s))",
                             figures={"depths": record.depths, "band": p.gate.borderline_kl}))
    if not same_as_main:
        record.error = ("the reference was not captured from main's source, and the round has no reference "
                        "build to re-run with its alternative kernels")
        return record
    for name, args in spec.variants:
        check_abort()
        record.variants.append(_variant(b, name, list(args), ref, emit, check_abort))
    ruling = adj.rule(record, border, p.gate)
    if any(x.figure == "kl" for x in ruling.reasons):
        return record       # outside the spread already: completions cannot change the outcome
    check_abort()
    _completions(b, record, emit, check_abort)
    return record


def _variant(b: Bench, name: str, args: list[str], ref: topk.Reference, emit: ev.Emit,
             check_abort: ev.CheckAbort) -> Variant:
    p = b.profile
    v = Variant(name=name, args=args)
    out_dir = b.work / "runs" / f"adjudicate-{name}"
    res = b.rt.run(b.builds["main"], logits_argv(p.parity.command, p) + args, src_dir=b.src_dirs["main"],
                   inputs_dir=b.inputs, out_dir=out_dir, run=p.run, label=f"reference/{name}", gpus=b.gpus,
                   models=b.models)
    check_abort()
    try:
        if res.exit_code != 0:
            raise parity.ParityInputError(f"exit status {res.exit_code}: "
                                          + " | ".join(protocol.log_tail(res.stderr or res.stdout)[-2:]))
        arr = protocol.read_logits(out_dir / p.parity.output, depths=len(p.parity.depths), rows=p.parity.rows,
                                   vocab=p.parity.vocab, max_bytes=LOGITS_MAX_BYTES)
        figs = topk.grade_logits(ref, arr, p.parity.depths, p.parity.rows, p.parity.vocab,
                                 next_tokens=next_tokens(b))
        v.kl = {f.depth: f.kl for f in figs}
        drop_logits(b, out_dir / p.parity.output)
    except parity.ParityInputError as e:
        v.error = f"the reference with {' '.join(args)}: {e}"
    emit(ev.AdjudicationStep(step="variant", message=f"reference with {name} ({' '.join(args)}): " + (
        v.error or "KL " + ", ".join(f"{d}: {k:.3g}" for d, k in v.kl.items())), figures=v.to_dict()))
    return v


def generate(b: Bench, image: str, label: str, extra: list[str], positions: list[int],
             expected: int, tokens: int | None = None) -> tuple[list[list[int]] | None, str | None]:
    """Greedy completions from the document's first ``positions`` tokens through ``image``'s harness
    (the profile's [adjudication] command): the token ids per position, or None and why."""
    p = b.profile
    spec = p.adjudication
    if spec is None:
        return None, "the profile has no [adjudication] command to generate completions with"
    out_dir = b.work / "runs" / f"completions-{label}"
    argv = fill(spec.command, p, doc=f"{INPUTS_ROOT}/{DOC_NAME}", positions=",".join(map(str, positions)),
                tokens=str(tokens or spec.tokens), out=OUT_ROOT) + extra
    res = b.rt.run(b.builds[image], argv, src_dir=b.src_dirs[image], inputs_dir=b.inputs, out_dir=out_dir,
                   run=p.run, label=f"{label}/completions", gpus=b.gpus, models=b.models)
    if res.exit_code != 0:
        return None, f"{label}: exit status {res.exit_code}: " + " | ".join(
            protocol.log_tail(res.stderr or res.stdout)[-2:])
    try:
        return adj.parse_tokens((out_dir / "generated.txt").read_text(errors="replace"), expected), None
    except (OSError, ValueError) as e:
        return None, f"{label}: {e}"


def _completions(b: Bench, record: Adjudication, emit: ev.Emit, check_abort: ev.CheckAbort) -> None:
    p = b.profile
    spec = p.adjudication
    assert spec is not None
    record.positions = adj.positions(p.parity.depths, spec.completions)
    n = len(record.positions)
    record.reference, err = generate(b, "main", "reference", [], record.positions, n)
    check_abort()
    if record.reference is None:
        record.error = err
        return
    follow = "adjudication-follow.txt"
    (b.inputs / follow).write_text("".join(" ".join(map(str, t)) + "\t\n" for t in record.reference))
    forced = fill(spec.follow, None, follow=f"{INPUTS_ROOT}/{follow}")
    record.candidate, err = generate(b, "candidate", "candidate", forced, record.positions, n)
    for v in record.variants:
        check_abort()
        # A variant whose logits were bit-identical to the reference's at every depth adds nothing
        # to the worst variant's count; it is not run again (its followed stays None).
        if v.error is None and any(k > 0 for k in v.kl.values()):
            v.followed, verr = generate(b, "main", f"reference-{v.name}", forced + v.args, record.positions, n)
            v.error = verr
    record.error = err
    total = sum(len(t) for t in record.reference)
    figures = {"positions": n, "tokens": total,
               "candidate": adj.disagreements(record.reference, record.candidate),
               "variants": {v.name: adj.disagreements(record.reference, v.followed) for v in record.variants}}
    emit(ev.AdjudicationStep(step="completions", message=f"{n} completions of up to {spec.tokens} tokens: the "
                             f"candidate differs from the reference's tokens at {figures['candidate']} of {total} "
                             "positions; the reference's own kernels at " + ", ".join(
                                 f"{k}: {'identical logits' if x is None else x}"
                                 for k, x in figures["variants"].items()), figures=figures))
