"""Headless output: progress lines on a terminal, JSON lines, JUnit XML, Markdown.

A consumer of the event stream like the TUI: it renders, it never measures.
One line per event (build logs only with --verbose, and their tail on failure),
no cursor movement, colour only on a terminal and never when NO_COLOR is set.
"""
from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Callable, Mapping
import xml.etree.ElementTree as ET

from .. import events as ev
from ..core.progress import Tracker, build_how, build_step, duration
from ..core.adjudication import Adjudication
from ..core.receipt import BUILDS, Figures, ParityRecord, Receipt
from ..core.verdict import OUTCOMES, Reason, VerdictRecord, stage_of
from .matrix import cells_of, matrix_table, summary_line
from .tables import Table, render

# One headline per outcome the gate can produce (a test checks there is one for each).
HEADLINES = {"accepted": "ACCEPTED, tier {tier}", "none": "NONE (decided: no worthwhile gain or regression)",
             "slower": "SLOWER (decided: slower than main)", "undecided": "UNDECIDED (budget spent)",
             "noise": "NOISE (this node's floor)",
             "rejected": "REJECTED", "implausible": "IMPLAUSIBLE (held for review)",
             "uncheckable": "UNCHECKABLE (held)", "infra": "INFRA (node fault, retry)"}
_COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "dim": "2", "bold": "1"}


def use_colour(stream: IO[str]) -> bool:
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


