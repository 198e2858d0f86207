"""The verdict, re-derived from a receipt's raw measurements alone, and the rules it uses.

Every reader (the round, replay, the lock, the reports, the screens) calls these rules
rather than keeping its own copy:

- ``counts(rep)`` / ``counted(receipt, rules)``: which reps count, and why the others don't;
- ``summarize``: per-build figures over exactly those reps;
- ``grade_depths`` / ``parity_ok``: per-depth grades (ratchet against main) and the parity verdict;
- ``path_problems`` / ``path_ok``: the scored-path and timed-path bars;
- ``decide``: the verdict of a round or a noise round (the apparatus refusal included);
- ``log_ratios`` / ``progress``: the paired estimand, and the decision so far (the round's
  stopping rule), both from ``sequential`` (docs/DECIDING.md).

Order: apparatus → parity → claims → guards → the sequential decision (and its tier) →
plausibility. Each stage can end the decision; later stages never soften an earlier one.
Each receipt is decided under the rules it was sealed under (``Ruleset``, at the end): schema-1
receipts reach the same stages and are then judged by ``legacy``.

Who is blamed for what:

- The candidate's own problems (parity failures, refused or failed runs, claims the
  wall clock contradicts, a guard breach) reject it.
- Main's problems make the round ``infra``: main is the yardstick, and a yardstick
  that fails its own claims usually means the node (its clock, its memory meter) is
  at fault, so nothing is recorded against the candidate; the round is retried.
  Main's claim problems take precedence over the candidate's for the same reason.
- Reps marked ``suspect`` (node trouble seen by telemetry) or ``aborted`` are left out
  of every statistic; too few valid reps left is ``infra`` with a diagnosis.
- A receipt whose status is ``infra`` is ``infra``, whatever it measured.

Outcomes and exit codes: accepted/none/undecided 0, rejected 1, slower 1 (0 when the profile
records it), infra 3, implausible and uncheckable 4 (held for review). Noise receipts give
``noise`` (0) or ``infra``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from console.core import accuracy, adjudication, claims, legacy, matrix, sequential, served_tokens, serving, stats
from console.core.adjudication import Adjudication, Ruling
from console.core.figures import finite, shown
from console.core.parity import DepthStatus, depth_status, versus_main, worst_depth
from console.core.receipt import (BUILDS, Figures, ParityRecord, ParitySide, PathFigures, Pins, Receipt,
                                  Rep, Sequential, TimedPath, is_bench_phase, plain)
from console.core.rules import GateRules
from console.core.sequential import band  # noqa: F401 - one definition, re-exported
from console.core.verdict import BANDS, OUTCOMES, Caveat, NoiseReport, Outcome, Reason, Speed, Verdict  # noqa: F401
from console.core.verdict import num as _num, pct as _pct, reason, warning




def _typed(receipt: Receipt) -> Receipt:
    """The gate reads typed receipts only: whoever holds a document reads it once, at its edge."""
    if not isinstance(receipt, Receipt):
        raise TypeError(f"the gate takes a Receipt, not a {type(receipt).__name__}: read the document "
                        "once with Receipt.from_dict and pass the receipt")
    return receipt


# --- parity ------------------------------------------------------------------------

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
    par = _typed(receipt).parity
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

    if (par.reference or {}).get("same_as_main"):
        warnings.append(warning("reference-is-main",
                                "the reference was captured from main's own source: main's KL is zero by "
                                "construction, so the parity check says 'same as main', not 'correct', and "
                                "the ratchet against main adds nothing"))

    scored = _grade_scored_path(par, rules, reasons, warnings)
    timed = _grade_timed_path(par.timed_path, rules, reasons, warnings)
    served = _grade_server(par, reasons, warnings)
    worst = worst_depth([cand_side.at(r["depth"]) for r in rows], rules)
    out = {"depths": table, "worst_depth": worst, "scored_path": scored, "timed_path": timed,
           "candidate_error": cand_error, "main_error": main_error,
           "all_uncheckable": bool(rows) and len(unchecked) == len(rows) and not cand_error}
    if ruling is not None:      # the key is absent from rounds that had nothing borderline
        out["adjudication"] = ruling.to_dict()
    if served is not None:      # serving profiles only
        out["server"] = served
    return ParityGrade(out, tuple(reasons), tuple(warnings))


def _grade_server(par: ParityRecord, reasons: list, warnings: list) -> dict[str, Any] | None:
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
    r = _typed(receipt)
    return grade_parity(r, rules).passed and not grade_accuracy(r, rules)[1]


def grade_accuracy(receipt: Receipt, rules: GateRules) -> tuple[dict[str, Any] | None, list]:
    """(accuracy table, reasons) of the task accuracy stage; (None, []) when the round had none.

    A reason's ``build`` says whose problem it is: the candidate's score or run ("candidate"),
    or the reference side's run (None: the yardstick failed, so the round is infra)."""
    acc = _typed(receipt).accuracy
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
    for r in tp.candidate:
        where = f"timed path (depth {tp.depth}, candidate timed rep {r.index})"
        reasons.extend(path_problems(PathFigures(tp.depth, r.top1, r.kl, r.error), rules, where,
                                     basis=" against main's"))
    worst = max((r.kl for r in tp.candidate if finite(r.kl)), default=None)
    return {"status": "fail" if len(reasons) > before else "pass", "depth": tp.depth,
            "reps": len(tp.candidate), "worst_kl": worst}


# --- claims: which reps count ------------------------------------------------------

def _claim_problems(rep: Rep, bench: Mapping[str, Any], rules: GateRules) -> list[tuple[str, str]]:
    """(code, message) for every claim of an ``ok`` rep that its evidence does not support."""
    out: list[tuple[str, str]] = []
    label = rep.label
    rep_ = rep.reported or {}
    value = rep.value
    if not finite(value) or not value > 0:
        said = "" if value is None else f" ({_num(value) if finite(value) else shown(value)}: not a positive finite rate)"
        return [("claim-no-value", f"{label}: no valid reported value{said}")]
    wall = float(rep.wall_s or 0.0)
    bound = wall * (1 + rules.wall_margin)
    margin = f"+{rules.wall_margin:.0%} margin"
    elapsed = rep_.get("elapsed_s")
    tokens = rep_.get("tokens", rep.tokens)
    unreadable = [(k, x) for k, x in (("elapsed_s", elapsed), ("tokens", tokens)) if x is not None and not finite(x)]
    if unreadable:
        # a claim no bound can be checked against is not a claim the wall clock supports
        return [("claim-wall", f"{label}: reported {k} is {shown(x)}, not a finite number") for k, x in unreadable]
    if elapsed is not None and elapsed > bound:
        out.append(("claim-wall", f"{label}: reported elapsed {elapsed:.4g} s exceeds the wall clock "
                                  f"{wall:.4g} s ({margin})"))
    if tokens is not None and tokens / value > bound:
        out.append(("claim-wall", f"{label}: {_num(value)}/s over {tokens} tokens implies "
                                  f"{tokens / value:.4g} s, more than the wall clock allows ({wall:.4g} s, {margin})"))
    declared_seek = bench.get("shortcut", "none") == "seek"
    announced = rep_.get("shortcut", "none")
    if announced == "seek" and not declared_seek:
        out.append(("claim-seek", f"{label}: announced a seek the profile does not declare"))
    if declared_seek and (rep.phase in ("timed", "short") or rep.phase.startswith("cell:")):
        if announced != "seek":
            out.append(("claim-seek", f"{label}: did not announce the seek the profile declares "
                                      f"(shortcut {announced!r}): its depth is unproven"))
        else:
            out.extend(_seek_memory_problem(rep, bench, rules, label))
    return out


