"""The verdict, re-derived from a receipt's raw measurements alone, and the rules it uses.

Every reader (the round, replay, the lock, the reports, the screens) calls these rules
rather than keeping its own copy:

- ``counts(rep)`` / ``counted(receipt, rules)``: which reps count, and why the others don't;
- ``summarize``: per-build figures over exactly those reps;
- ``grade_depths`` / ``parity_ok``: per-depth grades (ratchet against main) and the parity verdict;
- ``path_problems`` / ``path_ok``: the scored-path and timed-path bars;
- ``decide``: the verdict of a round or a noise round (the apparatus refusal included).

Order: apparatus → parity → claims → guards → significance → tier → plausibility. Each stage
can end the decision; later stages never soften an earlier one.

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

Outcomes and exit codes: accepted/none 0, rejected 1, infra 3, implausible and
uncheckable 4 (held for review). Noise receipts give ``noise`` (0) or ``infra``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from console.core import stats
from console.core.parity import DepthFigures, DepthStatus, depth_status, worst_depth
from console.core.receipt import (BUILDS, EXCLUDED, ParityRecord, ParitySide, PathFigures, Pins, Receipt,
                                  Rep, TimedPath, as_receipt, is_bench_phase)
from console.core.rules import GateRules
from console.core.verdict import BANDS, EXIT_CODES, OUTCOMES, Caveat, Reason, Speed, Verdict  # noqa: F401


def reason(code: str, message: str, build: str | None = "candidate", depth: int | None = None,
           figure: str | None = None, bar: float | None = None, value: float | None = None) -> Reason:
    return Reason(code, message, build, depth, figure, bar, value)


def warning(code: str, message: str) -> Caveat:
    return Caveat(code, message)


def band(basis: float, bands: Any) -> str:
    """xs < s ≤ s-band < m ≤ m-band < l ≤ l-band < xl ≤ xl-band."""
    if basis >= bands.xl:
        return "xl"
    if basis >= bands.l:
        return "l"
    if basis >= bands.m:
        return "m"
    if basis >= bands.s:
        return "s"
    return "xs"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _num(x: float) -> str:
    return f"{x:.4g}"


# --- parity ------------------------------------------------------------------------

def grade_depths(side: ParitySide | None, main: ParitySide | None, rules: GateRules) -> list[DepthStatus]:
    """Every depth of one build graded: the candidate with the ratchet against main, main alone."""
    if side is None:
        return []
    return [depth_status(f, main.at(f.depth) if main is not None else None, rules) for f in side.depths]


def parity_ok(side: ParitySide | None, main: ParitySide | None, rules: GateRules) -> bool:
    """Whether one build's logits pass at every depth (uncheckable depths are not failures).

    Pass ``main`` to apply the ratchet (the candidate); ``None`` grades a build alone (main).
    """
    if side is None or side.error:
        return False
    return all(st.status in ("pass", "uncheckable") for st in grade_depths(side, main, rules))


def path_problems(fig: PathFigures | None, rules: GateRules, where: str, basis: str = "") -> list[Reason]:
    """A bench run's own final logits against the bars: the scored path (against the
    reference) and each timed rep (against main's) use this one rule."""
    depth = fig.depth if fig else None
    kind = "timed-path" if basis else "scored-path"
    if fig is None or fig.error or fig.kl is None or fig.top1 is None:
        why = (fig.error if fig else None) or "no figures"
        return [reason(f"{kind}-error", f"{where}: {why}", depth=depth)]
    out = []
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


def grade_parity(receipt: Receipt | Mapping[str, Any], rules: GateRules) -> tuple[dict[str, Any], list, list]:
    """(parity table, rejection reasons, warnings) for the candidate, against the reference and main."""
    par = as_receipt(receipt).parity
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

    graded = {st.depth: st for st in grade_depths(cand_side, main_side, rules)}
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
    worst = worst_depth([cand_side.at(r["depth"]) for r in rows], rules)
    return ({"depths": table, "worst_depth": worst, "scored_path": scored, "timed_path": timed,
             "candidate_error": cand_error, "main_error": main_error,
             "all_uncheckable": bool(rows) and len(unchecked) == len(rows) and not cand_error},
            reasons, warnings)


def parity_passes(receipt: Receipt | Mapping[str, Any], rules: GateRules) -> bool:
    """Whether the candidate passed every parity check: the round uses it to skip timing."""
    return not grade_parity(receipt, rules)[1]


def _grade_scored_path(par: ParityRecord, rules: GateRules, reasons: list, warnings: list) -> dict[str, Any]:
    """The bench's own final logits against the reference: did the scored path compute the model?"""
    main, c = par.scored_path.get("main"), par.scored_path.get("candidate")
    main_d = main.to_dict() if main else None
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
    worst = max((r.kl for r in tp.candidate if r.kl is not None), default=None)
    return {"status": "fail" if len(reasons) > before else "pass", "depth": tp.depth,
            "reps": len(tp.candidate), "worst_kl": worst}


# --- claims: which reps count ------------------------------------------------------

def _claim_problems(rep: Rep, bench: Mapping[str, Any], rules: GateRules) -> list[tuple[str, str]]:
    """(code, message) for every claim of an ``ok`` rep that its evidence does not support."""
    out: list[tuple[str, str]] = []
    label = rep.label
    rep_ = rep.reported or {}
    value = rep.value
    if value is None or not value > 0:
        return [("claim-no-value", f"{label}: no valid reported value")]
    wall = float(rep.wall_s or 0.0)
    bound = wall * (1 + rules.wall_margin)
    margin = f"+{rules.wall_margin:.0%} margin"
    elapsed = rep_.get("elapsed_s")
    if elapsed is not None and elapsed > bound:
        out.append(("claim-wall", f"{label}: reported elapsed {elapsed:.4g} s exceeds the wall clock "
                                  f"{wall:.4g} s ({margin})"))
    tokens = rep_.get("tokens", rep.tokens)
    if tokens is not None and tokens / value > bound:
        out.append(("claim-wall", f"{label}: {_num(value)}/s over {tokens} tokens implies "
                                  f"{tokens / value:.4g} s, more than the wall clock allows ({wall:.4g} s, {margin})"))
    declared_seek = bench.get("shortcut", "none") == "seek"
    announced = rep_.get("shortcut", "none")
    if announced == "seek" and not declared_seek:
        out.append(("claim-seek", f"{label}: announced a seek the profile does not declare"))
    if declared_seek and rep.phase in ("timed", "short"):
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
    if peak is None:
        return [("claim-seek-memory", f"{label}: no evidence the seek allocated its cache "
                                      "(peak memory was not measured)")]
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
    return rep.status == "ok" and rep.value is not None and rep.wall_s is not None


def counted(receipt: Receipt | Mapping[str, Any], rules: GateRules) -> Counted:
    """Which of a round's reps count: every statistic (the verdict, the receipt's summary, the
    lock's pins, the screens) is computed over these and only these."""
    r = as_receipt(receipt)
    bench = r.profile.bench
    reps = sorted((x for x in r.reps if is_bench_phase(x.phase)), key=lambda x: x.schedule_key)
    valid: dict[tuple[str, str], list[Rep]] = {}
    problems: dict[str, list[Reason]] = {b: [] for b in BUILDS}
    excluded: dict[str, int] = {}
    for rep in reps:
        if rep.build not in problems:
            continue
        # A rep without the console's own wall clock is a measurement gap, not the build's claim.
        if rep.excluded or (rep.status == "ok" and rep.wall_s is None):
            excluded[rep.build] = excluded.get(rep.build, 0) + 1
            continue
        found = _status_problems(rep) if rep.status != "ok" else _claim_problems(rep, bench, rules)
        problems[rep.build].extend(reason(code, message, build=rep.build) for code, message in found)
        if not found:
            valid.setdefault((rep.build, rep.phase), []).append(rep)

    warnings = [warning("reps-excluded", f"{n} {b} rep(s) marked suspect or aborted were left out "
                                         "of the statistics (node problems, not the build's)")
                for b, n in sorted(excluded.items())]
    differential = {}
    for build in BUILDS:
        diff, problem = _differential(valid.get((build, "timed"), []), valid.get((build, "short"), []), rules)
        differential[build] = diff
        if problem:
            problems[build].append(reason("claim-differential", f"{build}: {problem}", build=build))
    problem = _overhead_problem(differential.get("main") or {}, differential.get("candidate") or {}, rules)
    if problem and not problems["candidate"]:
        problems["candidate"].append(reason("claim-overhead", f"candidate: {problem}"))
    return Counted(valid, problems, warnings, differential)


def summarize(receipt: Receipt | Mapping[str, Any], rules: GateRules) -> dict[str, Any]:
    """Per-build figures of the timed reps that count: the same reps the verdict decided on."""
    c = counted(receipt, rules)
    return {b: stats.summary(c.values(b)) for b in BUILDS}


def _overhead_problem(main: dict[str, Any], cand: dict[str, Any], rules: GateRules) -> str | None:
    """A short run padded with idle time flattens the long-minus-short slope and so props up
    an inflated rate. What the padding cannot hide is a fixed cost per run (the wall clock at
    zero tokens) well above main's, whose fixed work (start, load, seek) is the same."""
    a_main, a_cand = main.get("overhead_s"), cand.get("overhead_s")
    if a_main is None or a_cand is None:
        return None
    allowed = a_main + rules.overhead_margin * main["wall_s"]
    if a_cand <= allowed:
        return None
    return (f"its fixed cost per run is {a_cand:.3g} s against main's {a_main:.3g} s (allowed up to "
            f"{allowed:.3g} s, +{rules.overhead_margin:.0%} of main's run): a run that idles on short "
            "token counts could be propping up its wall-clock differential, so its rate is not vouched for")


def _status_problems(rep: Rep) -> list[tuple[str, str]]:
    label, status = rep.label, rep.status
    if status == "refused":
        why = "; ".join(str(x) for x in rep.refusals) or "its result line failed the schema"
        return [("refused", f"{label}: refused: {why}")]
    if status in ("failed", "timeout"):
        what = "timed out" if status == "timeout" else f"failed (exit code {rep.exit_code})"
        return [("failed-run", f"{label}: {what}")]
    return [("rep-status", f"{label}: unknown status {status!r}")]


def _differential(timed: list[Rep], short: list[Rep], rules: GateRules) -> tuple[dict[str, Any], str | None]:
    """The console's own rate from the long-minus-short wall clock, against the claim.

    Load, warm-up and teardown cost the same in both runs, so they cancel; what is
    left is what the extra tokens really cost.
    """
    if not timed:
        return {}, None
    if not short:
        return {"checked": False}, "no valid short reps: the reported rate cannot be checked against the wall clock"
    n_long = stats.median(float(r.tokens) for r in timed)
    n_short = stats.median(float(r.tokens) for r in short)
    w_long = stats.median(float(r.wall_s or 0.0) for r in timed)
    w_short = stats.median(float(r.wall_s or 0.0) for r in short)
    reported = stats.median(float(r.value or 0.0) for r in timed)
    need = reported / (1 + rules.differential_margin)
    out = {"checked": True, "tokens": n_long, "short_tokens": n_short, "wall_s": w_long,
           "short_wall_s": w_short, "reported_median": reported, "required_rate": need, "rate": None}
    if w_long <= w_short or n_long <= n_short:
        return out, (f"rate not supported by wall clock: {n_long:g} tokens took {w_long:.4g} s, "
                     f"no longer than {n_short:g} tokens ({w_short:.4g} s)")
    rate = (n_long - n_short) / (w_long - w_short)
    out["rate"] = rate
    out["overhead_s"] = w_short - n_short / rate      # the wall clock extrapolated to zero tokens
    if rate < need:
        return out, (f"rate not supported by wall clock: the extra {n_long - n_short:g} tokens cost "
                     f"{w_long - w_short:.4g} s, {_num(rate)}/s, below the reported {_num(reported)}/s "
                     f"(allowed down to {_num(need)}/s with a {rules.differential_margin:.0%} margin)")
    return out, None


# --- guards -------------------------------------------------------------------------

def _check_guards(c: Counted, lock: Pins, rules: GateRules,
                  reasons: list, warnings: list, infra: list) -> dict[str, Any]:
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
        med = row["candidate_median"]
        if med < row["min_allowed"]:
            reasons.append(reason("guard-breach",
                                  f"guard {g.name} (depth {g.depth}): median {_num(med)} is "
                                  f"{_pct(med / floor - 1)} against its floor {_num(floor)}; at most "
                                  f"{g.max_drop:.1%} below ({_num(row['min_allowed'])}) is allowed",
                                  figure=f"guard:{g.name}", bar=row["min_allowed"], value=med))
        if source == "lock" and main_med is not None and main_med > floor * (1 + rules.significance):
            warnings.append(warning("guard-floor-stale",
                                    f"guard {g.name}: main measures {_pct(row['main_median'] / floor - 1)} above "
                                    f"the floor {_num(floor)}; a stale-low floor admits regressions"))
    return out


# --- significance, tier, plausibility -----------------------------------------------------

def _speed(c: Counted, lock: Pins, rules: GateRules, warnings: list) -> Speed:
    main, cand = c.values("main"), c.values("candidate")
    main_med, cand_med = stats.median(main), stats.median(cand)
    lock_frontier = float(lock.frontier or 0.0)
    frontier, source = (lock_frontier, "lock") if lock_frontier > main_med else (main_med, "main this round")
    delta = cand_med - frontier
    gain = delta / frontier
    ratios = stats.paired_ratios(c.valid[("main", "timed")] + c.valid[("candidate", "timed")])
    interval = stats.ratio_interval(ratios, rules.confidence)
    basis_frontier = gain
    basis_anchor = delta / rules.anchor if rules.anchor > 0 else None
    if basis_anchor is not None and basis_anchor < basis_frontier:
        basis, basis_kind = basis_anchor, "anchor"
    else:
        basis, basis_kind = basis_frontier, "frontier"
    reference, reference_kind = (rules.anchor, "anchor") if rules.anchor > 0 else (frontier, "frontier")
    _speed_warnings(main_med, lock, rules, warnings)
    # Significance is never smaller than the noise this node has shown: a threshold below
    # the measured spread would let noise alone earn a tier.
    noise = lock.noise_spread
    threshold, threshold_source = rules.significance, "profile"
    if noise is not None and math.isfinite(noise) and noise > rules.significance:
        threshold, threshold_source = float(noise), "measured noise"
    return Speed(
        main=stats.summary(main), candidate=stats.summary(cand), main_median=main_med, candidate_median=cand_med,
        frontier=frontier, frontier_source=source, frontier_slot=lock.frontier_slot,
        lock_frontier=lock_frontier, delta=delta, gain=gain,
        significance=rules.significance, threshold=threshold, threshold_source=threshold_source,
        confidence=rules.confidence, pairs=len(ratios), ratios=ratios, interval=list(interval),
        anchor=rules.anchor, basis_frontier=basis_frontier, basis_anchor=basis_anchor,
        basis=basis, basis_kind=basis_kind,
        bands={"s": rules.bands.s, "m": rules.bands.m, "l": rules.bands.l, "xl": rules.bands.xl},
        plausibility={"factor": rules.plausibility, "reference": reference, "reference_kind": reference_kind,
                      "ceiling": rules.plausibility * reference},
        differential=c.differential)


def _speed_warnings(main_med: float, lock: Pins, rules: GateRules, warnings: list) -> None:
    noise = lock.noise_spread
    if noise is None:
        warnings.append(warning("noise-unmeasured", "this node's noise has not been measured (run a noise "
                                                    f"round); the {rules.significance:.1%} threshold is unverified"))
    elif noise > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the profile's significance threshold {rules.significance:.1%} is below this "
                                f"node's measured noise {noise:.1%}; this round requires a gain above "
                                f"{noise:.1%} instead"))
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


