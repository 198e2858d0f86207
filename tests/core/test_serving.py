"""The serving rules (core.serving) and how the gate applies them: the server check before timing,
the latency guards over the timed blocks, and no wall-clock differential for console-timed blocks."""
from __future__ import annotations

import math

from hypothesis import given, strategies as st

from console.core.decisions import counting, gate
from console.core.records.receipt import Receipt
from console.core.records.rules import GateRules, LatencyGuard
from console.core.records.served import Completion, ServedCheck, ServedSide
from console.core.decisions.serving import LATENCIES, agreed, cache_problem, latency_rows, side_problems

from .receipts import make_receipt

REF = [[1, 2, 3, 4]] * 8


def _side(tokens=None, probe=(1.0, 1.0, 0.98, 1.02), error="") -> ServedSide:
    tokens = tokens or REF
    return ServedSide(asked=4, completions=[Completion(position=16 * (i + 1), tokens=list(t), reference=list(r))
                                            for i, (t, r) in enumerate(zip(tokens, REF))],
                      probe_ttft_s=list(probe), ready_s=1.0, error=error)


def test_a_server_that_agrees_and_recomputes_a_repeat_passes():
    assert side_problems(_side(), 0.75, 0.5) == []


def test_only_the_first_token_is_graded_and_one_flip_in_eight_is_within_the_tolerance():
    later = [[1, 2, 9, 9]] * 8          # near-ties later in the continuation: not graded
    assert side_problems(_side(later), 0.75, 0.5) == []
    assert agreed(_side(later)) == (16, 32)
    one = [[1, 2, 3, 4]] * 7 + [[9, 2, 3, 4]]
    assert side_problems(_side(one), 0.75, 0.5) == []
    three = [[1, 2, 3, 4]] * 5 + [[9, 9, 9, 9]] * 3
    [problem] = side_problems(_side(three), 0.75, 0.5)
    assert problem == ("5 of 8 greedy completions start with the reference's token (at least 75% needed); "
                       "the first that does not is at position 96")


def test_a_server_that_stops_early_is_named_even_when_what_it_said_agrees():
    half = [[1, 2]] * 8
    [problem] = side_problems(_side(half), 0.75, 0.5)
    assert problem == ("stopped early: 2 of 4 tokens at position 16 (8 of 8 completions short), "
                       "reported as complete")


def test_a_repeat_answered_from_a_cache_is_refused_with_its_figures():
    [problem] = side_problems(_side(probe=(0.9, 0.05, 0.04, 0.05)), 0.75, 0.5)
    assert problem.startswith("answered a repeated prompt from a cache: time to first token 900 ms the first "
                              "time, 50 ms (median) on 3 repeats")


@given(st.floats(0.01, 10), st.lists(st.floats(0.01, 10), min_size=1, max_size=6), st.floats(0.05, 0.95))
def test_the_cache_probe_refuses_exactly_when_the_median_repeat_is_under_the_share(first, again, ratio):
    import statistics
    said = cache_problem([first, *again], ratio)
    assert (said is not None) == (statistics.median(again) < ratio * first)


def test_a_server_that_could_not_be_checked_says_why_and_an_unchecked_one_fails():
    assert side_problems(_side(error="main's server exited; its log ends: boom"), 0.75, 0.5) == [
        "main's server exited; its log ends: boom"]
    assert side_problems(None, 0.75, 0.5) == ["the server was not checked"]


def _figures(ttft: float, itl: float) -> dict:
    return {"p99_ttft_ms": ttft, "p99_itl_ms": itl}


def test_a_decided_latency_rise_past_the_allowed_share_is_a_breach():
    pairs = [(_figures(100, 10), _figures(150 + i, 10.1)) for i in range(6)]
    rows = latency_rows(pairs, [LatencyGuard("ttft_p99_ms", 0.25), LatencyGuard("itl_p99_ms", 0.25)], 0.01)
    assert rows["ttft_p99_ms"]["status"] == "breach" and rows["ttft_p99_ms"]["lower"] > 1.25
    assert rows["itl_p99_ms"]["status"] == "pass" and math.isclose(rows["itl_p99_ms"]["ratio"], 1.01)