def _seek_memory_problem(rep: Rep, bench: Mapping[str, Any], rules: GateRules, label: str) -> list[tuple[str, str]]:
    """A seek must have allocated its cache: peak memory covers depth x bytes per position."""
    peak = rep.peak_mem_bytes
    depth = int(rep.depth or bench.get("depth") or 0)
    need = depth * int(bench.get("seek_bytes_per_position", 0)) * rules.seek_memory_fraction
    if not finite(peak):
        return [("claim-seek-memory", f"{label}: no evidence the seek allocated its cache "
                                      f"(peak memory {'was not measured' if peak is None else 'is ' + shown(peak)})")]
    if peak < need:
        return [("claim-seek-memory", f"{label}: peak memory {peak / 2**20:.1f} MiB is below the "
                                      f"{need / 2**20:.1f} MiB a seek to depth {depth} needs")]
    return []


@dataclass
class Counted:
    """The reps that count, and why the others do not."""
    valid: dict[tuple[str, str], list[Rep]]   # (build, phase) -> reps whose figures stand
    problems: dict[str, list[Reason]]         # build -> reasons its reps were refused
    warnings: list[Caveat]
    differential: dict[str, Any]

    def values(self, build: str, phase: str = "timed") -> list[float]:
        return [float(r.value) for r in self.valid.get((build, phase), []) if r.value is not None]


def counts(rep: Rep) -> bool:
    """Whether a single rep can count at all, judged alone: finished ``ok`` with a value and
    the console's own wall clock. The round's claim checks (``counted``) may still refuse it."""
    return rep.status == "ok" and rep.value is not None and finite(rep.wall_s)


def counted(receipt: Receipt, rules: GateRules) -> Counted:
    """Which of a round's reps count: every statistic (the verdict, the receipt's summary, the
    lock's pins, the screens) is computed over these and only these."""
    r = _typed(receipt)
    bench = r.profile.bench
    reps = sorted((x for x in r.reps if is_bench_phase(x.phase)), key=lambda x: x.schedule_key)
    valid: dict[tuple[str, str], list[Rep]] = {}
    problems: dict[str, list[Reason]] = {b: [] for b in BUILDS}
    excluded: dict[str, int] = {}
    gaps: dict[str, int] = {}
    for rep in reps:
        if rep.build not in problems:
            continue
        if rep.excluded:
            excluded[rep.build] = excluded.get(rep.build, 0) + 1
            continue
        # A rep without the console's own wall clock (none recorded, or not a finite number) is a
        # measurement gap, not the build's claim: left out, never held against either build.
        if rep.status == "ok" and not finite(rep.wall_s):
            gaps[rep.build] = gaps.get(rep.build, 0) + 1
            continue
        found = _status_problems(rep) if rep.status != "ok" else _claim_problems(rep, bench, rules)
        problems[rep.build].extend(reason(code, message, build=rep.build) for code, message in found)
        if not found:
            valid.setdefault((rep.build, rep.phase), []).append(rep)

    warnings = [warning("reps-excluded", f"{n} {b} rep(s) marked suspect or aborted were left out "
                                         "of the statistics (node problems, not the build's)")
                for b, n in sorted(excluded.items())]
    warnings += [warning("reps-no-wall", f"{n} {b} rep(s) without a finite wall clock of the console's own were "
                                         "left out of the statistics (a measurement gap, not the build's)")
                 for b, n in sorted(gaps.items())]
    if bench.get("mode") == "serve":
        # the console's own client timed every token: there is no engine claim to check
        differential = {"checked": False, "why": "measured by the console's load client"}
    else:
        differential = ruleset(r).differential(_long_runs(valid, r), problems, rules)
    return Counted(valid, problems, warnings, differential)


def _long_phase(r: Receipt) -> str:
    """The phase of the long runs: the timed runs, or in a matrix round its home cell's (the bench's
    own shape, as the short runs are)."""
    spec = r.profile.matrix
    return spec.cell(spec.home).phase if r.kind == "matrix" and spec is not None else "timed"


def _long_runs(valid: dict[tuple[str, str], list[Rep]], r: Receipt) -> dict[tuple[str, str], list[Rep]]:
    """``valid`` with the long runs as its timed runs: what the wall-clock differential checks the
    short runs against."""
    phase = _long_phase(r)
    return valid if phase == "timed" else {**valid, **{(b, "timed"): valid.get((b, phase), []) for b in BUILDS}}


def _differential(valid: dict, problems: dict, rules: GateRules) -> dict[str, Any]:
    """Each build's rate against its wall clock, and the candidate's fixed cost against main's
    (``claims``: interval bounds at the profile's false-refusal rate)."""
    out: dict[str, Any] = {}
    runs = {b: (valid.get((b, "timed"), []), valid.get((b, "short"), [])) for b in BUILDS}
    for build in BUILDS:
        out[build], problem = claims.differential(*runs[build], rules)
        if problem:
            problems[build].append(reason("claim-differential", f"{build}: {problem}", build=build))
    out["overhead"], problem = claims.overhead_problem(runs["main"], runs["candidate"], rules)
    if problem and not problems["candidate"]:
        problems["candidate"].append(reason("claim-overhead", f"candidate: {problem}"))
    return out


def _legacy_differential(valid: dict, problems: dict, rules: GateRules) -> dict[str, Any]:
    """Schema 1: point estimates from medians (``legacy``)."""
    out: dict[str, Any] = {}
    for build in BUILDS:
        out[build], problem = legacy.differential(valid.get((build, "timed"), []), valid.get((build, "short"), []),
                                                  rules)
        if problem:
            problems[build].append(reason("claim-differential", f"{build}: {problem}", build=build))
    problem = legacy.overhead_problem(out.get("main") or {}, out.get("candidate") or {}, rules)
    if problem and not problems["candidate"]:
        problems["candidate"].append(reason("claim-overhead", f"candidate: {problem}"))
    return out


def summarize(receipt: Receipt, rules: GateRules) -> dict[str, Figures]:
    """Per-build figures of the timed reps that count: the same reps the verdict decided on (a
    matrix round's: its home cell's, the bench's own shape; each cell's are in the verdict)."""
    c = counted(receipt, rules)
    phase = _long_phase(_typed(receipt))
    return {b: Figures(**stats.summary(c.values(b, phase))) for b in BUILDS}


