"""The queue, live: who waits and why, what runs (with its round's progress), what finished.

Enter on a running candidate leaves this view with its id; ``console queue watch`` then opens
that round's live dashboard (following its journal) and comes back here when it is closed.

It reads the queue's SQLite file (WAL: reading never blocks a worker) and, for a running
candidate, the newest journal of its profile's results directory, once a second. It only
shows what the queue and the rounds recorded; nothing here books or changes anything.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from ..core.decisions import queue as policy
from ..core.decisions.progress import Tracker
from ..core.decisions.queue import CLOSED, State
from .. import events as ev
from ..core.records.untrusted import printable
from ..results.journal import JOURNAL_DIR, read_journal
from ..queueing.store import QueueStore, Row
from .widgets.linetable import Column, LineTable

_STYLE = {State.MERGEABLE: "bold green", State.MERGED: "green", State.NOT_MERGEABLE: "yellow",
          State.REFUSED: "bold red", State.REVIEW: "bold magenta", State.RUNNING: "bold cyan",
          State.CANCELLED: "dim", State.DRAFT: "dim"}

WAITING = (Column("id", "#", 3, True), Column("author", "author", 10), Column("state", "state", 8),
           Column("ready", "ready (UTC)", 19), Column("source", "source", 22), Column("why", "why it waits", 50))
RUNNING = (Column("id", "#", 3, True), Column("author", "author", 10), Column("where", "where", 16),
           Column("source", "source", 22), Column("live", "its round", 50))
TITLES = {"waiting": "Waiting (oldest ready first)", "running": "Running", "finished": "Finished (newest first)"}
FINISHED = (Column("id", "#", 3, True), Column("author", "author", 10), Column("state", "state", 13),
            Column("receipt", "receipt", 12), Column("source", "source", 22), Column("reason", "reason", 50))


def journal_of(row: Row) -> Path | None:
    """The newest journal where the candidate's round writes (its results folder), if any."""
    if not row.profile:
        return None
    from ..profile import ProfileError, load_profile
    try:
        name = load_profile(row.profile).name
    except ProfileError:
        return None
    results = Path(row.results) if row.results else None
    folders = [results] if results else []
    folders += [p for p in (Path.cwd() / "results" / name,) if p not in folders]
    journals = sorted((j for f in folders for j in (f / JOURNAL_DIR).glob("*.jsonl")),
                      key=lambda j: j.stat().st_mtime)
    return journals[-1] if journals else None


def live_round(row: Row) -> str:
    """The running candidate's round as its newest journal tells it: phase and rep k/N, time left."""
    journal = journal_of(row)
    if journal is None:
        return "starting…" if row.profile else ""
    phase, tracker, progress = "", Tracker(), None
    for e in read_journal(journal).typed():
        if isinstance(e, ev.RoundStarted):
            tracker.start(e.plan)
        elif isinstance(e, ev.PhaseStarted):
            phase = e.phase
        elif isinstance(e, ev.RepDone):
            progress = tracker.rep_done(e.rep, e.at) or progress
    return phase + (f", {progress.text()}" if progress is not None else "")


def _short(source: str, n: int = 22) -> Text:
    name = Path(source).name if "/" in source else source
    return _plain(name if len(name) <= n else "…" + name[-(n - 1):])


def _plain(text: str | None) -> Text:
    """What a submitter wrote (author, source, reason), shown as it is: never read as markup,
    its control characters escaped so that it cannot drive the terminal."""
    return Text(printable(text or ""))


def _state(state: State) -> Text:
    return Text(state.value, style=_STYLE.get(state, ""))


def sections(rows: Sequence[Row], live: Callable[[Row], str] = live_round) -> dict[str, list[tuple[str, list[Any]]]]:
    """Rows of the three tables, from the queue and the policy's plan (oldest ready first)."""
    plan = policy.plan([r.candidate for r in rows])
    why = {w.id: w.reason for w in plan.waiting}
    order = {cid: i for i, cid in enumerate(plan.bookable)}
    out: dict[str, list[tuple[str, list[Any]]]] = {"waiting": [], "running": [], "finished": []}
    waiting = [r for r in rows if r.candidate.state in (State.QUEUED, State.DRAFT, State.REVIEW)]
    waiting.sort(key=lambda r: (r.id not in order, order.get(r.id, 0), r.candidate.ready_at or "~", r.id))
    for r in waiting:
        c = r.candidate
        reason = why.get(c.id) or ("booked next" if order.get(c.id) == 0 else
                                   f"bookable, {order.get(c.id, 0) + 1} of {len(order)} in line")
        clash = plan.conflicts.get(c.id)
        if clash:
            reason += f"  [conflict: {', '.join(f'#{i}' for i in clash)}]"
        out["waiting"].append((str(c.id), [str(c.id), _plain(c.author), _state(c.state),
                                           _plain((c.ready_at or "-")[:19]), _short(r.source), _plain(reason)]))
    for r in rows:
        c = r.candidate
        if c.state is State.RUNNING:
            out["running"].append((str(c.id), [str(c.id), _plain(c.author), _plain(r.worker), _short(r.source),
                                               _plain(live(r))]))
        elif c.state in CLOSED or c.state is State.MERGEABLE:
            out["finished"].append((str(c.id), [str(c.id), _plain(c.author), _state(c.state),
                                                _plain((r.receipt_id or "-")[:12]), _short(r.source),
                                                _plain(c.reason)]))
    out["finished"].reverse()           # newest first
    return out


class QueueApp(App[int | None]):
    TITLE = "bench-console queue"
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("r", "reload", "Reload now"),
                Binding("enter", "open_round", "Open the running round")]
    CSS = """
    Screen { layout: vertical; }
    #queue-head { height: 1; background: $panel; padding: 0 1; }
    .section-title { height: 1; padding: 0 1; text-style: bold; margin-top: 1; }
    LineTable { height: auto; max-height: 14; }
    """

    def __init__(self, directory: Path, interval: float = 1.0, live: Callable[[Row], str] = live_round) -> None:
        super().__init__()
        self.directory, self.interval, self.live = directory, interval, live
        self.store: QueueStore | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="queue-head")
        with VerticalScroll():
            for key, cols in (("waiting", WAITING), ("running", RUNNING), ("finished", FINISHED)):
                yield Static(TITLES[key], classes="section-title", id=f"title-{key}")
                yield LineTable(cols, cursor=key == "running", id=f"queue-{key}")
        yield Footer()

    def on_mount(self) -> None:
        self.store = QueueStore(self.directory)
        self.action_reload()
        self.set_interval(self.interval, self.action_reload)

    def on_unmount(self) -> None:
        if self.store is not None:
            self.store.close()

    def action_open_round(self) -> None:
        """Leave with the selected running candidate: the caller opens its round's dashboard."""
        table = self.query_one("#queue-running", LineTable)
        if table.row_count:
            self.exit(int(table.key_at(table.cursor_row)))
        else:
            self.notify("nothing is running", severity="warning")

    def action_reload(self) -> None:
        assert self.store is not None
        rows = self.store.rows()
        parts = sections(rows, self.live)
        for key, table_rows in parts.items():
            table = self.query_one(f"#queue-{key}", LineTable)
            table.replace_rows(table_rows)
            self.query_one(f"#title-{key}", Static).update(f"{TITLES[key]} · {len(table_rows)}")
        counts = {s: sum(r.candidate.state is s for r in rows) for s in State}
        head = " · ".join(f"{n} {s.value}" for s, n in counts.items() if n) or "empty"
        self.query_one("#queue-head", Static).update(Text(printable(f"{self.store.path}  {head}")))
