"""A serving sweep in the live console, from a recorded real sweep (llama-server 0.3.16 against
0.3.36 at concurrency 1, 2 and 4; its blocks' request lists left out): each block's latencies as it
arrives, then each level on the curve, and the levels where a round's verdict would be."""
from __future__ import annotations

from pathlib import Path

from console import events as ev
from console.reports.replay import read_journal
from console.tui.app import ConsoleApp
from console.tui.widgets.reps import RepPlot

from .conftest import SIZE, SteppedSource, feed, frozen_clock, index_of

RECORDED = Path(__file__).resolve().parents[1] / "data" / "recorded_sweep.jsonl"


async def test_blocks_show_their_latencies_and_each_level_lands_on_the_curve():
    events = list(read_journal(RECORDED))
    source = SteppedSource(events)
    app = ConsoleApp(source, clock=frozen_clock)
    async with app.run_test(size=SIZE) as pilot:
        first_block = index_of(events, lambda e: isinstance(e, ev.RepDone))
        await feed(pilot, source, first_block)
        row = app.dashboard.reps.records
        [rep] = [r for r in row.values() if r.status == "ok"]
        cell = app.dashboard.reps.get_cell(next(iter(row)), "status")
        assert "8 req, TTFT p50/p99" in cell.plain and "ITL p50/p99" in cell.plain
        first_level = index_of(events, lambda e: isinstance(e, ev.SweepLevel))
        await feed(pilot, source, first_level)
        plot = app.dashboard.query_one(RepPlot)
        assert len(plot.levels) == 1 and plot.levels[0]["level"]["name"] == "c1"
        assert app.dashboard.verdict.text_plain.startswith("a sweep measures a curve and decides nothing")
        await feed(pilot, source, len(events))
        assert [lv["level"]["name"] for lv in plot.levels] == ["c1", "c2", "c4"]
        said = app.dashboard.verdict.text_plain
        assert "concurrency 1: main" in said and "concurrency 4: main" in said and "candidate +" in said
        assert app.dashboard.ended is not None and app.dashboard.ended.exit_code == 0
