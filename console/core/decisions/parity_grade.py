"""Parity graded, before any timing counts: each depth against the reference and against main
(a ratchet), borderline depths adjudicated, the scored-path and timed-path bars, the server's
answers, and task accuracy. A candidate that fails here earns no speed figure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import scipy.stats as sps

from console.core.decisions.counting import counted, measured_blocks, typed
from console.core.decisions import accuracy, served_tokens, serving
from console.core.records import adjudication
from console.core.records.adjudication import Adjudication, Ruling
from console.core.records.figures import finite, shown
from console.core.records.parity import DepthStatus, depth_status, versus_main, worst_depth
from console.core.records.receipt import (BUILDS, ParityRecord, ParitySide, PathFigures, Receipt, TimedPath,
                                          TimedPathRep)
from console.core.records.rules import GateRules
from console.core.statistics import stats
from console.core.records.verdict import Caveat, Reason
from console.core.records.verdict import reason, warning





def grade_depths(side: ParitySide | None, main: ParitySide | None, rules: GateRules,
                 adj: Adjudication | None = None) -> list[DepthStatus]:
    """Every depth of one build graded: the candidate with the ratchet against main (and its
    borderline depths settled by ``adj`` when the round adjudicated them), main alone."""
    if side is None:
        return []
    graded = [depth_status(f, main.at(f.depth) if main is not None else None, rules) for f in side.depths]
    ruling = adjudicate(side, graded, rules, adj) if main is not None else None
    if ruling is None:
        return graded
    out, told = [], False
    for f, st in zip(side.depths, graded):
        if f.depth in ruling.depths:
            if ruling.passed:
                st = DepthStatus(f.depth, "adjudicated", st.drift, (), reason(
                    "parity-adjudicated", f"depth {f.depth}: mean KL {f.kl:.3g} nats is over the bar "
                    f"{rules.kl_max:g}, within the borderline band; {ruling.summary}", depth=f.depth,
                    figure="kl", bar=ruling.depths[f.depth]["line"], value=f.kl))
            else:
                extra = [x for x in ruling.reasons if x.depth == f.depth or (x.depth is None and not told)]
                told = told or any(x.depth is None for x in extra)
                st = DepthStatus(f.depth, "fail", st.drift, st.reasons + tuple(extra))
        out.append(st)
    return out


def borderline(side: ParitySide, graded: list[DepthStatus], rules: GateRules) -> dict[int, float]:
    """depth -> mean KL of the depths that fail on KL alone, inside the borderline band."""
    return {f.depth: f.kl for f, st in zip(side.depths, graded)
            if st.status == "fail" and all(x.code == "parity-kl" for x in st.reasons)
            and adjudication.is_borderline(f.kl, f.top1, rules)}


def adjudicate(side: ParitySide, graded: list[DepthStatus], rules: GateRules,
               adj: Adjudication | None) -> Ruling | None:
    """The ruling on the candidate's borderline depths; None when none is borderline or the round
    did not adjudicate (then they stay failures)."""
    border = borderline(side, graded, rules)
    if not border or adj is None:
        return None
    return adjudication.rule(adj, border, rules)


def parity_ok(side: ParitySide | None, main: ParitySide | None, rules: GateRules,
              adj: Adjudication | None = None) -> bool:
    """Whether one build's logits pass at every depth (uncheckable depths are not failures).

    Pass ``main`` to apply the ratchet (the candidate); ``None`` grades a build alone (main).
    """
    if side is None or side.error:
        return False
    return all(st.passing for st in grade_depths(side, main, rules, adj))


def path_problems(fig: PathFigures | None, rules: GateRules, where: str, basis: str = "") -> list[Reason]:
    """A bench run's own final logits against the bars: the scored path (against the
    reference) and each timed rep (against main's) use this one rule."""
    depth = fig.depth if fig else None
    kind = "timed-path" if basis else "scored-path"
    if fig is None or fig.error:
        why = (fig.error if fig else None) or "no figures"
        return [reason(f"{kind}-error", f"{where}: {why}", depth=depth)]
    out = [reason(f"{kind}-not-finite", f"{where}: {name} is {shown(x)}, not a finite number: it cannot pass its "
                                        "bar", depth=depth, figure=name, bar=bar)
           for name, x, bar in (("kl", fig.kl, rules.kl_max), ("top1", fig.top1, rules.top1_min)) if not finite(x)]
    if out:
        return out
    if fig.kl > rules.kl_max:
        out.append(reason(f"{kind}-kl", f"{where}: KL {fig.kl:.3g} nats{basis} > bar {rules.kl_max:.3g}",
                          depth=depth, figure="kl", bar=rules.kl_max, value=fig.kl))
    if fig.top1 < rules.top1_min:
        msg = (f"{where}: predicts another next token than main" if basis else
               f"{where}: top-1 {fig.top1:.3f} < bar {rules.top1_min:.3f} "
               "(the timed path predicts a different next token)")
        out.append(reason(f"{kind}-top1", msg, depth=depth, figure="top1", bar=rules.top1_min, value=fig.top1))
    return out


def path_ok(fig: PathFigures | None, rules: GateRules) -> bool:
    return not path_problems(fig, rules, "")


@dataclass(frozen=True)
class ParityGrade:
    """The candidate's parity, against the reference and main: the verdict's parity table, the
    reasons that reject it and the warnings said beside."""
    table: dict[str, Any]
    reasons: tuple[Reason, ...]
    warnings: tuple[Caveat, ...]

    @property
    def passed(self) -> bool:
        return not self.reasons


def grade_parity(receipt: Receipt, rules: GateRules) -> ParityGrade:
    """The candidate's parity graded at every declared depth, its scored and timed paths and its server."""
    par = typed(receipt).parity
    cand_side, main_side = par.candidate, par.main
    reasons: list[Reason] = []
    warnings: list[Caveat] = []

    cand_error = cand_side.error if cand_side else "no parity figures for the candidate"
    if cand_error:
        reasons.append(reason("parity-error", f"candidate parity could not be graded: {cand_error}"))
    main_error = main_side.error if main_side else "no parity figures for main"
    if main_error:
        warnings.append(warning("main-parity-error",
                                f"main's parity could not be graded ({main_error}); the ratchet against "
                                "main is not applied this round, the absolute bars still are"))

    graded = {st.depth: st for st in grade_depths(cand_side, main_side, rules, par.adjudication)}
    table = []
    for d in par.declared_depths:
        c = cand_side.at(d) if cand_side else None
        m = main_side.at(d) if main_side else None
        st = graded.get(d)
        if c is None or st is None:
            if not cand_error:
                reasons.append(reason("parity-missing", f"depth {d}: no candidate figures", depth=d))
            table.append({"depth": d, "main": m.to_dict() if m else None, "candidate": None,
                          "status": "missing", "drift": None})
            continue
        reasons.extend(st.reasons)
        table.append({"depth": d, "main": m.to_dict() if m else None, "candidate": c.to_dict(),
                      "status": st.status, "drift": st.drift})
    drifting = [st for st in graded.values() if st.status == "drift"]
    if drifting:
        warnings.append(drift_warning(drifting, rules))
    ruling = None
    if cand_side is not None and main_side is not None:     # the same ruling grade_depths applied
        ruling = adjudicate(cand_side, grade_depths(cand_side, main_side, rules), rules, par.adjudication)
    if ruling is not None and ruling.passed:
        warnings.append(warning("parity-adjudicated", f"borderline KL at depth "
                                f"{', '.join(map(str, ruling.depths))} settled against the reference's own "
                                f"kernel spread: {ruling.summary}"))

    main_failing = [st.depth for st in grade_depths(main_side, None, rules) if st.status == "fail"]
    if main_failing:
        warnings.append(warning("main-parity-fail",
                                "main itself misses the parity bars at depth " + ", ".join(map(str, main_failing))
                                + "; the reference may not match main's model"))

    rows = [row for row in table if row["candidate"] is not None]
    unchecked = [row["depth"] for row in rows if row["status"] == "uncheckable"]
    if unchecked and len(unchecked) < len(rows):
        warnings.append(warning("parity-uncheckable",
                                "near-uniform reference at depth " + ", ".join(map(str, unchecked))
                                + ": those depths cannot reveal a fault and were not graded"))

    if par.reference.same_as_main:
        warnings.append(warning("reference-is-main",
                                "the reference was captured from main's own source: main's KL is zero by "
                                "construction, so the parity check says 'same as main', not 'correct', and "
                                "the ratchet against main adds nothing"))

    scored = _grade_scored_path(par, rules, reasons, warnings)
    timed = _grade_timed_path(par.timed_path, rules, reasons, warnings)
    reasons.extend(section_problems(typed(receipt)))
    served = grade_server(par, reasons, warnings)
    if served is not None and (missed := ungraded_blocks(typed(receipt), rules)) is not None:
        reasons.append(reason("served-tokens-ungraded", missed, build=None))
    worst = worst_depth([cand_side.at(r["depth"]) for r in rows], rules)
    out = {"depths": table, "worst_depth": worst, "scored_path": scored, "timed_path": timed,
           "candidate_error": cand_error, "main_error": main_error,
           "all_uncheckable": bool(rows) and len(unchecked) == len(rows) and not cand_error}
    if ruling is not None:      # the key is absent from rounds that had nothing borderline
        out["adjudication"] = ruling.to_dict()
    if served is not None:      # serving profiles only
        out["server"] = served
    return ParityGrade(out, tuple(reasons), tuple(warnings))


def section_problems(r: Receipt) -> list[Reason]:
    """A handed-over section whose revealed seed is not the one committed before it ran: what was
    timed cannot be re-derived, so the round is the console's failure (infra), not the candidate's."""
    broken = [s for s in r.sections or () if not s.holds()]
    return [reason("section-commitment", f"{len(broken)} handed-over section(s) reveal a seed that is not the one "
                   f"whose sha256 was journaled before they ran (first: {broken[0].phase} {broken[0].index})",
                   build=None)] if broken else []


def ungraded_blocks(r: Receipt, rules: GateRules) -> str | None:
    """Why the grading did not cover what the gate counts: every response of every counted timed
    block (each cell's, in a matrix of loads; each level's, in a sweep) must have been pooled for
    grading, or the yardstick missed work whose tokens no one checked (the round is infra, never a pass)."""
    graded = r.parity.server.graded if r.parity.server is not None else None
    if graded is None or graded.counted is None:
        return None     # graded before the pool was recorded, or not at all (said elsewhere)
    c = counted(r, rules)
    for b in BUILDS:
        served = sum(len((rep.reported or {}).get("requests") or []) for rep in measured_blocks(r, c, b))
        if graded.counted.get(b, 0) < served:
            return (f"{b}'s counted blocks served {served} responses; the grading read "
                    f"{graded.counted.get(b, 0)} of them: what the others served was never checked")
    return None


def grade_server(par: ParityRecord, reasons: list, warnings: list) -> dict[str, Any] | None:
    """Each server's greedy answers and cache probe (core.serving), then the timed blocks' served
    tokens (core.served_tokens): the candidate's problems reject it; main's are said (main is the
    yardstick, not on trial); a grading that could not run is the node's (infra)."""
    chk = par.server
    if chk is None:
        return None
    out: dict[str, Any] = {}
    for b in BUILDS:
        problems = serving.side_problems(getattr(chk, b), chk.min_match, chk.repeat_ratio)
        out[b] = {"status": "fail" if problems else "pass", "problems": problems}
        for text in problems:
            if b == "candidate":
                reasons.append(reason("server-check", f"candidate's server: {text}"))
            else:
                warnings.append(warning("main-server-check", f"main's own server: {text}"))
    if chk.workload is not None and not chk.workload.holds():
        reasons.append(reason("workload-commitment", "the timed workload's revealed seed is not the one whose "
                              f"sha256 ({chk.workload.commitment[:16]}…) was committed before the first block",
                              build=None))
    if chk.workload is not None and chk.workload.drawn == 0:
        warnings.append(warning("workload-public", "the timed prompts took no drawn ids (a workload file's, or "
                                "plain slices of the document): each was public before the round, so a server "
                                "could have computed its answer before it was ready"))
    if said := serving.ready_work(chk.main, chk.candidate):
        warnings.append(warning("server-ready-work", said))
    if chk.graded is not None:
        ruling = served_tokens.rule(chk.graded)
        out["graded"] = ruling.table
        if ruling.error:
            reasons.append(reason("served-tokens-ungraded", f"the served tokens could not be graded: {ruling.error}",
                                  build=None))
        reasons.extend(reason("served-tokens-main", f"main's own server under load: {t}", build=None)
                       for t in ruling.main_broken)
        reasons.extend(reason("served-tokens", f"candidate's server under load: {t}") for t in ruling.candidate)
        warnings.extend(warning("main-served-tokens", f"main's own server under load: {t}") for t in ruling.main)
        warnings.extend(warning("served-tokens-uncertain", f"candidate's server under load: {t}")
                        for t in ruling.uncertain)
    return out


def drift_warning(drifting: list[DepthStatus], rules: GateRules) -> Caveat:
    """One warning naming every depth that drifts from main while still legal, with its figures."""
    figures = "; ".join(f"depth {st.depth}: KL {st.warning.value:.3g} nats, {versus_main(st.drift)}"
                        for st in drifting if st.warning is not None and st.warning.value is not None)
    return warning("parity-drift", f"legal drift against main at depth {', '.join(str(st.depth) for st in drifting)} "
                                   f"({figures}): under the bar {rules.kl_max:g}, so not rejected, but more than "
                                   f"{rules.ratchet:g}x main and over the {rules.drift_floor:g}-nat floor; "
                                   "the ratchet rejects it once it reaches the bar")


def parity_passes(receipt: Receipt, rules: GateRules) -> bool:
    """Whether the candidate passed every parity check and its task accuracy: the round uses it
    to skip timing."""
    r = typed(receipt)
    return grade_parity(r, rules).passed and not grade_accuracy(r, rules)[1]


def grade_accuracy(receipt: Receipt, rules: GateRules) -> tuple[dict[str, Any] | None, list]:
    """(accuracy table, reasons) of the task accuracy stage; (None, []) when the round had none.

    A reason's ``build`` says whose problem it is: the candidate's score or run ("candidate"),
    or the reference side's run (None: the yardstick failed, so the round is infra)."""
    acc = typed(receipt).accuracy
    if acc is None:
        return None, []
    n = len(acc.answers)
    table: dict[str, Any] = {"items": n, "tasks_sha256": acc.tasks_sha256, "tokens": acc.tokens,
                             "reference_build": acc.reference.build if acc.reference else None}

    def outcomes(side: Any, who: str) -> tuple[list[bool] | None, Reason | None]:
        why = ("did not run" if side is None else side.error
               or (None if side.outputs is not None and len(side.outputs) == n
                   else f"{len(side.outputs or [])} answers for {n} items"))
        if why:
            return None, reason("accuracy-error", f"task accuracy: the {who} side could not be scored: {why}",
                                build="candidate" if who == "candidate" else None)
        return [accuracy.is_correct(o, a) for o, a in zip(side.outputs, acc.answers)], None

    ref_ok, ref_err = outcomes(acc.reference, "reference")
    cand_ok, cand_err = outcomes(acc.candidate, "candidate")
    errors = [e for e in (ref_err, cand_err) if e is not None]
    if ref_ok is None or cand_ok is None:
        table["status"] = "error"
        return table, errors
    g = accuracy.grade(ref_ok, cand_ok, rules)
    kinds: dict[str, list[int]] = {}
    for kind, r_ok, c_ok in zip(acc.kinds or [""] * n, ref_ok, cand_ok):
        row = kinds.setdefault(kind, [0, 0, 0])
        row[0] += 1
        row[1] += int(r_ok)
        row[2] += int(c_ok)
    table.update(g.to_dict(), status="pass" if g.passed else "fail",
                 per_kind={k: {"items": v[0], "reference": v[1], "candidate": v[2]} for k, v in kinds.items()},
                 reference_ok=ref_ok, candidate_ok=cand_ok)
    if g.passed:
        return table, []
    return table, [reason("accuracy-score",
                          f"task accuracy {g.candidate_score:.1%} against the reference's {g.reference_score:.1%} "
                          f"({g.delta * 100:+.1f} points over {n} items) is outside the tolerance "
                          f"±{g.tolerance * 100:.1f} points ({g.estimator}, {g.level:.0%}); "
                          f"{g.only_reference} item(s) only the reference answered, {g.only_candidate} only the "
                          "candidate", figure="accuracy", bar=g.tolerance, value=g.delta)]


def _grade_scored_path(par: ParityRecord, rules: GateRules, reasons: list, warnings: list) -> dict[str, Any]:
    """The bench's own final logits against the reference: did the scored path compute the model?"""
    main, c = par.scored_path.get("main"), par.scored_path.get("candidate")
    main_d = main.to_dict() if main else None
    if not c and par.server is not None:
        # a serving round's timed path is its server: the server check (graded below) compares it
        return {"main": None, "candidate": None, "status": "server"}
    if not c:
        warnings.append(warning("scored-path-unchecked",
                                "the scored-path check did not run: the timed path's own output was not compared"))
        return {"main": main_d, "candidate": None, "status": "unchecked"}
    found = path_problems(c, rules, f"scored path (depth {c.depth})")
    reasons.extend(found)
    return {"main": main_d, "candidate": c.to_dict(), "status": "fail" if found else "pass"}


def _grade_timed_path(tp: TimedPath | None, rules: GateRules, reasons: list, warnings: list) -> dict[str, Any]:
    """Each candidate timed rep's own output against main's, same inputs and shortcut.

    Absent before the timed reps run (the round asks for parity first) and in receipts
    older than the check: then it is said, not failed.
    """
    if tp is None:
        return {"status": "unchecked"}
    if tp.error or not tp.candidate:
        warnings.append(warning("timed-path-unchecked", "the timed reps' own output was not compared with "
                                f"main's: {tp.error or 'no candidate timed rep'}"))
        return {"status": "unchecked", "depth": tp.depth}
    before = len(reasons)
    if tp.basis == "section":
        reasons.extend(handed_over_problems(tp.candidate, rules))
    for r in tp.candidate if tp.basis != "section" else ():
        where = f"timed path (depth {tp.depth}, candidate timed rep {r.index})"
        reasons.extend(path_problems(PathFigures(tp.depth, r.top1, r.kl, r.error), rules, where,
                                     basis=" against main's"))
    worst = max((r.kl for r in tp.candidate if finite(r.kl)), default=None)
    return {"status": "fail" if len(reasons) > before else "pass", "depth": tp.depth,
            "reps": len(tp.candidate), "worst_kl": worst}


# The chance that a phase whose runs flip argmaxes at exactly the bar's rate (1 - gate.top1_min) is
# refused on its top-1 or its answers: a phase of a few runs cannot fail on one near-tie flip.
PATH_FALSE_REJECT = 0.01


def decidedly_under(flips: int, n: int, top1_min: float) -> bool:
    """Whether ``flips`` disagreements in ``n`` are decidedly more than the bar allows: at least that
    many happen with chance at most PATH_FALSE_REJECT when each flips at the rate 1 - ``top1_min``."""
    if n <= 0 or flips <= 0:
        return False
    return float(sps.binom.sf(flips - 1, n, 1.0 - top1_min)) <= PATH_FALSE_REJECT


def handed_over_problems(rows: Sequence[TimedPathRep], rules: GateRules) -> list[Reason]:
    """The candidate's runs of handed-over sections against main's runs of the same sections, graded
    per phase (the timed pairs, the short runs, each guard) as parity grades a depth: the median KL
    of the final rows under ``kl_max``; the final rows' top-1 and the chunks' answers main's, their
    disagreements not decidedly more than ``top1_min`` allows (one-sided binomial at
    PATH_FALSE_REJECT: four short runs of an honest release may flip one near-tie). A row of a drawn
    section is heavy-tailed between two honest builds (0.3.36 against 0.3.16: 0 to 0.24 nats over ten
    timed runs, median 0.014), so one row is not graded alone; a candidate that computes something
    else moves them all. A run whose output could not be read fails on its own."""
    out = [reason("timed-path-error", f"timed path ({r.phase} rep {r.index}): {r.error}") for r in rows if r.error]
    phases: dict[str, list[TimedPathRep]] = {}
    for r in rows:
        if not r.error:
            phases.setdefault(r.phase, []).append(r)
    for phase, rs in phases.items():
        where = f"timed path ({phase}, {len(rs)} run(s) against main's runs of the same sections)"
        kl, top1 = [r.kl for r in rs], [r.top1 for r in rs]
        if not all(finite(x) for x in kl + top1):
            out.append(reason("timed-path-not-finite", f"{where}: a KL or top-1 figure is not a finite number"))
            continue
        med = stats.median(kl)
        if med > rules.kl_max:
            out.append(reason("timed-path-kl", f"{where}: median KL {med:.3g} nats against main's > bar "
                                               f"{rules.kl_max:.3g}", figure="kl", bar=rules.kl_max, value=med))
        for code, what, figure, (agreed, n) in (
                ("timed-path-top1", "final rows predict main's next token", "top1", _rows_agreed(rs)),
                ("timed-path-answers", "chunks are answered as main answered them", "acks_agree", _chunks_agreed(rs))):
            if decidedly_under(n - agreed, n, rules.top1_min):
                out.append(reason(code, f"{where}: {agreed} of {n} {what} ({agreed / n:.1%}), decidedly under "
                                        f"{rules.top1_min:.1%} (one-sided binomial at {PATH_FALSE_REJECT:g})",
                                  figure=figure, bar=rules.top1_min, value=agreed / n))
    return out


def _rows_agreed(rs: Sequence[TimedPathRep]) -> tuple[int, int]:
    """Final rows whose top-1 is main's, of all (one final row per run)."""
    return round(sum(r.top1 for r in rs)), len(rs)


def _chunks_agreed(rs: Sequence[TimedPathRep]) -> tuple[int, int]:
    """Chunks answered as main answered them, of all the runs' chunks (a run that did not say how many
    chunks it answered counts as one)."""
    runs = [(r.acks_agree, r.chunks or 1) for r in rs if r.acks_agree is not None]
    return round(sum(a * n for a, n in runs)), sum(n for _, n in runs)
