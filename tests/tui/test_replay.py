"""Replay: journals (torn tails included) and sealed receipts, paced or flat out."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from console import events as ev
import threading

from console.reports.replay import FollowSource, ListSource, ReplaySource, events_from_receipt
from console.tui.app import ConsoleApp

from core.receipts import default_rules
from core.receipts import make_receipt as sealed_receipt

from console.core.records.receipt import Rep

from .conftest import RECORDED, SIZE, frozen_clock, gate_verdict, recorded_receipt


def test_journal_replays_every_line():
    events = list(ReplaySource(RECORDED, speed=0).events())
    lines = RECORDED.read_text().splitlines()
    assert len(events) == len(lines)
    assert [e.to_dict() for e in events] == [json.loads(line) for line in lines]


def test_torn_last_line_is_dropped_with_a_notice(tmp_path: Path):
    lines = RECORDED.read_text().splitlines()
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(lines[:20]) + "\n" + lines[20][: len(lines[20]) // 2])
    events = list(ReplaySource(torn, speed=0).events())
    assert len(events) == 21
    assert isinstance(events[-1], ev.Notice) and events[-1].code == "journal-torn"


def test_corrupt_middle_line_is_an_error(tmp_path: Path):
    lines = RECORDED.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:5] + ["{not json"] + lines[5:10]) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:6"):
        list(ReplaySource(bad, speed=0).events())


def test_unknown_event_kind_is_skipped(tmp_path: Path):
    lines = RECORDED.read_text().splitlines()
    newer = tmp_path / "newer.jsonl"
    newer.write_text("\n".join(lines[:3] + ['{"kind": "from_the_future", "at": 1}']) + "\n")
    events = list(ReplaySource(newer, speed=0).events())
    assert len(events) == 4 and events[-1].code == "journal-unknown-event"


def test_pacing_caps_gaps_and_speed_scales():
    events = [ev.PhaseStarted(phase=p, at=t) for p, t in
              (("build", 0.0), ("parity", 100.0), ("reps", 100.2))]
    t0 = time.monotonic()
    list(ListSource(events, speed=1.0, max_gap=0.3).events())
    paced = time.monotonic() - t0
    assert 0.45 <= paced < 1.5  # 100 s capped to 0.3 s, then the real 0.2 s
    t0 = time.monotonic()
    list(ListSource(events, speed=4.0, max_gap=0.3).events())
    assert time.monotonic() - t0 < paced / 2


def test_abort_ends_a_replay_incomplete():
    events = [ev.PhaseStarted(phase="build", at=float(i)) for i in range(100)]
    source = ListSource(events, speed=1.0, max_gap=10.0)
    it = source.events()
    first = next(it)
    source.abort()
    rest = list(it)
    assert first.phase == "build"
    assert len(rest) == 1 and isinstance(rest[0], ev.RoundEnded)
    assert rest[0].status == "incomplete"


def test_receipt_synthesizes_the_round(recorded, tmp_path: Path):
    receipt = recorded_receipt(recorded)
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    events = list(ReplaySource(path, speed=0).events())
    kinds = [e.kind for e in events]
    assert kinds[0] == "round_started" and kinds[-2:] == ["verdict", "round_ended"]
    assert kinds.count("build_done") == 2
    assert kinds.count("depth_graded") == 14
    assert kinds.count("rep_done") == len(receipt["reps"]) == 26
    # every rep, in order, as the one reader of receipts reads it back
    assert [e.rep for e in events if isinstance(e, ev.RepDone)] == [Rep.from_dict(x) for x in receipt["reps"]]
    # the verdict is the gate's, re-derived under the rules the receipt records, and says nothing else
    assert events[-2].verdict == gate_verdict(receipt)
    assert not any(isinstance(e, ev.Notice) and e.code == "not-rederived" for e in events)
    assert events[-1].receipt_path == str(path) and events[-1].exit_code == gate_verdict(receipt).exit_code
    ats = [e.at for e in events]
    assert ats == sorted(ats)
    assert "recorded" not in {e.status for e in events if isinstance(e, ev.DepthGraded)}   # graded again


def test_a_verdict_the_gate_cannot_rederive_is_shown_as_stored_and_says_so(recorded, tmp_path: Path, monkeypatch):
    from console.core.decisions import gate
    from console.core.records.receipt import ReceiptError
    from console.reports.replay import NOT_REDERIVED
    receipt = recorded_receipt(recorded)
    stored = gate_verdict(receipt)
    receipt["verdict"] = stored.to_dict()
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))

    def cannot(*_):
        raise ValueError("a rule this version of the gate does not know")
    monkeypatch.setattr(gate, "decide", cannot)
    events = list(ReplaySource(path, speed=0).events())
    shown = events[-2].verdict
    want = stored.to_dict()
    assert shown.to_dict() == {**want, "warnings": want["warnings"] + [{"code": "not-rederived",
                                                                        "message": NOT_REDERIVED}]}
    assert any(isinstance(e, ev.Notice) and e.code == "not-rederived" for e in events)
    assert {e.status for e in events if isinstance(e, ev.DepthGraded)} == {"recorded"}     # nothing graded
    assert events[-1].exit_code == stored.exit_code
    del receipt["verdict"]          # nothing stored and nothing re-derived: nothing honest to show
    path.write_text(json.dumps(receipt))
    with pytest.raises(ReceiptError, match="cannot re-derive its verdict, and it stores none"):
        list(ReplaySource(path, speed=0).events())


async def _until_ended(app, pilot) -> None:
    for _ in range(200):
        if app.dashboard.ended is not None:
            return
        await pilot.pause(0.05)


async def test_receipt_replays_through_the_app(recorded, tmp_path: Path):
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(recorded_receipt(recorded)))
    app = ConsoleApp(ReplaySource(path, speed=0), clock=frozen_clock)
    async with app.run_test(size=SIZE) as pilot:
        await _until_ended(app, pilot)
        assert app.dashboard.verdict.label == "TIER M"
        assert app.dashboard.reps.row_count == 26
        await pilot.press("r")
        assert type(app.screen).__name__ == "ReceiptScreen"


async def test_sealed_receipt_shows_the_gates_verdict(tmp_path: Path):
    receipt = sealed_receipt(cand=(200.0, 201.0, 199.5, 200.5, 200.2))  # no gain: the gate says none
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    expected = gate_verdict(receipt, default_rules())  # the rules the receipt records
    assert expected.outcome == "none"
    events = list(ReplaySource(path, speed=0).events())
    assert next(e for e in events if isinstance(e, ev.VerdictReady)).verdict == expected
    app = ConsoleApp(ReplaySource(path, speed=0), clock=frozen_clock)
    async with app.run_test(size=SIZE) as pilot:
        await _until_ended(app, pilot)
        assert app.dashboard.verdict.verdict == expected
        assert app.dashboard.verdict.label == "NONE"
        assert app.dashboard.ended.exit_code == expected.exit_code


def test_receipt_without_optional_parts():
    receipt = sealed_receipt()
    for key in ("started_at", "ended_at", "status", "runtime", "host", "preflight", "builds", "lock", "summary"):
        del receipt[key]
    receipt["parity"] = {}
    events = list(events_from_receipt(receipt))
    assert [e.kind for e in events][-2:] == ["verdict", "round_ended"]
    assert events[-2].verdict == gate_verdict(receipt, default_rules())


def test_a_receipt_this_version_cannot_read_is_an_error_that_names_it_and_why(tmp_path: Path):
    from console.core.records.receipt import SCHEMA, ReceiptError
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps({"round_id": "x", "reps": [{"build": "main"}]}))
    with pytest.raises(ReceiptError, match=f"{path} is not a receipt this version can read: unknown receipt schema None"):
        list(ReplaySource(path, speed=0).events())
    with pytest.raises(ReceiptError, match="records no gate rules"):     # never judged under rules made up here
        list(events_from_receipt({"schema": SCHEMA, "round_id": "x", "reps": [{"build": "main"}]}))


def test_following_a_journal_shows_lines_as_they_land_and_ends_with_the_round(tmp_path: Path):
    lines = RECORDED.read_text().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_text("".join(lines[:10]) + lines[10][:15])        # a line half written

    def writer():                                               # the round, writing on
        time.sleep(0.3)
        with live.open("a") as f:
            f.write(lines[10][15:])
            for line in lines[11:]:
                f.write(line)
                f.flush()
    t = threading.Thread(target=writer)
    t.start()
    got = list(FollowSource(live, poll_s=0.02).events())
    t.join()
    assert [e.to_dict() for e in got] == [json.loads(x) for x in lines]    # every line once, none torn
    assert isinstance(got[-1], ev.RoundEnded) and got[-1].status != "incomplete"


def test_following_a_round_that_died_ends_incomplete_and_says_so(tmp_path: Path):
    lines = RECORDED.read_text().splitlines(keepends=True)
    dead = tmp_path / "dead.jsonl"
    dead.write_text("".join(lines[:12]))
    got = list(FollowSource(dead, alive=lambda: False, poll_s=0.01).events())
    assert len(got) == 13 and got[-1].status == "incomplete" and "killed" in got[-1].message


def test_leaving_a_followed_round_stops_only_the_viewer(tmp_path: Path):
    live = tmp_path / "live.jsonl"
    live.write_text(RECORDED.read_text().splitlines(keepends=True)[0])
    src = FollowSource(live, poll_s=0.01)
    it = src.events()
    next(it)
    src.abort()
    end = next(it)
    assert end.status == "incomplete" and "goes on" in end.message


def test_a_sealed_receipt_replays_as_plain_events_with_its_plan(tmp_path: Path):
    """A receipt read with its seal is frozen (read-only mappings inside); what a replay makes of
    it is plain JSON again: every event writes to a journal, and the plan is replayed."""
    from console.core.decisions import gate
    from console.core.records.receipt import Receipt
    from console.core.records.verdict import VerdictRecord
    from console.reports.export.summary import markdown_summary
    preview = {"sd": 0.02, "sd_source": "node record", "max_pairs": 32, "decidable_gain": 0.03,
               "min_gain_pairs": 12, "false_accept": 0.01, "miss": 0.05}
    receipt = sealed_receipt(cand=(220.0, 221.0, 219.5, 220.5, 220.2),
                             sequential={"prior": [], "experiment": "e", "preview": preview, "stopped": "decided"})
    receipt["verdict"] = gate.decide(Receipt.from_dict(receipt), default_rules()).to_dict()
    receipt["seal"] = {"sha256": "0" * 64, "prev": None}
    r = Receipt.from_dict(receipt)
    assert r.sequential is not None and not isinstance(r.sequential.preview, dict)    # frozen
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    events = list(ReplaySource(path, speed=0).events())
    for e in events:
        json.dumps(e.to_dict())
    [plan] = [e for e in events if isinstance(e, ev.PlanReady)]
    assert plan.preview == preview
    assert "Planned from the node's noise (2.0%, node record)" in markdown_summary(r, VerdictRecord.from_dict(
        receipt["verdict"]))
