"""The verdict, re-derived from a receipt's raw measurements alone.

Order: parity → claims → guards → significance → tier → plausibility. Each stage
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
from dataclasses import dataclass, field
from typing import Any, Iterable

from console.core import stats
from console.core.parity import DepthFigures, depth_status, worst_depth
from console.core.rules import GateRules

EXIT_CODES = {"accepted": 0, "none": 0, "noise": 0, "rejected": 1, "infra": 3,
              "implausible": 4, "uncheckable": 4}
BANDS = ("xs", "s", "m", "l", "xl")
EXCLUDED = ("suspect", "aborted")       # node problems: dropped from statistics, not blamed


# --- the verdict ------------------------------------------------------------------

@dataclass
class Verdict:
    outcome: str                                  # one of EXIT_CODES
    tier: str | None = None                       # only when accepted
    would_be_tier: str | None = None              # implausible: the tier it would have had
    reasons: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    parity: dict[str, Any] = field(default_factory=dict)
    speed: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.outcome not in EXIT_CODES:
            raise ValueError(f"unknown outcome {self.outcome!r}")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        return _json_safe({
            "outcome": self.outcome, "tier": self.tier, "would_be_tier": self.would_be_tier,
            "exit_code": self.exit_code, "reasons": self.reasons, "warnings": self.warnings,
            "parity": self.parity, "speed": self.speed,
        })

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        return cls(outcome=d["outcome"], tier=d.get("tier"), would_be_tier=d.get("would_be_tier"),
                   reasons=list(d.get("reasons", [])), warnings=list(d.get("warnings", [])),
                   parity=dict(d.get("parity", {})), speed=dict(d.get("speed", {})))


def _json_safe(x: Any) -> Any:
    """Non-finite floats become None so the verdict is strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def reason(code: str, message: str, build: str | None = "candidate", depth: int | None = None,
           figure: str | None = None, bar: float | None = None, value: float | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "build": build, "depth": depth,
            "figure": figure, "bar": bar, "value": value}