class LineReporter:
    def __init__(self, stream: IO[str] = sys.stdout, verbose: bool = False, colour: bool | None = None,
                 github: bool | None = None):
        self.stream, self.verbose = stream, verbose
        self.colour = use_colour(stream) if colour is None else colour
        # GitHub Actions reads ::error/::warning lines on stdout as annotations
        self.github = os.environ.get("GITHUB_ACTIONS") == "true" if github is None else github
        self.t0: float | None = None
        self.progress = Tracker()
        self.build_t0: dict[str, float] = {}

    def _c(self, text: str, colour: str) -> str:
        return f"\033[{_COLOURS[colour]}m{text}\033[0m" if self.colour else text

    def _line(self, e: ev.Event, text: str) -> None:
        if self.t0 is None:
            self.t0 = e.at
        stamp = f"{e.at - self.t0:7.1f}s"
        self.stream.write(f"{self._c(stamp, 'dim')}  {text}\n")
        self.stream.flush()

    def __call__(self, e: ev.Event) -> None:
        text = self.format(e)
        if text is not None:
            self._line(e, text)

    def format(self, e: ev.Event) -> str | None:
        """The line an event prints, or None for one that prints nothing."""
        for cls in type(e).__mro__:
            if cls in _LINES:
                return _LINES[cls](self, e)
        return None

    def _round_started(self, e: ev.RoundStarted) -> str:
        self.progress.start(e.plan)
        h = e.host
        gpus = ", ".join(g.get("name", "?") for g in h.get("gpus", [])) or "none"
        return (f"round {e.round_id}: profile {e.profile} ({e.profile_sha256[:12]}), runtime {e.runtime}, "
                f"{h.get('cpu_model', '?')} x{h.get('cores', '?')}, GPUs: {gpus}, "
                + (f"timed pairs until decided, at most {e.plan.get('reps')}" if e.plan.get("sequential")
                   else f"{e.plan.get('reps')} timed pairs"))

    def _notice(self, e: ev.Notice) -> str:
        colour = {"error": "red", "warn": "yellow"}.get(e.level, "blue")
        return self._c(f"{e.level}: {e.message}", colour)

    def _build_started(self, e: ev.BuildStarted) -> str:
        self.build_t0[e.build] = e.at
        return f"build {e.build}: started from {source_text(e.source)}"

    def _build_log(self, e: ev.BuildLog) -> str | None:
        if self.verbose:
            return f"  {e.build} | {e.line}"
        step = build_step(e.line)
        if step is None:
            return None
        elapsed = e.at - self.build_t0.get(e.build, e.at)
        return f"build {e.build}: step {step[0]}/{step[1]}, {duration(elapsed)}: {e.line.split(':', 1)[1].strip()[:60]}"

    def _build_done(self, e: ev.BuildDone) -> str:
        return (f"build {e.build}: {build_how(e.seconds, e.reused_from)}, image {e.image_id[:19]}, "
                f"base {e.base_image_id[:19]}, compiler '{e.compiler}'")

    def _build_failed(self, e: ev.BuildFailed) -> str:
        tail = "".join(f"\n    | {line}" for line in e.log_tail[-15:])
        return self._c(f"build {e.build}: FAILED: {e.message}", "red") + tail

    def _depth_graded(self, e: ev.DepthGraded) -> str:
        colour = {"pass": "green", "uncheckable": "yellow", "drift": "yellow", "adjudicated": "yellow"}.get(e.status, "red")
        extra = f" ({'; '.join(e.reasons)})" if e.reasons else ""
        return (f"parity {e.build:9} depth {e.depth:5}: top-1 {e.top1:.3f}  KL {e.kl:.2e}  "
                + self._c(e.status, colour) + extra)

    def _accuracy_progress(self, e: ev.AccuracyProgress) -> str:
        text = "accuracy " + accuracy_progress_text(e)
        return self._c(text, "red") if e.error else text

    def _workload(self, e: ev.WorkloadCommitted) -> str:
        space = f", about 10^{e.space_log10:.1f} possible prompts" if e.space_log10 else ""
        return (f"workload: seed drawn, its sha256 {e.commitment[:16]}… committed (the seed is revealed in the "
                f"receipt); {e.drawn} drawn ids per prompt{space}")

    def _accuracy_graded(self, e: ev.AccuracyGraded) -> str:
        text = "accuracy " + accuracy_grade_text(e)
        return self._c(text, "green" if e.grade.get("status") == "pass" else "red")

    def _adjudication_step(self, e: ev.AdjudicationStep) -> str:
        colour = None if e.ok is None else ("green" if e.ok else "red")
        text = f"adjudication {e.step}: {e.message}"
        return self._c(text, colour) if colour else text

    def _parity_done(self, e: ev.ParityDone) -> str:
        if e.error:
            return self._c(f"parity {e.build}: FAILED: {e.error}", "red")
        return f"parity {e.build}: worst depth {e.worst_depth}"

    def _scored_path(self, e: ev.ScoredPathChecked) -> str:
        if e.error:
            return self._c(f"scored path {e.build}: FAILED: {e.error}", "red")
        status = self._c("pass", "green") if e.ok else self._c("FAIL", "red")
        return f"scored path {e.build} @ depth {e.depth}: top-1 {e.top1:.3f}  KL {e.kl:.2e}  {status}"

    def _rep_done(self, e: ev.RepDone) -> str:
        r = e.rep
        value = f"{r['value']:.2f}" if r.get("value") is not None else "-"
        mem = f"{r['peak_mem_bytes'] / 2**20:.0f} MiB" if r.get("peak_mem_bytes") else "mem ?"
        status = r["status"] if r["status"] == "ok" else self._c(r["status"], "red" if r["status"] != "suspect" else "yellow")
        why = ""
        if r.get("refusals"):
            why = " (" + "; ".join(r["refusals"]) + ")"
        elif r.get("suspect"):
            why = " (" + "; ".join(r["suspect"]) + ")"
        p = self.progress.rep_done(r, e.at)
        where = p.text() if p else f"rep at position {r['position']}"
        if r.get("context") == "serve":     # a block: its latencies instead of a memory figure
            mem = block_text(r.get("reported") or {})
        return (f"{r['build']:9} {r['phase']:14} #{r['index']}: {value:>9} "
                f"wall {r['wall_s']:.3f}s {mem} {status}{why}  [{where}]")

    def _plan_ready(self, e: ev.PlanReady) -> str:
        pooled = (f"; pooled with {e.prior_rounds} earlier round(s), {e.prior_pairs} pairs" if e.prior_rounds
                  else "")
        return self._c(f"plan: {e.sentence}{pooled}", "blue")

    def _verdict_ready(self, e: ev.VerdictReady) -> str:
        text = self.verdict_text(e.verdict)
        if not self.github or e.verdict.get("outcome") not in OUTCOMES:
            return text     # a replayed newer receipt's outcome is shown, but this version cannot annotate it
        return "\n".join([text, *annotations(VerdictRecord.from_dict(e.verdict))])

    def _round_ended(self, e: ev.RoundEnded) -> str:
        where = f"; receipt {e.receipt_path}" if e.receipt_path else ""
        return f"round {e.status} (exit {e.exit_code}){where}"

    def verdict_text(self, v: dict) -> str:
        """The verdict as an event carries it: JSON, whose outcome may be one a newer version sealed."""
        outcome = v.get("outcome", "?")
        head = HEADLINES.get(outcome, f"? {outcome} (not an outcome this gate produces)").format(
            tier=_tier_words(v.get("tier"), v.get("tier_span")))
        colour = {"accepted": "green", "none": "blue", "noise": "blue", "rejected": "red",
                  "slower": "red"}.get(outcome, "yellow")
        lines = [self._c(f"verdict: {head}", colour)]
        s = v.get("speed") or {}
        if s.get("gain") is not None:
            iv = s.get("interval") or [None, None]
            iv_txt = f"[{iv[0]:+.2%}, {iv[1]:+.2%}]" if None not in iv else "n/a"
            basis = f", basis {s['basis']:+.2%} ({s.get('basis_kind', '')})" if s.get("basis") is not None else ""
            lead = f"cell [{s['matrix']['lead']}]: " if s.get("matrix") else ""
            lines.append(f"  {lead}candidate {s.get('candidate_median', 0):.2f} vs frontier {s.get('frontier', 0):.2f} "
                         f"({s.get('frontier_source', '')}): gain {s['gain']:+.2%}, interval {iv_txt}{basis}")
            if s.get("decision"):
                d = s["decision"]
                pooled = f" (+{d['prior_pairs']} pooled from earlier rounds)" if d.get("prior_pairs") else ""
                lines.append(f"  {d['pairs']} pairs{pooled}, {s.get('method', '')}; levels "
                             f"{rate_text(1 - s.get('confidence', 0.99))} false accept")
        if cells_of(v):
            lines.append("  " + summary_line(v))
            lines += ["  " + x for x in table_text(matrix_table(v)).splitlines()[1:]]
        n = s.get("noise") or {}
        if n.get("sd") is not None:
            lines.append(f"  pair noise SD {n['sd']:.2%} (95% {n['lower']:.2%}–{n['upper']:.2%}) over {n['pairs']} pairs; "
                         f"with it a round decides gains ≥ {n['decidable_gain']:.1%} within {n['max_pairs']} pairs")
        for r in v.get("reasons", []):
            lines.append(f"  - {r.get('message', r.get('code'))}")
        for w in v.get("warnings", []):
            lines.append(self._c(f"  ! {w.get('message', w.get('code'))}", "yellow"))
        return "\n".join(lines)