def _status_problems(rep: Rep) -> list[tuple[str, str]]:
    label, status = rep.label, rep.status
    if status == "refused":
        why = "; ".join(str(x) for x in rep.refusals) or "its result line failed the schema"
        return [("refused", f"{label}: refused: {why}")]
    if status in ("failed", "timeout"):
        what = "timed out" if status == "timeout" else f"failed (exit code {rep.exit_code})"
        why = f": {'; '.join(str(x) for x in rep.refusals)}" if rep.refusals else ""
        return [("failed-run", f"{label}: {what}{why}")]
    return [("rep-status", f"{label}: unknown status {status!r}")]


# --- guards -------------------------------------------------------------------------

def _check_guards(c: Counted, lock: Pins, rules: GateRules,
                  reasons: list, warnings: list, infra: list,
                  judge: Callable[..., Reason | Caveat | None]) -> dict[str, Any]:
    out = {}
    for g in rules.guards:
        pinned = float(lock.guards.get(g.name) or 0.0)
        cand = c.values("candidate", f"guard:{g.name}")
        main = c.values("main", f"guard:{g.name}")
        main_med = stats.median(main) if main else None
        # With no pinned floor yet, main measured on this box in this round is the floor:
        # a guard is never switched off merely because the lock is new.
        floor, source = (pinned, "lock") if pinned > 0 else (main_med or 0.0, "main this round")
        row: dict[str, Any] = {"floor": floor, "floor_source": source, "max_drop": g.max_drop, "depth": g.depth,
                               "min_allowed": floor * (1 - g.max_drop), "enforced": floor > 0,
                               "candidate_median": stats.median(cand) if cand else None,
                               "main_median": main_med}
        out[g.name] = row
        if floor <= 0:
            warnings.append(warning("guard-unmeasured", f"guard {g.name}: no pinned floor and no valid main "
                                                        "reps this round; not enforced"))
            continue
        if not cand:
            infra.append(reason("guard-no-reps", f"guard {g.name}: no valid candidate reps to compare "
                                                 f"with its floor {_num(floor)}", build="candidate"))
            continue
        if (found := judge(c, g, floor, source, rules, row)) is not None:
            (reasons if isinstance(found, Reason) else warnings).append(found)
        if source == "lock" and main_med is not None and main_med > floor * (1 + rules.significance):
            warnings.append(warning("guard-floor-stale",
                                    f"guard {g.name}: main measures {_pct(row['main_median'] / floor - 1)} above "
                                    f"the floor {_num(floor)}; a stale-low floor admits regressions"))
    return out


def _check_latency(c: Counted, rules: GateRules, guards: dict[str, Any], reasons: list, warnings: list) -> None:
    """Serving latencies read from the timed blocks, the candidate's over main's in the same pair:
    a decided rise past the allowed share rejects, a possible one is said."""
    if not rules.latency:
        return
    pairs = [((m.reported or {}), (cand.reported or {})) for m, cand in pairs_of(c)]
    for metric, row in serving.latency_rows(pairs, rules.latency, rules.false_accept).items():
        guards[f"latency:{metric}"] = row
        said = (f"{metric}: the candidate's is {_pct(row['ratio'] - 1)} against main's in the same pair "
                f"[{_pct(row['lower'] - 1)}, {_pct(row['upper'] - 1)}] over {row['pairs']} pairs; at most "
                f"{_pct(row['max_rise'])} higher is allowed") if row["ratio"] is not None else ""
        if row["status"] == "unreadable":
            first = row["unreadable"][0]
            reasons.append(reason("latency-not-finite", f"latency guard {metric}: the candidate's block in pair "
                                                        f"{first['pair']} reads {first['value']}, not a positive "
                                                        f"finite number ({len(row['unreadable'])} such block(s))",
                                  figure=f"latency:{metric}", bar=row["allowed"]))
        elif row["status"] == "breach":
            reasons.append(reason("latency-breach", f"latency guard {said}", figure=f"latency:{metric}",
                                  bar=row["allowed"], value=row["lower"]))
        elif row["status"] == "uncertain":
            warnings.append(warning("latency-uncertain", f"latency guard {said}: a breach is possible but "
                                                         "not decided: not rejected"))
        elif row["status"] == "unmeasured":
            warnings.append(warning("latency-unmeasured", f"latency guard {metric}: fewer than 2 pairs with "
                                                          "the figure on both sides; not enforced"))


def _guard_median(c: Counted, g: Any, floor: float, source: str, rules: GateRules,
                  row: dict[str, Any]) -> Reason | None:
    """Schema 1: the candidate's median against the allowed minimum."""
    med = row["candidate_median"]
    if med >= row["min_allowed"]:
        return None
    return reason("guard-breach", f"guard {g.name} (depth {g.depth}): median {_num(med)} is {_pct(med / floor - 1)} "
                                  f"against its floor {_num(floor)}; at most {g.max_drop:.1%} below "
                                  f"({_num(row['min_allowed'])}) is allowed",
                  figure=f"guard:{g.name}", bar=row["min_allowed"], value=med)


def _guard_bound(c: Counted, g: Any, floor: float, source: str, rules: GateRules,
                 row: dict[str, Any]) -> Reason | Caveat | None:
    """A breach decided by the interval, or a warning while the interval still reaches below."""
    if (breach := _guard_breach(c, g, floor, source, rules, row)) is not None:
        return breach
    if row.get("lower") is None or row["lower"] >= row["min_allowed"]:
        return None
    med = row["candidate_median"]
    return warning("guard-uncertain", f"guard {g.name} (depth {g.depth}): {_pct(med / floor - 1)} "
                                      f"[{_pct(row['lower'] / floor - 1)}, {_pct(row['upper'] / floor - 1)}] against "
                                      f"its floor ({source}); the interval reaches below the {_pct(-g.max_drop)} "
                                      "allowed, so a breach is possible but not decided: not rejected")


def _guard_breach(c: Counted, g: Any, floor: float, source: str, rules: GateRules,
                  row: dict[str, Any]) -> Reason | None:
    """A guard is breached only when the candidate is decidedly below the allowed minimum:
    the one-sided upper bound (Student t on the logs, at ``gate.false_accept``) of its level,
    paired with main's guard reps when main this round is the floor, is under it. A noisy
    rep or two cannot reject a candidate; a real drop on a quiet node still does."""
    cand = c.valid.get(("candidate", f"guard:{g.name}"), [])
    if source == "main this round":
        main = {r.index: r for r in c.valid.get(("main", f"guard:{g.name}"), [])}
        values = [float(r.value) / float(main[r.index].value) for r in cand if r.index in main]
        scale, what = floor, "paired with main's guard reps"
    else:
        values = [float(r.value) for r in cand]
        scale, what = 1.0, "its level"
    if len(values) < 2:
        row["upper"] = None
        return None
    level = rules.false_accept
    upper = scale * stats.geometric_bound(values, level, "upper")
    row.update(upper=upper, level=level, lower=scale * stats.geometric_bound(values, level, "lower"))
    if upper >= row["min_allowed"]:
        return None
    med = row["candidate_median"]
    return reason("guard-breach", f"guard {g.name} (depth {g.depth}): median {_num(med)} is {_pct(med / floor - 1)} "
                                  f"against its floor {_num(floor)} ({source}); {what}, at most {_num(upper)} at the "
                                  f"{1 - level:.0%} level, below the {_num(row['min_allowed'])} allowed "
                                  f"({g.max_drop:.1%} under the floor)",
                  figure=f"guard:{g.name}", bar=row["min_allowed"], value=upper)


