"""The sequential decision: its confidence sequence, its error rates under optional stopping,
pooling across reruns, the tier and its span, and planning from the node's noise."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.statistics import sequential as S
from console.core.records.rules import Bands

DESIGN = S.Design()
BANDS = Bands()
SAME = S.Basis(main_level=100.0)


def _pairs(rng, n, gain, sd, df=None):
    noise = rng.standard_t(df, n) * sd / math.sqrt(df / (df - 2)) if df else rng.normal(0, sd, n)
    return list(math.log1p(gain) + noise)


def test_the_closed_form_is_the_set_where_the_e_value_stays_below_one_over_alpha():
    xs = [0.05, 0.11, -0.02, 0.08, 0.04, 0.09, 0.01, 0.07]
    lo, hi = S.sequence_at([S.stats_of(xs)], 0.01, 1.0)
    for mu, inside in ((lo + 1e-9, True), (hi - 1e-9, True), (lo - 1e-6, False), (hi + 1e-6, False)):
        assert bool(S.log_evalue(xs, mu, 1.0) < math.log(100)) is inside
    # the several-rounds path (root finding) agrees with the closed form on one round split in two
    split = S.sequence_at([S.stats_of(xs), (0, 0.0, 0.0)], 0.01, 1.0)
    assert split == pytest.approx((lo, hi))


def test_too_few_pairs_bound_nothing_and_more_pairs_only_tighten():
    xs = [0.1, 0.12, 0.08, 0.11, 0.09, 0.1, 0.12, 0.08, 0.1, 0.11]
    seq = S.running_sequence([xs], 0.01, 1.0)
    assert seq[0] == (-math.inf, math.inf) and seq[4] == (-math.inf, math.inf)     # n ≤ 5 at c² = 1
    assert math.isfinite(seq[5][0])
    for (a0, b0), (a1, b1) in zip(seq, seq[1:]):
        assert a1 >= a0 and b1 <= b0                    # intersected over n: the ends only tighten


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-0.3, 0.3), min_size=2, max_size=30), st.floats(0.001, 0.2))
def test_the_sequence_contains_the_sample_mean_and_narrows_with_alpha(xs, alpha):
    lo, hi = S.sequence_at([S.stats_of(xs)], alpha, 1.0)
    mean = float(np.mean(xs))
    assert lo <= mean + 1e-12 and mean - 1e-12 <= hi
    lo2, hi2 = S.sequence_at([S.stats_of(xs)], alpha / 2, 1.0)
    assert lo2 <= lo + 1e-12 and hi2 >= hi - 1e-12


def test_optional_stopping_does_not_raise_the_false_accept_rate():
    """Look after every pair, stop at the first acceptance: a candidate exactly at the
    significance bar (the worst case for a false accept) is accepted at most α of the time,
    with heavy-tailed noise; a fixed-n t test looked at the same way is fooled far more."""
    rng = np.random.default_rng(7)
    design = S.Design(max_pairs=40)
    runs, accepted, naive = 800, 0, 0
    from scipy import stats as sps
    for _ in range(runs):
        xs = _pairs(rng, 40, design.significance, 0.08, df=3)
        if any(d.state == "accepted" for d in S.trajectory([xs], design, SAME, BANDS)):
            accepted += 1
        for n in range(3, 41):      # peeking with a fixed-n 99 % one-sided t bound after every pair
            x = np.asarray(xs[:n])
            if x.mean() - sps.t.ppf(0.99, n - 1) * x.std(ddof=1) / math.sqrt(n) > math.log1p(design.significance):
                naive += 1
                break
    assert accepted / runs <= design.false_accept
    assert naive / runs > 3 * design.false_accept


def test_reruns_pool_so_rerunning_until_lucky_buys_nothing():
    """Three rounds of a candidate no faster than the bar: pooled, one sequence runs across
    them, and the chance of any acceptance stays within α."""
    rng = np.random.default_rng(11)
    design = S.Design(max_pairs=12)
    runs, accepted = 200, 0
    for _ in range(runs):
        rounds: list[list[float]] = []
        for _k in range(3):
            xs = _pairs(rng, 12, design.significance, 0.04, df=3)
            if any(d.state == "accepted" for d in S.trajectory(rounds + [xs], design, SAME, BANDS)):
                accepted += 1
                break
            rounds.append(xs)
    assert accepted / runs <= design.false_accept


def test_rounds_that_contradict_each_other_are_a_conflict_not_a_verdict():
    a = [0.30 + 0.001 * (-1) ** k for k in range(12)]
    b = [-0.30 + 0.001 * (-1) ** k for k in range(12)]
    assert S.decide_pairs([a, b], DESIGN, SAME, BANDS).state == "conflict"


@pytest.mark.parametrize("gain,state", [(0.30, "accepted"), (-0.25, "slower"), (0.0, "none")])
def test_a_clear_gain_a_clear_loss_and_no_change_are_each_decided(gain, state):
    xs = [math.log1p(gain) + 0.004 * (-1) ** k for k in range(12)]
    assert S.decide_pairs([xs], DESIGN, SAME, BANDS).state == state


def test_the_tier_is_the_conservative_end_and_the_span_says_what_else_it_may_be():
    xs = [math.log1p(0.12) + 0.02 * (-1) ** k for k in range(8)]
    d = S.decide_pairs([xs], DESIGN, SAME, BANDS)
    assert d.state == "accepted" and d.tier == S.band(d.basis_interval[0], BANDS)
    assert d.span == (d.tier, S.band(d.basis_interval[1], BANDS)) and not d.settled and not d.done
    tight = [math.log1p(0.12) + 0.001 * (-1) ** k for k in range(8)]
    d = S.decide_pairs([tight], DESIGN, SAME, BANDS)
    assert d.tier == "l" and d.settled and d.span is None and d.done


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 2.0), st.floats(0.0, 3.0), st.floats(0.0, 3.0), st.floats(-0.5, 1.0))
def test_the_tier_basis_is_never_above_the_gain_measured_against_main(main, pin, anchor, gain):
    b = S.Basis(main_level=main * 100, frontier=pin * 100, anchor=anchor * 100)
    if gain > 0:
        assert b.of(gain) <= gain + 1e-12


def test_planning_from_the_node_s_noise():
    quiet, loud = S.preview(0.01, DESIGN, 0.05), S.preview(0.10, DESIGN, 0.05)
    assert quiet.decidable_gain < loud.decidable_gain and quiet.sd_source == "node record"
    assert S.preview(None, DESIGN, 0.05).sd_source == "profile default"
    assert "decides gains ≥" in quiet.sentence() and f"within {DESIGN.max_pairs} pairs" in quiet.sentence()
    # the planned figures agree with what the rule does on noise of that size
    n = S.pairs_to_decide(0.10, 0.03, DESIGN)
    assert n is not None and S.half_width(n, 0.03, 0.01, 1.0) < math.log1p(0.10) - math.log1p(0.02)


def test_pair_noise_pools_within_rounds_and_flags_a_louder_round():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 0.02, 20), rng.normal(-0.5, 0.02, 20)     # round means differ: not noise
    n = S.pair_noise([a, b])
    assert n.df == 38 and 0.015 < n.sd < 0.025 and n.lower < n.sd < n.upper
    assert S.noisier_than(rng.normal(0, 0.08, 12), n) is not None
    assert S.noisier_than(rng.normal(0, 0.02, 12), n) is None


def test_a_budget_too_small_to_decide_anything_is_said_and_stays_json():
    pv = S.preview(0.08, S.Design(max_pairs=4), 0.05)
    assert pv.to_dict()["decidable_gain"] is None and "cannot decide any gain within 4 pairs" in pv.sentence()


def test_a_pending_claim_keeps_a_decided_round_open():
    xs = [math.log1p(0.30) + 0.004 * (-1) ** k for k in range(12)]
    d = S.decide_pairs([xs], DESIGN, SAME, BANDS)
    assert d.done
    d.pending = "the reported rate is above what the wall clock shows so far"
    assert d.state == "accepted" and not d.done


# --- three outcomes, each at its own rate (decision rules 3) --------------------------------

V2 = S.Design(rules=2)


def test_a_regression_of_the_smallest_size_is_slower_not_none():
    rng = np.random.default_rng(5)
    xs = _pairs(rng, 32, -0.05, 0.01)
    d = S.decide_pairs([xs], DESIGN, SAME, BANDS)
    assert d.state == "slower" and d.upper_slower < 0
    first = next(s for s in S.trajectory([xs], DESIGN, SAME, BANDS) if s.decided)
    assert first.state == "slower"                      # never `none` on the way there
    # the rules schema-2 receipts were sealed under called it `none` first
    assert next(s for s in S.trajectory([xs], V2, SAME, BANDS) if s.decided).state == "none"


def test_none_needs_the_interval_to_exclude_a_worthwhile_regression_too():
    xs = [math.log1p(-0.025) + 0.02 * (-1) ** k for k in range(10)]
    d = S.decide_pairs([xs], DESIGN, SAME, BANDS)
    assert d.basis_upper_miss < DESIGN.min_gain and d.lower_miss < -DESIGN.min_gain
    assert d.state == "open"
    assert S.decide_pairs([xs], V2, SAME, BANDS).state == "none"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-0.3, 0.3), min_size=2, max_size=40))
def test_each_outcome_holds_exactly_when_its_rule_does_and_never_reopens(xs):
    steps = S.trajectory([xs], DESIGN, SAME, BANDS)
    for k, d in enumerate(steps, start=1):
        if k < DESIGN.min_pairs:
            assert d.state == "open" and d.interval == (-math.inf, math.inf)
        if d.state == "slower":
            assert d.upper_slower < 0
        elif d.state == "accepted":
            assert d.basis_interval[0] > DESIGN.significance
        elif d.state == "none":
            assert d.basis_upper_miss < DESIGN.min_gain and d.lower_miss > -DESIGN.min_gain
    decided = [d.decided for d in steps]
    assert decided == sorted(decided)                   # once decided, never open again


def test_a_rerun_looks_only_after_its_own_minimum():
    rng = np.random.default_rng(2)
    prior = _pairs(rng, 30, 0.0, 0.03)
    xs = _pairs(rng, 6, 0.0, 0.03)
    steps = S.trajectory([prior, xs], DESIGN, SAME, BANDS)
    assert [s.state for s in steps[:DESIGN.min_pairs - 1]] == ["open"] * (DESIGN.min_pairs - 1)
    assert steps[DESIGN.min_pairs - 1].decided         # the pooled pairs decide at its first look
    # schema-2 rules looked at once: the earlier round decided the rerun at its first pair
    assert S.trajectory([prior, xs], V2, SAME, BANDS)[0].decided


def test_an_interval_that_empties_within_a_round_is_a_conflict_with_both_ends():
    xs = [0.10 + 0.001 * (-1) ** k for k in range(10)] + [-0.10 + 0.001 * (-1) ** k for k in range(30)]
    d = S.decide_pairs([xs], DESIGN, SAME, BANDS)
    assert d.state == "conflict" and d.conflict == "narrowed" and d.interval[0] > d.interval[1] and d.done


def test_the_false_slower_level_is_its_own():
    xs = [math.log1p(-0.02) + 0.02 * (-1) ** k for k in range(12)]
    strict = S.decide_pairs([xs], S.Design(false_slower=0.001), SAME, BANDS)
    loose = S.decide_pairs([xs], S.Design(false_slower=0.2), SAME, BANDS)
    assert strict.upper_slower > loose.upper_slower


def test_a_step_in_the_pairs_is_found_and_level_pairs_rarely_are():
    rng = np.random.default_rng(11)
    xs = list(rng.normal(0.0, 0.02, 12)) + list(rng.normal(0.12, 0.02, 12))
    shift = S.step_change(xs, 0.01)
    assert shift is not None and 10 <= shift.at <= 14 and shift.after - shift.before > 0.08
    assert "changed level after pair" in shift.sentence()
    alarms = sum(S.step_change(list(rng.normal(0.0, 0.03, 24)), 0.01) is not None for _ in range(400))
    assert alarms / 400 <= 0.02                         # at most its level (Bonferroni: below it)
    assert S.step_change([0.1] * 3, 0.01) is None       # too few pairs to split


def test_planning_counts_a_regression_as_decidable():
    assert S.pairs_to_decide(-0.20, 0.03, DESIGN) is not None
    assert S.pairs_to_decide(-0.20, 0.03, DESIGN) <= S.pairs_to_decide(-0.05, 0.03, DESIGN)


# --- serially correlated pairs -----------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-0.2, 0.2), min_size=2, max_size=40))
def test_the_serial_correction_only_ever_widens(xs):
    plain = S.running_sequence([xs], 0.01, 1.0, serial="none")
    lag1 = S.running_sequence([xs], 0.01, 1.0, serial="lag1")
    for (a, b), (c, d) in zip(plain, lag1):
        assert c <= a + 1e-12 and d >= b - 1e-12


def test_correlated_pairs_widen_the_interval_and_alternating_ones_do_not():
    trend = [0.05 + 0.01 * math.sin(k / 3) for k in range(24)]       # slow wander: positively correlated
    assert S.serial_factors(trend)[-1] > 1.5
    flip = [0.05 + (0.01 if k % 2 else -0.01) for k in range(24)]     # negatively correlated: no credit taken
    assert S.serial_factors(flip)[-1] == 1.0
    assert (S.serial_factors(trend)[:S.SERIAL_MIN_PAIRS - 1] == 1.0).all()