def test_a_noisy_rise_that_may_or_may_not_pass_the_share_is_uncertain_and_one_pair_is_unmeasured():
    noisy = [(_figures(100, 10), _figures(v, 10)) for v in (90, 180, 100, 170)]
    assert latency_rows(noisy, [LatencyGuard("ttft_p99_ms", 0.25)], 0.01)["ttft_p99_ms"]["status"] == "uncertain"
    one = latency_rows(noisy[:1], [LatencyGuard("ttft_p99_ms", 0.25)], 0.01)["ttft_p99_ms"]
    assert (one["status"], one["pairs"]) == ("unmeasured", 1)


def test_every_latency_a_profile_may_guard_is_a_figure_of_a_block():
    from console.serving.client import Block, RequestRecord
    from console.serving.metrics import summarize_block
    rec = RequestRecord(index=0, input_tokens=4, max_tokens=3, sent_s=0.0, first_token_s=0.1,
                        token_s=[0.1, 0.2, 0.3], output_tokens=3, chunks=3, status=200, end_s=0.3)
    fig = summarize_block(Block([rec], 0.3, "", 1))
    assert all(fig[k] is not None for k in LATENCIES.values())


# --- through the gate --------------------------------------------------------------------

def _receipt(check: ServedCheck, rules: GateRules, cand_ttft: float = 100.0) -> dict:
    """A complete round receipt (tests/core/receipts.py) made a serving round's: blocks as timed reps,
    each with its TTFT p99, and the server check on the parity record."""
    d = make_receipt(rules=rules)
    d["profile"]["bench"] = {"mode": "serve", "metric": "output_tok_s"}
    d["parity"]["server"] = check.to_dict()
    d["reps"] = [r for r in d["reps"] if r["phase"] in ("warmup", "timed")]
    for r in d["reps"]:
        r.update(context="serve", depth=0, peak_mem_bytes=None)
        r["reported"] = {"tokens": r["tokens"], "elapsed_s": r["reported"]["elapsed_s"],
                         "p99_ttft_ms": 100.0 if r["build"] == "main" else cand_ttft + r["index"] % 3}
    return d


def test_the_gate_rejects_a_candidate_whose_server_fails_its_check_and_only_warns_for_main():
    check = ServedCheck(main=_side(probe=(1, 0.1, 0.1)), candidate=_side([[1, 2]] * 8))
    v = gate.decide(Receipt.from_dict(_receipt(check, GateRules())), GateRules())
    assert v.outcome == "rejected"
    assert [x.code for x in v.reasons][:1] == ["server-check"]
    assert "main-server-check" in [w.code for w in v.warnings]
    assert v.parity["server"]["candidate"]["status"] == "fail"


def test_a_serving_round_has_no_wall_clock_differential_and_its_latency_guard_can_reject():
    ok = ServedCheck(main=_side(), candidate=_side())
    rules = GateRules(latency=(LatencyGuard("ttft_p99_ms", 0.25),))
    fine = gate.decide(Receipt.from_dict(_receipt(ok, rules)), rules)
    assert fine.outcome in ("accepted", "undecided") and not any(x.code.startswith("claim") for x in fine.reasons)
    assert fine.speed.guards["latency:ttft_p99_ms"]["status"] == "pass"
    assert counting.counted(Receipt.from_dict(_receipt(ok, rules)), rules).differential == {"checked": False,
                                                                     "why": "measured by the console's load client"}
    slow = gate.decide(Receipt.from_dict(_receipt(ok, rules, cand_ttft=200.0)), rules)
    assert slow.outcome == "rejected" and slow.reasons[0].code == "latency-breach"
    assert "ttft_p99_ms: the candidate's is +" in slow.reasons[0].message
