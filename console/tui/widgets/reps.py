"""Reps as they complete: a table, a per-build running summary, and a drift plot."""
from __future__ import annotations

import bisect
from typing import Any

from rich.text import Text
from textual import events
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ...core.records.receipt import Rep
from ...core.statistics import stats
from ...reports.text import block_text
from .linetable import Cell, Column, LineTable

_STATUS_STYLE = {"ok": "green", "running": "dim", "suspect": "yellow"}
_BUILD_SHORT = {"main": "main", "candidate": "cand"}
PLOT_WINDOW = 120        # positions shown in the reps plot
PLOT_REDRAW_S = 0.5   # the plot shows a trend; redrawing it per rep would dominate CPU


def fmt_value(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, (int, float)) else "—"


def rep_key(build: str, phase: str, index: Any, position: Any) -> str:
    return f"{build}:{phase}:{index}:{position}"


# the last column takes what is left of the line
COLUMNS = (Column("pos", "pos", 3, True), Column("build", "build", 5), Column("phase", "phase", 11),
           Column("idx", "#", 2, True), Column("value", "value", 6, True), Column("wall", "wall", 5, True),
           Column("status", "status · flags", 14))


class RepTable(LineTable):
    """One row per rep; a RepStarted row is filled in place when its RepDone arrives."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(COLUMNS, id="reps-table", **kw)
        self.records: dict[str, Rep] = {}     # a started rep is a placeholder until its RepDone
        self._done: set[str] = set()
        self._pending: dict[str, list[Cell]] = {}  # this batch's new rows (see flush)
        self._follow_pending = False
        self._followed_row = 0      # where following last put the cursor

    def _row(self, key: str, build: str, phase: str, index: Any, position: Any) -> None:
        self._pending[key] = [str(position), _BUILD_SHORT.get(build, build), phase, str(index),
                              "…", "", Text("running", style="dim")]

    def flush(self) -> None:
        """Add the rows that arrived since the last flush (the dashboard flushes once per
        batch): a rep that started and finished within one batch is added filled in."""
        if not self._pending:
            return
        self.add_rows(list(self._pending.items()))
        self._pending.clear()
        # Follow the newest rep unless the user moved the cursor to read an older one.
        # (Focus alone is no sign of reading: it can land here when other widgets hide.)
        if not self.has_focus or self.cursor_row == self._followed_row:
            self._follow_pending = True
            self.call_after_refresh(self._follow)

    def started(self, build: str, phase: str, index: int, position: int) -> None:
        key = rep_key(build, phase, index, position)
        if key not in self.records:
            self.records[key] = Rep(build=build, phase=phase, index=index, position=position, status="running")
            self._row(key, build, phase, index, position)

    def done(self, rep: Rep) -> str:
        key = rep_key(rep.build, rep.phase, rep.index, rep.position)
        if key in self._done:  # a retried attempt keeps its own row
            key = f"{key}:a{rep.attempt}"
        if key not in self.records:
            self._row(key, rep.build, rep.phase, rep.index, rep.position)
        self.records[key] = rep
        self._done.add(key)
        flags = [str(f) for f in rep.suspect] + [str(f) for f in rep.refusals]
        cell = Text(rep.status, style=_STATUS_STYLE.get(rep.status, "bold red"))
        if flags:
            cell.append(" " + ",".join(flags), style="yellow")
        if rep.context == "serve":     # a serving block: its latencies as they arrive
            cell.append(" · " + block_text(rep.reported or {}), style="dim")
        cells = (fmt_value(rep.value), "—" if rep.wall_s is None else f"{rep.wall_s:.2f}", cell)
        pending = self._pending.get(key)
        if pending is not None:
            pending[4:] = cells
        else:
            self.update_cells(key, dict(zip(("value", "wall", "status"), cells)))
        return key

    def selected_record(self) -> Rep | None:
        if not self.row_count:
            return None
        return self.records.get(self._keys[min(self.cursor_row, self.row_count - 1)])

    def _follow(self) -> None:
        if not self._follow_pending:
            return
        self._follow_pending = False
        # The cursor follows too, so `l` opens the newest rep by default.
        self.move_cursor(self.row_count - 1)
        self._followed_row = self.cursor_row

    def on_resize(self, event: events.Resize) -> None:
        # The dashboard shrinks this table when the verdict arrives: a follower keeps the
        # newest row in view at the new height.
        if self.row_count and self.cursor_row == self._followed_row:
            self._follow_pending = True
            self.call_after_refresh(self._follow)


class RepSummary(Static):
    """Running median and spread of what has arrived, per build, and the round's plan and
    latest decision as the round said them (display only)."""

    DEFAULT_CSS = "RepSummary { height: 3; padding: 0 1; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.values: dict[str, list[float]] = {"main": [], "candidate": []}
        self.plan: str = ""
        self.decision: str = ""

    def set_plan(self, sentence: str) -> None:
        self.plan = sentence

    def set_decision(self, line: str) -> None:
        self.decision = line

    def add(self, build: str, value: float) -> None:
        # Kept sorted: the core's summary sorts them again per batch, in linear time when sorted.
        bisect.insort(self.values.setdefault(build, []), value)  # redrawn per batch

    def median(self, build: str) -> float | None:
        return stats.summary(self.values.get(build) or [])["median"]

    def redraw(self) -> None:
        # The figures are the core's (console.core.statistics.stats), over what has arrived so far.
        t = Text(no_wrap=True, overflow="ellipsis")
        for build in ("main", "candidate"):
            s = stats.summary(self.values.get(build) or [])
            t.append(f"{_BUILD_SHORT[build]:<5}", style="bold")
            if not s["n"]:
                t.append("no timed reps yet\n", style="dim")
                continue
            t.append(f"n={s['n']}  median {s['median']:.1f}  range {s['min']:.1f}–{s['max']:.1f}"
                     f" ({s['spread']:.1%})\n")
        if self.decision:
            t.append("look ", style="bold")
            t.append(self.decision)
        elif self.plan:
            t.append("plan ", style="bold")
            t.append(self.plan, style="dim")
        t.rstrip()
        self.update(t, layout=False)  # a fixed three lines: a repaint, not a re-layout


class RepPlot(PlotextPlot):
    """Timed rep values over interleaved position, one series per build."""

    DEFAULT_CSS = "RepPlot { height: 10; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(id="reps-plot", **kw)
        self.series: dict[str, tuple[list[int], list[float]]] = {}
        self.levels: list[dict[str, Any]] = []   # a sweep's levels so far: the plot becomes their curve
        self._timer = None

    def add_level(self, figures: dict[str, Any]) -> None:
        self.levels.append(figures)
        if self._timer is None:
            self._timer = self.set_timer(PLOT_REDRAW_S, self._draw)

    def on_mount(self) -> None:
        # Textual also runs PlotextPlot.on_mount (handlers run along the MRO).
        self._draw()

    def add(self, build: str, position: int, value: float) -> None:
        xs, ys = self.series.setdefault(build, ([], []))
        xs.append(position)
        ys.append(value)
        if self._timer is None:
            self._timer = self.set_timer(PLOT_REDRAW_S, self._draw)

    def _draw(self) -> None:
        self._timer = None
        plt = self.plt
        plt.clear_data()
        if self.levels:
            self._curve()
            return
        # A plot a few dozen cells wide cannot show more positions than this; drawing
        # thousands of points would only cost the screen its responsiveness.
        last = max((xs[-1] for xs, _ in self.series.values() if xs), default=0)
        since = last - PLOT_WINDOW
        plt.title("timed reps: value by position" + (f" (last {PLOT_WINDOW})" if since > 0 else ""))
        for build, color in (("main", "blue"), ("candidate", "orange")):
            xs, ys = self.series.get(build, ([], []))
            i = bisect.bisect_right(xs, since) if since > 0 else 0
            if xs[i:]:
                plt.scatter(xs[i:], ys[i:], label=_BUILD_SHORT[build], color=color, marker="dot")
        self.refresh()

    def _curve(self) -> None:
        """A sweep's throughput against median TPOT per level, each point with its interval (drawn
        symmetric at the wider side: a terminal sketch must not look tighter than measured)."""
        plt = self.plt
        plt.title("sweep: output tok/s against TPOT p50 (ms), 95% intervals")
        for build, color in (("main", "blue"), ("candidate", "orange")):
            pts = [(lv["builds"][build]["median_tpot_ms"], lv["builds"][build]["output_throughput"])
                   for lv in self.levels if build in lv.get("builds", {})]
            pts = [(x, y) for x, y in pts if x.get("mean") is not None and y.get("mean") is not None]
            if pts:
                xs, ys = [x["mean"] for x, _ in pts], [y["mean"] for _, y in pts]
                plt.error(xs, ys, xerr=[_half(x) for x, _ in pts], yerr=[_half(y) for _, y in pts], color=color)
                plt.plot(xs, ys, color=color, marker="dot", label=_BUILD_SHORT[build])
        self.refresh()


def _half(e: dict[str, Any]) -> float:
    if e.get("low") is None or e.get("high") is None:
        return 0.0
    return max(e["mean"] - e["low"], e["high"] - e["mean"])