# Which LineReporter method prints each kind of event; kinds not here print nothing
# (RepStarted, TelemetrySample: the rep's own line and the telemetry come with RepDone).
_LINES: dict[type, Callable[[LineReporter, Any], str | None]] = {
    ev.RoundStarted: LineReporter._round_started,
    ev.PhaseStarted: lambda self, e: self._c(f"== {e.phase}", "bold"),
    ev.Notice: LineReporter._notice,
    ev.BuildStarted: LineReporter._build_started,
    ev.BuildLog: LineReporter._build_log,
    ev.BuildDone: LineReporter._build_done,
    ev.BuildFailed: LineReporter._build_failed,
    ev.DepthGraded: LineReporter._depth_graded,
    ev.AccuracyProgress: LineReporter._accuracy_progress,
    ev.AccuracyGraded: LineReporter._accuracy_graded,
    ev.AdjudicationStep: LineReporter._adjudication_step,
    ev.ParityDone: LineReporter._parity_done,
    ev.ScoredPathChecked: LineReporter._scored_path,
    ev.RepDone: LineReporter._rep_done,
    ev.PlanReady: LineReporter._plan_ready,
    ev.DecisionStep: lambda self, e: "decision: " + decision_text(e),
    ev.CellsStep: lambda self, e: f"cells after pair {e.pair}: " + " · ".join(cell_text(c) for c in e.cells),
    ev.SweepLevel: lambda self, e: self._c("level " + e.sentence, "blue"),
    ev.WorkloadCommitted: LineReporter._workload,
    ev.VerdictReady: LineReporter._verdict_ready,
    ev.RoundEnded: LineReporter._round_ended,
}