def warning(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


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

def _figures(side: dict[str, Any] | None) -> dict[int, DepthFigures]:
    if not side:
        return {}
    return {int(d["depth"]): DepthFigures.from_dict(d) for d in side.get("depths") or []}


def _grade_parity(receipt: dict[str, Any], rules: GateRules) -> tuple[dict[str, Any], list, list]:
    """(parity table, rejection reasons, warnings)."""
    par = receipt.get("parity") or {}
    cand_side, main_side = par.get("candidate") or {}, par.get("main") or {}
    cand, main = _figures(cand_side), _figures(main_side)
    declared = [int(d) for d in (par.get("reference") or {}).get("depths") or sorted(cand)]
    reasons: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []

    cand_error = cand_side.get("error") if cand_side else "no parity figures for the candidate"
    if cand_error:
        reasons.append(reason("parity-error", f"candidate parity could not be graded: {cand_error}"))
    main_error = main_side.get("error") if main_side else "no parity figures for main"
    if main_error:
        warnings.append(warning("main-parity-error",
                                f"main's parity could not be graded ({main_error}); the ratchet against "
                                "main is not applied this round, the absolute bars still are"))

    table = []
    for d in declared:
        c, m = cand.get(d), main.get(d)
        if c is None:
            if not cand_error:
                reasons.append(reason("parity-missing", f"depth {d}: no candidate figures", depth=d))
            table.append({"depth": d, "main": m.to_dict() if m else None, "candidate": None,
                          "status": "missing", "drift": None})
            continue
        st = depth_status(c, m, rules)
        reasons.extend(st.reasons)
        table.append({"depth": d, "main": m.to_dict() if m else None, "candidate": c.to_dict(),
                      "status": st.status, "drift": st.drift})

    main_failing = [m.depth for m in main.values() if depth_status(m, None, rules).status == "fail"]
    if main_failing:
        warnings.append(warning("main-parity-fail",
                                "main itself misses the parity bars at depth " + ", ".join(map(str, main_failing))
                                + "; the reference may not match main's model"))

    graded = [row for row in table if row["candidate"] is not None]
    unchecked = [row["depth"] for row in graded if row["status"] == "uncheckable"]
    if unchecked and len(unchecked) < len(graded):
        warnings.append(warning("parity-uncheckable",
                                "near-uniform reference at depth " + ", ".join(map(str, unchecked))
                                + ": those depths cannot reveal a fault and were not graded"))

    scored = _grade_scored_path(par.get("scored_path") or {}, rules, reasons, warnings)
    timed = _grade_timed_path(par.get("timed_path"), rules, reasons, warnings)
    worst = worst_depth([cand[r["depth"]] for r in graded], rules) if graded else None
    return ({"depths": table, "worst_depth": worst, "scored_path": scored, "timed_path": timed,
             "candidate_error": cand_error, "main_error": main_error,
             "all_uncheckable": bool(graded) and len(unchecked) == len(graded) and not cand_error},
            reasons, warnings)


def parity_passes(receipt: dict[str, Any], rules: GateRules) -> bool:
    """Whether the candidate passed every parity check: the round uses it to skip timing."""
    return not _grade_parity(receipt, rules)[1]


def scored_path_ok(side: dict[str, Any] | None, rules: GateRules) -> bool:
    """One build's scored-path figures against the bars (shared by the round, replay and the gate)."""
    if not side or side.get("error") or side.get("kl") is None or side.get("top1") is None:
        return False
    return side["kl"] <= rules.kl_max and side["top1"] >= rules.top1_min


def _grade_scored_path(sp: dict[str, Any], rules: GateRules, reasons: list, warnings: list) -> dict[str, Any]:
    """The bench's own final logits against the reference: did the scored path compute the model?"""
    c = sp.get("candidate")
    if not c:
        warnings.append(warning("scored-path-unchecked",
                                "the scored-path check did not run: the timed path's own output was not compared"))
        return {"main": sp.get("main"), "candidate": None, "status": "unchecked"}
    depth = c.get("depth")
    where = f"scored path (depth {depth})"
    before = len(reasons)
    if c.get("error"):
        reasons.append(reason("scored-path-error", f"{where}: {c['error']}", depth=depth))
    else:
        kl, top1 = c.get("kl"), c.get("top1")
        if kl is None or top1 is None:
            reasons.append(reason("scored-path-error", f"{where}: no figures", depth=depth))
        else:
            if kl > rules.kl_max:
                reasons.append(reason("scored-path-kl", f"{where}: KL {kl:.3g} nats > bar {rules.kl_max:.3g}",
                                      depth=depth, figure="kl", bar=rules.kl_max, value=kl))
            if top1 < rules.top1_min:
                reasons.append(reason("scored-path-top1",
                                      f"{where}: top-1 {top1:.3f} < bar {rules.top1_min:.3f} "
                                      "(the timed path predicts a different next token)",
                                      depth=depth, figure="top1", bar=rules.top1_min, value=top1))
    return {"main": sp.get("main"), "candidate": c, "status": "fail" if len(reasons) > before else "pass"}


def _grade_timed_path(tp: dict[str, Any] | None, rules: GateRules, reasons: list, warnings: list) -> dict[str, Any]:
    """Each candidate timed rep's own output against main's, same inputs and shortcut.

    Absent before the timed reps run (the round asks for parity first) and in receipts
    older than the check: then it is said, not failed.
    """
    if tp is None:
        return {"status": "unchecked"}
    depth = tp.get("depth")
    rows = tp.get("candidate") or []
    if tp.get("error") or not rows:
        warnings.append(warning("timed-path-unchecked", "the timed reps' own output was not compared with "
                                f"main's: {tp.get('error') or 'no candidate timed rep'}"))
        return {"status": "unchecked", "depth": depth}
    before = len(reasons)
    for r in rows:
        where = f"timed path (depth {depth}, candidate timed rep {r.get('index')})"
        if r.get("error") or r.get("kl") is None or r.get("top1") is None:
            reasons.append(reason("timed-path-error", f"{where}: {r.get('error') or 'no figures'}", depth=depth))
            continue
        if r["kl"] > rules.kl_max:
            reasons.append(reason("timed-path-kl", f"{where}: KL {r['kl']:.3g} nats against main's > bar "
                                  f"{rules.kl_max:.3g}", depth=depth, figure="kl", bar=rules.kl_max, value=r["kl"]))
        if r["top1"] < rules.top1_min:
            reasons.append(reason("timed-path-top1", f"{where}: predicts another next token than main",
                                  depth=depth, figure="top1", bar=rules.top1_min, value=r["top1"]))
    worst = max((r["kl"] for r in rows if isinstance(r.get("kl"), (int, float))), default=None)
    return {"status": "fail" if len(reasons) > before else "pass", "depth": depth, "reps": len(rows),
            "worst_kl": worst}


# --- claims ----------------------------------------------------------------------

def _is_bench_phase(phase: str) -> bool:
    return phase in ("timed", "short") or phase.startswith("guard:")


def _rep_label(rep: dict[str, Any]) -> str:
    return f"{rep.get('build')} {rep.get('phase')} rep {rep.get('index')} (position {rep.get('position')})"


def _claim_problems(rep: dict[str, Any], bench: dict[str, Any], rules: GateRules) -> list[tuple[str, str]]:
    """(code, message) for every claim of an ``ok`` rep that its evidence does not support."""
    out: list[tuple[str, str]] = []
    label = _rep_label(rep)
    rep_ = rep.get("reported") or {}
    value = rep.get("value")
    if value is None or not value > 0:
        return [("claim-no-value", f"{label}: no valid reported value")]
    wall = float(rep["wall_s"])
    bound = wall * (1 + rules.wall_margin)
    margin = f"+{rules.wall_margin:.0%} margin"
    elapsed = rep_.get("elapsed_s")
    if elapsed is not None and elapsed > bound:
        out.append(("claim-wall", f"{label}: reported elapsed {elapsed:.4g} s exceeds the wall clock "
                                  f"{wall:.4g} s ({margin})"))
    tokens = rep_.get("tokens", rep.get("tokens"))
    if tokens is not None and tokens / value > bound:
        out.append(("claim-wall", f"{label}: {_num(value)}/s over {tokens} tokens implies "
                                  f"{tokens / value:.4g} s, more than the wall clock allows ({wall:.4g} s, {margin})"))
    declared_seek = bench.get("shortcut", "none") == "seek"
    announced = rep_.get("shortcut", "none")
    if announced == "seek" and not declared_seek:
        out.append(("claim-seek", f"{label}: announced a seek the profile does not declare"))
    if declared_seek and rep.get("phase") in ("timed", "short"):
        if announced != "seek":
            out.append(("claim-seek", f"{label}: did not announce the seek the profile declares "
                                      f"(shortcut {announced!r}): its depth is unproven"))
        else:
            out.extend(_seek_memory_problem(rep, bench, rules, label))
    return out


def _seek_memory_problem(rep: dict[str, Any], bench: dict[str, Any], rules: GateRules,
                         label: str) -> list[tuple[str, str]]:
    """A seek must have allocated its cache: peak memory covers depth x bytes per position."""
    peak = rep.get("peak_mem_bytes")
    depth = int(rep.get("depth") or bench.get("depth") or 0)
    need = depth * int(bench.get("seek_bytes_per_position", 0)) * rules.seek_memory_fraction
    if peak is None:
        return [("claim-seek-memory", f"{label}: no evidence the seek allocated its cache "
                                      "(peak memory was not measured)")]
    if peak < need:
        return [("claim-seek-memory", f"{label}: peak memory {peak / 2**20:.1f} MiB is below the "
                                      f"{need / 2**20:.1f} MiB a seek to depth {depth} needs")]
    return []


@dataclass
class _Claims:
    valid: dict[tuple[str, str], list[dict[str, Any]]]   # (build, phase) -> reps that count
    problems: dict[str, list[dict[str, Any]]]            # build -> reasons
    warnings: list[dict[str, Any]]
    differential: dict[str, Any]


def _check_claims(receipt: dict[str, Any], rules: GateRules) -> _Claims:
    bench = (receipt.get("profile") or {}).get("bench") or {}
    reps = sorted((r for r in receipt.get("reps") or [] if _is_bench_phase(str(r.get("phase", "")))),
                  key=lambda r: (r.get("position", 0), str(r.get("build")), str(r.get("phase")),
                                 r.get("index", 0), r.get("attempt", 0)))
    valid: dict[tuple[str, str], list[dict[str, Any]]] = {}
    problems: dict[str, list[dict[str, Any]]] = {"main": [], "candidate": []}
    excluded: dict[str, int] = {}
    for rep in reps:
        build, phase, status = rep.get("build"), rep.get("phase"), rep.get("status")
        if build not in problems:
            continue
        # A rep without the console's own wall clock is a measurement gap, not the build's claim.
        if status in EXCLUDED or (status == "ok" and rep.get("wall_s") is None):
            excluded[build] = excluded.get(build, 0) + 1
            continue
        found = _status_problems(rep) if status != "ok" else _claim_problems(rep, bench, rules)
        for code, message in found:
            problems[build].append(reason(code, message, build=build))
        if not found:
            valid.setdefault((build, phase), []).append(rep)

    warnings = [warning("reps-excluded", f"{n} {b} rep(s) marked suspect or aborted were left out "
                                         "of the statistics (node problems, not the build's)")
                for b, n in sorted(excluded.items())]
    differential = {}
    for build in ("main", "candidate"):
        diff, problem = _differential(valid.get((build, "timed"), []), valid.get((build, "short"), []), rules)
        differential[build] = diff
        if problem:
            problems[build].append(reason("claim-differential", f"{build}: {problem}", build=build))
    problem = _overhead_problem(differential.get("main") or {}, differential.get("candidate") or {}, rules)
    if problem and not problems["candidate"]:
        problems["candidate"].append(reason("claim-overhead", f"candidate: {problem}"))
    return _Claims(valid, problems, warnings, differential)


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


def _status_problems(rep: dict[str, Any]) -> list[tuple[str, str]]:
    label, status = _rep_label(rep), rep.get("status")
    if status == "refused":
        why = "; ".join(str(x) for x in rep.get("refusals") or []) or "its result line failed the schema"
        return [("refused", f"{label}: refused: {why}")]
    if status in ("failed", "timeout"):
        what = "timed out" if status == "timeout" else f"failed (exit code {rep.get('exit_code')})"
        return [("failed-run", f"{label}: {what}")]
    return [("rep-status", f"{label}: unknown status {status!r}")]


def _differential(timed: list[dict[str, Any]], short: list[dict[str, Any]],
                  rules: GateRules) -> tuple[dict[str, Any], str | None]:
    """The console's own rate from the long-minus-short wall clock, against the claim.

    Load, warm-up and teardown cost the same in both runs, so they cancel; what is
    left is what the extra tokens really cost.
    """
    if not timed:
        return {}, None
    if not short:
        return {"checked": False}, "no valid short reps: the reported rate cannot be checked against the wall clock"
    n_long = stats.median(float(r["tokens"]) for r in timed)
    n_short = stats.median(float(r["tokens"]) for r in short)
    w_long = stats.median(float(r["wall_s"]) for r in timed)
    w_short = stats.median(float(r["wall_s"]) for r in short)
    reported = stats.median(float(r["value"]) for r in timed)
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


def _values(reps: Iterable[dict[str, Any]]) -> list[float]:
    return [float(r["value"]) for r in reps]


# --- guards -------------------------------------------------------------------------

def _check_guards(claims: _Claims, lock: dict[str, Any], rules: GateRules,
                  reasons: list, warnings: list, infra: list) -> dict[str, Any]:
    floors = lock.get("guards") or {}
    out = {}
    for g in rules.guards:
        pinned = float(floors.get(g.name) or 0.0)
        cand = _values(claims.valid.get(("candidate", f"guard:{g.name}"), []))
        main = _values(claims.valid.get(("main", f"guard:{g.name}"), []))
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

def _speed(claims: _Claims, lock: dict[str, Any], rules: GateRules, warnings: list) -> dict[str, Any]:
    main = _values(claims.valid[("main", "timed")])
    cand = _values(claims.valid[("candidate", "timed")])
    main_med, cand_med = stats.median(main), stats.median(cand)
    lock_frontier = float(lock.get("frontier") or 0.0)
    frontier, source = (lock_frontier, "lock") if lock_frontier > main_med else (main_med, "main this round")
    delta = cand_med - frontier
    gain = delta / frontier
    ratios = stats.paired_ratios(claims.valid[("main", "timed")] + claims.valid[("candidate", "timed")])
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
    noise = lock.get("noise_spread")
    threshold, threshold_source = rules.significance, "profile"
    if isinstance(noise, (int, float)) and math.isfinite(noise) and noise > rules.significance:
        threshold, threshold_source = float(noise), "measured noise"
    return {
        "main": stats.summary(main), "candidate": stats.summary(cand),
        "main_median": main_med, "candidate_median": cand_med,
        "frontier": frontier, "frontier_source": source, "frontier_slot": lock.get("frontier_slot"),
        "lock_frontier": lock_frontier, "delta": delta, "gain": gain,
        "significance": rules.significance, "threshold": threshold, "threshold_source": threshold_source,
        "confidence": rules.confidence,
        "pairs": len(ratios), "ratios": ratios, "interval": list(interval),
        "anchor": rules.anchor, "basis_frontier": basis_frontier, "basis_anchor": basis_anchor,
        "basis": basis, "basis_kind": basis_kind,
        "bands": {"s": rules.bands.s, "m": rules.bands.m, "l": rules.bands.l, "xl": rules.bands.xl},
        "plausibility": {"factor": rules.plausibility, "reference": reference, "reference_kind": reference_kind,
                         "ceiling": rules.plausibility * reference},
        "differential": claims.differential,
    }


def _speed_warnings(main_med: float, lock: dict[str, Any], rules: GateRules, warnings: list) -> None:
    noise = lock.get("noise_spread")
    if noise is None:
        warnings.append(warning("noise-unmeasured", "this node's noise has not been measured (run a noise "
                                                    f"round); the {rules.significance:.1%} threshold is unverified"))
    elif noise > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the profile's significance threshold {rules.significance:.1%} is below this "
                                f"node's measured noise {noise:.1%}; this round requires a gain above "
                                f"{noise:.1%} instead"))
    pin = float(lock.get("frontier") or 0.0)
    if pin <= 0:
        return
    if pin > main_med:
        warnings.append(warning("pin-stale", f"pin stale: the lock's frontier {_num(pin)} is "
                                             f"{_pct(pin / main_med - 1)} above main measured this round "
                                             f"({_num(main_med)}); the frontier stays at the pin"))
    elif main_med > pin * (1 + rules.significance):
        warnings.append(warning("pin-stale", f"pin stale: main measures {_num(main_med)}, "
                                             f"{_pct(main_med / pin - 1)} above the lock's frontier {_num(pin)}"))
    lock_anchor = float(lock.get("anchor") or 0.0)
    if rules.anchor > 0 and lock_anchor > 0 and not math.isclose(lock_anchor, rules.anchor, rel_tol=1e-9):
        warnings.append(warning("anchor-mismatch", f"the rules' anchor {_num(rules.anchor)} differs from "
                                                   f"the lock's {_num(lock_anchor)}"))


