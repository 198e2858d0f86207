"""Capacity at the SLO (core.decisions.capacity): the saturation guard, one level's call, the
brackets, the change and the search's stepper."""
from __future__ import annotations

import heapq
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.decisions import capacity as cap
from console.core.decisions.sweep import Level

SLO = {"ttft_ms": 1000.0, "tpot_ms": 100.0}


def client_block(rate: float, n: int, slots: int, seed: int, service_s: float = 1.0) -> list[dict]:
    """A block as the load client records it at an arrival rate, against a server of ``slots`` slots
    with at most ``slots`` in flight: a request waits for its arrival, then for a free slot."""
    rng = random.Random(seed)
    ends: list[float] = []
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        while ends and ends[0] <= t:
            heapq.heappop(ends)
        sent = t if len(ends) < slots else heapq.heappop(ends)
        first = sent + 0.1 * service_s * rng.lognormvariate(0, 0.2)
        end = first + 0.9 * service_s * rng.lognormvariate(0, 0.1)
        heapq.heappush(ends, end)
        out.append({"index": i, "due_s": t, "sent_s": sent, "first_token_s": first, "end_s": end,
                    "max_tokens": 16, "output_tokens": 16})
    return out


def capacity_of(slots: int, service_s: float = 1.0) -> float:
    return slots / service_s


# --- the saturation guard ---------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([1, 4, 8]))
def test_a_block_far_under_capacity_is_never_saturated(seed, slots):
    g = cap.saturation(client_block(0.5 * capacity_of(slots), 64, slots, seed))
    assert g.judged and g.open_loop and not g.saturated and g.growth < cap.GROWTH


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([1, 4, 8]))
def test_a_block_at_twice_capacity_is_always_saturated(seed, slots):
    g = cap.saturation(client_block(2.0 * capacity_of(slots), 64, slots, seed))
    assert g.saturated and g.growth >= cap.GROWTH and "grew without bound" in g.said
    assert g.kept_pace < 0.9         # completions fell behind the offered rate


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0.01, 50)), min_size=1, max_size=40))
def test_a_closed_loop_is_never_marked(times):
    reqs = [{"due_s": 0.0, "sent_s": s, "first_token_s": s + d, "end_s": s + 2 * d} for s, d in times]
    g = cap.saturation(reqs)
    assert not g.saturated and g.judged and not g.open_loop and "closed loop" in g.said


def test_too_few_requests_are_not_judged_and_bad_records_are_refused():
    g = cap.saturation(client_block(1.0, cap.MIN_REQUESTS - 1, 1, 1))
    assert not g.judged and not g.saturated and "too few" in g.said
    with pytest.raises(ValueError, match="due_s must be a finite number"):
        cap.saturation([{"due_s": "soon", "first_token_s": 1.0}])
    with pytest.raises(ValueError, match="list of request records"):
        cap.saturation("not a block")


def test_a_burst_of_arrivals_alone_does_not_set_the_trend():
    # a steady block whose last request waited long: the robust slope barely moves
    reqs = client_block(0.3, 32, 4, 7)
    reqs[-1] = {**reqs[-1], "first_token_s": reqs[-1]["first_token_s"] + 30.0}
    assert not cap.saturation(reqs).saturated


# --- one level's call ----------------------------------------------------------------------

def blocks(ttft_ms, tpot_ms=50.0, rate=0.0, sat=()):
    out = []
    for k, t in enumerate(ttft_ms):
        reqs = client_block(rate, 16, 4, k) if rate else [{"due_s": 0.0, "first_token_s": 0.1}] * 16
        if k in sat:
            reqs = client_block(8.0, 64, 4, k)
        out.append({"p99_ttft_ms": t, "p99_tpot_ms": tpot_ms, "goodput": 2.0 + k, "requests": reqs})
    return out


def test_a_level_holds_fails_or_is_unsure_by_its_bounds():
    assert cap.level_call(blocks([400, 420, 390, 410]), SLO, 0.01).call == cap.HOLDS
    assert cap.level_call(blocks([3000, 3100, 2900, 3050]), SLO, 0.01).call == cap.FAILS
    near = cap.level_call(blocks([700, 1300, 900, 1200]), SLO, 0.01)
    assert near.call == cap.UNSURE and near.bounds[0].low < 1000 < near.bounds[0].high
    assert cap.level_call(blocks([400, 410], tpot_ms=300.0), SLO, 0.01).call == cap.FAILS
    c = cap.level_call(blocks([400, 420, 390, 410]), SLO, 0.01)
    assert [b.figure for b in c.bounds] == ["p99_ttft_ms", "p99_tpot_ms"] and c.blocks == 4
    assert c.goodput == pytest.approx(math.exp(np.mean(np.log([2, 3, 4, 5]))))
    assert "holds" in cap.call_sentence("main", c) and "TTFT p99" in cap.call_sentence("main", c)


