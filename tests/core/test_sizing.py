"""bench.min_seconds: how many repeats a timed run gets, and whether the reps reached it."""
from __future__ import annotations

import math
import statistics

from hypothesis import given, strategies as st

from console.core.statistics.sizing import MAX_REPEAT, Sizing, short_of, size_repeats

seconds = st.floats(min_value=1e-4, max_value=100, allow_nan=False)


@given(st.floats(min_value=0.01, max_value=60), st.lists(st.tuples(st.sampled_from(["main", "candidate"]), seconds),
                                                          min_size=1, max_size=8))
def test_the_faster_build_reaches_the_minimum_with_the_fewest_repeats(min_s, probes):
    s = size_repeats(min_s, probes)
    fastest = s.section_s
    builds = {b for b, _ in probes}
    assert fastest == min(statistics.median(v for b2, v in probes if b2 == b) for b in builds)
    assert 1 <= s.repeat <= MAX_REPEAT
    if s.repeat < MAX_REPEAT:
        assert s.repeat * fastest >= min_s * (1 - 1e-12)
        assert s.repeat == 1 or (s.repeat - 1) * fastest < min_s


def test_without_a_reported_time_the_round_runs_one_section_and_says_why():
    s = size_repeats(2.0, [("main", float("nan")), ("candidate", 0.0)])
    assert s.repeat == 1 and s.section_s is None and "no warm-up run reported" in s.basis


def test_an_h200_sized_prefill_is_repeated_to_the_minimum():
    # prefill of 512 tokens took 0.08 s on an H200: a 2-second minimum needs 25 sections
    s = size_repeats(2.0, [("main", 0.081), ("candidate", 0.080), ("main", 0.079), ("candidate", 0.082)])
    assert s.repeat == math.ceil(2.0 / 0.080) and "25 repeat(s)" in s.basis


def test_a_misreported_tiny_elapsed_time_is_bounded():
    assert size_repeats(10.0, [("main", 1e-12)]).repeat == MAX_REPEAT


def test_reps_under_the_minimum_are_named():
    sized = Sizing(2.0, 25, 0.08, "warm-ups")
    assert short_of(sized, [2.1, 2.4]) is None
    said = short_of(sized, [2.1, 1.7])
    assert said is not None and "1.7 s" in said and "25 repeat(s)" in said
    assert short_of(sized, []) is None


def test_a_recorded_sizing_writes_back_as_it_was_read():
    for d in ({"min_seconds": 2, "repeat": 25, "section_s": 0.08, "basis": "b"},
              {"min_seconds": 2.0, "repeat": 1, "section_s": None, "basis": "b", "reached": False}):
        assert Sizing.from_dict(d).to_dict() == d