def _significance(speed: dict[str, Any], rules: GateRules) -> dict[str, Any] | None:
    """None when significant, else the reason it is not."""
    gain, (lo, hi) = speed["gain"], speed["interval"]
    threshold = speed.get("threshold", rules.significance)
    if gain <= threshold:
        source = "" if speed.get("threshold_source", "profile") == "profile" else " (this node's measured noise)"
        return reason("below-significance",
                      f"gain {_pct(gain)} over the frontier {_num(speed['frontier'])} is not above the "
                      f"significance threshold {threshold:.1%}{source}",
                      figure="gain", bar=threshold, value=gain)
    if not lo > 0:
        shown = "unbounded (fewer than two pairs)" if math.isinf(lo) else f"[{_pct(lo)}, {_pct(hi)}]"
        return reason("interval-includes-zero",
                      f"gain {_pct(gain)} but the {rules.confidence:.0%} paired interval {shown} "
                      "includes no change", figure="interval", bar=0.0, value=lo)
    return None


# --- decide ----------------------------------------------------------------------------

def decide(receipt: dict[str, Any], rules: GateRules) -> Verdict:
    """The verdict of one round, from its receipt's raw measurements."""
    if receipt.get("kind") == "noise":
        return decide_noise(receipt, rules)
    parity, parity_reasons, warnings = _grade_parity(receipt, rules)

    def verdict(outcome: str, reasons: list, speed: dict[str, Any] | None = None, **kw: Any) -> Verdict:
        return Verdict(outcome=outcome, reasons=reasons, warnings=warnings, parity=parity,
                       speed=speed if speed is not None else {}, **kw)

    if receipt.get("status") == "infra":
        why = receipt.get("diagnosis") or "the round was marked as a node fault"
        return verdict("infra", [reason("node-fault", f"infra: {why}", build=None)],
                       {"suppressed": "infra"})
    if parity_reasons:
        # Every reason is listed: what the candidate's timed reps claimed, where they ran, too.
        refused = _check_claims(receipt, rules).problems["candidate"]
        return verdict("rejected", parity_reasons + refused,
                       {"suppressed": "parity failed: no speed credit is computed"})
    if parity["all_uncheckable"]:
        return verdict("uncheckable", [reason("parity-uncheckable",
                                              "every depth has a near-uniform reference: parity cannot "
                                              "be checked, held for review", build=None)],
                       {"suppressed": "parity uncheckable"})

    claims = _check_claims(receipt, rules)
    warnings.extend(claims.warnings)
    if claims.problems["main"]:
        main_invalid = [dict(r, message="main invalid: " + r["message"])
                        for r in claims.problems["main"]]
        return verdict("infra", main_invalid + claims.problems["candidate"], {"suppressed": "main invalid"})
    if claims.problems["candidate"]:
        return verdict("rejected", claims.problems["candidate"], {"suppressed": "claims refused"})
    short = [b for b in ("main", "candidate") if len(claims.valid.get((b, "timed"), [])) < 2]
    if short:
        return verdict("infra", [reason("too-few-reps",
                                        f"{b}: {len(claims.valid.get((b, 'timed'), []))} valid timed rep(s); "
                                        "at least 2 are needed (the rest failed the node, not the build)",
                                        build=b) for b in short], {"suppressed": "too few valid reps"})

    guard_reasons: list[dict[str, Any]] = []
    guard_infra: list[dict[str, Any]] = []
    guards = _check_guards(claims, receipt.get("lock") or {}, rules, guard_reasons, warnings, guard_infra)
    if guard_reasons:
        return verdict("rejected", guard_reasons, {"suppressed": "guard breached", "guards": guards})
    if guard_infra:
        return verdict("infra", guard_infra, {"suppressed": "guard not measured", "guards": guards})

    speed = _speed(claims, receipt.get("lock") or {}, rules, warnings)
    speed["guards"] = guards
    not_significant = _significance(speed, rules)
    speed["significant"] = not_significant is None
    tier = band(speed["basis"], rules.bands) if not_significant is None else None
    speed["band"] = tier

    ceiling = speed["plausibility"]["ceiling"]
    if speed["candidate_median"] > ceiling:
        p = speed["plausibility"]
        return verdict("implausible", [reason(
            "implausible", f"candidate median {_num(speed['candidate_median'])} is above "
                           f"{p['factor']:g}x the {p['reference_kind']} {_num(p['reference'])} "
                           f"({_num(ceiling)}): held for review, not recorded",
            figure="candidate_median", bar=ceiling, value=speed["candidate_median"])],
            speed, would_be_tier=tier)
    if not_significant is not None:
        return verdict("none", [not_significant], speed)
    return verdict("accepted", [], speed, tier=tier)