def test_a_saturated_block_keeps_a_level_from_holding_and_most_of_them_fail_it():
    one = cap.level_call(blocks([400, 420, 390, 410], rate=0.5, sat=(2,)), SLO, 0.01)
    assert one.call == cap.UNSURE and one.saturation[2].saturated and "block 3" in one.reasons[0]
    most = cap.level_call(blocks([400, 420, 390, 410], rate=0.5, sat=(0, 1, 2)), SLO, 0.01)
    assert most.call == cap.FAILS
    assert "saturated block(s) 1, 2, 3" in cap.call_sentence("candidate", most)


def test_a_block_without_a_figure_or_a_single_block_decides_nothing():
    b = blocks([400, 420, 390, 410])
    b[1] = {**b[1], "p99_ttft_ms": None}
    assert cap.level_call(b, SLO, 0.01).call == cap.UNSURE
    assert cap.level_call(blocks([400]), SLO, 0.01).call == cap.UNSURE


def test_targets_are_checked():
    for slo, said in (({}, "no SLO targets"), ({"ttft": 1}, "unknown SLO key"), ({"ttft_ms": 0}, "positive")):
        with pytest.raises(ValueError, match=said):
            cap.level_call(blocks([1, 2]), slo, 0.01)
    with pytest.raises(ValueError, match="alpha"):
        cap.level_call(blocks([1, 2]), SLO, 1.5)


@pytest.mark.parametrize("truth, wrong", [(1000.0, cap.HOLDS), (1000.0, cap.FAILS)])
def test_a_level_call_is_wrong_at_most_at_its_rate_on_the_boundary(truth, wrong):
    # per-block p99s lognormal around the target itself: neither call is right there
    rng = np.random.default_rng(11)
    alpha, runs = 0.05, 4000
    hits = sum(cap.level_call(blocks(list(truth * np.exp(rng.normal(0, 0.3, 4)))), {"ttft_ms": truth},
                              alpha).call == wrong for _ in range(runs))
    assert hits / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


# --- brackets and the change ------------------------------------------------------------------

def test_a_bracket_reads_the_highest_hold_below_the_lowest_fail():
    b = cap.bracket({1: cap.HOLDS, 2: cap.HOLDS, 2.8: cap.UNSURE, 4: cap.FAILS, 8: cap.FAILS})
    assert (b.low, b.high, b.contradicted) == (2, 4, ())
    assert cap.bracket({1: cap.FAILS, 2: cap.FAILS}) == cap.Bracket(None, 1)
    assert cap.bracket({1: cap.HOLDS, 8: cap.HOLDS}) == cap.Bracket(8, None)
    odd = cap.bracket({1: cap.HOLDS, 2: cap.FAILS, 4: cap.HOLDS})
    assert (odd.low, odd.high, odd.contradicted) == (1, 2, (4,))
    assert "in [2, 4)" in b.to_dict()["said"] and "under 1" in cap.bracket_said(cap.Bracket(None, 1))


def test_the_change_is_decided_only_when_the_brackets_part():
    m = cap.Bracket(1.0, 2.0)
    assert cap.capacity_change(m, cap.Bracket(2.0, 4.0), 0.05).direction == cap.HIGHER
    assert cap.capacity_change(m, cap.Bracket(None, 1.0), 0.05).direction == cap.LOWER
    assert cap.capacity_change(m, cap.Bracket(1.4, 2.8), 0.05).direction == cap.UNDECIDED
    assert cap.capacity_change(cap.Bracket(8.0, None), cap.Bracket(8.0, None), 0.05).direction == cap.UNDECIDED


@given(st.floats(0.6, 7.0), st.floats(0.6, 7.0))
def test_right_calls_never_decide_a_change_the_wrong_way(c_main, c_cand):
    # every call right (holds below the capacity, fails above): a decided change has the true sign
    levels = [0.5, 0.7, 1, 1.4, 2, 2.8, 4, 5.6, 8]
    br = {b: cap.bracket({x: cap.HOLDS if x <= c else cap.FAILS for x in levels})
          for b, c in (("main", c_main), ("candidate", c_cand))}
    d = cap.capacity_change(br["main"], br["candidate"], 0.05).direction
    assert d == cap.UNDECIDED or (d == cap.HIGHER) == (c_cand > c_main)
    for b, c in (("main", c_main), ("candidate", c_cand)):
        assert br[b].low <= c and (br[b].high is None or c < br[b].high)


# --- the search --------------------------------------------------------------------------------

def oracle(c_main: float, c_cand: float):
    return lambda x: {"main": cap.HOLDS if x <= c_main else cap.FAILS,
                      "candidate": cap.HOLDS if x <= c_cand else cap.FAILS}


def walk(search: cap.Search, call) -> dict:
    calls: dict = {}
    while (x := cap.next_level(search, calls)) is not None:
        assert x not in calls and search.low <= x <= search.high
        calls[x] = call(x)
    return calls


