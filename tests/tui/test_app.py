"""The dashboard renders what the events say, as they arrive."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from console import events as ev
from console.reports.replay import ListSource
from console.tui.app import EXIT_QUIT_DURING_ROUND, ConsoleApp
from console.tui.screens.viewers import LogScreen, ReceiptScreen
from console.tui.widgets.builds import BuildPanel
from console.tui.widgets.cells import CellsPanel
from console.tui.widgets.reps import RepSummary

from .conftest import (SIZE, SteppedSource, feed, frozen_clock, gate_verdict, index_of, recorded_receipt,
                       screen_text, with_verdict)


def _app(events: list[ev.Event]) -> tuple[ConsoleApp, SteppedSource]:
    source = SteppedSource(events)
    return ConsoleApp(source, clock=frozen_clock), source


def _cell(table, row: str, col: str) -> str:
    value = table.get_cell(row, col)
    return getattr(value, "plain", str(value))


async def test_depth_rows_fill_in(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, 1)
        table = app.dashboard.parity.table
        assert table.row_count == 7  # one stable row per planned depth
        assert _cell(table, "4096", "c_top1") == "…"
        first_cand = index_of(recorded, lambda e: isinstance(e, ev.DepthGraded)
                              and e.build == "candidate")
        await feed(pilot, source, first_cand - 1)
        assert _cell(table, "4096", "m_top1") == "0.996"
        assert _cell(table, "4096", "m_kl") == "8.8e-06"
        assert _cell(table, "4", "c_top1") == "…"
        done = index_of(recorded, lambda e: isinstance(e, ev.ScoredPathChecked)
                        and e.build == "candidate")
        await feed(pilot, source, done)
        assert table.row_count == 7
        assert _cell(table, "4096", "c_top1") == "0.992"
        assert _cell(table, "4096", "c_kl") == "2.3e-05"
        assert _cell(table, "512", "grade") == "pass/pass"
        assert _cell(table, "4", "grade") == "unchk/unchk"
        assert _cell(table, "4096", "depth") == "4096 ◀"  # worst depth marked
        assert _cell(table, "2048", "depth") == "2048"
        notes = app.dashboard.parity.notes_plain
        assert "main ok, worst 4096 · candidate ok, worst 4096" in notes
        assert "@4 m,c: reference near-uniform" in notes
        assert "scored @4096 ✔ m 1.000 9.1e-06 ✔ c 0.998 2.2e-05" in notes
        text = screen_text(app)
        assert "scored @4096" in text and "bar top-1 ≥ 0.990" in text


async def test_reps_appear_with_running_summary(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, len(recorded))
        reps = app.dashboard.reps
        n_reps = sum(isinstance(e, ev.RepDone) for e in recorded)
        assert reps.row_count == n_reps == 26
        key = "candidate:timed:4:19"
        assert _cell(reps, key, "value") == "228.8"
        assert _cell(reps, key, "status") == "ok"
        assert _cell(reps, "main:timed:3:17", "status") == "ok sm-clock-dip"
        summary = app.dashboard.query_one(RepSummary)
        assert summary.median("main") == pytest.approx(210.4)
        last = [e for e in recorded if isinstance(e, ev.DecisionStep)][-1]
        assert summary.decision.startswith(f"{last.pairs} pairs") and "accepted m" in summary.decision
        assert summary.median("candidate") == pytest.approx(228.4)


async def test_verdict_banner_shows_tier_and_reasons(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, len(recorded) - 2)
        assert app.dashboard.verdict.label == ""
        await feed(pilot, source, len(recorded))
        panel = app.dashboard.verdict
        verdict = next(e for e in recorded if isinstance(e, ev.VerdictReady)).verdict
        assert verdict.outcome == "accepted" and verdict.tier == "m"
        assert panel.label == "TIER M" and panel.has_class("-tier")
        for reason in verdict.reasons:
            assert reason.message in panel.text_plain
        assert verdict.warnings
        for warning in verdict.warnings:
            assert warning.message in panel.text_plain
        speed = verdict.speed
        lo, hi = speed.interval
        assert f"{speed.gain:+.2%} [{lo:+.2%}, {hi:+.2%}]" in panel.text_plain
        assert "band m" in panel.text_plain
        assert app.dashboard.header.status == "complete"


def _rejected(recorded: list[ev.Event]) -> list[ev.Event]:
    """The recorded round with the candidate broken at depth 2048, judged by the gate."""
    def at_2048(e: ev.Event) -> bool:
        return isinstance(e, ev.DepthGraded) and e.build == "candidate" and e.depth == 2048

    out = [replace(e, top1=0.91, kl=4.1e-2, status="fail") if at_2048(e)
           else replace(e, ok=False, worst_depth=2048)
           if isinstance(e, ev.ParityDone) and e.build == "candidate" else e for e in recorded]
    verdict = gate_verdict(recorded_receipt(out))
    # the depth's row lists what the gate found there
    found = [r.message for r in verdict.reasons if r.depth == 2048]
    return with_verdict([replace(e, reasons=found) if at_2048(e) else e for e in out], verdict)


async def test_rejected_verdict_shows_each_reason(recorded):
    events = _rejected(recorded)
    verdict = next(e for e in events if isinstance(e, ev.VerdictReady)).verdict
    assert verdict.outcome == "rejected"
    assert {"parity-kl", "parity-top1"} <= {r.code for r in verdict.reasons}
    app, source = _app(events)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, len(events))
        panel = app.dashboard.verdict
        assert panel.label == "REJECTED"
        assert panel.has_class("-bad")
        for reason in verdict.reasons:
            assert reason.message in panel.text_plain
        assert f"speed not computed: {verdict.speed.suppressed}" in panel.text_plain
        table = app.dashboard.parity.table
        assert _cell(table, "2048", "grade") == "pass/fail"
        assert _cell(table, "2048", "depth") == "2048 ◀"
        assert "candidate parity FAILED, worst 2048" in app.dashboard.parity.notes_plain
        await pilot.press("q")
    assert app.return_code == 1  # the round's own exit code


async def test_abort_key_calls_source_abort(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, 40)
        await pilot.press("a")
        assert source.abort_calls == 1
        assert ("warn", "abort") in [e[:2] for e in app.dashboard.notices.entries]
        await pilot.press("a")  # a second press does not abort twice
        assert source.abort_calls == 1
        # the source ends its stream with RoundEnded(incomplete)
        for _ in range(100):
            if app.dashboard.ended is not None:
                break
            await pilot.pause(0.05)
        assert app.dashboard.ended.status == "incomplete"
        assert app.dashboard.header.status == "incomplete"
        assert not app.running


async def test_quit_mid_round_aborts(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, 10)
        await pilot.press("q")
    assert source.abort_calls == 1
    assert app.return_code == EXIT_QUIT_DURING_ROUND


async def test_log_key_shows_whole_build_log_and_rep_log(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, len(recorded))
        panel = app.dashboard.query_one("#build-candidate", BuildPanel)
        n_lines = sum(isinstance(e, ev.BuildLog) and e.build == "candidate" for e in recorded)
        assert len(panel.lines) == n_lines >= 50
        panel.log_widget.focus()
        await pilot.press("l")
        assert isinstance(app.screen, LogScreen)
        assert app.screen.query_one("#full-log").line_count == n_lines
        await pilot.press("escape")
        assert app.screen is app.dashboard
        app.dashboard.reps.focus()
        app.dashboard.reps.move_cursor(row=0)
        await pilot.press("l")
        assert isinstance(app.screen, LogScreen)
        log = app.screen.query_one("#full-log")
        assert "RESULT metric=decode_tok_s" in "\n".join(log.lines)


async def test_receipt_key_opens_pretty_json(tmp_path: Path):
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps({"schema": "bench-console/receipt/1", "round_id": "r1"}))
    events = [ev.RoundStarted(round_id="r1", profile="demo", profile_sha256="", runtime="local",
                              host={}, plan={}, at=1.0),
              ev.RoundEnded(status="complete", exit_code=0, receipt_path=str(receipt), at=2.0)]
    app, source = _app(events)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        assert app.screen is app.dashboard  # no receipt yet
        await feed(pilot, source, 2)
        await pilot.press("r")
        assert isinstance(app.screen, ReceiptScreen)
        assert "bench-console/receipt/1" in screen_text(app)


async def test_start_key_runs_a_factory(recorded):
    made: list[ListSource] = []

    def factory() -> ListSource:
        made.append(ListSource(recorded[:30]))
        return made[-1]

    app = ConsoleApp(factory, clock=frozen_clock)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not made and app.dashboard.header.status == "idle"
        await pilot.press("s")
        for _ in range(100):
            if app.dashboard.events_applied >= 30 and not app.running:
                break
            await pilot.pause(0.05)
        assert len(made) == 1
        assert app.dashboard.events_applied == 30
        assert app.dashboard.header.status == "stream ended"  # no RoundEnded in the slice


async def test_build_failure_and_log_flood():
    lines = [ev.BuildLog(build="main", line=f"line {i}", at=1.0) for i in range(3000)]
    events = [ev.BuildStarted(build="main", source={}, at=1.0), *lines,
              ev.BuildFailed(build="main", message="make: *** [engine] Error 1",
                             log_tail=["line 2999"], at=2.0),
              *[ev.TelemetrySample(source="nvml", values={"temp_c": 50 + i}, at=2.0)
                for i in range(200)]]
    app, source = _app(events)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, len(events))
        panel = app.dashboard.build_panel("main")
        assert panel.state == "failed"
        assert len(panel.lines) == 3000
        assert "make: *** [engine] Error 1" in screen_text(app)
        assert app.dashboard.header.telemetry["nvml"]["temp_c"] == 249  # newest sample wins


async def test_stream_error_is_reported():
    class Broken:
        def events(self):
            yield ev.PhaseStarted(phase="build", at=1.0)
            raise RuntimeError("docker daemon went away")

        def abort(self):
            pass

    app = ConsoleApp(Broken(), clock=frozen_clock)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            if not app.running:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        assert app.dashboard.header.status == "stream error"
        entries = app.dashboard.notices.entries
        assert ("error", "stream-error", "RuntimeError: docker daemon went away") in entries
        assert "daemon went away" in screen_text(app)


async def test_reps_table_follows_the_newest_rep_until_the_user_reads_an_older_one(recorded):
    app, source = _app(recorded)
    async with app.run_test(size=SIZE) as pilot:
        half = index_of(recorded, lambda e: isinstance(e, ev.RepDone) and e.rep.phase == "timed")
        await feed(pilot, source, half)
        table = app.dashboard.reps
        assert table.cursor_row == table.row_count - 1           # following, focused or not
        table.focus()
        await pilot.pause()
        await feed(pilot, source, half + 4)
        assert table.cursor_row == table.row_count - 1           # focus alone does not stop it
        await pilot.press("up", "up")
        reading = table.cursor_row
        await feed(pilot, source, len(recorded))
        assert table.cursor_row == reading < table.row_count - 1  # the reader's row stays put


async def test_header_shows_the_same_progress_and_time_left_as_the_headless_lines(recorded):
    from console.core.decisions.progress import Tracker
    plan = {**next(e for e in recorded if isinstance(e, ev.RoundStarted)).plan,
            "head_reps": 4, "tail_reps": 2, "reps": 10, "sequential": True, "max_minutes": 30}
    events = [replace(e, plan=plan) if isinstance(e, ev.RoundStarted) else e for e in recorded]
    done = [i for i, e in enumerate(events) if isinstance(e, ev.RepDone)]
    upto = done[len(done) // 2] + 1                  # mid-round, after a finished rep
    tracker, expected = Tracker(), None
    tracker.start(plan)
    for e in events[:upto]:
        if isinstance(e, ev.RepDone):
            expected = tracker.rep_done(e.rep, e.at) or expected
    assert expected is not None and expected.total and "left" in expected.text()
    app, source = _app(events)
    async with app.run_test(size=(200, 50)) as pilot:
        await feed(pilot, source, upto)
        assert app.dashboard.header.progress == expected.text()
        assert expected.text() in screen_text(app)
        await feed(pilot, source, len(events))      # once the round ends, elapsed stays and the ETA goes
        assert "left" not in screen_text(app).splitlines()[0]


async def test_a_matrix_rounds_cells_fill_in_as_they_are_decided(recorded):
    at = index_of(recorded, lambda e: isinstance(e, ev.VerdictReady))
    looks = [ev.CellsStep(pair=k, cells=[
        {"key": "depth=1024", "role": "scored", "state": "accepted" if k > 1 else "open", "pairs": k,
         "gain": 0.3, "interval": [0.12, 0.5] if k > 1 else [None, None], "tier": "l" if k > 1 else None},
        {"key": "depth=4096", "role": "scored", "state": "open", "pairs": k, "gain": -0.05,
         "interval": [-0.2, 0.1], "tier": None}]) for k in (1, 2)]
    events = recorded[:at] + looks + recorded[at:]
    app, source = _app(events)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, source, at - 1)
        panel = app.dashboard.query_one(CellsPanel)
        assert not panel.display                 # a one-cell round never shows it
        await feed(pilot, source, at + 1)
        assert panel.display and panel.border_subtitle == "after pair 1"
        await feed(pilot, source, at + 2)
        assert panel.border_subtitle == "after pair 2" and panel.cells[0].state == "accepted"
        text = screen_text(app)
        assert "depth=1024" in text and "accepted l" in text and "+12.0%" in text