# --- noise ---------------------------------------------------------------------------

def _noise_sides(claims: _Claims) -> tuple[list[float], list[float]]:
    """The two copies of the same build: main vs candidate, or alternate reps of main alone."""
    a = claims.valid.get(("main", "timed"), [])
    b = claims.valid.get(("candidate", "timed"), [])
    if not b:
        pairs = list(zip(a[0::2], a[1::2]))
        a, b = [x for x, _ in pairs], [y for _, y in pairs]
    return _values(a), _values(b)


def decide_noise(receipt: dict[str, Any], rules: GateRules) -> Verdict:
    """A build measured against itself: how much gain does noise alone produce here?

    Reps are validated like a round's (claims, exclusions); any claim problem or fewer
    than two pairs is ``infra``. The report is ``stats.noise_report``.
    """
    warnings: list[dict[str, Any]] = []
    if receipt.get("status") == "infra":
        why = receipt.get("diagnosis") or "the round was marked as a node fault"
        return Verdict("infra", reasons=[reason("node-fault", f"infra: {why}", build=None)])
    claims = _check_claims(receipt, rules)
    warnings.extend(claims.warnings)
    problems = claims.problems["main"] + claims.problems["candidate"]
    if problems:
        return Verdict("infra", reasons=problems, warnings=warnings)
    a, b = _noise_sides(claims)
    report = stats.noise_report(a, b, rules.significance, rules.confidence)
    if report["pairs"] < 2:
        return Verdict("infra", reasons=[reason("too-few-reps", f"{report['pairs']} valid pair(s); at least 2 "
                                                                "are needed to measure noise", build=None)],
                       warnings=warnings, speed={"noise": report})
    if report["spread"] > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the significance threshold {rules.significance:.1%} is below this node's "
                                f"noise {report['spread']:.1%} (max pair gain): the gate would be decorative"))
    if report["false_positives"]:
        warnings.append(warning("false-positives",
                                f"the significance rule fired on {report['false_positives']} of "
                                f"{report['windows']} windows of this build against itself "
                                f"({report['false_positive_rate']:.0%})"))
    return Verdict("noise", warnings=warnings, speed={"noise": report})
