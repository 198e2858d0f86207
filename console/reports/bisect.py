"""A bisection's record as tables (``--format table|md|csv|json``) and as one HTML page: each step's
round with its outcome, gain and interval, and the range narrowing to the first changed item. Only
what the record holds is shown; every step's own verdict is its sealed receipt's."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.provenance.bisection import Mark, Step, effect_of, spent
from ..results.store import atomic_write
from .html import CSS, PAGE, RC, _figure, _svg, esc
from .tables import Column, Table, percent, short

STEP_COLUMNS = (
    Column("step", "the step's number, in the order the rounds ran"),
    Column("role", "endpoints (bad end against good end), probe (an item against the good end), or check "
                   "(the bad end against the first changed item)"),
    Column("item", "the item measured as the candidate (0 = good end)"),
    Column("label", "that item: a commit's short hash and subject, or a release", short(48)),
    Column("against", "the item measured as main"),
    Column("outcome", "the round's outcome (the gate's), or build-failed, infra, interrupted"),
    Column("mark", "probes: what the outcome says of the item (good, bad, skip, undecided)"),
    Column("gain", "candidate against main, as a fraction", percent),
    Column("low", "the gain's interval, lower end, at the step's rate", percent),
    Column("high", "the gain's interval, upper end", percent),
    Column("pairs", "timed pairs the decision read"),
    Column("rate", "the error rate the outcome was decided at (0: nothing decided)", lambda x: f"{x:.2%}"),
    Column("minutes", "wall-clock minutes of the round (builds included)", lambda x: f"{x:.1f}"),
    Column("receipt", "the sealed receipt (first 12 characters)", short(12)),
    Column("note", "why it was skipped, or that an earlier step decided it", short(80)),
)

SUMMARY_COLUMNS = (
    Column("result", "found, suspects, not-one-step, infra or interrupted (exit codes in docs/BISECT.md)"),
    Column("direction", "slower (a regression was bisected) or faster (an improvement)"),
    Column("first_bad", "the first changed item, when exactly one is possible"),
    Column("label", "that item", short(48)),
    Column("suspects", "every item that could be the first changed one"),
    Column("gain", "the first changed item against the good end", percent),
    Column("low", "its interval, lower end", percent),
    Column("high", "its interval, upper end", percent),
    Column("rounds", "rounds run (or read back from earlier steps)"),
    Column("minutes", "their minutes together", lambda x: f"{x:.1f}"),
    Column("error_bound", "sum of the decided steps' rates: the bisection errs at most this often",
           lambda x: f"{x:.2%}"),
    Column("error_rate", "the bisection's stated rate", lambda x: f"{x:.2%}"),
    Column("sentence", "what the steps show, in words"),
)


def tables(doc: dict[str, Any]) -> list[Table]:
    """The summary and the steps of a bisection record (its JSON, as written)."""
    items = doc.get("items") or []
    label = lambda i: items[i]["label"] if isinstance(i, int) and 0 <= i < len(items) else None  # noqa: E731
    typed = [Step.from_dict(s) for s in doc.get("steps") or []]
    steps = [{"step": k, **s.to_dict(), "label": label(s.item)} for k, s in enumerate(typed, 1)]
    fb = doc.get("first_bad")
    effect = effect_of(typed, fb)
    summary = {"result": doc.get("result"), "direction": doc.get("direction"), "first_bad": fb, "label": label(fb),
               "suspects": doc.get("suspects") or [], "gain": effect.gain if effect else None,
               "low": effect.low if effect else None, "high": effect.high if effect else None,
               "rounds": len(steps), "minutes": sum(s.minutes for s in typed), "error_bound": spent(typed),
               "error_rate": doc.get("error_rate"), "sentence": doc.get("sentence")}
    return [Table("summary", f"Bisection {doc.get('bisect_id')} ({doc.get('profile')})", SUMMARY_COLUMNS, [summary]),
            Table("steps", "Steps", STEP_COLUMNS, steps)]


# --- the page ------------------------------------------------------------------------------------

MARK_COLOURS = {Mark.GOOD.value: "#1f6fb4", Mark.BAD.value: "#c0392b", Mark.SKIP.value: "#999999",
                Mark.UNDECIDED.value: "#e8a10a"}


def write_html(doc: dict[str, Any], path: Path) -> Path:
    atomic_write(path, render_html(doc).encode("utf-8"))
    return path


def render_html(doc: dict[str, Any]) -> str:
    import matplotlib
    _svg.count = 0
    summary, steps = tables(doc)
    s = summary.rows[0]
    with matplotlib.rc_context(RC):
        plot = _plot(doc, steps.rows)
    badge = {"found": "accepted", "not-one-step": "slower"}.get(str(s["result"]), "")     # the report's colours
    body = (f'<section><h2>Bisection {esc(doc.get("bisect_id"))} <span class="dim">{esc(doc.get("profile"))}</span></h2>'
            f'<p><span class="badge {badge}">{esc(s["result"])}</span> {esc(s["sentence"])}</p>'
            f"<p>{len(doc.get('items') or [])} items, from {esc(_label(doc, 0))} (good) to "
            f"{esc(_label(doc, -1))} (bad). Each decided step at {float(doc.get('step_rate') or 0):.2%}; "
            f"{doc.get('planned_steps')} planned, so the bisection errs at most {float(doc.get('error_rate') or 0):.0%} "
            f"(Bonferroni); the decided steps' rates sum to {s['error_bound']:.2%}.</p>"
            f"<figure>{plot}<figcaption>Each probe's gain against the good end with its interval at the step's "
            "rate, coloured by what it says of the item; the dashed line is the first changed item.</figcaption>"
            f"</figure>{_steps_table(steps)}</section>")
    return PAGE.format(title=esc(f"Bisection {doc.get('bisect_id')}"), what="a bisection", css=CSS, body=body,
                       note="Every step is a sealed round in the results directory's ledger; `console verdict "
                            "RECEIPT` re-derives each one.")


def _label(doc: dict[str, Any], i: int) -> str:
    items = doc.get("items") or []
    return items[i]["label"] if items else "?"


def _plot(doc: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    fig, ((ax,),) = _figure(10, 3.2)
    pts = [r for r in rows if r.get("gain") is not None and r.get("against") == 0]
    for r in pts:
        colour = MARK_COLOURS.get(str(r.get("mark") or ("bad" if r.get("role") == "endpoints" else "")), "#555555")
        lo = r["gain"] - r["low"] if r.get("low") is not None else 0.0
        hi = r["high"] - r["gain"] if r.get("high") is not None else 0.0
        ax.errorbar([r["item"]], [r["gain"] * 100], yerr=[[lo * 100], [hi * 100]], color=colour, marker="o", capsize=3)
    for r in rows:
        if r.get("mark") in (Mark.SKIP.value, Mark.UNDECIDED.value) or (r.get("gain") is None and r.get("role") == "probe"):
            ax.plot([r["item"]], [0], marker="x", color=MARK_COLOURS[Mark.SKIP.value])
    if doc.get("first_bad") is not None:
        ax.axvline(doc["first_bad"] - 0.5, color="#c0392b", ls="--", lw=1)
    ax.axhline(0, color="#333", lw=0.6)
    ax.set(xlabel="item (0 = good end)", ylabel="gain against the good end (%)",
           xlim=(-0.5, len(doc.get("items") or [0]) - 0.5))
    return _svg(fig)


def _steps_table(t: Table) -> str:
    head = "".join(f"<th>{esc(c.key)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(c.show(r.get(c.key)) if r.get(c.key) is not None else '-')}</td>"
                                    for c in t.columns) + "</tr>" for r in t.rows)
    return f"<h3>{esc(t.title)}</h3><table><tr>{head}</tr>{body}</table>"
