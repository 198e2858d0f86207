"""A bisection, live: the range as a strip of items narrowing as steps decide, a table of the steps,
and the running round's lines. The bisection (``bisect.Bisection``) runs on a thread worker and
decides everything; this view only shows what it said and marked. ``q`` interrupts the running
round (it ends incomplete, sealing nothing) and the bisection ends ``interrupted`` with the steps it
finished kept in its record."""
from __future__ import annotations

from typing import Any, Mapping

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Log, Static

from .. import events as ev
from ..core.provenance.bisection import Mark, open_range
from ..core.records.untrusted import printable
from ..reports.text import LineReporter

SYMBOLS = {Mark.GOOD: ("✓", "bold blue"), Mark.BAD: ("✗", "bold red"), Mark.SKIP: ("s", "dim"),
           Mark.UNDECIDED: ("?", "bold yellow")}


def strip(n: int, marks: Mapping[int, Mark], probing: int | None = None) -> Text:
    """One cell per item: its mark (· untried), the open range between the last good and the first
    bad item underlined, the item being measured in reverse video."""
    o = open_range(n, marks)
    out = Text()
    for i in range(n):
        sym, style = SYMBOLS.get(marks.get(i), ("·", ""))      # type: ignore[arg-type]
        if o.good <= i <= o.bad:
            style += " underline"
        if i == probing:
            style += " reverse"
        out.append(f" {sym} ", style=style.strip())
    out.append(f"   open {o.good}..{o.bad}: {len(o.untried)} untried", style="dim")
    return out


class BisectApp(App[Any]):
    TITLE = "bench-console bisect"
    BINDINGS = [Binding("q", "quit_bisect", "Interrupt and quit")]
    CSS = """
    #strip { height: 3; padding: 1 1 0 1; }
    #said { height: 3; padding: 0 1; color: $text-muted; }
    DataTable { height: 12; }
    Log { height: 1fr; border-top: solid $panel; }
    """

    def __init__(self, bisection: Any, steps: Any) -> None:
        super().__init__()
        self.bisection, self.steps = bisection, steps
        self.lines = LineReporter(colour=False)
        self.record: Any = None
        self.quitting = False

    def compose(self) -> ComposeResult:
        yield Static(id="strip")
        yield Static(id="said")
        yield DataTable(id="steps", cursor_type="row", zebra_stripes=True)
        yield Log(id="log", max_lines=2000)
        yield Footer()

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        for c in ("step", "role", "item", "outcome", "mark", "gain", "interval", "pairs", "min"):
            t.add_column(c, key=c)
        self._draw()
        self.bisection.say = lambda line: self.call_from_thread(self.said, line)
        self.steps.sink = lambda e: self.call_from_thread(self.round_event, e)
        self.run_bisection()

    @work(thread=True, exclusive=True)
    def run_bisection(self) -> None:
        rec = self.bisection.run()
        self.call_from_thread(self.finished, rec)

    def said(self, line: str) -> None:
        self.query_one("#said", Static).update(Text(printable(line)))
        self.query_one(Log).write_line(printable(f"bisect: {line}"))
        steps = self.bisection.record.steps
        t = self.query_one(DataTable)
        for k, s in enumerate(steps, 1):
            row = _row(k, s)
            if str(k) in t.rows:
                for col, value in zip(("step", "role", "item", "outcome", "mark", "gain", "interval", "pairs", "min"), row):
                    t.update_cell(str(k), col, value)
            else:
                t.add_row(*row, key=str(k))
        self._draw()

    def round_event(self, e: ev.Event) -> None:
        text = self.lines.format(e)
        if text is not None:
            self.query_one(Log).write_line(printable(text))

    def finished(self, rec: Any) -> None:
        self.record = rec
        self._draw()
        self.query_one("#said", Static).update(Text(printable(rec.sentence) + "   (q to leave)"))
        if self.quitting:
            self.exit(rec)

    def _draw(self) -> None:
        self.query_one("#strip", Static).update(strip(self.bisection.n, dict(self.bisection.marks), self.bisection.probing))

    def action_quit_bisect(self) -> None:
        """Leave once finished; before that, interrupt the running round and leave when the
        bisection has written its record (``finished``)."""
        if self.record is not None:
            self.exit(self.record)
            return
        self.quitting = True
        self.query_one("#said", Static).update(Text("interrupting the running round…"))
        self.steps.abort()


def _row(k: int, s: Any) -> tuple[str, ...]:
    iv = "-" if s.low is None or s.high is None else f"[{s.low:+.1%}, {s.high:+.1%}]"
    return (str(k), s.role, str(s.item), s.outcome, s.mark.value if s.mark else "-",
            "-" if s.gain is None else f"{s.gain:+.1%}", iv, str(s.pairs), f"{s.minutes:.1f}")


def run_bisect_tui(cfg: Any, steps: Any) -> Any:
    """Run the bisection under the live view; its record (also when interrupted)."""
    from ..bisect import Bisection
    b = Bisection(cfg, steps)
    steps.threaded = True           # its rounds are followed on the worker thread, not under signals
    app = BisectApp(b, steps)
    app.run()
    return app.record if app.record is not None else b.record
