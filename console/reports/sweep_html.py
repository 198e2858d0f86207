"""A sweep's page: each build's throughput against its latency over the load levels, with the
intervals, and a table of every level (written beside the sweep document once the sweep ends:
``reports.export.sweep_page``).

It renders only what the sweep measured (``core.sweep`` figures); like the round report it is one
self-contained file, SVG inline, no script.
"""
from __future__ import annotations

from typing import Any, Mapping

from .html import COLOURS, CSS, PAGE, RC, _figure, _svg, esc

# (x figure, its label) for each panel: throughput against the latency a user waits for
PANELS = (("median_tpot_ms", "time per output token, median (ms)"),
          ("median_ttft_ms", "time to first token, median (ms)"))
ROWS = (("output_throughput", "output tok/s", ".1f"), ("request_throughput", "requests/s", ".2f"),
        ("goodput", "goodput req/s", ".2f"), ("median_ttft_ms", "TTFT p50 ms", ".0f"),
        ("p99_ttft_ms", "TTFT p99 ms", ".0f"), ("median_tpot_ms", "TPOT p50 ms", ".0f"),
        ("p99_itl_ms", "ITL p99 ms", ".0f"))


def render_sweep(doc: Mapping[str, Any]) -> str:
    import matplotlib
    _svg.count = 0
    levels = doc.get("levels") or []
    profile = ((doc.get("receipt") or {}).get("profile") or {}).get("name", "?")
    with matplotlib.rc_context(RC):
        plot = _curves(levels) if levels else '<p class="na">no level was measured</p>'
    refused = "".join(f"<li>{esc(x)}</li>" for x in doc.get("refused") or [])
    body = (f"<section><h2>Sweep {esc(doc.get('round_id'))} ({esc(profile)})</h2>"
            f"<p>Each point is a build's geometric mean over the level's blocks, with its two-sided 95 % interval; "
            f"both servers were started once, each with {esc(doc.get('server_slots'))} slots. A sweep "
            f"measures a curve and decides nothing: a round at one level decides.</p>"
            + (f"<p>Refused before timing:</p><ul>{refused}</ul>" if refused else "")
            + f"<figure>{plot}</figure>{_table(levels, doc.get('slo_ms') or {})}</section>"
            + _capacity(doc.get("capacity")))
    return PAGE.format(title=esc(f"Sweep {doc.get('round_id')} ({profile})"), what="a sweep", css=CSS, body=body,
                       note="Every figure is the sweep document's own: its blocks, measured by the console's "
                            "load client. A sweep has no verdict.")


def _curves(levels: list[Mapping[str, Any]]) -> str:
    fig, axes = _figure(10, 3.8, cols=len(PANELS))
    for ax, (x_key, x_label) in zip(axes[0], PANELS):
        for build, colour in COLOURS.items():
            pts = [(lv["builds"][build][x_key], lv["builds"][build]["output_throughput"], lv["level"]["name"])
                   for lv in levels if build in lv["builds"]]
            pts = [(x, y, n) for x, y, n in pts if x.get("mean") is not None and y.get("mean") is not None]
            if not pts:
                continue
            xs, ys = [x["mean"] for x, _, _ in pts], [y["mean"] for _, y, _ in pts]
            ax.errorbar(xs, ys, xerr=_err(pts, 0), yerr=_err(pts, 1), color=colour, marker="o", ms=4, capsize=2,
                        lw=1, label=build)
            for x, y, name in zip(xs, ys, (n for _, _, n in pts)):
                ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=colour)
        ax.set(xlabel=x_label, ylabel="output tokens/s")
        ax.legend(loc="lower right")
    return _svg(fig)


def _err(pts: list, i: int) -> list[list[float]]:
    """matplotlib's asymmetric error bars from each point's interval (zero where it has none)."""
    lows, highs = [], []
    for p in pts:
        e = p[i]
        lows.append(e["mean"] - e["low"] if e.get("low") is not None else 0.0)
        highs.append(e["high"] - e["mean"] if e.get("high") is not None else 0.0)
    return [lows, highs]


def _cell(e: Mapping[str, Any] | None, fmt: str) -> str:
    if not e or e.get("mean") is None:
        return '<td class="na">—</td>'
    iv = f' <span class="na">[{e["low"]:{fmt}}, {e["high"]:{fmt}}]</span>' if e.get("low") is not None else ""
    return f"<td>{e['mean']:{fmt}}{iv}</td>"


def _table(levels: list[Mapping[str, Any]], slo: Mapping[str, Any]) -> str:
    head = "".join(f"<th>{esc(label)}</th>" for _, label, _ in ROWS)
    rows = []
    for lv in levels:
        for build in ("main", "candidate"):
            f = lv["builds"].get(build) or {}
            cells = "".join(_cell(f.get(k), fmt) for k, _, fmt in ROWS)
            rows.append(f"<tr><td>{esc(lv['level']['name'])}</td><td>{build}</td><td>{f.get('output_throughput', {}).get('n', 0)}</td>{cells}</tr>")
        g = lv.get("gain")
        if g and g.get("mean") is not None:
            iv = f" [{g['low']:+.1%}, {g['high']:+.1%}]" if g.get("low") is not None else ""
            rows.append(f'<tr><td></td><td colspan="{len(ROWS) + 2}">candidate over main, output throughput, paired by '
                        f"block: {g['mean']:+.1%}{iv}</td></tr>")
    targets = ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items()) or "none set"
    return (f"<table><tr><th>level</th><th>build</th><th>blocks</th>{head}</tr>{''.join(rows)}</table>"
            f"<p>Goodput counts the requests that met every target ({esc(targets)}).</p>")


def _capacity(c: Mapping[str, Any] | None) -> str:
    """A capacity search's section: each level's calls for both builds, each build's capacity, the change."""
    if not c:
        return ""
    rows = []
    for lv in c.get("levels") or []:
        cells = "".join(f"<td>{esc((lv.get(b) or {}).get('call', '—'))}</td><td>{esc(_call_figures(lv.get(b) or {}))}</td>"
                        for b in ("main", "candidate"))
        rows.append(f"<tr><td>{esc(lv.get('name'))}</td>{cells}</tr>")
    caps = "".join(f"<li>{b}: {esc((c.get('capacity') or {}).get(b, {}).get('said', '—'))}</li>"
                   for b in ("main", "candidate"))
    targets = ", ".join(f"{k} ≤ {v:g}" for k, v in (c.get("targets_ms") or {}).items())
    change = c.get("change") or {}
    return (f"<section><h2>Capacity at the SLO ({esc(targets)})</h2>"
            f"<p>{esc(change.get('said', ''))} (any wrong call over the search at most {c.get('alpha', 0):g}: "
            f"{c.get('alpha_per_call', 0):.2g} per call, {c.get('budget')} levels budgeted, {c.get('measured')} "
            f"measured; {esc(c.get('stopped', ''))}).</p><ul>{caps}</ul>"
            f"<table><tr><th>level</th><th>main</th><th>figures</th><th>candidate</th><th>figures</th></tr>"
            f"{''.join(rows)}</table></section>")


def _call_figures(call: Mapping[str, Any]) -> str:
    parts = [f"{b['key']}: p99 {b['mean']:.0f} ms" + (f" [{b['low']:.0f}, {b['high']:.0f}]"
                                                     if b.get("low") is not None and b.get("high") is not None else "")
             for b in call.get("bounds") or [] if b.get("mean") is not None]
    sat = [str(i + 1) for i, g in enumerate(call.get("saturation") or []) if g.get("saturated")]
    return "; ".join(parts) + (f"; saturated block(s) {', '.join(sat)}" if sat else "")
