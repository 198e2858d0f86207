"""Change points in main's series: found where the level moved, not in a flat or spiky series."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.statistics import changepoints as cp


def _noisy(levels: list[float], sd: float = 0.01, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return [v * math.exp(rng.normal(0, sd)) for v in levels]


def test_an_8_percent_step_half_way_is_found_there_with_its_size():
    values = _noisy([100.0] * 12 + [92.0] * 12)
    (c,) = cp.detect(values)
    assert c.at == 12 and c.direction == "down"
    assert c.low < -0.08 < c.high and c.high < -0.02
    assert c.p <= 0.01 and c.splits == 24 - 2 * 4 + 1 and (c.before, c.after) == (12, 12)


def test_a_flat_series_and_a_single_spike_have_no_change_point():
    assert cp.detect(_noisy([100.0] * 24)) == []
    spiky = _noisy([100.0] * 24)
    spiky[10] *= 0.7                    # one odd round: a segment of one is never admissible
    assert cp.detect(spiky) == []


def test_two_steps_are_two_change_points():
    values = _noisy([100.0] * 10 + [94.0] * 10 + [88.0] * 10, sd=0.005)
    assert [c.at for c in cp.detect(values)] == [10, 20]


def test_a_real_but_small_shift_is_not_worth_a_change_point():
    values = _noisy([100.0] * 12 + [99.0] * 12, sd=0.0005)
    assert cp.detect(values, cp.Rules(min_change=0.02)) == []
    assert [c.at for c in cp.detect(values, cp.Rules(min_change=0.005))] == [12]


def test_a_series_too_short_to_split_has_none():
    assert cp.detect([100.0, 50.0, 100.0]) == []
    assert cp.detect([]) == []


def test_identical_sides_and_a_clean_step_without_noise():
    assert cp.detect([100.0] * 10) == []
    (c,) = cp.detect([100.0] * 5 + [90.0] * 5)
    assert c.at == 5 and c.change == pytest.approx(-0.10) and c.p == 0.0


@pytest.mark.parametrize("bad", [[100.0, 0.0, 100.0, 100.0], [1.0, float("nan")], [1.0, float("inf")], [-1.0]])
def test_values_that_are_not_positive_and_finite_are_refused(bad):
    with pytest.raises(ValueError):
        cp.detect(bad * 3)


@pytest.mark.parametrize("kw", [{"alpha": 0.0}, {"alpha": 1.0}, {"min_change": -0.1}, {"min_segment": 1},
                                {"min_change": float("nan")}])
def test_rules_that_mean_nothing_are_refused(kw):
    with pytest.raises(ValueError):
        cp.Rules(**kw)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(50, 150), min_size=8, max_size=40), st.floats(0.1, 10))
def test_change_points_do_not_depend_on_the_unit(values, scale):
    a = cp.detect(values)
    b = cp.detect([v * scale for v in values])
    assert [c.at for c in a] == [c.at for c in b]
    for x, y in zip(a, b):
        assert x.change == pytest.approx(y.change, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(50, 150), min_size=8, max_size=40))
def test_every_change_point_clears_its_rules(values):
    rules = cp.Rules()
    for c in cp.detect(values, rules):
        assert c.p <= rules.alpha and abs(c.change) >= rules.min_change
        assert c.before >= rules.min_segment and c.after >= rules.min_segment
        assert c.low <= c.change <= c.high