def tier_text(v: VerdictRecord) -> str:
    """``L`` or ``L (interval spans L–XL)``: the conservative tier and what it may still be."""
    return _tier_words(v.tier, v.tier_span)


def _tier_words(tier: Any, span: Any) -> str:
    tier = str(tier).upper()
    if span and span[0] != span[-1]:
        return f"{tier} (interval spans {span[0].upper()}–{span[-1].upper()})"
    return tier


def decision_text(e: "ev.DecisionStep") -> str:
    """One line per look: pairs, the gain and its sequence, the state."""
    iv = e.interval or [None, None]
    shown = "[" + ", ".join("…" if x is None else f"{x:+.1%}" for x in iv) + "]"
    gain = "n/a" if e.gain is None else f"{e.gain:+.1%}"
    pooled = f"+{e.prior_pairs}" if e.prior_pairs else ""
    state = e.state if e.state != "accepted" else f"accepted {e.tier}" + (
        f" (spans {e.span[0]}–{e.span[-1]})" if e.span else "")
    return f"{e.pairs}{pooled} pairs, gain {gain} {shown}: {state}"


def rate_text(x: float) -> str:
    """An error rate as said to people: 1 %, 0.5 %, 0.17 % (a matrix splits the round's rate)."""
    return f"{round(x * 100, 10):.2g}%"


def cell_text(c: Mapping[str, Any]) -> str:
    """One cell of a matrix round's look: its key, state, gain and interval."""
    iv = c.get("interval") or [None, None]
    shown = "[" + ", ".join("…" if x is None else f"{x:+.1%}" for x in iv) + "]"
    gain = "n/a" if c.get("gain") is None else f"{c['gain']:+.1%}"
    state = c.get("state", "?") + (f" {c['tier']}" if c.get("tier") and c.get("state") == "accepted" else "")
    return f"[{c.get('key')}] {state} {gain} {shown} ({c.get('pairs', 0)} pairs)"


def table_text(t: Table, fmt: str = "table") -> str:
    """``t`` rendered as text (``table`` or ``md``)."""
    buf = io.StringIO()
    render([t], fmt, buf)
    return buf.getvalue()


class JsonLinesReporter:
    """Machine-readable progress: each event as one JSON object per line."""

    def __init__(self, stream: IO[str] = sys.stdout):
        self.stream = stream

    def __call__(self, e: ev.Event) -> None:
        self.stream.write(json.dumps(e.to_dict(), sort_keys=True, default=str) + "\n")
        self.stream.flush()


def source_text(src: dict) -> str:
    if "patch" in src:
        return f"patch {Path(src['patch']).name} over {source_text(src.get('over', {}))}"
    if "git" in src:
        return f"{src['git']}@{src.get('commit', src.get('ref', ''))[:12]}"
    if "pypi" in src:
        return f"sdist {src['pypi']}" + (f" ({src['subtree']})" if src.get("subtree") else "") \
            + (f", sha256 {src['sdist_sha256'][:12]}" if src.get("sdist_sha256") else "")
    return src.get("path", "?")


# --- files written beside the receipt ----------------------------------------