# --- decide ----------------------------------------------------------------------------

def _node_fault(r: Receipt) -> Reason:
    return reason("node-fault", f"infra: {r.diagnosis or 'the round was marked as a node fault'}", build=None)


def _apparatus_touched(r: Receipt) -> Reason:
    touched = tuple(r.apparatus.touched) if r.apparatus else ()
    return Reason("apparatus-touched", "the candidate changes the measuring apparatus: " + ", ".join(touched)
                  + ". Those paths are protected by the profile; propose harness changes on main instead.",
                  files=touched)


def decide(receipt: Receipt, rules: GateRules) -> Verdict:
    """The verdict of one round (or noise round), from its receipt's raw measurements.

    Stages in order, the first that stops the round giving the verdict: the apparatus, parity
    and task accuracy, the reps that count, the guards, then the speed decision."""
    r = _typed(receipt)
    if r.kind == "noise":
        return _decide_noise(r, rules)
    sealed = ruleset(r)
    said = list(sealed.said)
    if r.apparatus is not None and r.apparatus.touched:
        # Refused before anything was built: the candidate cannot supply its own ruler.
        return Verdict("rejected", reasons=[_apparatus_touched(r)], warnings=said,
                       suppressed="the candidate touched the apparatus")
    graded = grade_parity(r, rules)
    parity, parity_reasons = dict(graded.table), list(graded.reasons)
    accuracy_table, accuracy_reasons = grade_accuracy(r, rules)
    if accuracy_table is not None:
        parity["accuracy"] = accuracy_table
    warnings = said + list(graded.warnings)     # the stages below add theirs: every verdict carries them all
    verdict = _verdicts(warnings, parity)
    if (stopped := _before_timing(r, rules, parity, parity_reasons, accuracy_reasons, verdict)) is not None:
        return stopped
    c = counted(r, rules)
    warnings.extend(c.warnings)
    if (stopped := _reps_invalid(c, verdict, _long_runs(c.valid, r))) is not None:
        return stopped
    if r.kind == "matrix" and r.profile.matrix is not None:
        return _decide_matrix(r, c, rules, warnings, verdict)
    guard_reasons: list[Reason] = []
    guard_infra: list[Reason] = []
    guards = _check_guards(c, r.lock, rules, guard_reasons, warnings, guard_infra, sealed.guard)
    _check_latency(c, rules, guards, guard_reasons, warnings)
    if guard_reasons:
        return verdict("rejected", guard_reasons, suppressed="guard breached", guards=guards)
    if guard_infra:
        return verdict("infra", guard_infra, suppressed="guard not measured", guards=guards)
    return sealed.speed(r, c, rules, guards, warnings, verdict)


def _verdicts(warnings: list[Caveat], parity: dict[str, Any]) -> Callable[..., Verdict]:
    """A maker of this round's verdicts: each carries the round's warnings and parity table."""
    def verdict(outcome: str, reasons: list, speed: Speed | None = None, **kw: Any) -> Verdict:
        return Verdict(outcome=outcome, reasons=reasons, warnings=warnings, parity=parity, speed=speed, **kw)
    return verdict


def _before_timing(r: Receipt, rules: GateRules, parity: dict[str, Any], parity_reasons: list[Reason],
                   accuracy_reasons: list[Reason], verdict: Callable[..., Verdict]) -> Verdict | None:
    """The verdict when the round stops before its timed reps count: a node fault, the reference's
    side of task accuracy, a parity or accuracy failure, or parity that cannot be checked."""
    if r.status == "infra":
        return verdict("infra", [_node_fault(r)], suppressed="infra")
    if any(x.build is None for x in accuracy_reasons):
        return verdict("infra", [x for x in accuracy_reasons if x.build is None],
                       suppressed="the reference side of task accuracy failed")
    if any(x.build is None for x in parity_reasons):    # the yardstick failed (served tokens ungraded)
        return verdict("infra", [x for x in parity_reasons if x.build is None], suppressed="parity not graded")
    parity_reasons = parity_reasons + accuracy_reasons
    if parity_reasons:
        # Every reason is listed: what the candidate's timed reps claimed, where they ran, too.
        refused = counted(r, rules).problems["candidate"]
        return verdict("rejected", parity_reasons + refused, suppressed="parity failed: no speed credit is computed")
    if parity["all_uncheckable"]:
        return verdict("uncheckable", [reason("parity-uncheckable",
                                              "every depth has a near-uniform reference: parity cannot "
                                              "be checked, held for review", build=None)],
                       suppressed="parity uncheckable")
    return None


def _reps_invalid(c: Counted, verdict: Callable[..., Verdict],
                  valid: dict[tuple[str, str], list[Rep]]) -> Verdict | None:
    """The verdict when the reps that count cannot be compared: main's invalid, the candidate's
    claims refused, or too few valid timed reps (a matrix round's: its home cell's) on a side."""
    if c.problems["main"]:
        main_invalid = [x.prefixed("main invalid: ") for x in c.problems["main"]]
        return verdict("infra", main_invalid + c.problems["candidate"], suppressed="main invalid")
    if c.problems["candidate"]:
        return verdict("rejected", c.problems["candidate"], suppressed="claims refused")
    short = [b for b in BUILDS if len(valid.get((b, "timed"), [])) < 2]
    if short:
        return verdict("infra", [reason("too-few-reps",
                                        f"{b}: {len(valid.get((b, 'timed'), []))} valid timed rep(s); "
                                        "at least 2 are needed (the rest failed the node, not the build)",
                                        build=b) for b in short], suppressed="too few valid reps")
    return None


def _decide_legacy_speed(r: Receipt, c: Counted, rules: GateRules, guards: dict[str, Any],
                         warnings: list[Caveat], verdict: Callable[..., Verdict]) -> Verdict:
    """A schema-1 receipt: the fixed-reps rules it was sealed under."""
    speed, not_significant, tier = legacy.decide_speed(c, r.lock, rules, warnings)
    pin_warnings(speed.main_median, r.lock, rules, warnings)
    speed.guards = guards
    if (held := _implausible(speed)) is not None:
        return verdict("implausible", [held], speed, would_be_tier=tier)
    if not_significant is not None:
        return verdict("none", [not_significant], speed)
    return verdict("accepted", [], speed, tier=tier)


