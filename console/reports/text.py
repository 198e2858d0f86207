"""Headless output: progress lines on a terminal, JSON lines, GitHub Actions annotations.

A consumer of the event stream like the TUI: it renders, it never measures.
One line per event (build logs only with --verbose, and their tail on failure),
no cursor movement, colour only on a terminal and never when NO_COLOR is set.
The files a round leaves (junit.xml, summary.md) are exporters' (``reports.export``).
"""
from __future__ import annotations

import json
import os
import sys
from typing import IO, Any, Callable
from .. import events as ev
from ..core.decisions.progress import Tracker, build_how, build_step, duration
from ..core.records.verdict import VerdictRecord
from ..core.records.verdict_parts import CellPart, SpeedPart
from .export.table import render as aligned
from .matrix import matrix_table, summary_line
from .words import HEADLINES, rate_text, source_text, tier_text

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
        gpus = ", ".join(e.host.gpu_names()) or "none"
        return (f"round {e.round_id}: profile {e.profile} ({e.profile_sha256[:12]}), runtime {e.runtime}, "
                f"{e.host.cpu_line()}, GPUs: {gpus}, "
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
        return self._c(text, "green" if e.grade.status == "pass" else "red")

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
        value = f"{r.value:.2f}" if r.value is not None else "-"
        mem = f"{r.peak_mem_bytes / 2**20:.0f} MiB" if r.peak_mem_bytes else "mem ?"
        status = r.status if r.status == "ok" else self._c(r.status, "red" if r.status != "suspect" else "yellow")
        why = ""
        if r.refusals:
            why = " (" + "; ".join(r.refusals) + ")"
        elif r.suspect:
            why = " (" + "; ".join(r.suspect) + ")"
        p = self.progress.rep_done(e.rep, e.at)
        where = p.text() if p else f"rep at position {r.position}"
        if r.context == "serve":     # a block: its latencies instead of a memory figure
            mem = block_text(r.reported or {})
        return (f"{r.build:9} {r.phase:14} #{r.index}: {value:>9} "
                f"wall {r.wall_s:.3f}s {mem} {status}{why}  [{where}]")

    def _plan_ready(self, e: ev.PlanReady) -> str:
        pooled = (f"; pooled with {e.prior_rounds} earlier round(s), {e.prior_pairs} pairs" if e.prior_rounds
                  else "")
        return self._c(f"plan: {e.sentence}{pooled}", "blue")

    def _verdict_ready(self, e: ev.VerdictReady) -> str:
        text = self.verdict_text(e.verdict)
        return "\n".join([text, *annotations(e.verdict)]) if self.github else text

    def _round_ended(self, e: ev.RoundEnded) -> str:
        where = f"; receipt {e.receipt_path}" if e.receipt_path else ""
        return f"round {e.status} (exit {e.exit_code}){where}"

    def verdict_text(self, v: VerdictRecord) -> str:
        """The verdict in a few lines: the headline, the figures it rests on, the cells of a matrix
        round, a noise round's finding, then its reasons and warnings."""
        head = HEADLINES[v.outcome].format(tier=tier_text(v))
        colour = _VERDICT_COLOURS.get(v.outcome, "yellow")
        lines = [self._c(f"verdict: {head}", colour), *_speed_lines(v.speed)]
        if v.speed.cells:
            lines.append("  " + summary_line(v))
            lines += ["  " + x for x in aligned([matrix_table(v)]).splitlines()[1:]]
        n = v.noise
        if n is not None and n.sd is not None:
            lines.append(f"  pair noise SD {n.sd:.2%} (95% {n.lower:.2%}–{n.upper:.2%}) over {n.pairs} pairs; "
                         f"with it a round decides gains ≥ {n.decidable_gain:.1%} within {n.max_pairs} pairs")
        lines += [f"  - {r.message or r.code}" for r in v.reasons]
        lines += [self._c(f"  ! {w.message or w.code}", "yellow") for w in v.warnings]
        return "\n".join(lines)


# The headline's colour by outcome (yellow for the rest: held, undecided, infra).
_VERDICT_COLOURS = {"accepted": "green", "none": "blue", "noise": "blue", "rejected": "red", "slower": "red"}


def _speed_lines(s: SpeedPart) -> list[str]:
    """The figures the decision rests on: the gain against the frontier, then the pairs and the
    rate it was decided at (said only where the verdict records it); none without a gain."""
    if s.gain is None:
        return []
    iv = s.interval or (None, None)
    iv_txt = f"[{iv[0]:+.2%}, {iv[1]:+.2%}]" if None not in iv else "n/a"
    basis = f", basis {s.basis:+.2%} ({s.basis_kind or ''})" if s.basis is not None else ""
    lead = f"cell [{s.matrix.lead}]: " if s.matrix is not None else ""
    lines = [f"  {lead}candidate {s.candidate_median or 0:.2f} vs frontier {s.frontier or 0:.2f} "
             f"({s.frontier_source or ''}): gain {s.gain:+.2%}, interval {iv_txt}{basis}"]
    d = s.decision
    if d is not None:
        pooled = f" (+{d.prior_pairs} pooled from earlier rounds)" if d.prior_pairs else ""
        fa = s.false_accept
        level = f"; levels {rate_text(fa)} false accept" if fa is not None else ""
        lines.append(f"  {d.pairs} pairs{pooled}, {s.method or ''}{level}")
    return lines


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


def decision_text(e: "ev.DecisionStep") -> str:
    """One line per look: pairs, the gain and its sequence, the state."""
    iv = e.interval or [None, None]
    shown = "[" + ", ".join("…" if x is None else f"{x:+.1%}" for x in iv) + "]"
    gain = "n/a" if e.gain is None else f"{e.gain:+.1%}"
    pooled = f"+{e.prior_pairs}" if e.prior_pairs else ""
    state = e.state if e.state != "accepted" else f"accepted {e.tier}" + (
        f" (spans {e.span[0]}–{e.span[-1]})" if e.span else "")
    return f"{e.pairs}{pooled} pairs, gain {gain} {shown}: {state}"


def cell_text(c: CellPart) -> str:
    """One cell of a matrix round's look (``CellsStep``: a cell's decision so far, the keys a
    sealed cell has): its key, state, gain and interval."""
    shown = "[" + ", ".join("…" if x is None else f"{x:+.1%}" for x in c.interval or (None, None)) + "]"
    gain = "n/a" if c.gain is None else f"{c.gain:+.1%}"
    state = c.state + (f" {c.tier}" if c.tier and c.state == "accepted" else "")
    return f"[{c.key}] {state} {gain} {shown} ({c.pairs} pairs)"


class JsonLinesReporter:
    """Machine-readable progress: each event as one JSON object per line."""

    def __init__(self, stream: IO[str] = sys.stdout):
        self.stream = stream

    def __call__(self, e: ev.Event) -> None:
        self.stream.write(json.dumps(e.to_dict(), sort_keys=True, default=str) + "\n")
        self.stream.flush()


def accuracy_progress_text(e: ev.AccuracyProgress) -> str:
    """One side's task accuracy so far, as the headless lines and the TUI say it."""
    if e.error:
        return f"{e.build}: failed after {e.done} item(s): {e.error}"
    return f"{e.build}: {e.done}/{e.total} items, {e.correct} right ({e.correct / max(e.done, 1):.1%})"


def accuracy_grade_text(e: ev.AccuracyGraded) -> str:
    """The gate's grade of task accuracy in one line (headless lines, TUI notices)."""
    g = e.grade
    if g.status not in ("pass", "fail"):
        return "not graded: " + "; ".join(e.reasons)
    return (f"{g.status}: reference {g.reference_score:.1%}, candidate {g.candidate_score:.1%} "
            f"({g.delta * 100:+.1f} pts, tolerance ±{g.tolerance * 100:.1f}, {g.estimator})")


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
