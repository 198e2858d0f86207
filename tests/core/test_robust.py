"""The robust sequence (``sequence = "huber"``): a dipped pair counts as one pair, the rates hold
under optional stopping, the live loop and a later re-derivation agree, and receipts sealed
before it are decided as they were."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.statistics import robust, sequential as S
from console.core.records.rules import Bands, GateRules, rules_from_dict

BANDS = Bands()
SAME = S.Basis(main_level=100.0)
HUBER = S.Design(sequence="huber", serial="lag1", prior_sd=0.05)
RAW = S.Design(sequence="t-mixture", serial="lag1")


def _width(design, xs):
    d = S.decide_pairs([xs], design, SAME, BANDS)
    lo, hi = d.interval
    return hi - lo


def test_a_dipped_pair_counts_as_one_pair_not_as_its_size():
    rng = np.random.default_rng(3)
    xs = list(math.log1p(0.05) + rng.normal(0, 0.03, 16))
    dipped = xs[:8] + [xs[8] - 0.25, xs[9] + 0.25] + xs[10:]     # one rep of each build lost a quarter
    # the raw sequence's width grows by far more than the robust one's
    raw_growth = _width(RAW, dipped) / _width(RAW, xs)
    robust_growth = _width(HUBER, dipped) / _width(HUBER, xs)
    assert raw_growth > 1.8 and robust_growth < 1.45
    # and the robust decision on the dipped round is the clean round's
    assert S.decide_pairs([dipped], HUBER, SAME, BANDS).state == S.decide_pairs([xs], HUBER, SAME, BANDS).state


def test_the_live_loop_and_the_re_derivation_read_the_same_sequence():
    """The runner stops on the trajectory of the pairs so far; the verdict re-derives it from all
    of them: each prefix's last step is the whole trajectory's step at that pair, exactly."""
    rng = np.random.default_rng(11)
    xs = list(math.log1p(0.04) + rng.normal(0, 0.05, 24))
    xs[7] -= 0.3
    whole = S.trajectory([xs], HUBER, SAME, BANDS)
    for k in range(1, len(xs) + 1):
        assert S.trajectory([xs[:k]], HUBER, SAME, BANDS)[-1] == whole[k - 1]


def test_optional_stopping_holds_the_false_accept_rate_with_dips_and_heavy_tails():
    """At the bar (the worst case), looking after every pair and stopping at the first acceptance."""
    rng = np.random.default_rng(5)
    design = S.Design(sequence="huber", serial="lag1", prior_sd=0.05, max_pairs=32)
    runs, accepted = 600, 0
    for i in range(runs):
        noise = rng.standard_t(3, 32) * 0.03 / math.sqrt(3) if i % 2 else rng.normal(0, 0.03, 32)
        dips = np.where(rng.random(32) < 0.08, np.log1p(-rng.uniform(0.05, 0.25, 32)), 0.0)
        xs = list(math.log1p(design.significance) + noise + dips * np.sign(rng.random(32) - 0.5))
        accepted += any(d.state == "accepted" for d in S.trajectory([xs], design, SAME, BANDS))
    assert accepted / runs <= design.false_accept + 3 * math.sqrt(design.false_accept / runs)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-0.3, 0.3), min_size=4, max_size=24), st.floats(0.001, 0.2))
def test_the_sequence_holds_the_huber_centre_and_narrows_with_alpha(xs, alpha):
    r = robust.Round.of(xs, 0.05, np.ones(len(xs)))
    run = robust.running([r], [alpha, alpha / 2], 1.0)
    centre = run.centre[-1]
    (lo, hi), (lo2, hi2) = ((e[0][-1], e[1][-1]) for e in (run.ends[alpha], run.ends[alpha / 2]))
    assert lo - robust.STEP <= centre <= hi + robust.STEP
    assert lo2 <= lo + 1e-12 and hi2 >= hi - 1e-12


def test_pooled_rounds_that_contradict_each_other_are_a_conflict():
    a = [0.20, 0.21, 0.19, 0.20, 0.22, 0.18, 0.20, 0.21] * 2
    b = [-0.20, -0.21, -0.19, -0.20, -0.22, -0.18, -0.20, -0.21] * 2
    d = S.decide_pairs([a, b], HUBER, SAME, BANDS)
    assert d.state == "conflict" and d.conflict == "rounds"


def test_receipts_sealed_before_the_robust_sequence_are_decided_on_the_raw_pairs():
    stored = {k: v for k, v in GateRules().__dict__.items()}
    stored = {**stored, "bands": {}, "guards": (), "latency": ()}
    del stored["sequence"]
    assert rules_from_dict(stored).sequence == "t-mixture"
    assert S.Design.of(rules_from_dict(stored)).method == S.METHOD
    assert S.Design.of(GateRules()).method == robust.METHOD
    assert S.Design.of(GateRules(), version=2).sequence == "t-mixture"     # schema-2 rules never had it


def test_planning_reads_the_same_sequence():
    hw_raw = S.spread(16, 0.03, 0.01, RAW)
    hw_robust = S.spread(16, 0.03, 0.01, HUBER)
    assert hw_robust == pytest.approx(hw_raw, rel=0.25)        # on Gaussian noise, about as wide
    assert S.pairs_to_decide(0.10, 0.03, HUBER) is not None


def test_pairs_needed_are_counted_against_the_basis():
    """Against a pin 4 % above main, a gain of 6 % is a basis of about 2 %: far more pairs."""
    plain = S.pairs_to_decide(0.06, 0.03, HUBER)
    pinned = S.pairs_to_decide(0.06, 0.03, HUBER, S.Basis(main_level=100.0, frontier=104.0))
    assert plain is not None and (pinned is None or pinned > 2 * plain)


def test_an_interval_emptied_at_the_false_slower_level_alone_is_a_conflict():
    design = S.Design(false_slower=0.2)
    d = S._judge(12, 0, 0.01, (-0.01, 0.03), (-0.005, 0.025), (0.02, 0.01), design, SAME, BANDS)
    assert d.state == "conflict" and d.conflict == "narrowed"