def _decide_speed(r: Receipt, c: Counted, rules: GateRules, guards: dict[str, Any],
                  warnings: list[Caveat], verdict: Callable[..., Verdict]) -> Verdict:
    """The sequential decision on the paired gain: accepted, slower, none or undecided, unless
    the result is implausible or its pairs conflict or shift."""
    speed, d = _speed(r, c, rules, warnings)
    speed.guards = guards
    if (doubt := unresolved_claim(c)) is not None:
        warnings.append(warning("claim-unresolved", f"{doubt}; more timed pairs would decide it"))
    if (held := _implausible(speed)) is not None:
        return verdict("implausible", [held], speed, would_be_tier=d.tier)
    if d.state == "conflict":
        return verdict("infra", [_conflict(d, rules)], speed)
    sealed = ruleset(r)
    if (shifted := sealed.settle(r, c, d, speed, rules, warnings)) is not None:
        return verdict("infra", [shifted], speed)
    if d.state == "accepted":
        return verdict("accepted", [], speed, tier=d.tier, tier_span=list(d.span) if d.span else None)
    if d.state == "slower":
        return verdict("slower", [_slower(d, rules)], speed, slower_rejects=rules.slower == "reject")
    if d.state == "none":
        return verdict("none", [sealed.no_change(d, rules)], speed)
    return verdict("undecided", [_undecided(d, speed, rules)], speed)


# --- a matrix round: each cell decided at the family's rates, one verdict from them -----------------

def _cell_view(c: Counted, cell: matrix.Cell) -> Counted:
    """The round's counted reps as one cell sees them: its own reps are its timed reps."""
    return Counted({(b, "timed"): c.valid.get((b, cell.phase), []) for b in BUILDS}, c.problems, [], c.differential)


def _cell_receipt(r: Receipt, cell: matrix.Cell) -> Receipt:
    """The receipt with the cell's own pin as its frontier (pins are keyed by every axis)."""
    lock = replace(r.lock, frontier=float(r.lock.cells.get(cell.key) or 0.0),
                   frontier_slot=str(r.lock.cell_slots.get(cell.key) or ""))
    return replace(r, lock=lock)


def cell_decisions(r: Receipt, c: Counted, rules: GateRules) -> list[tuple[matrix.Cell, sequential.Decision]]:
    """Each cell's decision so far at the family's rates (the round's stopping rule reads these)."""
    spec = r.profile.matrix
    fam = matrix.family_rules(rules, len(spec.cells))
    design = design_of(fam, ruleset(r).design)
    out = []
    for cell in spec.cells:
        view = _cell_view(c, cell)
        d = sequential.decide_pairs([log_ratios(view)], design, basis_of(view, _cell_receipt(r, cell).lock, fam),
                                    rules.bands)
        d.pending = unresolved_claim(c) if cell.key == spec.home else None
        out.append((cell, d))
    return out


def matrix_progress(receipt: Receipt, rules: GateRules) -> list[tuple[matrix.Cell, sequential.Decision]] | None:
    """The matrix round's decisions so far; None once nothing can be decided (claims refused)."""
    r = _typed(receipt)
    c = counted(r, rules)
    if c.problems["main"] or c.problems["candidate"]:
        return None
    return cell_decisions(r, c, rules)


def _cell_result(r: Receipt, c: Counted, cell: matrix.Cell, fam: GateRules) -> tuple[matrix.CellResult, Speed | None]:
    view = _cell_view(c, cell)
    if any(len(view.valid[(b, "timed")]) < 2 for b in BUILDS):
        return matrix.CellResult(cell.key, cell.axes, cell.role, "open", len(pairs_of(view)), math.nan,
                                 (-math.inf, math.inf), metric=cell.metric,
                                 sentence="fewer than two valid runs of a build: not measured"), None
    rc, said = _cell_receipt(r, cell), []
    speed, d = _speed(rc, view, fam, said)
    shifted = ruleset(r).settle(rc, view, d, speed, fam, said)
    state = "conflict" if d.state == "conflict" or shifted is not None else matrix.state_of(cell, d, fam.min_gain)
    sentence = (shifted or (_conflict(d, fam) if d.state == "conflict" else None))
    return matrix.CellResult(
        cell.key, cell.axes, cell.role, state, d.pairs, d.gain, d.interval, speed.main_median,
        speed.candidate_median, d.tier if state == "accepted" else None, d.span if state == "accepted" else None,
        d.basis_interval[0], d.lower_miss, d.upper_miss, cell.metric,
        sentence.message if sentence is not None else "", tuple(w.message for w in said),
        matrix.cleared(d, fam.min_gain)), speed


def _decide_matrix(r: Receipt, c: Counted, rules: GateRules, warnings: list[Caveat],
                   verdict: Callable[..., Verdict]) -> Verdict:
    """Every cell decided at the family's rates (core.matrix), then one verdict by the profile's rule.
    The verdict's figures are those of the cell its outcome rests on first; every cell is kept."""
    spec = r.profile.matrix
    fam = matrix.family_rules(rules, len(spec.cells))
    results, speeds = [], {}
    for cell in spec.cells:
        res, speeds[cell.key] = _cell_result(r, c, cell, fam)
        results.append(res)
    fv = matrix.verdict_of(results, spec.rule)
    lead = next((k for k in (*fv.deciding, spec.home) if speeds.get(k) is not None), None)
    speed = speeds.get(lead) if lead else None
    if speed is not None:
        speed.matrix = {"cells": [x.to_dict() for x in results], "rule": spec.rule, "rule_text": matrix.RULES[spec.rule],
                        "family": matrix.FAMILY, "cells_n": len(results), "lead": lead, "sentence": fv.sentence,
                        "false_accept_per_cell": fam.false_accept, "false_slower_per_cell": fam.false_slower}
    held = [x for k, sp in speeds.items() if sp is not None and (x := _implausible(sp)) is not None]
    if held:
        return verdict("implausible", held, speed, would_be_tier=fv.tier)
    if fv.outcome == "infra":
        return verdict("infra", [reason("cell-conflict", fv.sentence, build=None)], speed)
    if fv.outcome == "slower":
        return verdict("slower", [reason("slower", f"decided: {fv.sentence}")], speed,
                       slower_rejects=rules.slower == "reject")
    if fv.outcome == "accepted":
        return verdict("accepted", [], speed, tier=fv.tier)
    if fv.outcome == "none":
        return verdict("none", [reason("no-gain", f"decided: {fv.sentence}")], speed)
    return verdict("undecided", [reason("undecided", fv.sentence)], speed)


