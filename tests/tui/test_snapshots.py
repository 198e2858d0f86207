"""The dashboard at three moments of the recorded round, at 120x40, clock frozen.

Regenerate after an intended change of look:
    .venv/bin/pytest tests/tui/test_snapshots.py --snapshot-update
"""
from __future__ import annotations

from console import events as ev
from console.tui.app import ConsoleApp

from .conftest import SIZE, SteppedSource, feed, frozen_clock, index_of, recorded_events


def _snap(snap_compare, upto) -> bool:
    events = recorded_events()
    n = upto(events)
    source = SteppedSource(events)
    app = ConsoleApp(source, clock=frozen_clock)

    async def run_before(pilot) -> None:
        await feed(pilot, source, n)

    return snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_building(snap_compare):
    # Mid-way through the candidate's build log, main already built.
    assert _snap(snap_compare, lambda evs: index_of(
        evs, lambda e: isinstance(e, ev.BuildStarted) and e.build == "candidate") + 30)


def test_mid_reps(snap_compare):
    assert _snap(snap_compare, lambda evs: index_of(
        evs, lambda e: isinstance(e, ev.RepDone) and e.rep["phase"] == "timed"
        and e.rep["index"] == 2 and e.rep["build"] == "main"))


def test_verdict(snap_compare):
    assert _snap(snap_compare, len)
