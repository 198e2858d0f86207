"""The served tokens' ruling: departures past the margin, the candidate's rate against main's
(one-sided Fisher exact at the stated rate), main's own departures a warning, and the smallest
share of cheating requests the sample catches at 99 %."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from console.core import gate, served_tokens as stk
from console.core.served import GradedRequest, ServedCheck, ServedGrade


def req(build: str, gaps: list[float], i: int = 0) -> GradedRequest:
    """A request whose served token differs from the reference's wherever its gap is not 0."""
    return GradedRequest(build=build, phase="timed", block=i // 8, attempt=0, request=i % 8,
                         served=[100 + k for k in range(len(gaps))],
                         best=[100 + k if g == 0 else 7 for k, g in enumerate(gaps)], gap=gaps, prompt=[2, 5])


def grade(main_bad: int, cand_bad: int, n: int = 48, gap: float = 4.0) -> ServedGrade:
    reqs = [req("main", [gap if i < main_bad else 0.0] + [0.0] * 3, i) for i in range(n)]
    reqs += [req("candidate", [0.0, gap if i < cand_bad else 0.0, 0.0, 0.0], i) for i in range(n)]
    return ServedGrade(margin=1.0, false_reject=0.01, available={"main": n, "candidate": n}, requests=reqs)


def test_a_near_tie_inside_the_margin_agrees_and_anything_else_departs():
    assert stk.departures(req("main", [0.0, 0.4, 1.0]), 1.0) == []
    assert stk.departures(req("main", [0.0, 1.01, 0.0]), 1.0) == [1]
    assert stk.departures(req("main", [math.nan, math.inf, -0.5]), 1.0) == [0, 1, 2]
    short = GradedRequest("main", "timed", 0, 0, 0, served=[1, 2], best=[1], gap=[0.0])
    assert stk.departures(short, 1.0) == [0, 1]     # a grade that does not cover every token departs


def test_a_candidate_whose_requests_depart_under_load_is_rejected_with_the_first_named():
    r = stk.rule(grade(0, 20))
    assert r.candidate and not r.main and not r.uncertain
    assert "20 of 48 graded requests depart" in r.candidate[0] and "main's 0 of 48" in r.candidate[0]
    assert "timed block 0 request 0, token 1: served 101, the reference's 7, 4 nats below it" in r.candidate[0]
    assert r.table["candidate"]["rate"] == 20 / 48 and r.table["p_value"] < 0.01


def test_departures_no_more_often_than_mains_pass_and_mains_own_are_said():
    r = stk.rule(grade(3, 3))
    assert not r.candidate and r.main and r.uncertain
    assert stk.rule(grade(0, 0)).candidate == [] and stk.rule(grade(0, 0)).uncertain == []


def test_the_gate_rejects_through_the_server_record_and_an_ungraded_round_is_infra():
    reasons, warnings = [], []
    par = type("P", (), {"server": ServedCheck(graded=grade(2, 30))})()
    out = gate._grade_server(par, reasons, warnings)
    # (the check before timing has no sides here: "not checked" for each, beside the grading)
    assert [x.code for x in reasons if x.code != "server-check"] == ["served-tokens"]
    assert [w.message for w in warnings if w.code == "main-served-tokens"] == [
        "main's own server under load: 2 of 48 graded requests depart from the reference's tokens (timed block 0 "
        "request 0, token 0: served 100, the reference's 7, 4 nats below it)"]
    assert out["graded"]["main"]["departed"] == 2 and out["graded"]["candidate"]["departed"] == 30
    reasons = []
    g = grade(0, 0)
    g.error = "the grade command exited 3"
    gate._grade_server(type("P", (), {"server": ServedCheck(graded=g)})(), reasons, [])
    assert [(x.code, x.build) for x in reasons if x.code != "server-check"] == [("served-tokens-ungraded", None)]


def test_the_record_round_trips_through_the_receipt():
    g = grade(1, 2)
    assert ServedCheck.from_dict(ServedCheck(graded=g).to_dict()).graded == g
    assert "graded" not in ServedCheck().to_dict()      # rounds sealed before grading read the same


@settings(max_examples=60, deadline=None)
@given(n=st.integers(4, 96), km=st.integers(0, 4), alpha=st.sampled_from([0.01, 0.05]))
def test_the_stated_share_is_caught_99_percent_of_the_time_and_a_smaller_one_is_not(n, km, alpha):
    nm = 48
    f = stk.smallest_caught(n, (km, nm), alpha)
    k = stk.critical(n, (km, nm), alpha)
    if f is None:
        assert k is None or sps.binom.sf(k - 1, n, 1.0) < 0.99
        return
    assert stk.p_value((k, n), (km, nm)) <= alpha and (k == 1 or stk.p_value((k - 1, n), (km, nm)) > alpha)
    assert sps.binom.sf(k - 1, n, f) >= 0.99 - 1e-9 and sps.binom.sf(k - 1, n, f * 0.98) < 0.99


@settings(max_examples=80, deadline=None)
@given(main_bad=st.integers(0, 48), cand_bad=st.integers(0, 48))
def test_the_candidate_is_never_rejected_for_departing_no_more_than_main(main_bad, cand_bad):
    r = stk.rule(grade(main_bad, cand_bad))
    if cand_bad <= main_bad:
        assert not r.candidate
    assert bool(r.main) == (main_bad > 0)
