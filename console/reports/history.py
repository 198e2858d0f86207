"""Main's history as tables (``console history --format table|md|csv|json``) and as one HTML page: each
series' points with the pins in force, its change points with their sizes, intervals and the range
to hand to ``console bisect``. Only what ``core.history`` found is shown."""
from __future__ import annotations

from pathlib import Path

from ..core.statistics import changepoints as cp
from ..core.provenance.history import History, Series
from ..results.store import atomic_write
from .html import CSS, PAGE, RC, _figure, _svg, esc
from .tables import Column, Table, percent, short

SERIES_COLUMNS = (
    Column("series", "profile, metric, depth, runtime, node and experiment identity of the series"),
    Column("node", "the node's fingerprint (its CPU, cores, GPUs, driver): another node is another series"),
    Column("identity", "the experiment identity (runtime, the profile's measured sections, model, harness, GPU): "
                       "another is another series"),
    Column("since", "what changed from the series before it of the same node, profile, metric and depth, e.g. "
                    "'runtime docker not local' (empty: none before it)"),
    Column("rounds", "sealed rounds in the series"),
    Column("first", "when its first round was sealed (UTC)", short(19)),
    Column("last", "when its last round was sealed (UTC)", short(19)),
    Column("latest", "main's figure in the latest round (geometric mean of its counted timed reps)"),
    Column("changes", "change points found"),
    Column("raises", "rounds whose frontier pin is above the previous round's"),
)

CHANGE_COLUMNS = (
    Column("series", "the series (as in the series table)"),
    Column("at", "index of the first round after the change (0 = the series' first round)"),
    Column("change", "main after against main before: exp(mean log after - mean log before) - 1", percent),
    Column("low", "its two-sided interval at 1 - alpha (Welch), lower end", percent),
    Column("high", "upper end", percent),
    Column("p", "the best split's p-value, Bonferroni-corrected over the splits tested", lambda x: f"{x:.2g}"),
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
    Column("value", "main's figure: geometric mean of its counted timed reps"),
    Column("reps", "main's counted timed reps"),
    Column("pin", "the frontier pin in force for the round (0: none)"),
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
    how = (f"alpha {rules.alpha:g}, min change {rules.min_change:.1%}, min segment {rules.min_segment}"
           + (f"; left out: {h.left_out_sentence()}" if h.left_out else ""))
    return [Table("series", f"Main's series ({how})", SERIES_COLUMNS, series),
            Table("changes", "Change points", CHANGE_COLUMNS, changes),
            Table("points", "Rounds", POINT_COLUMNS, points)]


# --- the page -------------------------------------------------------------------------------------

def write_html(h: History, rules: cp.Rules, path: Path) -> Path:
    atomic_write(path, render_html(h, rules).encode("utf-8"))
    return path


def render_html(h: History, rules: cp.Rules) -> str:
    import matplotlib
    _svg.count = 0
    with matplotlib.rc_context(RC):
        sections = "".join(_section(s) for s in h.series)
    left = f"<p>Left out: {esc(h.left_out_sentence())}.</p>" if h.left_out else ""
    body = (f"<section><h2>Main's history</h2><p>{esc(cp.METHOD)}: alpha {rules.alpha:g}, min change "
            f"{rules.min_change:.1%}, at least {rules.min_segment} rounds a side. Each point is main's geometric mean "
            f"over one round's counted timed reps.</p>{left}</section>{sections}")
    return PAGE.format(title="Main's history", what="main's history", css=CSS, body=body,
                       note="Every point is a sealed receipt's own figures; a node or experiment identity change "
                            "(runtime, the profile's measured sections, model, harness, GPU) starts another series "
                            "and is never a change point.")


def _section(s: Series) -> str:
    rows = "".join(
        f"<tr><td>{c.point.at}</td><td>{c.point.change:+.1%} [{c.point.low:+.1%}, {c.point.high:+.1%}]</td>"
        f"<td>{c.point.p:.2g}</td><td>{esc(c.before.round_id)}</td><td>{esc(c.after.round_id)}</td>"
        f"<td>{_bisect_cell(c)}</td></tr>"
        for c in s.changes)
    table = (f"<table><tr><th>at</th><th>change [interval]</th><th>p</th><th>last before</th><th>first after</th>"
             f"<th>to bisect</th></tr>{rows}</table>" if rows else '<p class="na">no change point</p>')
    since = f"<p>A new series: {esc(s.since)}.</p>" if s.since else ""
    return (f"<section><h2>{esc(s.key.label())}</h2>{since}<figure>{_plot(s)}<figcaption>Main's figure per round; each "
            "segment's mean with its interval between change points; the frontier pin dashed where one was in "
            f"force, raises marked ▲.</figcaption></figure>{table}</section>")


def _bisect_cell(c) -> str:
    cmd = c.bisect_command
    return f"<code>{esc(cmd)}</code>" if cmd else '<span class="na">main was a directory here: no commits to bisect</span>'


def _plot(s: Series) -> str:
    fig, ((ax,),) = _figure(10, 3.2)
    ax.plot(list(range(len(s.points))), [p.value for p in s.points], "o", ms=4, color="#1f6fb4", label="main")
    for g in s.segments:
        ax.hlines(g.mean, g.start - 0.4, g.end - 0.6, color="#333", lw=1.2)
        ax.fill_between([g.start - 0.4, g.end - 0.6], g.low, g.high, color="#999", alpha=0.25, lw=0)
    for c in s.changes:
        ax.axvline(c.point.at - 0.5, color="#c0392b", ls="--", lw=1)
    pins = [(i, p.pin) for i, p in enumerate(s.points) if p.pin > 0]
    if pins:
        ax.step([i for i, _ in pins], [v for _, v in pins], where="post", color="#e8710a", ls=":", lw=1, label="pin")
        ax.plot(list(s.raises), [s.points[i].pin for i in s.raises], "^", color="#e8710a", ms=6)
    ax.set(xlabel="round (time order)", ylabel=s.key.metric)
    ax.legend(loc="lower left")
    return _svg(fig)
