"""Helpers for driving the console app deterministically from a recorded stream."""
from __future__ import annotations

import asyncio
import inspect
import math
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from console import events as ev
from console.core.decisions import gate
from console.core.records.receipt import Receipt
from console.core.records.verdict import VerdictRecord
from console.reports.replay import read_journal
from console.tui.app import ConsoleApp
from core.receipts import VOCAB, default_rules, make_receipt  # tests/core: realistic receipts

RECORDED = Path(__file__).resolve().parents[1] / "data" / "recorded_round.jsonl"
SIZE = (120, 40)
# The recorded round's plan states this parity bar; the gate judges it by the same.
RULES = default_rules(top1_min=0.99, kl_max=1e-3)
LOCK = {"frontier": 210.0, "frontier_slot": "DEMO_H100_DECODE_4096", "anchor": 0.0,
        "guards": {"decode_ctx128": 410.0}, "noise_spread": 0.012}


class SteppedSource:
    """Yields events only as far as the test has released them."""

    def __init__(self, events: list[ev.Event]) -> None:
        self.events_list = events
        self.released = 0
        self.yielded = 0
        self.abort_calls = 0
        self._cond = threading.Condition()
        self._aborted = False

    def release(self, upto: int) -> None:
        with self._cond:
            self.released = min(upto, len(self.events_list))
            self._cond.notify_all()

    def events(self) -> Iterator[ev.Event]:
        i = 0
        while i < len(self.events_list):
            with self._cond:
                while i >= self.released and not self._aborted:
                    self._cond.wait(0.05)
                if self._aborted:
                    break
            yield self.events_list[i]
            i += 1
            self.yielded = i
        if self._aborted:
            yield ev.RoundEnded(status="incomplete", exit_code=130, message="aborted")

    def abort(self) -> None:
        self.abort_calls += 1
        with self._cond:
            self._aborted = True
            self._cond.notify_all()


def recorded_receipt(events: list[ev.Event]) -> dict[str, Any]:
    """The round as a receipt: the events' own reps and parity figures, in the complete
    frame tests/core/receipts.py builds (profile, bench, rules, lock)."""
    figures: dict[str, list[dict[str, Any]]] = {"main": [], "candidate": []}
    for e in events:
        if isinstance(e, ev.DepthGraded):
            figures[e.build].append({"depth": e.depth, "top1": e.top1, "kl": e.kl,
                                     "ref_entropy": e.ref_entropy, "max_entropy": math.log(VOCAB)})
    scored = {e.build: {"depth": e.depth, "top1": e.top1, "kl": e.kl, "error": e.error}
              for e in events if isinstance(e, ev.ScoredPathChecked)}
    receipt = make_receipt(main_parity=figures["main"], cand_parity=figures["candidate"],
                           scored_path=scored, lock=dict(LOCK), rules=RULES)
    receipt["reps"] = [e.rep.to_dict() for e in events if isinstance(e, ev.RepDone)]
    return receipt


def gate_verdict(receipt: dict[str, Any], rules=RULES) -> VerdictRecord:
    """What the real gate decides, as the event stream carries it."""
    return VerdictRecord.of(gate.decide(Receipt.from_dict(receipt), rules))


def with_verdict(events: list[ev.Event], verdict: VerdictRecord) -> list[ev.Event]:
    """The stream with ``verdict`` as its verdict and the round ending with its exit code."""
    out: list[ev.Event] = []
    for e in events:
        if isinstance(e, ev.VerdictReady):
            e = ev.VerdictReady(verdict=verdict, at=e.at)
        elif isinstance(e, ev.RoundEnded):
            e = ev.RoundEnded(status=e.status, exit_code=verdict.exit_code, message=e.message,
                              receipt_path=e.receipt_path, at=e.at)
        out.append(e)
    return out


def recorded_events() -> list[ev.Event]:
    """The recorded round, its verdict the gate's decision on the round's own data (the
    journal's verdict is hand-written and uses words the gate never emits)."""
    events = list(read_journal(RECORDED))
    return with_verdict(events, gate_verdict(recorded_receipt(events)))


def index_of(events: list[ev.Event], pred) -> int:
    """Number of events up to and including the first one matching ``pred``."""
    for i, e in enumerate(events):
        if pred(e):
            return i + 1
    raise AssertionError("no such event")


async def feed(pilot, source: SteppedSource, upto: int, timeout: float = 10.0) -> None:
    """Release events up to ``upto`` and wait until the screen has applied them."""
    app: ConsoleApp = pilot.app
    source.release(upto)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while app.dashboard.events_applied < upto:
        if loop.time() > deadline:
            raise AssertionError(f"applied {app.dashboard.events_applied} of {upto} events")
        await pilot.pause(0.02)
    from console.tui.widgets.reps import RepPlot, RepTable
    plot = app.dashboard.query_one(RepPlot)
    table = app.dashboard.query_one(RepTable)
    while plot._timer is not None:  # the plot redraws on its own throttle
        if loop.time() > deadline:
            raise AssertionError("plot never redrew")
        await pilot.pause(0.05)
    # The table scrolls to its newest row on idle, after sizing it; the layout that follows
    # the last event (the verdict shrinks the table) can ask for that again, so settle twice.
    for _ in range(3):
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        while table._follow_pending:
            if loop.time() > deadline:
                raise AssertionError("the reps table never followed its newest row")
            await pilot.pause(0.02)
    # scrollbars and focus styles settle a refresh or two after the last layout
    await pilot.pause(0.2)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def frozen_clock() -> float:
    return 1000.0


@pytest.fixture
def recorded() -> list[ev.Event]:
    return recorded_events()


def screen_text(app: ConsoleApp) -> str:
    """The screen as plain text (what a person would read), for assertions."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests on a fresh event loop (no asyncio plugin needed)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        names = pyfuncitem._fixtureinfo.argnames
        asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
        return True
    return None
