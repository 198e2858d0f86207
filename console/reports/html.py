"""A self-contained HTML report of a round, or a comparison of rounds (`console report`).

Like the other reports it renders and never measures: every figure is the receipt's own, or
the verdict the gate re-derives from it. Plots are matplotlib figures inlined as SVG, the page
has its CSS inline and no script, so it opens anywhere, offline. matplotlib is imported only
when a report is rendered, so starting the console stays fast.
"""
from __future__ import annotations

import html
import io
import math
import re
from typing import Any, Mapping, Sequence

from ..core.decisions import counting, gate
from ..core.records.receipt import BUILDS, Figures, Receipt, Rep
from ..core.records.rules import Bands
from ..core.records.verdict import VerdictRecord
from .matrix import axes_of, cells_of, matrix_table, row_of, summary_line as matrix_summary
from .tables import shown
from .words import HEADLINES, accuracy_sentence, gain_phrase, rate_text, source_text, tier_text

COLOURS = {"main": "#1f6fb4", "candidate": "#e8710a"}
MARKERS = {"warmup": "v", "short": "^", "timed": "o", "guard": "s"}
PHASE_NAMES = {"warmup": "warm-up", "short": "short", "timed": "timed", "guard": "guard"}
ROUND_NOTE = "Every figure is the receipt's own; each verdict is re-derived from its receipt by the gate."
NOT_RECORDED = "not recorded"     # the receipt lacks it
NONE = '<span class="na">—</span>'  # the verdict has none (no tier, no speed figures)
# Tier bands, lightest to darkest, drawn behind the paired gains.
BAND_FILLS = {"xs": "#f1f1f1", "s": "#e3f1e1", "m": "#cde6c9", "l": "#b1d8ab", "xl": "#92c98a"}
# Telemetry panels: the summary metrics (telemetry/base.py) each one plots, and their scale.
PANELS = (("clocks (MHz)", re.compile(r"(^|_)(cpu_mhz|sm_clock_mhz|mem_clock_mhz)$"), 1.0),
          ("temperature (°C)", re.compile(r"(^|_)temp_c$"), 1.0),
          ("power (W)", re.compile(r"(^|_)power_w$"), 1.0),
          ("CPU (cores)", re.compile(r"^(busy_cores|load1)$"), 1.0),
          ("memory available (GiB)", re.compile(r"^mem_available_bytes$"), 2.0 ** -30))
METRIC_MARKERS = ("o", "s", "D", "^", "v", "P")
# Deterministic SVG (no date, fixed ids), text drawn as paths so it looks the same without the fonts.
RC = {"svg.fonttype": "path", "svg.hashsalt": "bench-console", "font.size": 9,
      "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
      "legend.fontsize": 8, "legend.frameon": False}
SVG_METADATA = {"Format": None, "Type": None, "Creator": None, "Date": None}


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def plain(x: Any) -> str:
    """Receipt text for a plot: a "$" would start mathtext."""
    return str(x).replace("$", r"\$")


def render_html(receipts: Sequence[Receipt], verdicts: Sequence[VerdictRecord] | None = None) -> str:
    """The report page: one section per receipt, and for several a combined plot of their pairs.

    ``verdicts`` are the gate's, one per receipt (``VerdictRecord.of(gate.decide(r, r.rules))``);
    when omitted they are re-derived here, as every reader of a receipt does."""
    import matplotlib
    rs = list(receipts)
    if not rs:
        raise ValueError("a report needs at least one receipt")
    if verdicts is None:
        verdicts = [VerdictRecord.of(gate.decide(r, r.rules)) for r in rs]
    vs = list(verdicts)
    if len(vs) != len(rs):
        raise ValueError(f"{len(rs)} receipt(s) but {len(vs)} verdict(s)")
    _svg.count = 0      # the plots' ids, numbered afresh: the same receipts give the same page
    with matplotlib.rc_context(RC):
        body = [_comparison(rs, vs)] if len(rs) > 1 else []
        body += [_round_section(i, r, v, len(rs) > 1) for i, (r, v) in enumerate(zip(rs, vs), 1)]
    title = (f"Round {rs[0].round_id} ({rs[0].profile.name})" if len(rs) == 1
             else f"Comparison of {len(rs)} rounds")
    what = "one round" if len(rs) == 1 else f"a comparison of {len(rs)} rounds"
    return PAGE.format(title=esc(title), what=what, css=CSS, body="\n".join(body), note=ROUND_NOTE)


