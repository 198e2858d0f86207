"""The float64 exp, log and sums a pinned reference is computed with: close to the true values,
and made only of operations whose results no CPU, vector width or numpy version changes."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings, strategies as st

from console.core.statistics import portable

NONPOSITIVE = st.floats(min_value=-760.0, max_value=0.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(NONPOSITIVE, min_size=1, max_size=64))
def test_exp_is_within_an_ulp_of_the_c_librarys(xs):
    got = portable.exp(np.array(xs))
    for x, g in zip(xs, got):
        want = math.exp(x)
        assert abs(g - want) <= max(math.ulp(want), 5e-324), (x, g, want)


def test_exp_of_minus_infinity_and_of_zero():
    assert list(portable.exp(np.array([-np.inf, -1e308, 0.0]))) == [0.0, 0.0, 1.0]


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False))
def test_log_is_correctly_rounded_where_the_c_library_is(s):
    assert abs(portable.log(s) - math.log(s)) <= math.ulp(math.log(s))


def test_log_refuses_what_has_none():
    for bad in (0.0, -1.0, math.inf, math.nan):
        try:
            portable.log(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=300))
def test_total_is_a_sum_in_a_fixed_order(xs):
    a = np.array(xs, dtype=np.float64)
    got = portable.total(a)
    assert math.isclose(got, math.fsum(xs), rel_tol=1e-12, abs_tol=1e-6)
    # the same numbers in another memory layout give the same bits
    assert portable.total(np.ascontiguousarray(a[::-1])[::-1]) == got
