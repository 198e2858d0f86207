"""Parity against the reference: one stable row per depth, filled as depths are graded.

Under the gated figures, once a round reports them, the spread of one build's rows per depth
(``console.core.records.parity.KLStats``): mean KL ± its relative SE, the 99th percentile and the
maximum, top-1 ± its binomial SE, and RMS Δp. The candidate's is shown when it has one.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ...core.records.parity import KLStats
from .linetable import Column, LineTable

# The grades console.core.records.parity.depth_status gives ("recorded": a replay not re-graded).
_STATUS_STYLE = {"pass": "green", "drift": "yellow", "adjudicated": "yellow", "fail": "bold red",
                 "regressed": "bold red", "uncheckable": "yellow"}
_STATUS_SHORT = {"uncheckable": "unchk", "regressed": "regr", "recorded": "rec", "adjudicated": "adj"}
_WARNED = ("uncheckable", "drift", "adjudicated")     # passing grades that come with a note
_BUILD_COLS = {"main": ("m_top1", "m_kl"), "candidate": ("c_top1", "c_kl")}


def fmt_top1(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else "—"


def fmt_kl(v: Any) -> str:
    return f"{v:.1e}" if isinstance(v, (int, float)) else "—"


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def fmt_small(v: Any) -> str:
    """Two significant digits with a bare exponent ("1.7e-6"): the spread columns are narrow."""
    if not _num(v):
        return "—"
    if v == 0:
        return "0"
    mantissa, exp = f"{v:.1e}".split("e")
    return f"{mantissa}e{int(exp)}"


def fmt_kl_se(kl: Any, se: Any) -> str:
    """Mean KL ± its standard error relative to the mean ("1.7e-6±5%"). Row KLs are never
    negative, so the SE is at most the mean: 11 cells at most."""
    if not _num(kl):
        return "—"
    if not _num(se) or kl == 0:
        return fmt_small(kl)
    return fmt_small(kl) + f"±{se / kl:.0%}"


def fmt_top1_se(top1: Any, se: Any) -> str:
    if not _num(top1):
        return "—"
    return f"{top1:.3f}" + (f"±{se:.3f}".replace("0.", ".", 1) if _num(se) else "")


def status_text(status: str | None) -> Text:
    if not status:
        return Text("·", style="dim")
    return Text(_STATUS_SHORT.get(status, status), style=_STATUS_STYLE.get(status, "dim"))


def bar_caption(plan: dict[str, Any]) -> str:
    """The parity bar as the plan states it (the app never sets one)."""
    spec = plan.get("parity") if isinstance(plan.get("parity"), dict) else plan
    top1 = next((spec[k] for k in ("top1_min", "min_top1") if k in spec), None)
    kl = next((spec[k] for k in ("kl_max", "max_kl") if k in spec), None)
    parts = []
    if isinstance(top1, (int, float)):
        parts.append(f"top-1 ≥ {top1:.3f}")
    if isinstance(kl, (int, float)):
        parts.append(f"KL ≤ {kl:.1e}")
    return "bar " + ", ".join(parts) if parts else ""


class ParityPanel(Vertical):
    """Depth table plus a line for the worst depth and the scored-path check."""

    DEFAULT_CSS = """
    ParityPanel { height: auto; border: round $primary-darken-2; }
    ParityPanel LineTable { height: auto; max-height: 12; scrollbar-size: 1 1; }
    ParityPanel .parity-notes { height: auto; padding: 0 1; }
    ParityPanel .parity-spread-caption { height: auto; padding: 0 1; color: $text-muted; }
    ParityPanel #parity-spread { padding-left: 1; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(id="parity", **kw)
        self.border_title = "parity vs reference"
        self.rows: dict[int, dict[str, Any]] = {}
        self.worst: dict[str, int | None] = {}
        self.parity_ok: dict[str, bool] = {}
        self.errors: dict[str, str] = {}
        self.scored: dict[str, dict[str, Any]] = {}
        self.spread: dict[str, dict[int, tuple[KLStats, float, float]]] = {}   # build -> depth -> (spread, KL, top-1)
        self.notes_plain = ""

    def compose(self) -> ComposeResult:
        # Sized to fit the 58-cell column: depth, figures per build, both grades.
        yield LineTable([Column("depth", "depth", 6), Column("m_top1", "m top1", 6, True),
                         Column("m_kl", "m KL", 7, True), Column("c_top1", "c top1", 6, True),
                         Column("c_kl", "c KL", 7, True), Column("grade", "grade m/c", 11)],
                        cursor=False, gap=2, id="parity-table")
        yield Static("", classes="parity-notes")
        # The spread of one build's rows: shown once a round reports it (older journals do not).
        # No gap: each width holds its widest value plus the space after it, so six columns
        # fit the 58-cell column.
        yield Static("", classes="parity-spread-caption")
        yield LineTable([Column(key, label, width) for label, key, width in (
            ("depth", "depth", 6), ("KL±SE", "kl", 13), ("KL p99", "p99", 8), ("KL max", "max", 8),
            ("top1±SE", "top1", 12), ("RMS Δp", "dp", 6))], cursor=False, gap=0, id="parity-spread")

    def on_mount(self) -> None:
        for part in (self.spread_table, self.query_one(".parity-spread-caption")):
            part.display = False

    @property
    def table(self) -> LineTable:
        return self.query_one("#parity-table", LineTable)

    @property
    def spread_table(self) -> LineTable:
        return self.query_one("#parity-spread", LineTable)

    def set_plan(self, plan: dict[str, Any]) -> None:
        caption = bar_caption(plan)
        if caption:
            self.border_subtitle = caption
        spec = plan.get("parity") if isinstance(plan.get("parity"), dict) else {}
        for depth in spec.get("depths") or plan.get("depths") or []:
            if isinstance(depth, int):
                self._ensure_row(depth)

    def _ensure_row(self, depth: int) -> dict[str, Any]:
        if depth not in self.rows:
            self.rows[depth] = {}
            self.table.add_row(Text(str(depth)), "…", "…", "…", "…", status_text(None),
                               key=str(depth))
            self.spread_table.add_row(Text(str(depth)), "…", "…", "…", "…", "…", key=str(depth))
        return self.rows[depth]

    def _grade_text(self, depth: int) -> Text:
        row = self.rows[depth]
        t = status_text(row.get("main"))
        t.append("/", style="dim")
        t.append_text(status_text(row.get("candidate")))
        return t

    def _depth_text(self, depth: int) -> Text:
        if depth not in self.worst.values():
            return Text(str(depth))
        return Text(f"{depth} ◀", style="bold reverse yellow")

    def graded(self, build: str, depth: int, top1: float, kl: float, status: str,
               reasons: list[str], stats: KLStats | None = None) -> None:
        row = self._ensure_row(depth)
        row[build] = status
        row[f"{build}_reasons"] = reasons
        key = str(depth)
        cells = {"grade": self._grade_text(depth)}
        cols = _BUILD_COLS.get(build)
        if cols:
            cells |= {cols[0]: fmt_top1(top1), cols[1]: fmt_kl(kl)}
        self.table.update_cells(key, cells)
        if stats and build in _BUILD_COLS:
            self.spread.setdefault(build, {})[depth] = (stats, kl, top1)
            self._redraw_spread()
        self._redraw_notes()

    def _spread_build(self) -> str | None:
        return next((b for b in ("candidate", "main") if self.spread.get(b)), None)

    def _redraw_spread(self) -> None:
        build = self._spread_build()
        if build is None:
            return
        figures = self.spread[build]
        n = next(iter(figures.values()))[0].rows
        caption = self.query_one(".parity-spread-caption", Static)
        caption.update(f"{build}'s {n} rows per depth: spread (KL in nats)")
        table = self.spread_table
        for depth in self.rows:
            if depth not in figures:
                cells = ("…",) * 5
            else:
                s, kl, top1 = figures[depth]
                cells = (fmt_kl_se(kl, s.kl_se), fmt_small(s.kl_p99), fmt_small(s.kl_max), fmt_top1_se(top1, s.top1_se),
                         fmt_small(s.rms_dp))
            table.update_cells(str(depth), dict(zip(("kl", "p99", "max", "top1", "dp"), cells)))
        caption.display = table.display = True

    def done(self, build: str, ok: bool, worst_depth: int | None, error: str | None) -> None:
        previous = self.worst.get(build)
        self.worst[build] = worst_depth
        self.parity_ok[build] = ok
        if error:
            self.errors[build] = error
        for depth in {previous, worst_depth}:
            if depth is not None and depth in self.rows:
                self.table.update_cell(str(depth), "depth", self._depth_text(depth))
        self._redraw_notes()

    def scored_path(self, build: str, info: dict[str, Any]) -> None:
        self.scored[build] = info
        self._redraw_notes()

    def _redraw_notes(self) -> None:
        # Three short lines at most, so the notes fit under the table at 40 rows.
        t = Text()
        parts = []
        for build in ("main", "candidate"):
            if build in self.parity_ok:
                ok = self.parity_ok[build]
                part = Text(f"{build} ")
                part.append("ok" if ok else "parity FAILED", style="green" if ok else "bold red")
                if self.worst.get(build) is not None:
                    part.append(f", worst {self.worst[build]}")
                if build in self.errors:
                    part.append(f" ({self.errors[build]})", style="red")
                parts.append(part)
        if parts:
            t.append_text(Text(" · ").join(parts))
            t.append("\n")
        for depth, row in sorted(self.rows.items()):
            # One line per depth and reason, naming the builds it applies to.
            by_reason: dict[str, list[str]] = {}
            style = ""
            for build in ("main", "candidate"):
                if row.get(build) in ("fail", "regressed") + _WARNED:
                    # a failing grade colours the line over a warning one
                    if row[build] not in _WARNED or not style:
                        style = _STATUS_STYLE[row[build]]
                    for reason in row.get(f"{build}_reasons") or [row[build]]:
                        by_reason.setdefault(reason, []).append(build[0])
            for reason, builds in by_reason.items():
                t.append(f"@{depth} {','.join(builds)}: {reason}\n", style=style)
        if self.scored:
            depths = {str(info.get("depth")) for info in self.scored.values()}
            t.append(f"scored @{'/'.join(sorted(depths))}")
            for build, info in self.scored.items():
                ok = bool(info.get("ok"))
                t.append(" ✔ " if ok else " ✘ ", style="green" if ok else "bold red")
                t.append(f"{build[0]} {fmt_top1(info.get('top1'))} {fmt_kl(info.get('kl'))}")
                if info.get("error"):
                    t.append(f" ({info['error']})", style="red")
        t.rstrip()
        self.notes_plain = t.plain
        self.query_one(".parity-notes", Static).update(t)
