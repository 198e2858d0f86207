"""The served tokens' ruling: departures past the margin, the candidate's rate against main's
(one-sided Fisher exact at the stated rate), main's own departures a warning, and the smallest
share of cheating requests the sample catches at 99 %."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from console.core.decisions import parity_grade, served_tokens as stk
from console.core.records.served import GradedRequest, ServedCheck, ServedGrade


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
    out = parity_grade.grade_server(par, reasons, warnings)
    # (the check before timing has no sides here: "not checked" for each, beside the grading)
    assert [x.code for x in reasons if x.code != "server-check"] == ["served-tokens"]
    assert [w.message for w in warnings if w.code == "main-served-tokens"] == [
        "main's own server under load: 2 of 48 graded requests depart from the reference's tokens (timed block 0 "
        "request 0, token 0: served 100, the reference's 7, 4 nats below it)"]
    assert out["graded"]["main"]["departed"] == 2 and out["graded"]["candidate"]["departed"] == 30
    reasons = []
    g = grade(0, 0)
    g.error = "the grade command exited 3"
    parity_grade.grade_server(type("P", (), {"server": ServedCheck(graded=g)})(), reasons, [])
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


# --- what was served is the console's to establish ------------------------------------------

def counted(g: ServedGrade, main: tuple[int, list[str]], cand: tuple[int, list[str]]) -> ServedGrade:
    g.counted = {"main": main[0], "candidate": cand[0]}
    g.ungradable = {b: why for b, (_, why) in (("main", main), ("candidate", cand)) if why}
    return g


def test_a_candidate_that_serves_responses_the_console_cannot_grade_is_rejected_with_both_counts():
    g = counted(grade(0, 0, n=16), (16, []), (64, ["timed block 2 request 5: its stream carried no token ids"] * 48))
    r = stk.rule(g)
    assert r.candidate == ["16 of the 64 responses of its counted timed blocks could be graded (48 carried no "
                           "usable token ids; first: timed block 2 request 5: its stream carried no token ids)"]
    assert not r.main_broken
    assert stk.rule(counted(grade(0, 0, n=16), (16, []), (16, []))).candidate == []


def test_mains_ungradable_responses_make_the_round_infra_not_a_pass():
    g = counted(grade(0, 0, n=16), (17, ["timed block 0 request 3: it failed"]), (16, []))
    reasons, warnings = [], []
    parity_grade.grade_server(type("P", (), {"server": ServedCheck(graded=g)})(), reasons, warnings)
    [main] = [x for x in reasons if x.code == "served-tokens-main"]
    assert main.build is None and main.message.startswith("main's own server under load: 16 of the 17 responses")


# --- served tokens graded as parity grades ------------------------------------------------

def like_parity(g: ServedGrade) -> ServedGrade:
    g.agree_min, g.gap_max, g.gap_floor, g.ratchet = 0.84, 0.10, 0.05, 2.0
    return g


def near_ties(build: str, every: int, gap: float, n: int = 48) -> list[GradedRequest]:
    """``n`` requests of 8 tokens, every ``every``-th token a near-tie ``gap`` nats below the argmax."""
    return [req(build, [gap if (8 * i + k) % every == 0 else 0.0 for k in range(8)], i) for i in range(n)]


def graded_like_parity(main: list[GradedRequest], cand: list[GradedRequest]) -> ServedGrade:
    return like_parity(ServedGrade(margin=2.0, false_reject=0.01, available={"main": len(main), "candidate": len(cand)},
                                   requests=main + cand))


def test_a_candidate_systematically_worse_within_the_margin_is_rejected_by_the_ratchet():
    # no token departs (every gap is inside the 2-nat margin), yet a third of its tokens are not the
    # reference's choice, at 0.24 nats on average: 12x main's
    r = stk.rule(graded_like_parity(near_ties("main", 32, 0.6), near_ties("candidate", 3, 0.7)))
    assert r.table["candidate"]["departed"] == 0 and r.table["main"]["departed"] == 0
    assert r.table["main"]["agreement"] == 1 - 1 / 32 and round(r.table["candidate"]["mean_gap"], 3) == 0.233
    assert any("over the bar 0.1" in x for x in r.candidate), r.candidate
    assert not any("ratchet" in x for x in r.candidate)           # over the bar it has already failed
    # under the bars but from the floor on, twice main's: the ratchet alone rejects
    r = stk.rule(graded_like_parity(near_ties("main", 32, 0.6), near_ties("candidate", 8, 0.5)))
    assert len(r.candidate) == 1 and "0.0625 nats below" in r.candidate[0] and "3.3x main's 0.0187" in r.candidate[0]


def test_an_honest_candidate_like_the_newer_release_passes_and_mains_own_failures_are_said():
    # 0.3.36 against 0.3.16 on this node: about 6.5 % and 4.3 % near-ties, each well inside the margin
    r = stk.rule(graded_like_parity(near_ties("main", 23, 0.35), near_ties("candidate", 15, 0.45)))
    assert r.candidate == [] and r.main == []
    r = stk.rule(graded_like_parity(near_ties("main", 4, 1.5), near_ties("candidate", 4, 1.5)))
    assert r.main and all("bar" in x for x in r.main) and r.candidate    # both over the bars: said for both
    assert not any("ratchet" in x for x in r.candidate)                  # no worse than main's


@settings(max_examples=80, deadline=None)
@given(m_every=st.integers(2, 64), c_every=st.integers(2, 64), m_gap=st.floats(0.0, 2.0), c_gap=st.floats(0.0, 2.0))
def test_the_ratchet_never_rejects_a_candidate_no_worse_than_main_or_under_the_floor(m_every, c_every, m_gap, c_gap):
    g = graded_like_parity(near_ties("main", m_every, m_gap), near_ties("candidate", c_every, c_gap))
    s = stk.sides(g)
    ratchet = any("ratchet" in x for x in stk.rule(g).candidate)
    c, m = s["candidate"].mean_gap, s["main"].mean_gap
    assert ratchet == (0.05 <= c <= 0.10 and c >= 2.0 * m)
    if s["candidate"].mean_gap <= s["main"].mean_gap or s["candidate"].mean_gap < 0.05:
        assert not ratchet


# --- before the blocks and around them ------------------------------------------------------

def test_a_candidate_that_works_long_before_it_is_ready_is_said_with_both_figures():
    from console.core.decisions.serving import ready_work
    from console.core.records.served import ServedSide
    main, cand = ServedSide(ready_s=1.2, ready_cpu_s=0.9), ServedSide(ready_s=31.0, ready_cpu_s=29.5)
    said = ready_work(main, cand)
    assert said.startswith("the candidate's server spent 29.5 CPU seconds before it was ready (31.0 s wall), "
                           "main's 0.9 (1.2 s)")
    assert ready_work(main, ServedSide(ready_s=1.5, ready_cpu_s=4.0)) is None     # 4.4x, but 3.1 s more
    assert ready_work(ServedSide(ready_s=20, ready_cpu_s=20.0), ServedSide(ready_s=30, ready_cpu_s=30.0)) is None
    assert ready_work(main, ServedSide()) is None and ready_work(main, main) is None


def test_a_revealed_seed_that_is_not_the_committed_one_is_infra_and_a_public_workload_is_said():
    from console.core.records.served import WorkloadDraw, commitment_of
    good = WorkloadDraw(seed="ab" * 16, commitment=commitment_of("ab" * 16), drawn=4, space_log10=21.6)
    assert good.holds() and ServedCheck.from_dict(ServedCheck(workload=good).to_dict()).workload == good
    warnings = []
    parity_grade.grade_server(type("P", (), {"server": ServedCheck(workload=good)})(), [], warnings)
    assert not [w for w in warnings if w.code.startswith("workload")]
    public = WorkloadDraw(seed="ab" * 16, commitment=good.commitment, drawn=0)
    parity_grade.grade_server(type("P", (), {"server": ServedCheck(workload=public)})(), [], warnings)
    [w] = [w for w in warnings if w.code == "workload-public"]
    assert "each was public before the round" in w.message
    reasons = []
    bad = WorkloadDraw(seed="cd" * 16, commitment=good.commitment)
    parity_grade.grade_server(type("P", (), {"server": ServedCheck(workload=bad)})(), reasons, [])
    [x] = [x for x in reasons if x.code == "workload-commitment"]
    assert x.build is None and "is not the one whose sha256" in x.message


# --- decided against main on the same requests (receipts with ``paired``) ---------------------

def paired(main: list[GradedRequest], cand: list[GradedRequest]) -> ServedGrade:
    g = graded_like_parity(main, cand)
    g.paired = True
    return g


def test_paired_the_newer_release_passes_and_a_systematically_worse_candidate_is_rejected_against_main():
    # the same figures as the ratchet's tests above: an honest release about twice main's gap passes,
    # because main's own gap (its server against its build) at its upper bound allows it
    r = stk.rule(paired(near_ties("main", 23, 0.35), near_ties("candidate", 15, 0.45)))
    assert r.candidate == [] and [x["figure"] for x in r.table["paired"]] == ["gap", "disagreement"]
    r = stk.rule(paired(near_ties("main", 32, 0.6), near_ties("candidate", 8, 0.5)))
    assert len(r.candidate) == 2 and all("on the same requests as main" in x for x in r.candidate), r.candidate
    assert "more than 2x main's own 0.0187 nats" in r.candidate[0]


def test_paired_figures_need_two_pairs_and_read_only_requests_both_builds_served():
    main = near_ties("main", 32, 0.6, n=8)                  # one block: one pair
    r = stk.rule(paired(main, near_ties("candidate", 2, 1.5, n=8)))
    assert all(x["pairs"] == 1 for x in r.table["paired"]) and not any("same requests" in x for x in r.candidate)
    # a candidate request main has no grade for is left out of the pair, not held against either build
    extra = [req("candidate", [1.9] * 8, i) for i in range(48, 56)]
    base = stk.paired(paired(near_ties("main", 32, 0.6), near_ties("candidate", 32, 0.6)))
    with_extra = stk.paired(paired(near_ties("main", 32, 0.6), near_ties("candidate", 32, 0.6) + extra))
    assert [p.to_dict() for p in base] == [p.to_dict() for p in with_extra]


@settings(max_examples=60, deadline=None)
@given(every=st.integers(2, 64), gap=st.floats(0.0, 1.9))
def test_paired_never_rejects_a_candidate_that_served_what_main_served(every, gap):
    g = paired(near_ties("main", every, gap), near_ties("candidate", every, gap))
    assert not any("same requests" in x for x in stk.rule(g).candidate)