# --- text ---------------------------------------------------------------------------

def _pct(x: Any) -> str:
    return NOT_RECORDED if x is None else ("unbounded" if not math.isfinite(x) else f"{x * 100:+.1f} %")


def _or(x: Any) -> str:
    return esc(x) if x not in (None, "", [], {}) else f'<span class="na">{NOT_RECORDED}</span>'


def _code(x: Any, n: int | None = None) -> str:
    if x in (None, ""):
        return _or(None)
    s = str(x)
    return f'<code title="{esc(s)}">{esc(s[:n] + "…" if n and len(s) > n else s)}</code>'


def _interval_text(v: VerdictRecord) -> str:
    if v.gain is None:
        return esc(v.suppressed or "no speed figures: " + v.outcome)
    return esc(gain_phrase(v).removeprefix(" — "))     # the same words as summary.md


def _pairs_text(r: Receipt, v: VerdictRecord) -> str:
    d = v.decision
    if v.speed.pairs is None:
        noise = v.noise
        return esc(noise.pairs) if noise is not None and noise.pairs is not None and noise.held("pairs") else NONE
    out = str(v.speed.pairs)
    if d is not None and d.prior_pairs:
        out += f" (+{d.prior_pairs} pooled from earlier rounds)"
    if r.sequential and r.sequential.stopped:
        out += f"; stopped: {r.sequential.stopped}"
    return esc(out)


def _header(r: Receipt, v: VerdictRecord) -> str:
    outcome = v.outcome.value
    headline = HEADLINES[outcome].format(tier=tier_text(v))
    h = r.host
    cpu = h.cpu_model and f"{h.cpu_model} ×{'?' if h.cores is None else h.cores}"
    node = " · ".join(str(x) for x in (r.profile.node, cpu, r.runtime.kind) if x)
    noise = v.noise
    exit_code = v.exit_code if "exit_code" in v.keys else "?"
    rows = [("verdict", f'<span class="badge {esc(outcome)}">{esc(headline)}</span> '
                        f'(exit {esc(exit_code)}; re-derived from the receipt)'),
            ("tier", esc(tier_text(v)) if v.tier else NONE),
            ("gain", _interval_text(v)),
            ("pairs", _pairs_text(r, v))]
    if noise is not None and None not in (noise.sd, noise.lower, noise.upper):
        rows.append(("pair noise", esc(f"SD {noise.sd:.2%} (95 % {noise.lower:.2%}–{noise.upper:.2%})")))
    rows += [("node", _or(node)),
             ("profile", f"{_or(r.profile.name)} {_code(r.profile.sha256 and 'sha256:' + r.profile.sha256, 23)}"
                         f" <span class=\"dim\">{esc(r.profile.path)}</span>"),
             ("round", f"{_code(r.round_id)} {esc(r.kind)}, {esc(r.schema)}; "
                       f"{_or(r.started_at)} → {_or(r.ended_at)}")]
    table = "".join(f"<tr><th>{k}</th><td>{x}</td></tr>" for k, x in rows)
    figures = counting.summarize(r, r.rules)
    builds = "".join(_build_row(b, r.builds.get(b), figures[b]) for b in BUILDS)
    reasons = "".join(f"<li>{esc(x.message or x.code)}</li>" for x in v.reasons)
    warnings = "".join(f"<li class=\"warn\">{esc(x.message or x.code)}</li>" for x in v.warnings)
    return (f'<table class="facts">{table}</table>'
            + (f"<ul>{reasons}{warnings}</ul>" if reasons or warnings else "")
            + '<table class="builds"><tr><th>build</th><th>source</th><th>image ID</th><th>base image ID</th>'
              f'<th>compiler</th><th>build (s)</th><th>timed median</th><th>counted</th></tr>{builds}</table>')


