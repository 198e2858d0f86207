"""Main's history as a static site (``console history DIRS --html OUTDIR``): plain files to open
straight from disk (``file://``) or to serve from any static host, with no server and no script.

``OUTDIR/index.html`` says how change points were found (the method, its rules, the family-wise
alpha and each series' share of it), which rounds were left out and, when the alarm is given, what
fires. Then one small plot per series: every round a marker, each segment's level with its
interval, each change point, the pin in force. Every marker is a link to its round's page
``OUTDIR/receipts/<receipt id>.html``: the one-round report (``reports.html``) of that sealed
receipt. A regression is a click away from the round that showed it, and that round's reps,
parity and telemetry.

Like every report it renders and never decides: the series and change points are
``core.provenance.history``'s, the alarm ``core.provenance.alarm``'s, each round's verdict the
caller's (the gate's, re-derived from the receipt).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Mapping

from ..core.provenance.alarm import Alarm
from ..core.provenance.history import Change, History, Series
from ..core.records.receipt import Receipt
from ..core.records.verdict import VerdictRecord
from ..core.statistics import changepoints as cp
from ..errors import UsageError
from ..results.store import atomic_write
from .html import CSS, PAGE, RC, _figure, _svg, esc, plain, render_html

RECEIPTS = "receipts"           # the folder of round pages, beside index.html
# A receipt id is a sha256 digest; anything else would not be a safe file name, so it gets no page.
SAFE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]*")
POINT, SEGMENT, CHANGE, PIN = "#1f6fb4", "#333", "#c0392b", "#e8710a"
SITE_CSS = CSS + """
main { max-width: 1640px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: 14px; margin-top: 16px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 10px; }
.card.firing { border: 2px solid #c0392b; }
.card h3 { margin: 0; font-size: 15px; }
.card .label { color: #777; font-size: 11px; overflow-wrap: anywhere; }
.card svg { display: block; width: 100%; height: auto; }
.card svg a:hover use { opacity: 0.5; }
.card ul { margin: 4px 0 0; padding-left: 18px; font-size: 12px; }
.card code { font-size: 11px; overflow-wrap: anywhere; }
.alarm { border: 2px solid #1e5e1a; background: #eef8ec; border-radius: 6px; padding: 6px 12px; }
.alarm h3 { margin: 6px 0; }
.alarm.fired { border-color: #c0392b; background: #fdeeee; }
.alarm li.firing { color: #a00; font-weight: 600; }
p.back { margin: 0 0 8px; font-size: 14px; }
"""
LEGEND = ("● a round: main's geometric mean over its counted reps (click it for the round's page) · "
          "— a segment's mean, the band its 95 % interval · ┆ a change point · ⋯ the pin in force, "
          "▲ a raise")
BACK = '<p class="back"><a href="../index.html">← main\'s history</a></p>'


def write_site(h: History, rules: cp.Rules, out: Path, receipts: Mapping[str, Receipt],
               verdict_of: Callable[[Receipt], VerdictRecord], alarm: Alarm | None = None) -> Path:
    """Write ``out/index.html`` and a page per round under ``out/receipts/``; return the index.

    ``receipts`` maps a receipt id (``Point.receipt``) to its receipt; a point whose receipt is not
    there is drawn without a link. ``verdict_of`` gives a receipt's verdict as the gate re-derives it.

    The index is written afresh each time. A round's page that already exists is kept: a receipt
    is sealed and named by the hash of its bytes, so the same id is the same round and its page says
    the same, and publishing every night renders only the rounds sealed since. (After an upgrade that
    changes the gate or the round page, remove ``out/receipts`` to have every page drawn again.)
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file, not a directory: the history site is a folder of pages",
                         "Give --html a directory (it is made if missing), or move the file away.")
    linked = {p.receipt for s in h.series for p in s.points if _linkable(p.receipt, receipts)}
    index = out / "index.html"
    atomic_write(index, _index(h, rules, linked, alarm).encode("utf-8"))
    for rid in sorted(linked):
        page = out / RECEIPTS / f"{rid}.html"
        if not page.exists():
            r = receipts[rid]
            atomic_write(page, _with_back_link(render_html([r], [verdict_of(r)])).encode("utf-8"))
    return index


def _linkable(rid: str, receipts: Mapping[str, Receipt]) -> bool:
    return bool(rid) and SAFE_ID.fullmatch(rid) is not None and rid in receipts


def _with_back_link(page: str) -> str:
    return page.replace("<main>", "<main>\n" + BACK, 1)


# --- the index ------------------------------------------------------------------------------------

def _index(h: History, rules: cp.Rules, linked: set[str], alarm: Alarm | None) -> str:
    import matplotlib
    firing = {id(f.series) for f in alarm.firing} if alarm else set()
    _svg.count = 0      # the plots' ids numbered afresh: the same history gives the same page
    with matplotlib.rc_context({**RC, "font.size": 8}):
        cards = "".join(_card(s, linked, id(s) in firing) for s in h.series)
    body = f'{_header(h, rules, linked)}{_alarm_box(alarm) if alarm else ""}<div class="grid">{cards}</div>'
    return PAGE.format(title="Main's history", what="main's history", css=SITE_CSS, body=body,
                       note="Every point is a sealed receipt's own figures; a node or experiment identity change "
                            "(runtime, the profile's measured sections, model, harness, GPU) starts another "
                            "series and is never a change point.")


def _header(h: History, rules: cp.Rules, linked: set[str]) -> str:
    n = len(h.series)
    rounds = {p.receipt for s in h.series for p in s.points}
    unlinked = len(rounds - linked)
    lines = [f"{len(rounds)} sealed rounds in {n} series. Change points: {esc(cp.METHOD)}; at least "
             f"{rules.min_change:.1%} either way and {rules.min_segment} rounds a side.",
             f"Alpha {h.alpha:g} over the whole family: each series is searched at {h.series_alpha:.3g} "
             f"(alpha / {n} series, Bonferroni), so in a history where nothing changed the chance of any "
             f"change point anywhere is at most {h.alpha:g}."]
    if h.left_out:
        lines.append(f"Left out: {esc(h.left_out_sentence())}.")
    if unlinked:
        lines.append(f"{unlinked} round(s) have no receipt in the ledgers read: their points link nowhere.")
    return (f"<section><h2>Main's history</h2>{''.join(f'<p>{x}</p>' for x in lines)}"
            f'<p class="dim">{esc(LEGEND)}</p></section>')


def _alarm_box(alarm: Alarm) -> str:
    what = "regression" if alarm.fail_on == "regression" else "change"
    said = "".join(f'<li class="{"firing" if f in alarm.firing else "dim"}">{esc(f.sentence())}</li>'
                   for f in alarm.findings)
    head = (f"{len(alarm.firing)} {what}(s) in {len(alarm.watched)} watched series" if alarm.fired
            else f"no {what} in {len(alarm.watched)} watched series")
    superseded = f"; {alarm.superseded} superseded series not watched" if alarm.superseded else ""
    return (f'<section class="alarm{" fired" if alarm.fired else ""}"><h3>Alarm: {esc(head)}</h3>'
            f'{f"<ul>{said}</ul>" if said else ""}<p class="dim">{esc(alarm.method())}{superseded}.</p></section>')


def _card(s: Series, linked: set[str], firing: bool) -> str:
    lower = ' <span class="dim">lower is better</span>' if s.key.lower_is_better else ""
    since = f'<div class="label">a new series: {esc(s.since)}</div>' if s.since else ""
    changes = "".join(f"<li>{_change_line(c, linked)}</li>" for c in s.changes)
    return (f'<div class="card{" firing" if firing else ""}">'
            f'<h3 title="{esc(s.key.label())}">{esc(s.key.name)}{lower}</h3>'
            f'<div class="label">{esc(s.key.label())} · {len(s.points)} rounds</div>{since}'
            f"{_plot(s, linked)}"
            f'<ul>{changes or "<li class=na>no change point</li>"}</ul></div>')


def _change_line(c: Change, linked: set[str]) -> str:
    p = c.point
    cmd = c.bisect_command
    to_bisect = f"<code>{esc(cmd)}</code>" if cmd else '<span class="na">main was a directory: nothing to bisect</span>'
    return (f"round {p.at}: <b>{p.change:+.1%}</b> [{p.low:+.1%}, {p.high:+.1%}], p {p.p:.2g}; "
            f"{p.before} rounds before (the last {_round_link(c.before.round_id, c.before.receipt, linked)}), "
            f"{p.after} after (the first {_round_link(c.after.round_id, c.after.receipt, linked)}); {to_bisect}")


def _round_link(round_id: str, rid: str, linked: set[str]) -> str:
    return f'<a href="{RECEIPTS}/{esc(rid)}.html">{esc(round_id)}</a>' if rid in linked else esc(round_id)


def _plot(s: Series, linked: set[str]) -> str:
    fig, ((ax,),) = _figure(3.8, 2.2)
    xs = list(range(len(s.points)))
    for g in s.segments:
        ax.hlines(g.mean, g.start - 0.4, g.end - 0.6, color=SEGMENT, lw=1.2, zorder=2)
        ax.fill_between([g.start - 0.4, g.end - 0.6], g.low, g.high, color="#999", alpha=0.25, lw=0, zorder=1)
    for c in s.changes:
        ax.axvline(c.point.at - 0.5, color=CHANGE, ls="--", lw=1, zorder=2)
    pins = [(i, p.pin) for i, p in enumerate(s.points) if p.pin > 0]
    if pins:
        ax.step([i for i, _ in pins], [v for _, v in pins], where="post", color=PIN, ls=":", lw=1.2, zorder=2)
        ax.plot(list(s.raises), [s.points[i].pin for i in s.raises], "^", color=PIN, ms=5, zorder=3)
    urls = [f"{RECEIPTS}/{p.receipt}.html" if p.receipt in linked else None for p in s.points]
    ax.scatter(xs, [p.value for p in s.points], s=16, color=POINT, zorder=4, urls=urls)
    ax.set_xlabel("round (time order)")
    ax.set_ylabel(plain(s.key.metric) + (", lower is better" if s.key.lower_is_better else ""))
    titles = {u: f"{p.round_id}: {p.value:.4g} ({p.reps} reps), main {p.source}, sealed {p.sealed_at}"
              for u, p in zip(urls, s.points) if u}
    return _linked(_svg(fig), titles)


def _linked(svg: str, titles: Mapping[str, str]) -> str:
    """matplotlib writes each marker's link as ``<a xlink:href=URL target="_blank">``: made a plain
    ``href`` (SVG 2, what the round pages' back link returns to: the same tab) with the round as its
    hover title."""
    def one(m: re.Match[str]) -> str:
        url = m.group(1)
        title = titles.get(url)
        return f'<a href="{esc(url)}">' + (f"<title>{esc(title)}</title>" if title else "")
    return re.sub(r'<a xlink:href="([^"]+)" target="_blank">', one, svg)
