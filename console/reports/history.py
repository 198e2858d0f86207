"""Main's history as tables (``console history --format table|md|csv|json``): each series' points with
the pins in force, its change points with their sizes, intervals and the range to hand to
``console bisect``; the alarm's findings (also as GitHub annotations) and the culprits. Only what the
core found is shown; the static site is ``reports.history_site``."""
from __future__ import annotations

from typing import Sequence

from ..core.statistics import changepoints as cp
from ..core.provenance.alarm import Alarm
from ..core.provenance.culprits import Culprit, Skipped
from ..core.provenance.history import History
from .tables import Column, Table, percent, short

SERIES_COLUMNS = (
    Column("series", "profile, figure (the scored metric, a cell, a guard, a serving latency), metric, depth, "
                     "runtime, node and experiment identity of the series"),
    Column("node", "the node's fingerprint (its CPU, cores, GPUs, driver): another node is another series"),
    Column("identity", "the experiment identity (runtime, the profile's measured sections, model, harness, GPU): "
                       "another is another series"),
    Column("since", "what changed from the series before it of the same node, profile, metric and depth, e.g. "
                    "'runtime docker not local' (empty: none before it)"),
    Column("rounds", "sealed rounds in the series"),
    Column("first", "when its first round was sealed (UTC)", short(19)),
    Column("last", "when its last round was sealed (UTC)", short(19)),
    Column("latest", "main's figure in the latest round (geometric mean of its counted values of the figure)"),
    Column("changes", "change points found"),
    Column("raises", "rounds whose pin (the frontier, or the cell's or guard's own) is above the previous round's"),
)

CHANGE_COLUMNS = (
    Column("series", "the series (as in the series table)"),
    Column("at", "index of the first round after the change (0 = the series' first round)"),
    Column("change", "main after against main before: exp(mean log after - mean log before) - 1", percent),
    Column("low", "its two-sided interval at 1 - alpha / series (Welch), lower end", percent),
    Column("high", "upper end", percent),
    Column("p", "the best split's p-value, Bonferroni-corrected over the splits tested (a change point when at most "
                "alpha / series)", lambda x: f"{x:.2g}"),
    Column("before", "rounds in the segment before the change"),
    Column("after", "rounds in the segment after"),
    Column("last_before", "the last round before the change", short(24)),
    Column("first_after", "the first round after it", short(24)),
    Column("good", "main's source in the last round before: the good end to bisect from"),
    Column("bad", "main's source in the first round after: the bad end"),
)

POINT_COLUMNS = (
    Column("series", "the series"),
    Column("index", "the round's place in the series"),
    Column("sealed_at", "when it was sealed (UTC)", short(19)),
    Column("round_id", "the round"),
    Column("receipt", "its receipt id", short(12)),
    Column("value", "main's figure: geometric mean of its counted values of the series' figure"),
    Column("reps", "main's counted values (reps, or a serving round's blocks)"),
    Column("pin", "the pin in force for the round (the frontier, or the cell's or guard's own; 0: none)"),
    Column("source", "main's source: a commit, a release, or a directory and its tree digest"),
)


def tables(h: History, rules: cp.Rules) -> list[Table]:
    series, changes, points = [], [], []
    for s in h.series:
        name = s.key.label()
        series.append({"series": name, "node": s.key.node, "identity": s.key.identity, "since": s.since,
                       "rounds": len(s.points), "first": s.points[0].sealed_at,
                       "last": s.points[-1].sealed_at, "latest": s.points[-1].value, "changes": len(s.changes),
                       "raises": len(s.raises)})
        for c in s.changes:
            p = c.point
            changes.append({"series": name, "at": p.at, "change": p.change, "low": p.low, "high": p.high, "p": p.p,
                            "before": p.before, "after": p.after, "last_before": c.before.round_id,
                            "first_after": c.after.round_id, "good": c.before.source, "bad": c.after.source})
        for i, pt in enumerate(s.points):
            points.append({"series": name, "index": i, "sealed_at": pt.sealed_at, "round_id": pt.round_id,
                           "receipt": pt.receipt, "value": pt.value, "reps": pt.reps, "pin": pt.pin,
                           "source": pt.source})
    how = (f"alpha {rules.alpha:g} over {len(h.series)} series, each at {h.series_alpha:.3g}; min change "
           f"{rules.min_change:.1%}, min segment {rules.min_segment}"
           + (f"; left out: {h.left_out_sentence()}" if h.left_out else ""))
    return [Table("series", f"Main's series ({how})", SERIES_COLUMNS, series),
            Table("changes", "Change points", CHANGE_COLUMNS, changes),
            Table("points", "Rounds", POINT_COLUMNS, points)]


