"""A capacity search as `console sweep --capacity` runs it: the command's refusals, the sweep kind's
loop over the stepper's levels (blocks simulated), its live lines, its document section and page."""
from __future__ import annotations

import argparse
from dataclasses import replace
from types import SimpleNamespace

import pytest

from console import commands
from console.core.decisions import capacity as cap
from console.core.decisions.sweep import Level
from console.errors import UsageError
from console.paths import profile_arg
from console.profile import load_profile
from console.reports.sweep_html import render_sweep
from console.round import kinds
from console.round.kinds.sweep import Sweep

PROFILE = profile_arg("llama-server")


def _args(**kw) -> argparse.Namespace:
    base = {"profile": PROFILE, "capacity": True, "rate": "0.5,8", "concurrency": None, "blocks": 4,
            "budget": None, "resolution": None, "alpha": None}
    return argparse.Namespace(**{**base, **kw})


def test_a_capacity_search_needs_slo_targets_and_two_ends():
    p = load_profile(PROFILE)
    opts = commands._capacity_search(p, _args(budget=6))
    assert opts["capacity"].budget == 6 and opts["levels"] == (Level(p.server.concurrency, 0.5),
                                                                Level(p.server.concurrency, 8.0))
    bare = replace(p, server=replace(p.server, slo={}))
    with pytest.raises(UsageError, match="no SLO targets"):
        commands._capacity_search(bare, _args())
    with pytest.raises(UsageError, match="two levels"):
        commands._capacity_search(p, _args(rate="1,2,4"))


def _fake_round(p, events):
    """What the kind's loop reads of a round: its profile, its events, the servers' load."""
    return SimpleNamespace(p=p, emit=events.append, servers=SimpleNamespace(load=None), check_abort=lambda: None)


def test_the_sweep_kind_measures_the_levels_the_stepper_picks(monkeypatch):
    p = load_profile(PROFILE)
    p = replace(p, server=replace(p.server, slo={"ttft_ms": 1000.0}))
    search = cap.Search(0.5, 8.0, budget=6)
    sweep = kinds.named("sweep", levels=(Level(4, 0.5), Level(4, 8.0)), blocks=2, capacity=search)
    assert isinstance(sweep, Sweep) and sweep.slots(p) == 4
    plan = sweep.plan({"reps": 0}, p)
    assert plan["reps"] == 6 * 3 and plan["capacity"]["axis"] == "rate"

    def blocks(self, rnd, b, receipt, level, budget, position, reps):
        # main's p99 TTFT 400 ms per request/s, the candidate's half: capacities 2.5 and 5 req/s
        for k in range(self.blocks):
            for build, per in (("main", 400.0), ("candidate", 200.0)):
                reps[(build, k)] = SimpleNamespace(reported={"p99_ttft_ms": per * level.rate * (1 + 0.01 * k),
                                                             "requests": [], "duration": 1.0})
        return position + 2 * (self.blocks + 1)
    monkeypatch.setattr(Sweep, "_level", blocks)
    events = []
    sweep.timed(_fake_round(p, events), None, None)
    result = sweep.found[-1]
    assert len(result.levels) <= 6 and [e.sentence.split(":")[0] for e in events
                                        if hasattr(e, "sentence")][:2] == [Level(4, 0.5).said, Level(4, 8.0).said]
    said = [e.sentence for e in events if hasattr(e, "sentence")]
    assert "SLO: main holds" in said[0] and "candidate fails" in said[1]
    br = result.brackets()
    assert br["main"].low <= 2.5 < br["main"].high and br["candidate"].low <= 5 < br["candidate"].high
    doc = result.to_dict(name=lambda x: sweep.level_at(x, p).name)
    assert doc["levels"][0]["name"] == "r0.5" and doc["axis"] == "rate"
    page = render_sweep({"round_id": "r1", "levels": [], "slo_ms": {"ttft_ms": 1000}, "server_slots": 4,
                         "receipt": {"profile": {"name": "llama-server"}}, "refused": [], "capacity": doc})
    assert "Capacity at the SLO (ttft_ms ≤ 1000)" in page and page.count("<tr><td>r") == len(result.levels)
    assert doc["change"]["said"] in page


def test_a_concurrency_search_runs_levels_as_concurrencies():
    p = load_profile(PROFILE)
    sweep = kinds.named("sweep", **commands._capacity_search(p, _args(rate=None, concurrency="1,16")))
    assert sweep.slots(p) == 16 and sweep.level_at(4.0, p) == Level(4)
