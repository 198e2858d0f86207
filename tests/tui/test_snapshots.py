"""The dashboard at three moments of the recorded round, at 120x40, clock frozen.

Regenerate after an intended change of look:
    .venv/bin/pytest tests/tui/test_snapshots.py --snapshot-update
"""
from __future__ import annotations

import re
from pathlib import Path

from console import events as ev
from console.tui import app as app_module
from console.tui.app import ConsoleApp

from .conftest import SIZE, SteppedSource, feed, frozen_clock, index_of, recorded_events


class _SnapApp(ConsoleApp):
    """The console as it renders, less the zero-width rectangles the SVG export emits for
    empty segments: invisible, and present or not depending on refresh timing."""

    CSS_PATH = str(Path(app_module.__file__).parent / ConsoleApp.CSS_PATH)

    def export_screenshot(self, *args, **kwargs) -> str:
        return _ZERO_WIDTH.sub("", super().export_screenshot(*args, **kwargs))


_ZERO_WIDTH = re.compile(r'<rect [^>]*\bwidth="0"[^>]*/>\s*')


def _snap(snap_compare, upto) -> bool:
    events = recorded_events()
    n = upto(events)
    source = SteppedSource(events)
    app = _SnapApp(source, clock=frozen_clock)

    async def run_before(pilot) -> None:
        await feed(pilot, source, n)

    return snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_building(snap_compare):
    # Mid-way through the candidate's build log, main already built.
    assert _snap(snap_compare, lambda evs: index_of(
        evs, lambda e: isinstance(e, ev.BuildStarted) and e.build == "candidate") + 30)


def test_mid_reps(snap_compare):
    assert _snap(snap_compare, lambda evs: index_of(
        evs, lambda e: isinstance(e, ev.RepDone) and e.rep.phase == "timed"
        and e.rep.index == 2 and e.rep.build == "main"))


def test_verdict(snap_compare):
    assert _snap(snap_compare, len)