def _significance(speed: Speed, rules: GateRules) -> Reason | None:
    """None when significant, else the reason it is not."""
    gain, (lo, hi) = speed.gain, speed.interval
    threshold = speed.threshold
    if gain <= threshold:
        source = "" if speed.threshold_source == "profile" else " (this node's measured noise)"
        return reason("below-significance",
                      f"gain {_pct(gain)} over the frontier {_num(speed.frontier)} is not above the "
                      f"significance threshold {threshold:.1%}{source}",
                      figure="gain", bar=threshold, value=gain)
    if not lo > 0:
        shown = "unbounded (fewer than two pairs)" if math.isinf(lo) else f"[{_pct(lo)}, {_pct(hi)}]"
        return reason("interval-includes-zero",
                      f"gain {_pct(gain)} but the {rules.confidence:.0%} paired interval {shown} "
                      "includes no change", figure="interval", bar=0.0, value=lo)
    return None


# --- decide ----------------------------------------------------------------------------

def _node_fault(r: Receipt) -> Reason:
    return reason("node-fault", f"infra: {r.diagnosis or 'the round was marked as a node fault'}", build=None)


def _apparatus_touched(r: Receipt) -> Reason:
    touched = tuple(r.apparatus.touched) if r.apparatus else ()
    return Reason("apparatus-touched", "the candidate changes the measuring apparatus: " + ", ".join(touched)
                  + ". Those paths are protected by the profile; propose harness changes on main instead.",
                  files=touched)