def _build_row(b: str, bd: Any, figures: Figures) -> str:
    med = figures.median
    cells = [_or(source_text(bd.source) if bd else None), _code(bd and bd.image_id, 19),
             _code(bd and bd.base_image_id, 19), _or(bd and bd.compiler)]
    nums = [_or(bd and bd.build_s), _or(None if med is None else f"{med:.4g}"), esc(figures.n)]
    return (f"<tr><th>{b}</th>" + "".join(f"<td>{c}</td>" for c in cells)
            + "".join(f'<td class="num">{c}</td>' for c in nums) + "</tr>")


def _round_section(i: int, r: Receipt, v: VerdictRecord, numbered: bool) -> str:
    head = f"Round {i}: " if numbered else "Round "
    metric = str(r.profile.bench.get("metric") or "value")
    plots = [("Reps by position", _reps_plot(r, metric),
              "Every bench run in the order it ran: filled markers finished ok (the claim checks may still "
              "refuse them: see the reasons above), hollow ones were marked suspect or aborted (left out of "
              "every statistic), crosses failed or were refused."),
             *([("Matrix: each cell's gain", _matrix_plot(v),
                 "Each cell's paired gain (colour: green faster, red slower), its interval at the cell's "
                 "false-accept rate (the family's rate split over the cells), its pairs and its outcome. "
                 + matrix_summary(v) + _cells_table(v))] if cells_of(v) else
               [("Paired gains and the decision", _pairs_plot(r, v),
                 "Candidate / main per pair, as the gate pairs the counted timed reps; the decision's interval "
                 "is drawn over the profile's tier bands.")]),
             ("Parity per depth", _parity_plot(r),
              "Mean KL and top-1 agreement against the reference at each context depth, with the profile's bars."),
             ("Telemetry by rep", _telemetry_plot(r),
              "Each rep's telemetry summary (median, bar from min to max over the run) in schedule order.")]
    figs = "".join(f'<figure><h3>{t}</h3>{svg}<figcaption>{c}</figcaption></figure>' for t, svg, c in plots)
    said = accuracy_sentence(v)
    accuracy = f"<p>{esc(said)}</p>" if said else ""
    return (f'<section><h2>{head}{esc(r.round_id)} <span class="dim">{esc(r.profile.name)}</span></h2>'
            f"{_header(r, v)}{accuracy}{figs}</section>")


# --- plots ------------------------------------------------------------------------------

def _figure(width: float, height: float, rows: int = 1, cols: int = 1, **kw: Any):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(rows, cols, squeeze=False, **kw)