def junit_xml(r: Receipt, verdict: VerdictRecord) -> str:
    """One test case per gate stage, so CI dashboards show where a round stopped. A reason is a
    failure only when the verdict fails the job (its exit code); an outcome that exits 0 (none,
    undecided, slower recorded) states its reasons as the stage's output instead."""
    stages: dict[str, list[Reason]] = {"parity": [], "claims": [], "guards": [], "verdict": []}
    for reason in verdict.reasons:
        stages[stage_of(reason.code)].append(reason)
    fails = verdict.exit_code not in (0, None)
    suite = ET.Element("testsuite", name=f"bench-console round {r.round_id}",
                       tests=str(len(stages)), failures=str(sum(1 for rs in stages.values() if rs) if fails else 0))
    classname = f"bench-console.{r.profile.name}"
    for name, rs in stages.items():
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        for reason in rs:
            if fails:
                ET.SubElement(case, "failure", message=reason.message)
            else:
                ET.SubElement(case, "system-out").text = f"{verdict.outcome}: {reason.message}"
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def gain_phrase(verdict: VerdictRecord) -> str:
    """" — gain +12.3 % (interval +8.1 % to +16.0 %, 1 % false accept)", or "" without a gain."""
    if verdict.gain is None:
        return ""
    iv = ", ".join("unbounded" if x is None else f"{x:+.1%}" for x in verdict.interval or (None, None))
    level = f", {rate_text(1 - verdict.confidence)} false accept" if verdict.confidence is not None else ""
    return f" — gain {verdict.gain:+.1%}, interval [{iv}]{level}"


def markdown_summary(r: Receipt, verdict: VerdictRecord) -> str:
    lines = [f"# Round {r.round_id} — {r.profile.name}", "",
             f"**Verdict: {verdict.outcome}" + (f", tier {tier_text(verdict).lower()}" if verdict.tier
                                                else "") + "**" + gain_phrase(verdict), ""]
    lines += [f"- {reason.message}" for reason in verdict.reasons]
    lines += [f"- warning: {w.message}" for w in verdict.warnings]
    lines += _decision_lines(r, verdict)
    if cells_of(verdict.to_dict()):     # a matrix round: every cell, as the exports show it
        md = table_text(matrix_table(verdict.to_dict()), "md")
        lines += ["", summary_line(verdict.to_dict()), "", *md.splitlines()[2:]]
    # As reported by the engine over its ok timed reps; the verdict above says which claims stood.
    lines += ["", "| build | image | compiler | reported median | reps | spread |", "|---|---|---|---|---|---|"]
    for b in BUILDS:
        bd, fig = r.builds.get(b), (r.summary or {}).get(b, Figures())
        med = "-" if fig.median is None else f"{fig.median:.2f}"
        spread = "-" if fig.spread is None else f"{fig.spread:.2%}"
        image, compiler = (bd.image_id, bd.compiler) if bd else (None, None)
        lines.append(f"| {b} | `{(image or 'not built')[:19]}` | {compiler or '-'} | {med} | {fig.n} | {spread} |")
    lines += _parity_lines(r.parity, verdict)
    lines += _adjudication_lines(r.parity.adjudication, verdict) + _accuracy_lines(verdict)
    return "\n".join(lines) + "\n"


def _decision_lines(r: Receipt, verdict: VerdictRecord) -> list[str]:
    """Where the stopping rule left the round, and what its plan said it could decide."""
    d = verdict.decision
    if d is None:
        return []
    iv = ", ".join("unbounded" if x is None else f"{x:+.1%}" for x in d.get("interval") or [None, None])
    pooled = f" (+{d['prior_pairs']} pooled from earlier rounds)" if d.get("prior_pairs") else ""
    gain = "n/a" if d.get("gain") is None else f"{d['gain']:+.1%}"
    said = {"accepted": "Decided", "none": "Decided", "slower": "Decided"}.get(verdict.outcome, "Not decided")
    seq = r.sequential
    settle = seq.decided_at if seq else None
    when = (f" (decided after {settle}, then settling the tier)" if settle and settle != d["pairs"] else "")
    lines = ["", f"{said} on {d['pairs']} pairs{pooled}{when}: gain {gain}, interval [{iv}] at the "
                 f"{rate_text(1 - _level(verdict))} false-accept level ({verdict.speed.get('method')})."]
    plan = seq.preview if seq else None
    if isinstance(plan, Mapping) and plan.get("decidable_gain") is not None:
        lines.append(f"Planned from the node's noise ({plan['sd']:.1%}, {plan['sd_source']}): gains of "
                     f"{plan['decidable_gain']:.1%} or more decidable within {plan['max_pairs']} pairs.")
    return lines