# --- the alarm and the culprits -------------------------------------------------------------------

ALARM_COLUMNS = (
    Column("series", "the watched series whose newest segment moved"),
    Column("finding", "regression (worse: lower throughput, higher latency) or improvement"),
    Column("firing", "whether it raises the alarm (--fail-on regression: regressions; change: either)"),
    Column("change", "the newest segment against the one before: exp(mean log after - mean log before) - 1",
           percent),
    Column("low", "its two-sided interval at 1 - each series' alpha (Welch), lower end", percent),
    Column("high", "upper end", percent),
    Column("before", "rounds in the segment before"),
    Column("after", "rounds in the newest segment"),
    Column("last_before", "the last round before the change", short(24)),
    Column("first_after", "the first round of the newest segment", short(24)),
    Column("good", "main's source in the last round before"),
    Column("bad", "main's source in the first round after"),
)

CULPRIT_COLUMNS = (
    Column("series", "the series whose change point was bisected (one bisection may explain several)"),
    Column("good", "the good end: main's source before the change"),
    Column("bad", "the bad end: main's source after it"),
    Column("result", "found, suspects, not-one-step, infra, interrupted, or not run"),
    Column("culprit", "the first item like the bad end (found), or the items it is one of (suspects)"),
    Column("steps", "the bisection's steps (rounds and steps read back from the ledger)"),
    Column("measured", "steps measured now: the others were decided by earlier steps in the ledger"),
    Column("minutes", "minutes the steps took, builds included"),
    Column("why", "the bisection's sentence, or why it was not run"),
)


def alarm_table(a: Alarm) -> Table:
    rows = [{"series": f.series.key.label(), "finding": f.word, "firing": f in a.firing, "change": f.size,
             "low": f.low, "high": f.high, "before": f.before, "after": f.after,
             "last_before": f.change.before.round_id, "first_after": f.change.after.round_id,
             "good": f.change.before.source, "bad": f.change.after.source} for f in a.findings]
    return Table("alarm", f"The alarm (--fail-on {a.fail_on}; {a.method()})", ALARM_COLUMNS, rows)


def alarm_lines(a: Alarm) -> list[str]:
    """What a person reads at the end of the output: each firing finding, then the verdict."""
    lines = [f"ALARM {f.sentence()}" for f in a.firing]
    n = len(a.firing)
    word = "regression" if a.fail_on == "regression" else "change"
    lines.append(f"alarm: {n} {word}{'s' if n != 1 else ''} in {len(a.watched)} watched series" if n else
                 f"no alarm: no {word} in the newest segment of {len(a.watched)} watched series")
    lines.append(f"  ({a.method()}" + (f"; {a.superseded} superseded series not watched" if a.superseded else "")
                 + ")")
    return lines


def _gh_escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping: data escapes %, CR and LF; a property also : and ,."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotations(a: Alarm, culprits: Sequence[Culprit] = ()) -> str:
    """The alarm as GitHub Actions annotations: an error per firing finding, a notice per other
    moved series and per culprit a bisection named, and a notice with the verdict and the method."""
    out = []
    for f in a.findings:
        level = "error" if f in a.firing else "notice"
        out.append(f"::{level} title={_gh_escape(f'{f.word}: {f.series.key.name}', prop=True)}::{_gh_escape(f.sentence())}")
    for c in culprits:
        said = f"{c.result}: {c.culprit or c.sentence} ({c.hunt.good} .. {c.hunt.bad}; {c.steps} steps, {c.minutes} min)"
        out.append(f"::notice title={_gh_escape('culprit: ' + c.hunt.metric, prop=True)}::{_gh_escape(said)}")
    head, *rest = alarm_lines(a)[-2:]
    out.append(f"::notice title={_gh_escape('console history', prop=True)}::{_gh_escape(head + ' ' + ' '.join(rest).strip())}")
    return "\n".join(out) + "\n"


def culprit_table(found: list[Culprit], skipped: list[Skipped]) -> Table:
    rows = [{"series": "; ".join(f"{s.key.name} (round {c.point.at})" for s, c in x.hunt.changes),
             "good": x.hunt.good, "bad": x.hunt.bad, "result": x.result, "culprit": x.culprit, "steps": x.steps,
             "measured": x.measured, "minutes": x.minutes, "why": x.sentence} for x in found]
    rows += [{"series": f"{k.series.key.name} (round {k.change.point.at})", "good": k.change.before.source,
              "bad": k.change.after.source, "result": "not run", "culprit": "", "steps": 0, "measured": 0,
              "minutes": 0.0, "why": k.why} for k in skipped]
    return Table("culprits", "The culprits (console history --bisect)", CULPRIT_COLUMNS, rows)