def decide(receipt: Receipt | Mapping[str, Any], rules: GateRules) -> Verdict:
    """The verdict of one round (or noise round), from its receipt's raw measurements."""
    r = as_receipt(receipt)
    if r.kind == "noise":
        return _decide_noise(r, rules)
    if r.apparatus is not None and r.apparatus.touched:
        # Refused before anything was built: the candidate cannot supply its own ruler.
        return Verdict("rejected", reasons=[_apparatus_touched(r)], suppressed="the candidate touched the apparatus")
    parity, parity_reasons, warnings = grade_parity(r, rules)

    def verdict(outcome: str, reasons: list, speed: Speed | None = None, **kw: Any) -> Verdict:
        return Verdict(outcome=outcome, reasons=reasons, warnings=warnings, parity=parity, speed=speed, **kw)

    if r.status == "infra":
        return verdict("infra", [_node_fault(r)], suppressed="infra")
    if parity_reasons:
        # Every reason is listed: what the candidate's timed reps claimed, where they ran, too.
        refused = counted(r, rules).problems["candidate"]
        return verdict("rejected", parity_reasons + refused, suppressed="parity failed: no speed credit is computed")
    if parity["all_uncheckable"]:
        return verdict("uncheckable", [reason("parity-uncheckable",
                                              "every depth has a near-uniform reference: parity cannot "
                                              "be checked, held for review", build=None)],
                       suppressed="parity uncheckable")

    c = counted(r, rules)
    warnings.extend(c.warnings)
    if c.problems["main"]:
        main_invalid = [x.prefixed("main invalid: ") for x in c.problems["main"]]
        return verdict("infra", main_invalid + c.problems["candidate"], suppressed="main invalid")
    if c.problems["candidate"]:
        return verdict("rejected", c.problems["candidate"], suppressed="claims refused")
    short = [b for b in BUILDS if len(c.valid.get((b, "timed"), [])) < 2]
    if short:
        return verdict("infra", [reason("too-few-reps",
                                        f"{b}: {len(c.valid.get((b, 'timed'), []))} valid timed rep(s); "
                                        "at least 2 are needed (the rest failed the node, not the build)",
                                        build=b) for b in short], suppressed="too few valid reps")

    guard_reasons: list[Reason] = []
    guard_infra: list[Reason] = []
    guards = _check_guards(c, r.lock, rules, guard_reasons, warnings, guard_infra)
    if guard_reasons:
        return verdict("rejected", guard_reasons, suppressed="guard breached", guards=guards)
    if guard_infra:
        return verdict("infra", guard_infra, suppressed="guard not measured", guards=guards)

    speed = _speed(c, r.lock, rules, warnings)
    speed.guards = guards
    not_significant = _significance(speed, rules)
    speed.significant = not_significant is None
    tier = band(speed.basis, rules.bands) if not_significant is None else None
    speed.band = tier

    p = speed.plausibility
    if speed.candidate_median > p["ceiling"]:
        return verdict("implausible", [reason(
            "implausible", f"candidate median {_num(speed.candidate_median)} is above "
                           f"{p['factor']:g}x the {p['reference_kind']} {_num(p['reference'])} "
                           f"({_num(p['ceiling'])}): held for review, not recorded",
            figure="candidate_median", bar=p["ceiling"], value=speed.candidate_median)],
            speed, would_be_tier=tier)
    if not_significant is not None:
        return verdict("none", [not_significant], speed)
    return verdict("accepted", [], speed, tier=tier)