def _conflict(d: sequential.Decision, rules: GateRules) -> Reason:
    """An empty interval at any level the decision reads, said with both ends at each level."""
    levels = [(f"the {rules.false_accept:.0%} false-accept level", d.interval),
              (f"the {rules.miss:.0%} miss level", (d.lower_miss, d.upper_miss))]
    if d.conflict == "narrowed":
        lo, hi = next((ends for _, ends in levels if ends[0] > ends[1]), d.interval)
        return reason("interval-empty", f"the interval emptied after {d.pairs} pairs ({_levels(levels)}; each end "
                                        "the tightest seen so far), so no single gain fits this round's pairs: the "
                                        "node changed mid-round", build=None, figure="interval", bar=hi, value=lo)
    if math.isnan(d.upper_slower) and rules.false_slower != rules.false_accept:
        levels.append((f"the {rules.false_slower:.0%} false-slower level", (math.nan, d.upper_slower)))
    return reason("rounds-disagree", "this round's pairs contradict the earlier rounds of the same candidate pooled "
                                     f"with it ({d.prior_pairs} pairs): {_levels(levels)}; the node changed between "
                                     "them", build=None)


def _levels(levels: list[tuple[str, tuple[float, float]]]) -> str:
    """Each level's interval: its two ends, "empty" where no gain fits, or the ends that crossed."""
    said = []
    for name, (lo, hi) in levels:
        if math.isnan(lo) or math.isnan(hi):
            said.append(f"at {name} no gain is consistent with all of them")
        elif lo > hi:
            said.append(f"at {name} the lower end {_pct(lo)} is above the upper end {_pct(hi)}")
        else:
            said.append(f"at {name} {_shown((lo, hi))}")
    return "; ".join(said)


def _step_check(c: Counted, d: sequential.Decision, speed: Speed, lock: Pins, rules: GateRules,
                warnings: list) -> Reason | None:
    """The round's pairs split where they changed level most (rules 3). A change that bears on
    the outcome makes the round infra; one whose two sides each point to the decided outcome
    leaves it standing; an undecided round's shifted pairs stand but never pool. Both said."""
    if (shift := sequential.step_change(log_ratios(c), rules.step_level)) is None:
        return None
    speed.shift = shift.to_dict()
    if d.state == "open":
        warnings.append(warning("step-change", f"{shift.sentence()}: the node changed mid-round, so these pairs "
                                               "will not pool with a rerun of this candidate"))
    elif shift.agrees(d, design_of(rules, 3), basis_of(c, lock, rules)):
        warnings.append(warning("step-change", f"{shift.sentence()}: the node changed mid-round, but each side "
                                               f"alone points to `{d.state}` as well, so it stands"))
    else:
        return reason("step-change", f"{shift.sentence()}: the node changed mid-round and the two sides do not "
                                     "point to one outcome; run it again on a quiet node", build=None,
                      figure="shift", bar=rules.step_level, value=shift.p)
    return None


def _settled(r: Receipt, c: Counted, d: sequential.Decision, speed: Speed, rules: GateRules,
             warnings: list) -> Reason | None:
    """Rules 3 after a decision: the step check (a shift that bears on the outcome is returned),
    then what the verdict must say beside the outcome."""
    if (shifted := _step_check(c, d, speed, r.lock, rules, warnings)) is not None:
        return shifted
    _decision_warnings(r, d, speed, rules, warnings)
    return None


def _unchecked(r: Receipt, c: Counted, d: sequential.Decision, speed: Speed, rules: GateRules,
               warnings: list) -> Reason | None:
    """Rules 2 checked nothing after a decision."""
    return None


def _decision_warnings(r: Receipt, d: sequential.Decision, speed: Speed, rules: GateRules, warnings: list) -> None:
    """What the verdict must say beside a decided outcome (rules 3): an unsettled tier, a basis
    whose denominator was not measured with the stated rate, a round measured afresh."""
    if d.state == "accepted" and d.span:
        warnings.append(warning("tier-span", f"the tier is {d.span[0]} at least: the basis interval "
                                             f"{_shown(d.basis_interval)} spans {d.span[0]}–{d.span[1]} (the settle "
                                             f"budget of {rules.settle_pairs} pairs did not narrow it to one band)"))
    if d.state == "accepted" and (speed.frontier_source == "lock" or speed.basis_kind == "anchor"):
        what = "the anchor" if speed.basis_kind == "anchor" else "the lock's frontier pin"
        warnings.append(warning("basis-unmeasured", f"the tier basis is against {what}, through main's median this "
                                                    "round taken as exact: the stated false-accept rate covers the "
                                                    "gain against main, not main's own uncertainty in the basis"))
    seq = r.sequential or Sequential()
    if seq.fresh:
        warnings.append(warning("fresh", "measured afresh (--fresh): earlier rounds of this candidate were not "
                                         "pooled, so the false-accept rate holds for this round alone"))


def _no_gain(d: sequential.Decision, rules: GateRules) -> Reason:
    """Rules 2: `none` read on the upper end alone."""
    said = (f"decided: the gain is below {rules.min_gain:.1%}, the smallest the profile cares about (upper end "
            f"{_pct(d.basis_upper_miss)} at the {rules.miss:.0%} miss rate; estimate {_pct(d.gain)})")
    return reason("no-gain", said, figure="gain", bar=rules.min_gain, value=d.basis_upper_miss)


def _no_change(d: sequential.Decision, rules: GateRules) -> Reason:
    said = (f"decided: no gain of {rules.min_gain:.1%} or more and no regression of as much "
            f"({_miss_ends(d)} at the {rules.miss:.0%} miss rate; estimate {_pct(d.gain)})")
    return reason("no-gain", said, figure="gain", bar=rules.min_gain, value=d.basis_upper_miss)


def _implausible(speed: Speed) -> Reason | None:
    p = speed.plausibility
    if speed.candidate_median <= p["ceiling"]:
        return None
    return reason("implausible", f"candidate median {_num(speed.candidate_median)} is above "
                                 f"{p['factor']:g}x the {p['reference_kind']} {_num(p['reference'])} "
                                 f"({_num(p['ceiling'])}): held for review, not recorded",
                  figure="candidate_median", bar=p["ceiling"], value=speed.candidate_median)


def _end(x: float) -> str:
    return "unbounded" if not math.isfinite(x) else _pct(x)


def _shown(iv: tuple[float, float]) -> str:
    return "[" + ", ".join(_end(x) for x in iv) + "]"


def _miss_ends(d: sequential.Decision) -> str:
    """The two ends `none` reads at the miss rate: the gain's lower end against main and the
    basis's upper end. They are one interval only while the basis is the gain itself; against a
    pin above main they are on two scales and can even cross, so each is named."""
    if d.basis_upper_miss == d.upper_miss:
        return f"interval {_shown((d.lower_miss, d.upper_miss))}"
    return f"gain against main at least {_end(d.lower_miss)}, basis at most {_end(d.basis_upper_miss)}"


def _slower(d: sequential.Decision, rules: GateRules) -> Reason:
    verb = "rejected" if rules.slower == "reject" else "recorded, not rejected (gate.slower = \"record\")"
    upper = d.upper_slower if math.isfinite(d.upper_slower) else d.interval[1]
    return reason("slower", f"decided: slower than main, gain {_pct(d.gain)}, at most {_pct(upper)} at the "
                            f"{rules.false_slower:.0%} false-slower level; {verb}",
                  figure="gain", bar=0.0, value=upper)