def test_the_search_starts_at_its_ends_and_bisects_on_the_geometric_midpoint():
    s = cap.Search(0.5, 8.0)
    assert cap.next_level(s, {}) == 0.5 and cap.next_level(s, {0.5: {"main": "holds", "candidate": "holds"}}) == 8.0
    calls = {0.5: oracle(3, 3)(0.5), 8.0: oracle(3, 3)(8.0)}
    assert cap.next_level(s, calls) == 2.0
    assert s.alpha_per_call == pytest.approx(0.05 / 16)


@settings(max_examples=80, deadline=None)
@given(st.floats(0.55, 7.5), st.floats(0.55, 7.5))
def test_right_calls_bracket_both_capacities_within_the_resolution(c_main, c_cand):
    s = cap.Search(0.5, 8.0, budget=20, resolution=1.25)
    calls = walk(s, oracle(c_main, c_cand))
    for b, c in (("main", c_main), ("candidate", c_cand)):
        br = cap.bracket({x: by[b] for x, by in calls.items()})
        assert br.low <= c < br.high and br.ratio <= 1.25 * 1.01     # levels are rounded to 3 figures


@given(st.integers(1, 40), st.integers(1, 40))
def test_a_concurrency_search_stops_at_neighbouring_whole_numbers(c_main, c_cand):
    s = cap.Search(1, 48, whole=True, budget=30)
    calls = walk(s, oracle(c_main + 0.5, c_cand + 0.5))
    assert all(x == int(x) for x in calls)
    for b, c in (("main", c_main), ("candidate", c_cand)):
        br = cap.bracket({x: by[b] for x, by in calls.items()})
        assert br.low == c or br.high / br.low <= 1.25


def test_the_budget_ends_the_search_and_unsure_levels_are_bisected_around():
    s = cap.Search(0.5, 8.0, budget=4)
    assert len(walk(s, oracle(3, 3))) == 4
    assert "budget" in cap.step(s, walk(s, oracle(3, 3))).said
    unsure = walk(cap.Search(0.5, 8.0, budget=12), lambda x: {b: cap.UNSURE if 2 <= x <= 4 else
                                                              cap.HOLDS if x < 2 else cap.FAILS for b in cap.BUILDS})
    assert any(x < 2 for x in unsure if x != 0.5) and any(x > 4 for x in unsure if x != 8.0)


def test_a_search_past_either_end_stops_at_once():
    for c in (0.3, 20.0):
        calls = walk(cap.Search(0.5, 8.0), oracle(c, c))
        assert sorted(calls) == [0.5, 8.0]


def test_search_options_are_checked_with_what_was_expected():
    for kw, said in (({"low": 2, "high": 1}, "under its high end"), ({"low": 0, "high": 1}, "positive"),
                     ({"low": 1, "high": 2, "budget": 1}, "at least 2"), ({"low": 1, "high": 2, "resolution": 1},
                                                                         "ratio over 1"),
                     ({"low": 1.5, "high": 4, "whole": True}, "whole numbers"),
                     ({"low": 1, "high": 2, "alpha": 0}, "alpha")):
        with pytest.raises(ValueError, match=said):
            cap.Search(**kw)
    s, ends = cap.parse_search(None, "0.5,8", 4, budget=6)
    assert (s.low, s.high, s.whole, s.budget) == (0.5, 8.0, False, 6) and ends == (Level(4, 0.5), Level(4, 8.0))
    s, ends = cap.parse_search("1,16", None, 4)
    assert s.whole and ends == (Level(1), Level(16))
    with pytest.raises(ValueError, match="two levels"):
        cap.parse_search(None, "1,2,4", 4)


def test_run_calls_each_level_and_writes_the_section():
    heard = []

    def measure(x):
        return [({"p99_ttft_ms": 300 * x * f, "p99_tpot_ms": 20.0, "requests": []},
                 {"p99_ttft_ms": 150 * x * f, "p99_tpot_ms": 20.0, "requests": []}) for f in (0.98, 1.0, 1.02, 1.01)]
    r = cap.run(cap.Search(0.5, 16.0, budget=10), {"ttft_ms": 1000}, measure, lambda x, c: heard.append(x))
    assert list(r.levels) == heard and len(heard) <= 10
    br = r.brackets()
    assert br["main"].low < 1000 / 300 < br["main"].high and br["candidate"].low < 1000 / 150 < br["candidate"].high
    d = r.to_dict(name=lambda x: f"r{x:g}")
    assert d["change"]["direction"] == cap.HIGHER and d["alpha_per_call"] == pytest.approx(0.05 / 20)
    assert d["levels"][0]["name"] == "r0.5" and d["levels"][0]["main"]["call"] == cap.HOLDS
    assert d["capacity"]["main"]["capacity"] == br["main"].low and d["stopped"]