# --- noise ---------------------------------------------------------------------------

def _noise_sides(c: Counted) -> tuple[list[float], list[float]]:
    """The two copies of the same build: main vs candidate, or alternate reps of main alone."""
    a, b = c.values("main"), c.values("candidate")
    if not b:
        pairs = list(zip(a[0::2], a[1::2]))
        a, b = [x for x, _ in pairs], [y for _, y in pairs]
    return a, b


def _decide_noise(r: Receipt, rules: GateRules) -> Verdict:
    """A build measured against itself: how much gain does noise alone produce here?

    Reps are validated like a round's (claims, exclusions); any claim problem or fewer
    than two pairs is ``infra``. The report is ``stats.noise_report``.
    """
    warnings: list[Caveat] = []
    if r.status == "infra":
        return Verdict("infra", reasons=[_node_fault(r)])
    c = counted(r, rules)
    warnings.extend(c.warnings)
    problems = c.problems["main"] + c.problems["candidate"]
    if problems:
        return Verdict("infra", reasons=problems, warnings=warnings)
    a, b = _noise_sides(c)
    report = stats.noise_report(a, b, rules.significance, rules.confidence)
    if report["pairs"] < 2:
        return Verdict("infra", reasons=[reason("too-few-reps", f"{report['pairs']} valid pair(s); at least 2 "
                                                                "are needed to measure noise", build=None)],
                       warnings=warnings, noise=report)
    if report["spread"] > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the significance threshold {rules.significance:.1%} is below this node's "
                                f"noise {report['spread']:.1%} (max pair gain): the gate would be decorative"))
    if report["false_positives"]:
        warnings.append(warning("false-positives",
                                f"the significance rule fired on {report['false_positives']} of "
                                f"{report['windows']} windows of this build against itself "
                                f"({report['false_positive_rate']:.0%})"))
    return Verdict("noise", warnings=warnings, noise=report)