def _undecided(d: sequential.Decision, speed: Speed, rules: GateRules) -> Reason:
    pooled = f" (with {d.prior_pairs} pooled from earlier rounds)" if d.prior_pairs else ""
    need = (f"; at this noise a decision needs about {speed.needed_pairs} pairs in all" if speed.needed_pairs
            else "; at this noise and gain no budget decides it")
    within = f"nor decided within ±{rules.min_gain:.1%} ({_miss_ends(d)} at the {rules.miss:.0%} miss rate)"
    return reason("undecided", f"budget spent after {d.pairs + d.prior_pairs} pairs{pooled}: gain {_pct(d.gain)}, "
                               f"interval {_shown(d.interval)} at the {rules.false_accept:.0%} level, neither above "
                               f"{rules.significance:.1%} {within}{need}",
                  figure="interval", bar=rules.significance, value=d.basis_interval[0])


# --- the paired estimand ----------------------------------------------------------------

def pairs_of(c: Counted) -> list[tuple[Rep, Rep]]:
    """(main, candidate) timed reps of the same pair: the k-th of each build in the round's
    drift-cancelling order. A pair missing either rep (excluded, refused) is dropped whole."""
    main = {rep.index: rep for rep in c.valid.get(("main", "timed"), [])}
    cand = {rep.index: rep for rep in c.valid.get(("candidate", "timed"), [])}
    return [(main[k], cand[k]) for k in sorted(main.keys() & cand.keys())]


def log_ratios(c: Counted) -> list[float]:
    """log(candidate / main) per pair: the one estimand every speed figure comes from."""
    return [math.log(float(cr.value) / float(mr.value)) for mr, cr in pairs_of(c)]


def design_of(rules: GateRules, version: int = 3) -> sequential.Design:
    """The sequential design of ``rules`` under decision rules ``version`` (the receipt's)."""
    return sequential.Design.of(rules, version)


def basis_of(c: Counted, lock: Pins, rules: GateRules) -> sequential.Basis:
    main = c.values("main")
    return sequential.Basis(stats.median(main) if main else 1.0, float(lock.frontier or 0.0), rules.anchor)


def progress(receipt: Receipt, rules: GateRules) -> sequential.Decision | None:
    """The decision so far, for the round's stopping rule: None once nothing can be decided
    from speed any more (a build's claims refused, a failed run)."""
    r = _typed(receipt)
    c = counted(r, rules)
    if c.problems["main"] or c.problems["candidate"]:
        return None
    prior = [p.log_ratios for p in r.sequential.prior] if r.sequential else []
    d = sequential.decide_pairs(prior + [log_ratios(c)], design_of(rules, ruleset(r).design),
                                basis_of(c, r.lock, rules), rules.bands)
    d.pending = unresolved_claim(c)
    return d


def unresolved_claim(c: Counted) -> str | None:
    """A build whose reported rate its wall clock does not support so far, although the bound
    does not refuse it yet: the round keeps adding pairs (the verdict warns if it never resolves)."""
    for b in BUILDS:
        d = c.differential.get(b) or {}
        if d.get("rate") is not None and d["rate"] < d.get("required_rate", 0.0):
            return (f"{b}'s reported rate {_num(d['reported_median'])}/s is above what its wall clock shows so far "
                    f"({_num(d['rate'])}/s, {_num(d['required_rate'])}/s needed): not yet refused at the "
                    f"{d['level']:.1%} level")
    return None


def _speed(r: Receipt, c: Counted, rules: GateRules, warnings: list) -> tuple[Speed, sequential.Decision]:
    main, cand = c.values("main"), c.values("candidate")
    lock = r.lock
    xs = log_ratios(c)
    seq = r.sequential or Sequential()
    prior = [p.log_ratios for p in seq.prior]
    basis = basis_of(c, lock, rules)
    design = design_of(rules, ruleset(r).design)
    d = sequential.decide_pairs(prior + [xs], design, basis, rules.bands)
    main_med, cand_med = stats.median(main), stats.median(cand)
    node = _node_noise(lock)
    pair_sd = stats.stdev(xs) if len(xs) >= 2 else None
    _sequential_warnings(r, xs, node, pair_sd, rules, warnings)
    pin_warnings(main_med, lock, rules, warnings)
    needed = None
    if d.state == "open" and pair_sd:
        needed = sequential.pairs_to_decide(d.gain, pair_sd, design, basis)
    reference, reference_kind = (rules.anchor, "anchor") if rules.anchor > 0 else (basis.reference, "frontier")
    speed = Speed(
        main=stats.summary(main), candidate=stats.summary(cand), main_median=main_med, candidate_median=cand_med,
        frontier=basis.reference, frontier_source="lock" if basis.frontier > main_med else "main this round",
        frontier_slot=lock.frontier_slot, lock_frontier=float(lock.frontier or 0.0),
        delta=cand_med - basis.reference, gain=d.gain,
        significance=rules.significance, threshold=rules.significance, threshold_source="profile",
        confidence=1.0 - rules.false_accept, pairs=len(xs), ratios=[math.exp(x) for x in xs],
        interval=list(d.interval), anchor=rules.anchor,
        basis_frontier=d.basis_interval[0], basis_anchor=None, basis=d.basis_interval[0], basis_kind=basis.kind,
        bands={"s": rules.bands.s, "m": rules.bands.m, "l": rules.bands.l, "xl": rules.bands.xl},
        plausibility={"factor": rules.plausibility, "reference": reference, "reference_kind": reference_kind,
                      "ceiling": rules.plausibility * reference},
        differential=c.differential, significant=d.state == "accepted", band=d.tier,
        method=design.method, decision=d.to_dict(), preview=plain(seq.preview),   # the verdict's own copy
        node_noise=node.to_dict() if node else None, pair_sd=pair_sd, needed_pairs=needed)
    return speed, d


def pin_warnings(main_med: float, lock: Pins, rules: GateRules, warnings: list) -> None:
    """A pin that main this round measures well above or below, and an anchor the lock disagrees with."""
    pin = float(lock.frontier or 0.0)
    if pin <= 0:
        return
    if pin > main_med:
        warnings.append(warning("pin-stale", f"pin stale: the lock's frontier {_num(pin)} is "
                                             f"{_pct(pin / main_med - 1)} above main measured this round "
                                             f"({_num(main_med)}); the frontier stays at the pin"))
    elif main_med > pin * (1 + rules.significance):
        warnings.append(warning("pin-stale", f"pin stale: main measures {_num(main_med)}, "
                                             f"{_pct(main_med / pin - 1)} above the lock's frontier {_num(pin)}"))
    lock_anchor = float(lock.anchor or 0.0)
    if rules.anchor > 0 and lock_anchor > 0 and not math.isclose(lock_anchor, rules.anchor, rel_tol=1e-9):
        warnings.append(warning("anchor-mismatch", f"the rules' anchor {_num(rules.anchor)} differs from "
                                                   f"the lock's {_num(lock_anchor)}"))


