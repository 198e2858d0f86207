import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from console.core.statistics import stats
from console.core.records.receipt import Rep
from console.core.statistics.stats import (interleaved_order, mad_spread, median, noise_report, paired_ratios,
                                ratio_interval, spread, t_cdf, t_quantile)


def test_median_and_spreads():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    with pytest.raises(ValueError):
        median([])
    assert spread([90, 100, 110]) == pytest.approx(0.2)
    assert mad_spread([100, 100, 100]) == 0.0
    assert mad_spread([98, 100, 102, 100, 130]) == pytest.approx(1.4826 * 2 / 100)  # one outlier barely moves it


def test_interleaved_order():
    assert interleaved_order(1) == ["main", "candidate"]
    assert interleaved_order(2) == ["main", "candidate", "candidate", "main"]
    assert interleaved_order(4) == ["main", "candidate", "candidate", "main"] * 2
    assert interleaved_order(0) == []


def test_interleaving_cancels_linear_drift():
    order = interleaved_order(4)
    pos = {b: [i for i, x in enumerate(order) if x == b] for b in ("main", "candidate")}
    assert sum(pos["main"]) == sum(pos["candidate"])


# Student t, two-sided critical values from standard tables.
@pytest.mark.parametrize("p,df,expected", [
    (0.975, 1, 12.706204736), (0.975, 2, 4.302652730), (0.975, 4, 2.776445105),
    (0.975, 10, 2.228138852), (0.975, 30, 2.042272456), (0.975, 100, 1.983971519),
    (0.95, 5, 2.015048373), (0.995, 1, 63.656741163), (0.9, 3, 1.637744354),
    (0.995, 9, 3.249835542), (0.9995, 4, 8.610301581),
])
def test_t_quantile_matches_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, rel=1e-8)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, rel=1e-8)


def test_t_cdf():
    assert t_cdf(0.0, 7) == 0.5
    assert t_cdf(2.228138852, 10) == pytest.approx(0.975, abs=1e-9)
    assert t_cdf(-2.228138852, 10) == pytest.approx(0.025, abs=1e-9)
    # df = 1 is Cauchy: F(t) = 1/2 + atan(t)/π
    assert t_cdf(3.0, 1) == pytest.approx(0.5 + math.atan(3.0) / math.pi, abs=1e-12)


def test_ratio_interval():
    assert ratio_interval([1.05], 0.95) == (-math.inf, math.inf)
    assert ratio_interval([], 0.95) == (-math.inf, math.inf)
    lo, hi = ratio_interval([1.05, 1.05, 1.05], 0.95)
    assert lo == pytest.approx(0.05) and hi == pytest.approx(0.05)
    ratios = [1.04, 1.06, 1.05, 1.055, 1.045]
    lo, hi = ratio_interval(ratios, 0.95)
    logs = [math.log(r) for r in ratios]
    m = sum(logs) / 5
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / 4)
    assert math.log1p(hi) - m == pytest.approx(2.776445105 * sd / math.sqrt(5), rel=1e-8)
    assert lo < 0.05 < hi


@settings(max_examples=100)
@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=12), st.floats(0.5, 0.99))
def test_ratio_interval_properties(ratios, confidence):
    lo, hi = ratio_interval(ratios, confidence)
    assert lo <= hi
    gm = math.expm1(sum(math.log(r) for r in ratios) / len(ratios))
    assert lo - 1e-12 <= gm <= hi + 1e-12
    lo2, hi2 = ratio_interval(ratios, min(0.999, confidence + 0.005))
    assert lo2 <= lo + 1e-12 and hi2 >= hi - 1e-12


def _rep(build, position, value):
    return Rep(build=build, phase="timed", index=0, position=position, value=value)


def test_paired_ratios_pair_by_schedule_position():
    reps = [_rep("main", 0, 100), _rep("candidate", 1, 110), _rep("candidate", 2, 120), _rep("main", 3, 100),
            _rep("main", 4, 200)]
    assert paired_ratios(reps) == [1.1, 1.2]
    random.Random(0).shuffle(reps)
    assert paired_ratios(reps) == [1.1, 1.2]


def test_noise_report_constant_build():
    r = noise_report([100.0] * 6, [100.0] * 6, 0.02, 0.95)
    assert r["spread"] == 0.0 and r["false_positives"] == 0 and r["false_positive_rate"] == 0.0
    assert r["windows"] == 15          # contiguous windows of >= 2 pairs out of 6


def test_noise_report_counts_false_positives_of_a_drifting_copy():
    a = [100.0] * 6
    b = [100.0, 100.5, 103.0, 103.2, 103.1, 100.2]   # a node hiccup lifting one copy for a while
    r = noise_report(a, b, 0.02, 0.95)
    assert r["spread"] == pytest.approx(0.032)
    assert r["false_positives"] >= 1
    assert 0 < r["false_positive_rate"] < 1
    assert r["suggested_significance"] >= 0.02
    assert noise_report(a, b, 0.05, 0.95)["false_positives"] == 0


def test_noise_report_with_no_pairs():
    r = noise_report([], [], 0.02, 0.95)
    assert r["pairs"] == 0 and r["false_positive_rate"] is None
