"""Which of a round's reps count, and why the others do not: every statistic (the verdict, the
receipt's summary, the lock's pins, the screens) is computed over these and only these.

A rep counts when it finished ``ok`` with a value and the console's own wall clock, was not marked
suspect or aborted by telemetry, and its claims agree with that clock (the differential, at the
profile's false-refusal rate). The paired estimand (``log_ratios``) is read from the reps that count."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from console.core.records import kinds
from console.core.decisions import claims, legacy
from console.core.statistics import stats
from console.core.records.figures import finite, shown
from console.core.records.receipt import BUILDS, Figures, Receipt, Rep, is_bench_phase
from console.core.records.rules import GateRules
from console.core.records.verdict import Caveat, Reason
from console.core.records.verdict import num as _num, reason, warning





def typed(receipt: Receipt) -> Receipt:
    """The gate reads typed receipts only: whoever holds a document reads it once, at its edge."""
    if not isinstance(receipt, Receipt):
        raise TypeError(f"the gate takes a Receipt, not a {type(receipt).__name__}: read the document "
                        "once with Receipt.from_dict and pass the receipt")
    return receipt


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
    if rep.console_timed:
        out.extend(_clock_problems(rep, elapsed, rules))
    else:
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


def _clock_problems(rep: Rep, elapsed: Any, rules: GateRules) -> list[tuple[str, str]]:
    """A console-timed rep: its figure is the console's clock over the section (tokens / section_s);
    the engine's own timing of the same section is a cross-check. It cannot honestly exceed the
    console's (the engine's section lies inside the console's), nor fall under it by more than the
    handover's own cost: an engine whose clock reads less than the work took is refused, whatever
    it gains by it (nothing: the figure is not its own)."""
    label, section = rep.label, float(rep.section_s or 0.0)
    if not section > 0 or not math.isclose(float(rep.value or 0.0), rep.tokens / section, rel_tol=1e-9):
        return [("claim-clock", f"{label}: its value is not the console's clock over the section "
                                f"({rep.tokens} tokens in {shown(rep.section_s)} s)")]
    if elapsed is None:
        return []
    if elapsed > section * (1 + rules.wall_margin):
        return [("claim-wall", f"{label}: reported elapsed {elapsed:.4g} s exceeds the console's clock over the "
                               f"section it handed over ({section:.4g} s, +{rules.wall_margin:.0%} margin)")]
    if elapsed < section * (1 - rules.clock_margin):
        return [("claim-clock", f"{label}: the engine's own clock says the section took {elapsed:.4g} s, "
                                f"{1 - elapsed / section:.0%} under the console's {section:.4g} s (at most "
                                f"{rules.clock_margin:.0%} is the handover's): the clock it reads is not the one "
                                "that timed the work")]
    return []


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
    r = typed(receipt)
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
    if r.profile.serves:
        # the console's own client timed every token: there is no engine claim to check
        differential = {"checked": False, "why": "measured by the console's load client"}
    else:
        differential = _DIFFERENTIAL[r.rules_version](long_runs(valid, r), problems, rules)
    return Counted(valid, problems, warnings, differential)


def timed_phases(r: Receipt) -> list[str]:
    """The phases whose reps are a round's timed pairs: its one shape's, or each matrix cell's."""
    return [c.phase for c in r.profile.matrix.cells] if r.profile.matrix is not None else ["timed"]


def measured_blocks(r: Receipt, c: Counted, build: str) -> list[Rep]:
    """What ``build``'s server served that a finding rests on, and so must be graded: the counted
    reps of the timed phases, and a sweep's blocks at its levels (a sweep counts no pairs, but its
    figures and a capacity change are read from those blocks)."""
    timed = [rep for phase in timed_phases(r) for rep in c.valid.get((build, phase), [])]
    return timed + [rep for rep in r.reps if rep.build == build and rep.phase.startswith(SWEEP_PHASE)
                    and rep.status == "ok"]


SWEEP_PHASE = "sweep:"      # a sweep level's blocks (round.kinds.sweep); its warm-ups are "sweep-warmup:"


def long_phase(r: Receipt) -> str:
    """The phase of the long runs: the timed runs, or in a matrix round its home cell's (the bench's
    own shape, as the short runs are)."""
    spec = r.profile.matrix
    return spec.cell(spec.home).phase if kinds.of(r.kind).per_cell and spec is not None else "timed"


def long_runs(valid: dict[tuple[str, str], list[Rep]], r: Receipt) -> dict[tuple[str, str], list[Rep]]:
    """``valid`` with the long runs as its timed runs: what the wall-clock differential checks the
    short runs against."""
    phase = long_phase(r)
    return valid if phase == "timed" else {**valid, **{(b, "timed"): valid.get((b, phase), []) for b in BUILDS}}


def differential(valid: dict, problems: dict, rules: GateRules) -> dict[str, Any]:
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


def legacy_differential(valid: dict, problems: dict, rules: GateRules) -> dict[str, Any]:
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
    phase = long_phase(typed(receipt))
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


def node_fault(r: Receipt) -> Reason:
    return reason("node-fault", f"infra: {r.diagnosis or 'the round was marked as a node fault'}", build=None)


def pairs_of(c: Counted) -> list[tuple[Rep, Rep]]:
    """(main, candidate) timed reps of the same pair: the k-th of each build in the round's
    drift-cancelling order. A pair missing either rep (excluded, refused) is dropped whole."""
    main = {rep.index: rep for rep in c.valid.get(("main", "timed"), [])}
    cand = {rep.index: rep for rep in c.valid.get(("candidate", "timed"), [])}
    return [(main[k], cand[k]) for k in sorted(main.keys() & cand.keys())]


def log_ratios(c: Counted) -> list[float]:
    """log(candidate / main) per pair: the one estimand every speed figure comes from."""
    return [math.log(float(cr.value) / float(mr.value)) for mr, cr in pairs_of(c)]


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


# Each build's claims against its own wall clock, by the rules a receipt was sealed under: schema 1
# read medians as point estimates (``legacy``); later schemas bound them at a stated rate (``claims``).
_DIFFERENTIAL: dict[int, Callable[[dict, dict, GateRules], dict[str, Any]]] = {
    1: legacy_differential, 2: differential, 3: differential}