def _node_noise(lock: Pins) -> sequential.PairNoise | None:
    if lock.noise_sd is None or not lock.noise_df:
        return None
    return sequential.PairNoise.of(lock.noise_sd, lock.noise_df)


def _sequential_warnings(r: Receipt, xs: list[float], node: sequential.PairNoise | None, pair_sd: float | None,
                         rules: GateRules, warnings: list) -> None:
    seq = r.sequential or Sequential()
    if seq.prior:
        n = sum(len(p.log_ratios) for p in seq.prior)
        cited = ", ".join(p.round_id for p in seq.prior[-3:]) + (", …" if len(seq.prior) > 3 else "")
        warnings.append(warning("pooled", f"rerun: pooled with {len(seq.prior)} earlier round(s) of this candidate "
                                          f"({cited}; {n} pairs); one confidence sequence runs across them, so the "
                                          f"{rules.false_accept:.0%} false-accept rate holds however often it is rerun"))
    if node is None:
        warnings.append(warning("noise-unmeasured", "this node's pair noise has not been measured (run "
                                                    "`console noise`); the round was planned with the profile's "
                                                    f"{rules.planning_noise:.1%}. The decision does not depend on it"))
    elif (louder := sequential.noisier_than(xs, node)) is not None:
        warnings.append(warning("noisier-than-node",
                                f"this round's pairs are noisier than the node's record: SD {louder:.1%} against "
                                f"{node.sd:.1%} (95% {node.lower:.1%}–{node.upper:.1%}); something on the node may "
                                "have changed. The decision stands (it needs no noise figure), but it took more pairs"))


# --- noise ---------------------------------------------------------------------------

def _decide_noise(r: Receipt, rules: GateRules) -> Verdict:
    """A build measured against itself: the node's pair noise, on the scale the decisions use.

    Reps are validated like a round's (claims, exclusions); any claim problem or fewer
    than three pairs is ``infra``. The report is the SD of the paired log ratios with its
    95 % interval (``sequential.pair_noise``); the lock pools it with the node's earlier
    noise rounds. Schema-1 receipts keep their old report (``stats.noise_report``).
    """
    warnings: list[Caveat] = []
    if r.status == "infra":
        return Verdict("infra", reasons=[_node_fault(r)])
    c = counted(r, rules)
    warnings.extend(c.warnings)
    problems = c.problems["main"] + c.problems["candidate"]
    if problems:
        return Verdict("infra", reasons=problems, warnings=warnings)
    return ruleset(r).noise(c, rules, warnings)


def _decide_noise_pairs(c: Counted, rules: GateRules, warnings: list) -> Verdict:
    """The SD of the paired log ratios with its 95 % interval."""
    xs = log_ratios(c)
    found = sequential.pair_noise([xs]) if len(xs) >= 3 else None
    report: dict[str, Any] = {"pairs": len(xs), "log_ratios": xs}
    if found is None:
        return Verdict("infra", reasons=[reason("too-few-reps", f"{len(xs)} valid pair(s); at least 3 are needed "
                                                                "to measure noise", build=None)],
                       warnings=warnings, noise=NoiseReport.from_dict(report))
    report.update(found.to_dict())
    report["gain"] = math.expm1(stats.mean(xs))
    design = design_of(rules)
    report["decidable_gain"] = sequential.smallest_decidable_gain(found.sd, design)
    report["max_pairs"] = design.max_pairs
    return Verdict("noise", warnings=warnings, noise=NoiseReport.from_dict(report))


def _noise_sides(c: Counted) -> tuple[list[float], list[float]]:
    """The two copies of the same build: main vs candidate, or alternate reps of main alone."""
    a, b = c.values("main"), c.values("candidate")
    if not b:
        pairs = list(zip(a[0::2], a[1::2]))
        a, b = [x for x, _ in pairs], [y for _, y in pairs]
    return a, b


def _decide_noise_v1(c: Counted, rules: GateRules, warnings: list) -> Verdict:
    """Schema 1: the largest single-pair deviation, and how often the old rule was fooled."""
    warnings.insert(0, warning("legacy-rules", f"this noise receipt is {legacy.NOTE}"))
    a, b = _noise_sides(c)
    report = stats.noise_report(a, b, rules.significance, rules.confidence)
    if report["pairs"] < 2:
        return Verdict("infra", reasons=[reason("too-few-reps", f"{report['pairs']} valid pair(s); at least 2 "
                                                                "are needed to measure noise", build=None)],
                       warnings=warnings, noise=NoiseReport.from_dict(report))
    if report["spread"] > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the significance threshold {rules.significance:.1%} is below this node's "
                                f"noise {report['spread']:.1%} (max pair gain): the gate would be decorative"))
    if report["false_positives"]:
        warnings.append(warning("false-positives",
                                f"the significance rule fired on {report['false_positives']} of "
                                f"{report['windows']} windows of this build against itself "
                                f"({report['false_positive_rate']:.0%})"))
    return Verdict("noise", warnings=warnings, noise=NoiseReport.from_dict(report))


# --- the rules each receipt schema was sealed under -----------------------------------------

@dataclass(frozen=True)
class Ruleset:
    """What the decision rules of one receipt schema decide their own way. A receipt is decided
    under the rules it was sealed under (``Receipt.rules_version``); the stages call these and
    never ask which schema they hold."""
    said: tuple[Caveat, ...]                        # on every round verdict it gives
    differential: Callable[[dict, dict, GateRules], dict[str, Any]]  # each build's claims against its clock
    guard: Callable[..., Reason | Caveat | None]    # one guard, once it has a floor and candidate reps
    speed: Callable[..., Verdict]                   # the speed decision, after the guards
    settle: Callable[..., Reason | None]            # after a sequential decision: a shift that undoes it
    no_change: Callable[[sequential.Decision, GateRules], Reason]
    noise: Callable[[Counted, GateRules, list], Verdict]
    design: int                                     # sequential.Design's rules (progress and speed)


_RULESETS = {
    1: Ruleset(said=(warning("legacy-rules", f"this receipt is {legacy.NOTE}"),), differential=_legacy_differential,
               guard=_guard_median, speed=_decide_legacy_speed, settle=_settled, no_change=_no_change,
               noise=_decide_noise_v1, design=3),
    2: Ruleset(said=(), differential=_differential, guard=_guard_bound, speed=_decide_speed, settle=_unchecked,
               no_change=_no_gain, noise=_decide_noise_pairs, design=2),
    3: Ruleset(said=(), differential=_differential, guard=_guard_bound, speed=_decide_speed, settle=_settled,
               no_change=_no_change, noise=_decide_noise_pairs, design=3),
}


def ruleset(r: Receipt) -> Ruleset:
    return _RULESETS[r.rules_version]
