"""The queue view shows what the queue recorded: who waits and why, what runs and how far, what finished."""
from __future__ import annotations

import json

from console import events as ev
from console.core.decisions.queue import State
from console.core.records.receipt import Rep
from console.paths import DEMO_PROFILE
from console.queueing.store import QueueStore
from console.tui.queue_view import QueueApp, live_round, sections
from console.tui.widgets.linetable import LineTable


def _fill(store: QueueStore) -> None:
    def add(author, state, reason="", **fields):
        cid = store.submit(author=author, source=f"/p/{author}-{state.value}.patch", profile=str(DEMO_PROFILE),
                           state=State.QUEUED, reason="queued", files=["src/model.c"], fingerprint=frozenset())
        if state is not State.QUEUED:
            store.move(cid, state, reason or state.value, **fields)
        return cid
    add("alice", State.RUNNING, "batch job 7 on partition bench", worker="slurm:7")
    add("alice", State.QUEUED)
    add("bob", State.QUEUED)
    add("carol", State.MERGEABLE, "accepted, tier XL", receipt_id="ab" * 32)
    add("dan", State.REFUSED, "cannot be scored: it changes the measuring apparatus: src/bench.c")


def _cells(table: LineTable) -> list[list[str]]:
    return [[str(c) for c in table._cells[i]] for i in range(table.row_count)]


def test_sections_say_why_each_waits_and_show_the_live_round(tmp_path):
    store = QueueStore(tmp_path)
    _fill(store)
    parts = sections(store.rows(), live=lambda r: "reps, rep 3/38, ≤ 2m00s left")
    waiting = {row[0]: row for _k, row in parts["waiting"]}
    assert str(waiting["2"][5]).startswith("waits for #1 by the same author (running)")
    assert "booked next" in str(waiting["3"][5]) and "conflict: #1, #2, #4" in str(waiting["3"][5])
    (_k, running), = parts["running"]
    assert str(running[2]) == "slurm:7" and str(running[4]) == "reps, rep 3/38, ≤ 2m00s left"
    finished = [row for _k, row in parts["finished"]]
    assert [r[0] for r in finished] == ["5", "4"]          # newest first
    assert "measuring apparatus" in str(finished[0][5]) and str(finished[1][3]) == "ab" * 6


def test_the_live_round_is_read_from_the_newest_journal(tmp_path, monkeypatch):
    store = QueueStore(tmp_path / "q")
    _fill(store)
    row = store.get(1)
    journal = tmp_path / "results" / "demo" / "journal"
    journal.mkdir(parents=True)
    plan = {"reps": 4, "head_reps": 2, "tail_reps": 2, "sequential": True, "max_minutes": 30}
    events = [ev.RoundStarted(round_id="r1", profile="demo", profile_sha256="", runtime="docker", host={}, plan=plan,
                              at=0.0), ev.PhaseStarted(phase="reps", at=1.0)]
    events += [ev.RepDone(rep=Rep(build="main", phase="warmup" if i < 2 else "timed", index=i, position=i),
                          at=2.0 + 10 * i) for i in range(4)]
    (journal / "r1.jsonl").write_text("".join(json.dumps(e.to_dict()) + "\n" for e in events))
    monkeypatch.chdir(tmp_path)
    assert live_round(row) == "reps, rep 4/12, ≤ 1m20s left"


async def test_the_app_draws_the_three_sections(tmp_path):
    store = QueueStore(tmp_path)
    _fill(store)
    app = QueueApp(tmp_path, interval=0.2, live=lambda r: "parity")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.3)
        waiting = _cells(app.query_one("#queue-waiting", LineTable))
        assert [r[0] for r in waiting] == ["3", "2"]         # bookable first, then the one that waits
        assert _cells(app.query_one("#queue-running", LineTable))[0][4] == "parity"
        store.move(3, State.RUNNING, "booked by w:1", worker="w:1")
        await pilot.pause(0.5)                                # re-read on its own
        assert [r[0] for r in _cells(app.query_one("#queue-running", LineTable))] == ["1", "3"]
        head = str(app.query_one("#queue-head").render())
        assert "2 running" in head and "1 refused" in head
        app.query_one("#queue-running", LineTable).focus()
        await pilot.press("down", "enter")                    # open #3's round
    assert app.return_value == 3


HOSTILE = ["[/]", "[bold red]x", "\x1b[2J\x1b[31mevil", "a\nb\rc\x07"]


def hostile_queue(directory) -> QueueStore:
    """A queue whose authors, sources, reasons and worker are markup and terminal controls."""
    q = QueueStore(directory)
    for i, who in enumerate(HOSTILE):
        cid = q.submit(author=who, source=f"/p/{who}.patch", profile=str(DEMO_PROFILE), state=State.QUEUED,
                       reason=f"queued {who}", files=[], fingerprint=frozenset())
        if i == 0:
            q.move(cid, State.RUNNING, f"booked {who}", worker=f"w{who}")
        if i == 1:
            q.move(cid, State.CANCELLED, f"cancelled {who}")
    return q


async def test_the_view_shows_hostile_authors_as_text(tmp_path):
    hostile_queue(tmp_path).close()
    app = QueueApp(tmp_path, interval=0.2, live=lambda r: "[/] \x1b[2J")
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause(0.4)
        for key in ("waiting", "running", "finished"):
            table = app.query_one(f"#queue-{key}", LineTable)
            shown = [c for row in _cells(table) for c in row]
            assert table.row_count and not any(ch in c for c in shown for ch in "\x1b\n\r\x07")
            for y in range(table.row_count):       # each line drawn, none read as markup
                table.render_line(y)
        waiting = [c for row in _cells(app.query_one("#queue-waiting", LineTable)) for c in row]
        assert "\\x1b[2J\\x1b[31mevil" in waiting and "a\\x0ab\\x0dc\\x07" in waiting
        running = _cells(app.query_one("#queue-running", LineTable))[0]
        assert running[1] == "[/]" and running[2] == "w[/]" and running[4] == "[/] \\x1b[2J"
        assert "[bold red]x" in _cells(app.query_one("#queue-finished", LineTable))[0]