def _svg(fig: Any) -> str:
    """The figure as inline SVG: no XML prolog, no external namespace but SVG's own, ids unique
    in the page (several plots share glyph and clip ids), scaled to the page's width."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=SVG_METADATA)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "", 1)
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 width="100%"', svg, count=1)
    prefix = f"f{_svg.count}-"
    _svg.count += 1
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', svg)
    return re.sub(r'(href="#|url\(#)', rf"\1{prefix}", svg)


_svg.count = 0


def _missing(why: str) -> str:
    return f'<p class="na">{esc(why)}</p>'


def _phase(rep: Rep) -> str:
    """guard and matrix cell runs are drawn as guard and timed runs."""
    return "guard" if rep.phase.startswith("guard:") else "timed" if rep.phase.startswith("cell:") else rep.phase


def _unit(metric: str) -> str:
    return "tokens/s" if metric.endswith("tok_s") else "s" if metric.endswith("_s") else ""


def _reps_plot(r: Receipt, metric: str) -> str:
    from matplotlib.lines import Line2D
    from matplotlib.transforms import blended_transform_factory
    reps = sorted((x for x in r.reps if x.position >= 0 and _phase(x) in MARKERS), key=lambda x: x.schedule_key)
    if not reps:
        return _missing(f"reps {NOT_RECORDED}")
    fig, axes = _figure(10, 3.8)
    ax = axes[0][0]
    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    metrics: dict[str, str] = {}
    for rep in reps:
        colour, marker = COLOURS.get(rep.build, "grey"), MARKERS[_phase(rep)]
        value = rep.value if rep.value is not None else (rep.reported or {}).get("value")
        metrics.setdefault(_phase(rep), str((rep.reported or {}).get("metric") or metric))
        if value is None:       # nothing reported: marked on the axis
            ax.plot(rep.position, 0.03, "x", color=colour, ms=8, mew=2, transform=bottom, clip_on=False)
        elif rep.status == "ok":
            ax.plot(rep.position, value, marker, color=colour, ms=6, zorder=3)
        elif rep.excluded:
            ax.plot(rep.position, value, marker, mfc="white", mec=colour, mew=1.4, ms=7, zorder=3)
        else:
            ax.plot(rep.position, value, "x", color=colour, ms=8, mew=2, zorder=3)
    for b in BUILDS:
        timed = [x for x in reps if x.build == b and x.phase == "timed" and x.status == "ok" and x.value is not None]
        ax.plot([x.position for x in timed], [x.value for x in timed], "-", color=COLOURS[b], alpha=0.35, lw=1)
    # The schedule's phases, named over the plot (every other one shaded).
    for phase in MARKERS:
        pos = [x.position for x in reps if _phase(x) == phase]
        if pos:
            if phase in ("short", "guard"):
                ax.axvspan(min(pos) - 0.5, max(pos) + 0.5, color="#000", alpha=0.03, lw=0)
            ax.text((min(pos) + max(pos)) / 2, 1.01, PHASE_NAMES[phase], transform=bottom, ha="center",
                    va="bottom", fontsize=8, color="#555")
    handles = [Line2D([], [], color=COLOURS[b], marker="o", ls="-", label=b) for b in BUILDS]
    handles += [Line2D([], [], color="#555", marker=MARKERS[p], ls="",
                       label=PHASE_NAMES[p] + (f" ({plain(metrics[p])})" if metrics[p] != metric else ""))
                for p in MARKERS if p in metrics]
    handles += [Line2D([], [], color="#555", marker="o", mfc="white", ls="", label="suspect / aborted"),
                Line2D([], [], color="#555", marker="x", mew=2, ls="", label="failed / refused")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1))
    unit = _unit(metric)
    ax.set(xlabel="rep position in the round's schedule", ylabel=plain(metric) + (f" ({unit})" if unit else ""))
    ax.set_title(f"reported {plain(metric)} of every rep", loc="left", pad=16)
    return _svg(fig)


def _draw_bands(ax: Any, bands: Bands, vertical: bool = False) -> None:
    """The tier bands as shaded spans, each named at its edge (``band``: xs < s ≤ … ≤ xl)."""
    from matplotlib.transforms import blended_transform_factory
    edges = [("xs", 0.0), ("s", bands.s), ("m", bands.m), ("l", bands.l), ("xl", bands.xl)]
    span = ax.axvspan if vertical else ax.axhspan
    for k, (name, lo) in enumerate(edges):
        hi = edges[k + 1][1] if k + 1 < len(edges) else 1e4
        span(lo * 100, hi * 100, color=BAND_FILLS[name], zorder=0, lw=0)
    span(-1e4, 0, color="#fbe5e5", zorder=0, lw=0)
    # Named at their lower edges, the widest first; a name that would overlap its neighbour is left out.
    start, end = ax.get_xlim() if vertical else ax.get_ylim()
    last = math.inf
    for name, lo in reversed(edges):
        at = lo * 100
        if not start <= at <= end or last - at < 0.045 * (end - start):
            continue
        last = at
        if vertical:
            ax.text(at, 1.0, f" {name}", transform=blended_transform_factory(ax.transData, ax.transAxes),
                    va="top", ha="left", fontsize=8, color="#3b6b35")
        else:
            ax.text(1.0, at, f" {name} ≥ {lo:.1%}" if lo else f" {name}", va="bottom", ha="left", fontsize=8,
                    color="#3b6b35", transform=blended_transform_factory(ax.transAxes, ax.transData))


def _limits(values: list[float], bands: Bands) -> tuple[float, float]:
    lo, hi = min(values + [0.0, -2.0]), max(values + [bands.xl * 110])
    pad = (hi - lo) * 0.06
    return lo - pad, hi + pad


def _interval(v: VerdictRecord) -> tuple[float | None, list[float | None]] | None:
    """The verdict's gain and interval in percent; None ends are unbounded."""
    if v.gain is None or not v.interval:
        return None
    return v.gain * 100, [None if x is None else x * 100 for x in v.interval]


