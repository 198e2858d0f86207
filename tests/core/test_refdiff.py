"""How two captures of a reference differ: in grading's terms, never just "differs"."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.provenance import refdiff
from console.core.records import topk

DEPTHS = [32, 128]


def ref(seed=0, vocab=300, k=40, levels=None):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, size=(2, 4, vocab))
    if levels:                                   # coarse values: many ties
        x = np.round(x * levels) / levels
    return topk.compress(x.astype(np.float32), k)


def edited(r, **arrays):
    return dataclasses.replace(r, **{k: np.array(v) for k, v in arrays.items()})


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 39))
def test_a_digest_is_a_valid_reference_and_agrees_with_its_source(seed, k):
    full = ref(seed)
    small = refdiff.truncate(full, k)
    topk.check(small, 2, 4, 300, k)                  # still a distribution: the rest is in the tail
    assert refdiff.compare(small, full, DEPTHS).identical
    assert not refdiff.compare(full, small, DEPTHS).grading_can_change


def test_a_moved_log_probability_is_named_with_its_size_and_place():
    a = ref()
    logp = a.logp.copy()
    logp[1, 2, 5] -= 1e-3
    logp[1, 2] = np.sort(logp[1, 2])[::-1]           # keep the row non-increasing
    b = edited(a, logp=logp)
    d = refdiff.compare(a, b, DEPTHS)
    assert d.changed == ((128, 2),) and d.depths == (128,)
    assert d.max_logp == pytest.approx(1e-3, rel=1e-6) and d.max_logp_at[:2] == (128, 2)
    assert not d.argmax_moved and not d.membership and not d.ties_only
    assert d.grading_can_change


def test_tied_tokens_trading_places_inside_the_kept_set_change_nothing_graded():
    a = ref(levels=1)
    d0, r0 = 0, 1
    row = a.logp[d0, r0]
    # two adjacent positions of equal value, not the first and not in the last (boundary) group
    pos = next(i for i in range(1, a.shape[2] - 2) if row[i] == row[i + 1] and row[i] != row[-1])
    ids = a.ids.copy()
    ids[d0, r0, [pos, pos + 1]] = ids[d0, r0, [pos + 1, pos]]
    d = refdiff.compare(a, edited(a, ids=ids), DEPTHS)
    assert d.changed == ((32, 1),) and d.ties_only == ((32, 1),)
    assert not d.membership and not d.argmax_moved and d.max_logp == 0.0
    assert not d.grading_can_change


def test_another_token_at_the_boundary_or_the_top_can_change_grading():
    a = ref()
    ids = a.ids.copy()
    ids[1, 3, -1] = next(t for t in range(300) if t not in set(ids[1, 3].tolist()))
    d = refdiff.compare(a, edited(a, ids=ids), DEPTHS)
    assert d.membership == ((128, 3),) and d.grading_can_change
    ids = a.ids.copy()
    ids[0, 0, [0, 1]] = ids[0, 0, [1, 0]]
    d = refdiff.compare(a, edited(a, ids=ids), DEPTHS)
    assert d.argmax_moved == ((32, 0),) and d.grading_can_change


def test_references_of_other_shapes_are_not_compared():
    with pytest.raises(ValueError):
        refdiff.compare(ref(vocab=300), ref(vocab=301), DEPTHS)
