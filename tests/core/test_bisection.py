"""Bisection's rules: which item next, what the marks show, the rate split, outcomes to marks."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from console.core.provenance import bisection as B
from console.core.provenance.bisection import Mark
from console.core.records.rules import GateRules


def _walk(n: int, first_bad: int, unjudged: frozenset[int] = frozenset()) -> tuple[dict[int, Mark], list[int]]:
    """Bisect a range whose item i is bad iff i >= first_bad; items in ``unjudged`` are skips."""
    marks = {0: Mark.GOOD, n - 1: Mark.BAD}
    probes = []
    while (i := B.next_probe(n, marks)) is not None:
        assert i not in marks, "an item is never probed twice"
        probes.append(i)
        marks[i] = Mark.SKIP if i in unjudged else (Mark.BAD if i >= first_bad else Mark.GOOD)
    return marks, probes


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))))
def test_a_single_step_is_found_in_at_most_the_planned_probes(case):
    n, first_bad = case
    marks, probes = _walk(n, first_bad)
    c = B.conclude(n, marks)
    assert c.found and c.first_bad == first_bad and c.suspects == (first_bad,)
    assert c.last_good == first_bad - 1
    assert len(probes) <= B.planned_steps(n) - 2        # the ends' round and the check are the other two
    assert B.contradictions(marks) == []


@settings(max_examples=400, deadline=None)
@given(st.integers(3, 80).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(1, n - 1), st.frozensets(st.integers(1, n - 2), max_size=n // 2))))
def test_skips_leave_every_item_that_could_be_first_and_nothing_else(case):
    n, first_bad, skipped = case
    marks, probes = _walk(n, first_bad, skipped)
    c = B.conclude(n, marks)
    assert first_bad in c.suspects
    assert list(c.suspects) == list(range(c.suspects[0], c.suspects[-1] + 1)), "suspects are one run of items"
    assert all(i in skipped for i in c.suspects[:-1]), "only unjudged items share the blame"
    assert c.found == (len(c.suspects) == 1)
    assert len(probes) <= n - 2


def test_the_probe_is_the_untried_item_nearest_the_middle():
    assert B.next_probe(16, {0: Mark.GOOD, 15: Mark.BAD}) == 7
    assert B.next_probe(16, {0: Mark.GOOD, 15: Mark.BAD, 7: Mark.SKIP}) == 8     # a skipped midpoint's neighbour
    assert B.next_probe(16, {0: Mark.GOOD, 15: Mark.BAD, 7: Mark.GOOD}) == 11
    assert B.next_probe(3, {0: Mark.GOOD, 2: Mark.BAD, 1: Mark.UNDECIDED}) is None
    assert B.next_probe(2, {0: Mark.GOOD, 1: Mark.BAD}) is None


def test_a_bad_item_before_a_good_one_is_a_contradiction():
    marks = {0: Mark.GOOD, 9: Mark.BAD, 3: Mark.BAD, 6: Mark.GOOD}
    assert B.contradictions(marks) == [(3, 6)]
    assert B.conclude(10, marks).first_bad == 3      # read as one step, it would say 3: the driver refuses that


@pytest.mark.parametrize("outcome,direction,mark", [
    ("none", "slower", Mark.GOOD), ("slower", "slower", Mark.BAD), ("accepted", "slower", Mark.GOOD),
    ("undecided", "slower", Mark.UNDECIDED), ("rejected", "slower", Mark.SKIP), ("implausible", "slower", Mark.SKIP),
    ("uncheckable", "slower", Mark.SKIP), ("accepted", "faster", Mark.BAD), ("slower", "faster", Mark.GOOD),
    ("none", "faster", Mark.GOOD)])
def test_outcomes_read_as_marks(outcome, direction, mark):
    assert B.mark_of(outcome, direction) is mark


@pytest.mark.parametrize("outcome,word", [("none", "good"), ("accepted", "good"), ("slower", "bad"),
                                          ("undecided", "skip"), ("rejected", "skip"), ("build-failed", "skip"),
                                          ("infra", "abort"), ("interrupted", "abort")])
def test_git_bisect_is_told_good_bad_skip_or_abort(outcome, word):
    assert B.git_bisect_word(outcome) == word


@given(st.integers(2, 10_000), st.floats(0.001, 0.5))
def test_the_split_never_spends_more_than_the_total_on_planned_steps(n, total):
    rate = B.split(total, n)
    assert rate * B.planned_steps(n) == pytest.approx(total)
    assert B.planned_steps(n) == (math.ceil(math.log2(n - 1)) if n > 2 else 0) + 2


def test_the_split_refuses_what_is_not_a_rate():
    with pytest.raises(ValueError):
        B.split(0.0, 16)
    with pytest.raises(ValueError):
        B.planned_steps(1)


def test_step_rules_are_never_looser_than_the_profile():
    rules = GateRules(false_accept=0.01, false_slower=0.01, miss=0.05, min_gain=0.035, anchor=123.0, settle_pairs=4)
    r = B.step_rules(rules, 0.02, min_gain=0.05)
    assert (r.false_accept, r.false_slower, r.miss) == (0.01, 0.01, 0.02)
    assert r.min_gain == 0.05 and r.anchor == 0.0 and r.settle_pairs == 0 and r.guards == ()
    assert B.step_rules(rules, 0.02, min_gain=0.01).min_gain == 0.035


@pytest.mark.parametrize("gain,floor,expected", [(-0.10, 0.035, 0.05), (-0.04, 0.035, 0.035), (0.30, 0.035, 0.15),
                                                 (None, 0.035, 0.035), (float("nan"), 0.035, 0.035)])
def test_a_probe_rules_out_half_the_ends_change(gain, floor, expected):
    assert B.step_min_gain(gain, floor) == pytest.approx(expected)


def test_spent_sums_only_decided_steps():
    s = lambda outcome, rate: B.Step(role="probe", item=1, against=0, outcome=outcome, rate=rate)  # noqa: E731
    assert B.spent([s("none", 0.01), s("slower", 0.01), s("undecided", 0.0), s("build-failed", 0.0),
                    s("rejected", 0.01)]) == pytest.approx(0.02)


def test_a_step_survives_its_json():
    s = B.Step(role="probe", item=3, against=0, outcome="slower", mark=Mark.BAD, rate=0.008, gain=-0.1, low=-0.2,
               high=-0.01, pairs=12, minutes=1.5, receipt="ab" * 32, round_id="r", note="")
    assert B.Step.from_dict(s.to_dict()) == s