def _pair_gains(r: Receipt) -> list[float]:
    pairs = counting.pairs_of(counting.counted(r, r.rules))
    return [(float(c.value) / float(m.value) - 1.0) * 100 for m, c in pairs]


def _pairs_plot(r: Receipt, v: VerdictRecord) -> str:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    gains = _pair_gains(r)
    suppressed = v.suppressed
    if not gains:
        return _missing("no timed pair counted" + (f": {suppressed}" if suppressed else ""))
    rules = r.rules
    decided = _interval(v)
    fig, axes = _figure(10, 3.6)
    ax = axes[0][0]
    n = len(gains)
    ax.plot(range(1, n + 1), gains, "o", color=COLOURS["candidate"], ms=5, zorder=3)
    ax.axhline(0, color="#333", lw=0.8)
    ax.axhline(rules.significance * 100, color="#3b6b35", ls="--", lw=1, zorder=2)
    ends = [x for x in (decided[1] if decided else []) if x is not None]
    lo, hi = _limits(gains + ends, rules.bands)
    ax.set_ylim(lo, hi)
    handles = [Line2D([], [], color=COLOURS["candidate"], marker="o", ls="", label="one pair: candidate / main − 1"),
               Line2D([], [], color="#3b6b35", ls="--", label=f"significance bar {rules.significance:.1%}")]
    x = n + 1.5
    if decided:
        gain, (a, b) = decided
        a_, b_ = lo if a is None else a, hi if b is None else b
        ax.plot([x, x], [a_, b_], color="#222", lw=3, solid_capstyle="butt", zorder=4)
        for end in (a, b):      # a cap marks a bounded end; an unbounded one runs off the axis
            if end is not None:
                ax.plot([x - 0.3, x + 0.3], [end, end], color="#222", lw=2, zorder=4)
        ax.plot(x, gain, "D", color="#222", ms=8, zorder=5)
        ax.axhline(gain, color="#222", lw=0.8, ls=":", zorder=2)
        fa = v.false_accept      # said only where the verdict records it
        handles.append(Line2D([], [], color="#222", marker="D", lw=3, label="gain and its interval"
                              + (f" ({rate_text(fa)} false accept)" if fa is not None else "")))
        d = v.decision
        basis = [None if e is None else e * 100 for e in (d.basis_interval if d is not None else ())]
        if len(basis) == 2 and basis != decided[1]:     # a pinned frontier or an anchor moves the tier basis
            ax.plot([x + 0.6] * 2, [lo if basis[0] is None else basis[0], hi if basis[1] is None else basis[1]],
                    color="#3b6b35", lw=3, solid_capstyle="butt", zorder=4)
            handles.append(Line2D([], [], color="#3b6b35", lw=3, label="the interval as tier basis "
                                  "(against the frontier / anchor)"))
        ax.set_xticks(list(range(1, n + 1, max(1, n // 16))) + [x],
                      [str(k) for k in range(1, n + 1, max(1, n // 16))] + ["decision"])
    else:
        ax.text(0.5, 0.92, f"no decision interval: {plain(suppressed or v.outcome)}", transform=ax.transAxes,
                ha="center", fontsize=9, color="#a00")
    ax.set_xlim(0.3, x + 1.2)
    _draw_bands(ax, rules.bands)
    handles += [Patch(color=BAND_FILLS["m"], label="tier bands (basis ≥ edge)"),
                Patch(color="#fbe5e5", label="slower than main")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.14, 1))
    ax.set(xlabel="pair (A B B A order)", ylabel="candidate over main (%)")
    ax.set_title(f"{n} paired gains", loc="left")
    return _svg(fig)


def _matrix_plot(v: VerdictRecord) -> str:
    """A heat map of the cells: the last varying axis across (depth, in a llama-bench-like matrix), the
    other axes' values down."""
    from matplotlib.colors import TwoSlopeNorm
    cells = cells_of(v)
    axes = axes_of(cells)
    across = axes[-1]
    cols = list(dict.fromkeys(str(c.axes[across]) for c in cells))
    down = lambda c: ", ".join(f"{a}={c.axes[a]}" for a in axes if a != across) or "all"  # noqa: E731
    rows = list(dict.fromkeys(down(c) for c in cells))
    grid = [[math.nan] * len(cols) for _ in rows]
    fig, ax = _figure(1.6 + 2.2 * len(cols), 0.9 + 1.0 * len(rows))
    ax = ax[0][0]
    for c in cells:
        i, j = rows.index(down(c)), cols.index(str(c.axes[across]))
        row = row_of(c, axes)
        grid[i][j] = 100 * row["gain"] if row["gain"] is not None else math.nan
        iv = "[" + ", ".join("…" if x is None else f"{100 * x:+.1f}" for x in (row["low"], row["high"])) + "]"
        gain = "n/a" if row["gain"] is None else f"{100 * row['gain']:+.1f} %"
        said = f"{row['outcome']}" + (f" {row['tier']}" if row["tier"] else "")
        ax.text(j, i, f"{gain}\n{iv}\n{said}, {row['pairs']} pairs" + _tile_latency(row), ha="center",
                va="center", fontsize=8)
    top = max([abs(x) for r_ in grid for x in r_ if math.isfinite(x)] + [1.0])
    ax.imshow(grid, cmap="RdYlGn", norm=TwoSlopeNorm(0.0, -top, top), aspect="auto")
    ax.set_xticks(range(len(cols)), [f"{across}={x}" for x in cols])
    ax.set_yticks(range(len(rows)), rows)
    return _svg(fig)


def _tile_latency(row: dict[str, Any]) -> str:
    """A serving cell's TTFT p99, main's then the candidate's, under its gain."""
    if "ttft_p99_main" not in row:
        return ""
    ms = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
    return f"\nTTFT p99 {ms(row['ttft_p99_main'])} → {ms(row['ttft_p99_candidate'])} ms"


def _cells_table(v: VerdictRecord) -> str:
    """The cells as the exports tabulate them (matrix_table), as HTML: every figure, every outcome."""
    t = matrix_table(v)
    head = "".join(f'<th title="{esc(c.doc)}">{esc(c.key)}</th>' for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(text)}</td>" for text in row) + "</tr>" for row in shown(t))
    return f'</figcaption><table class="builds"><tr>{head}</tr>{body}</table><figcaption>'


def _parity_plot(r: Receipt) -> str:
    sides = {b: r.parity.side(b) for b in BUILDS}
    errors = [f"{b}: {s.error}" for b, s in sides.items() if s is not None and s.error]
    if not any(s is not None and s.depths for s in sides.values()):
        return _missing(f"parity figures {NOT_RECORDED}" + (f" ({'; '.join(errors)})" if errors else ""))
    rules = r.rules
    kls = [f.kl for s in sides.values() if s for f in s.depths if f.kl > 0]
    floor = min(kls + [rules.kl_max]) / 30
    fig, axes = _figure(10, 3.4, 1, 2)
    kl_ax, top_ax = axes[0]
    # Depths evenly spaced, by rank: their labels stay apart however they are spread.
    depths = sorted({f.depth for s in sides.values() if s for f in s.depths})
    at = {d: k for k, d in enumerate(depths)}
    for b, s in sides.items():
        if not s or not s.depths:
            continue
        d = [at[f.depth] for f in s.depths]
        style = dict(color=COLOURS[b], marker="o" if b == "main" else "s", ms=5, lw=1.5, label=b,
                     ls="-" if b == "candidate" else "--")
        kl_ax.plot(d, [max(f.kl, floor) for f in s.depths], **style)
        zero = [at[f.depth] for f in s.depths if f.kl <= 0]
        if zero:
            kl_ax.plot(zero, [floor] * len(zero), "v", color=COLOURS[b], ms=8, ls="",
                       label=f"{b}: KL = 0 (drawn at the floor)")
        top_ax.plot(d, [f.top1 for f in s.depths], **style)
    kl_ax.axhline(rules.kl_max, color="#c00", ls="--", lw=1.2, label=f"bar: KL ≤ {rules.kl_max:g}")
    top_ax.axhline(rules.top1_min, color="#c00", ls="--", lw=1.2, label=f"bar: top-1 ≥ {rules.top1_min:g}")
    kl_ax.set_yscale("log")
    kl_ax.set_ylim(floor / 2, max(kls + [rules.kl_max]) * 4)
    low = min([f.top1 for s in sides.values() if s for f in s.depths] + [rules.top1_min])
    top_ax.set_ylim(max(0.0, low - 0.05), 1.02)
    for ax, what in ((kl_ax, "mean KL to the reference (nats, log scale)"), (top_ax, "top-1 agreement (share)")):
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set(xlabel="context depth (tokens)", ylabel=what)
        ax.legend(loc="best")
    ref = r.parity.reference
    kl_ax.set_title("KL per depth" + (" (reference = main's own build)" if ref.same_as_main else ""), loc="left")
    top_ax.set_title("top-1 per depth", loc="left")
    if errors:
        fig.suptitle(plain("; ".join(errors)), color="#a00", fontsize=9)
    return _svg(fig)


def _telemetry_plot(r: Receipt) -> str:
    from matplotlib.lines import Line2D
    series: dict[str, dict[str, list[tuple[int, str, dict]]]] = {}
    for rep in sorted(r.reps, key=lambda x: x.schedule_key):
        metrics = (rep.telemetry or {}).get("metrics") or {}
        for name, st in metrics.items():
            if rep.position < 0 or not isinstance(st, Mapping) or st.get("median") is None:
                continue
            panel = next((title for title, pattern, _ in PANELS if pattern.search(name)), None)
            if panel:
                series.setdefault(panel, {}).setdefault(name, []).append((rep.position, rep.build, st))
    if not series:
        return _missing(f"telemetry {NOT_RECORDED}")
    panels = [(t, scale) for t, _, scale in PANELS if t in series]
    fig, axes = _figure(10, 1.9 * len(panels) + 0.6, len(panels), 1, sharex=True)
    for (title, scale), (ax,) in zip(panels, axes):
        handles = []
        for k, (name, points) in enumerate(sorted(series[title].items())):
            marker = METRIC_MARKERS[k % len(METRIC_MARKERS)]
            for b in BUILDS:
                pts = [(p, st) for p, build, st in points if build == b]
                if not pts:
                    continue
                med = [float(st["median"]) * scale for _, st in pts]
                lo = [m - float(st.get("min", st["median"])) * scale for m, (_, st) in zip(med, pts)]
                hi = [float(st.get("max", st["median"])) * scale - m for m, (_, st) in zip(med, pts)]
                ax.errorbar([p for p, _ in pts], med, yerr=[lo, hi], fmt=marker, color=COLOURS[b], ms=4,
                            elinewidth=1, capsize=0, alpha=0.9)
            handles.append(Line2D([], [], color="#555", marker=marker, ls="", label=plain(name)))
        ax.set_ylabel(title)
        ax.legend(handles=handles + [Line2D([], [], color=COLOURS[b], lw=3, label=b) for b in BUILDS],
                  loc="upper left", bbox_to_anchor=(1.01, 1))
    axes[0][0].set_title("telemetry per rep: median, min–max over the run", loc="left")
    axes[-1][0].set_xlabel("rep position in the round's schedule")
    return _svg(fig)


def _comparison(rs: list[Receipt], vs: list[VerdictRecord]) -> str:
    """Every round's paired gains and its interval on one axis, over the first round's bands."""
    from matplotlib.lines import Line2D
    fig, axes = _figure(10, 0.55 * len(rs) + 1.6)
    ax = axes[0][0]
    values: list[float] = []
    for y, (r, v) in enumerate(zip(rs, vs)):
        gains = _pair_gains(r)
        values += gains
        if gains:
            jitter = [((k * 7) % 11 - 5) * 0.025 for k in range(len(gains))]
            ax.plot(gains, [y + j for j in jitter], "o", color=COLOURS["candidate"], ms=3.5, alpha=0.55, zorder=3)
        decided = _interval(v)
        if decided:
            gain, (a, b) = decided
            values += [x for x in (a, b) if x is not None]
            ax.plot([gain], [y], "D", color="#222", ms=7, zorder=5)
            ax.plot([a if a is not None else -1e3, b if b is not None else 1e3], [y, y], color="#222", lw=3,
                    zorder=4)
    lo, hi = _limits(values, rs[0].rules.bands)
    ax.set_xlim(lo, hi)
    ax.set_ylim(len(rs) - 0.4, -0.6)
    _draw_bands(ax, rs[0].rules.bands, vertical=True)
    ax.axvline(0, color="#333", lw=0.8)
    labels = [f"{k}. {r.round_id} · {v.outcome}" + (f" {tier_text(v)}" if v.tier else "")
              for k, (r, v) in enumerate(zip(rs, vs), 1)]
    ax.set_yticks(range(len(rs)), [plain(x) for x in labels])
    ax.grid(axis="y", alpha=0)
    ax.set_xlabel("candidate over main (%)")
    ax.legend(handles=[Line2D([], [], color=COLOURS["candidate"], marker="o", ls="", label="one pair"),
                       Line2D([], [], color="#222", marker="D", lw=3, label="gain and its interval")],
              loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("paired gains of each round, over the tier bands of round 1", loc="left")
    rows = "".join(f"<tr><td>{k}</td><td>{_code(r.round_id)}</td><td>{_or(r.profile.name)}</td>"
                   f"<td>{esc(v.outcome)}</td><td>{esc(tier_text(v)) if v.tier else NONE}</td>"
                   f"<td>{_interval_text(v)}</td><td>{_pairs_text(r, v)}</td></tr>"
                   for k, (r, v) in enumerate(zip(rs, vs), 1))
    return ('<section><h2>Comparison</h2><table class="builds"><tr><th>#</th><th>round</th><th>profile</th>'
            f'<th>outcome</th><th>tier</th><th>gain</th><th>pairs</th></tr>{rows}</table>'
            f'<figure>{_svg(fig)}<figcaption>Each row is one round: its pairs (candidate / main − 1, as the gate '
            'pairs them) and the interval its verdict decided on.</figcaption></figure></section>')


CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 20px; border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 16px; margin: 18px 0 6px; }
table { border-collapse: collapse; margin: 10px 0; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
table.facts th { background: #f6f6f6; width: 90px; }
table.builds th { background: #f6f6f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 13px; background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }
.dim { color: #777; font-weight: normal; font-size: 0.85em; }
.na { color: #999; font-style: italic; }
.badge { font-weight: 600; padding: 2px 8px; border-radius: 4px; background: #fdf0d5; color: #7a4b00; }
.badge.accepted { background: #dcf2da; color: #1e5e1a; }
.badge.none, .badge.noise { background: #dde9f7; color: #17457a; }
.badge.rejected, .badge.slower { background: #f9dcdc; color: #8a1414; }
li.warn { color: #7a4b00; }
figure { margin: 8px 0 24px; } figure svg { display: block; height: auto; }
figcaption { color: #555; font-size: 13px; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<main>
<h1>bench-console report <span class="dim">{what}</span></h1>
<p class="dim">{note}</p>
{body}
</main>
</body>
</html>
"""