def _level(verdict: VerdictRecord) -> float:
    """The decision's confidence; 0.99 where the verdict does not record it."""
    return 0.99 if verdict.confidence is None else verdict.confidence


def _parity_lines(par: ParityRecord, verdict: VerdictRecord) -> list[str]:
    """The candidate's figures per depth beside main's and the gate's grade."""
    if not (par.candidate and par.candidate.depths):
        return []
    lines = ["", "| depth | grade | main KL | candidate KL ± SE | median | p90 | p95 | p99 | p99.9 | max "
                 "| top-1 ± SE | RMS Δp |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    grades = verdict.depth_grades
    sci = lambda x: "-" if x is None else f"{x:.2e}"  # noqa: E731
    for d in par.candidate.depths:
        m, s = par.main.at(d.depth) if par.main else None, d.stats    # no stats in older receipts
        kl = sci(d.kl) + ("" if s is None or s.kl_se is None else f" ± {s.kl_se:.1e}")
        top1 = f"{d.top1:.3f}" + ("" if s is None else f" ± {s.top1_se:.3f}")
        spread = " | ".join(sci(s and getattr(s, k)) for k in ("kl_median", "kl_p90", "kl_p95", "kl_p99", "kl_p999",
                                                              "kl_max"))
        lines.append(f"| {d.depth} | {grades.get(d.depth, '-')} | {sci(m and m.kl)} | {kl} | {spread} | {top1} "
                     f"| {sci(s and s.rms_dp)} |")
    return lines + ["", f"KL(reference ‖ build) in nats over {par.reference.get('rows', '?')} rows per depth "
                        "(quantiles and max of the rows); top-1 ± its binomial SE; RMS Δp: the root mean square "
                        "change in the probability of the document's next token. The gate judges mean KL and "
                        "top-1 only."]


def _adjudication_lines(adj: Adjudication | None, verdict: VerdictRecord) -> list[str]:
    ruling = verdict.adjudication
    if ruling is None:
        return []
    depths = ruling.get("depths") or {}
    out = ["", f"**Borderline KL: {'pass (adjudicated)' if ruling.get('passed') else 'rejected'}.** "
               "The reference build rerun with its alternative kernels:", "",
           "| kernel variant | " + " | ".join(f"KL @{d}" for d in depths) + " |",
           "|---|" + "---|" * len(depths)]
    for v in adj.variants if adj else []:
        # the ruling's depths are JSON keys (strings); the record's are ints
        cells = [("error" if v.error else f"{v.kl.get(int(d), float('nan')):.3g}") for d in depths]
        out.append(f"| {v.name} (`{' '.join(v.args)}`) | " + " | ".join(cells) + " |")
    for d, x in depths.items():
        line = "-" if x.get("line") is None else f"{x['line']:.3g}"
        out.append(f"\nDepth {d}: candidate KL {x['kl']:.3g} against the 2x line {line}: "
                   + ("within." if x.get("within") else "over."))
    if ruling.get("candidate_disagree") is not None:
        out.append(f"\nCompletions ({len(adj.positions) if adj else 0} from the document, teacher-forced): the "
                   f"candidate's argmax differs from the reference's tokens at {ruling['candidate_disagree']} of "
                   f"{ruling.get('positions')} positions; the reference's own kernels at {ruling.get('variant_disagree')}"
                   f" (line {ruling['agreement_line']:g}).")
    return out


def accuracy_progress_text(e: ev.AccuracyProgress) -> str:
    """One side's task accuracy so far, as the headless lines and the TUI say it."""
    if e.error:
        return f"{e.build}: failed after {e.done} item(s): {e.error}"
    return f"{e.build}: {e.done}/{e.total} items, {e.correct} right ({e.correct / max(e.done, 1):.1%})"


def accuracy_grade_text(e: ev.AccuracyGraded) -> str:
    """The gate's grade of task accuracy in one line (headless lines, TUI notices)."""
    g = e.grade
    if g.get("status") not in ("pass", "fail"):
        return "not graded: " + "; ".join(e.reasons)
    return (f"{g['status']}: reference {g['reference_score']:.1%}, candidate {g['candidate_score']:.1%} "
            f"({g['delta'] * 100:+.1f} pts, tolerance ±{g['tolerance'] * 100:.1f}, {g['estimator']})")


def accuracy_sentence(verdict: VerdictRecord) -> str | None:
    """The task accuracy stage in one sentence, as the gate graded it; None when there was none."""
    acc = verdict.accuracy
    if acc is None or acc.get("status") not in ("pass", "fail"):
        return None
    return (f"Task accuracy: {acc['status']}. Reference {acc['reference_correct']}/{acc['items']} "
            f"({acc['reference_score']:.1%}), candidate {acc['candidate_correct']}/{acc['items']} "
            f"({acc['candidate_score']:.1%}): {acc['delta'] * 100:+.1f} points against a tolerance of "
            f"±{acc['tolerance'] * 100:.1f} ({acc['estimator']}, {acc['level']:.0%}); "
            f"{acc['only_reference']} item(s) only the reference answered, {acc['only_candidate']} only the candidate.")


def _accuracy_lines(verdict: VerdictRecord) -> list[str]:
    said, acc = accuracy_sentence(verdict), verdict.accuracy
    if said is None or acc is None:
        return []
    head, rest = said.split(". ", 1)
    out = ["", f"**{head}.** {rest}", "", "| kind | items | reference | candidate |", "|---|---|---|---|"]
    for kind, row in (acc.get("per_kind") or {}).items():
        out.append(f"| {kind or '-'} | {row['items']} | {row['reference']} | {row['candidate']} |")
    return out


def write_reports(out_dir: Path, r: Receipt, verdict: VerdictRecord) -> list[Path]:
    """junit.xml and summary.md beside the receipt; under GitHub Actions the summary is also
    appended to the job's step summary (GITHUB_STEP_SUMMARY)."""
    paths = [out_dir / "junit.xml", out_dir / "summary.md"]
    summary = markdown_summary(r, verdict)
    paths[0].write_text(junit_xml(r, verdict))
    paths[1].write_text(summary)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(summary + "\n")
    return paths


# --- GitHub Actions workflow commands ------------------------------------------

def _escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotations(verdict: VerdictRecord) -> list[str]:
    """``::error`` for each reason of a verdict that fails the job, ``::warning`` for each
    warning; a verdict that passes states its reasons as ``::notice``."""
    level = "error" if verdict.exit_code not in (0, None) else "notice"
    head = f"bench-console: {verdict.outcome}"
    out = [f"::{level} title={_escape(head, True)}::{_escape(r.message or r.code)}" for r in verdict.reasons]
    out += [f"::warning title={_escape('bench-console warning', True)}::{_escape(w.message or w.code)}"
            for w in verdict.warnings]
    return out


def block_text(fig: dict) -> str:
    """A serving block's figures in one line: requests, TTFT and ITL percentiles (ms)."""
    def ms(key: str) -> str:
        v = fig.get(key)
        return f"{v:.0f}" if isinstance(v, (int, float)) else "-"
    failed = f", {fig.get('failed')} failed" if fig.get("failed") else ""
    return (f"{fig.get('completed', 0)} req{failed}, TTFT p50/p99 {ms('median_ttft_ms')}/{ms('p99_ttft_ms')} ms, "
            f"ITL p50/p99 {ms('median_itl_ms')}/{ms('p99_itl_ms')} ms")
