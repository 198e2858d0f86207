"""Main's history in the terminal: the series (one row each), the selected series plotted with its
change points, and its change points with the range to bisect. It shows what ``core.history`` found;
nothing here detects anything."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static
from textual_plotext import PlotextPlot

from ..core.provenance.history import History, Series
from ..core.records.untrusted import printable


class SeriesPlot(PlotextPlot):
    DEFAULT_CSS = "SeriesPlot { height: 16; }"

    def show(self, s: Series) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(printable(s.key.label()))
        plt.scatter(list(range(len(s.points))), [p.value for p in s.points], marker="dot", color="blue", label="main")
        for c in s.changes:
            plt.vline(c.point.at - 0.5, color="red")
        pins = [(i, p.pin) for i, p in enumerate(s.points) if p.pin > 0]
        if pins:
            plt.plot([i for i, _ in pins], [v for _, v in pins], color="orange", label="pin")
        plt.xlabel("round (time order); red: change points")
        self.refresh()


def change_lines(s: Series) -> Text:
    """The selected series' change points, each with its size, interval and range to bisect."""
    if not s.changes:
        return Text("no change point in this series", style="dim")
    out = Text()
    for c in s.changes:
        p = c.point
        out.append(f"round {p.at}: {p.change:+.1%} [{p.low:+.1%}, {p.high:+.1%}] p {p.p:.2g}  ",
                   style="bold red" if p.change < 0 else "bold green")
        out.append(printable((c.bisect_command or "main was a directory here: no commits to bisect") + "\n"))
    return out


class HistoryApp(App[None]):
    TITLE = "bench-console history"
    BINDINGS = [Binding("q", "quit", "Quit")]
    CSS = "#head { height: 2; padding: 0 1; } DataTable { height: 8; } #changes { padding: 0 1; }"

    def __init__(self, history: History, rules: Any) -> None:
        super().__init__()
        self.history, self.rules = history, rules

    def compose(self) -> ComposeResult:
        h = self.history
        yield Static(Text(printable(f"{len(h.series)} series; alpha {self.rules.alpha:g}, min change "
                                    f"{self.rules.min_change:.1%}, min segment {self.rules.min_segment}"
                                    + (f"; left out: {h.left_out_sentence()}" if h.left_out else ""))), id="head")
        yield DataTable(id="series", cursor_type="row")
        yield SeriesPlot()
        yield Static(id="changes")
        yield Footer()

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_columns("series", "rounds", "latest", "changes")
        for i, s in enumerate(self.history.series):
            t.add_row(Text(printable(s.key.label())), str(len(s.points)), f"{s.points[-1].value:.4g}",
                      str(len(s.changes)), key=str(i))
        self._select(0)

    def on_data_table_row_highlighted(self, e: DataTable.RowHighlighted) -> None:
        if e.row_key.value is not None:
            self._select(int(e.row_key.value))

    def _select(self, i: int) -> None:
        if not self.history.series:
            return
        s = self.history.series[i]
        self.query_one(SeriesPlot).show(s)
        self.query_one("#changes", Static).update(change_lines(s))


def run_history(history: History, rules: Any) -> None:
    HistoryApp(history, rules).run()
