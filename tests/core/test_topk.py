"""The compact (top-k + tail) reference: its KL against the full float32 KL, its other figures,
and the checks that refuse what is not a set of distributions."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.records import parity, topk
from console.core.records.parity import ParityInputError


def logits(shape, seed=0, scale=3.0, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def pair(depths=2, rows=3, vocab=400, k=16, noise=0.05, seed=0):
    ref = logits((depths, rows, vocab), seed)
    cand = (ref + logits((depths, rows, vocab), seed + 1, scale=noise)).astype(np.float32)
    tokens = np.random.default_rng(seed + 2).integers(-1, vocab, (depths, rows))
    return ref, cand, tokens, topk.compress(ref, k, tokens)


DEPTHS = [8, 16]


def test_a_build_that_reproduces_the_reference_bit_for_bit_has_kl_exactly_zero():
    ref, _, tokens, comp = pair()
    for f in topk.grade_logits(comp, ref.copy(), DEPTHS, 3, 400, next_tokens=tokens):
        assert f.kl == 0.0 and f.top1 == 1.0 and f.stats.kl_max == 0.0 and f.stats.rms_dp == 0.0


def test_top1_entropy_and_dp_are_the_full_paths_figures():
    ref, cand, tokens, comp = pair(noise=0.8)
    full = parity.grade_logits(ref, cand, DEPTHS, 3, 400, next_tokens=tokens)
    compact = topk.grade_logits(comp, cand, DEPTHS, 3, 400, next_tokens=tokens)
    for f, c in zip(full, compact):
        assert c.top1 == f.top1 and c.depth == f.depth and c.max_entropy == f.max_entropy
        assert math.isclose(c.ref_entropy, f.ref_entropy, rel_tol=1e-12)
        assert math.isclose(c.stats.rms_dp, f.stats.rms_dp, rel_tol=1e-9)
        assert c.stats.dp_rows == f.stats.dp_rows and c.stats.top1_se == f.stats.top1_se
        assert 0 < c.kl <= f.kl


def test_a_tail_of_one_token_is_the_full_kl():
    ref, cand, tokens, _ = pair(vocab=50, noise=0.3)
    comp = topk.compress(ref, 49, tokens)
    for f, c in zip(parity.grade_logits(ref, cand, DEPTHS, 3, 50), topk.grade_logits(comp, cand, DEPTHS, 3, 50)):
        assert math.isclose(c.kl, f.kl, rel_tol=1e-9)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), vocab=st.integers(2, 300), k_share=st.floats(0.0, 1.0),
       scale=st.sampled_from([0.1, 1.0, 4.0, 12.0]), noise=st.sampled_from([0.0, 1e-4, 0.01, 0.3, 3.0]),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_the_compact_kl_is_never_negative_and_never_exceeds_the_full_kl(seed, vocab, k_share, scale, noise, dtype):
    """Merging the tail's outcomes into one can only lower a KL (the log-sum inequality)."""
    k = min(vocab - 1, 1 + int(k_share * (vocab - 1)))
    ref = logits((1, 2, vocab), seed, scale, dtype)
    cand = (ref + logits((1, 2, vocab), seed + 1, noise * scale, dtype)).astype(dtype)
    comp = topk.compress(ref, k)
    full = parity.grade_logits(ref, cand, [4], 2, vocab)[0]
    got = topk.grade_logits(comp, cand, [4], 2, vocab)[0]
    assert 0.0 <= got.kl <= full.kl * (1 + 1e-9) + 1e-12
    assert got.top1 == full.top1
    assert math.isclose(got.ref_entropy, full.ref_entropy, rel_tol=1e-9, abs_tol=1e-12)


def test_a_candidate_whose_tail_underflows_still_gets_a_finite_bounded_kl():
    ref = logits((1, 1, 100), 3, 2.0)
    cand = ref.copy()
    top = topk.top_ids(ref[0, 0], 5)
    cand[0, 0, :] = -1e4                     # everything but the reference's top 5: below exp's range
    cand[0, 0, top] = ref[0, 0, top]
    comp = topk.compress(ref, 5)
    got = topk.grade_logits(comp, cand, [4], 1, 100)[0].kl
    assert math.isfinite(got) and got <= parity.grade_logits(ref, cand, [4], 1, 100)[0].kl


def test_the_first_id_is_numpys_argmax_even_among_ties():
    x = np.zeros(20, dtype=np.float32)
    x[[3, 7, 11]] = 5.0
    assert list(topk.top_ids(x, 2)) == [3, 7]
    assert topk.top_ids(x, 1)[0] == np.argmax(x)
    y = np.full(20, 1.0, dtype=np.float32)          # all tied: more ties at the maximum than k
    assert topk.top_ids(y, 3)[0] == 0


def test_the_scored_path_row_is_graded_like_the_grid():
    ref, cand, tokens, comp = pair(noise=0.5)
    row = topk.grade_row(comp, 1, -1, cand[1, -1])
    single = topk.compress(ref[1:, 2:], 16)
    assert math.isclose(row.kl, topk.grade_logits(single, cand[1:, 2:], [16], 1, 400)[0].kl, rel_tol=1e-12)
    # the full reference's row is graded as before
    assert topk.grade_row(ref, 1, -1, cand[1, -1]) == parity.grade_row(ref[1, -1], cand[1, -1])


def test_the_full_reference_path_is_unchanged():
    ref, cand, tokens, _ = pair()
    assert topk.grade_logits(ref, cand, DEPTHS, 3, 400, next_tokens=tokens) == \
        parity.grade_logits(ref, cand, DEPTHS, 3, 400, next_tokens=tokens)


def test_a_non_finite_candidate_is_named_by_depth_and_row():
    _, cand, _, comp = pair()
    cand = cand.copy()
    cand[1, 2, 5] = np.nan
    with pytest.raises(ParityInputError, match=r"candidate logits: NaN at depth 16, row 2"):
        topk.grade_logits(comp, cand, DEPTHS, 3, 400)
    with pytest.raises(ParityInputError, match=r"candidate row: NaN"):
        topk.grade_row(comp, 1, 2, cand[1, 2])


def test_a_non_finite_reference_is_refused_at_capture():
    ref = logits((1, 2, 30), 1)
    ref[0, 1, 3] = -np.inf
    with pytest.raises(ParityInputError, match=r"reference logits: -inf at depth 0, row 1"):
        topk.compress(ref, 4)


def test_the_reference_must_be_of_the_rounds_document():
    _, cand, tokens, comp = pair()
    other = tokens.copy()
    other[0, 0] = (other[0, 0] + 1) % 400
    with pytest.raises(ParityInputError, match="another document"):
        topk.grade_logits(comp, cand, DEPTHS, 3, 400, next_tokens=other)


def test_k_must_leave_a_tail():
    with pytest.raises(ParityInputError, match="1 <= k < vocab"):
        topk.compress(logits((1, 1, 10)), 10)


def test_the_candidate_must_fit_the_reference():
    *_, comp = pair()
    with pytest.raises(ParityInputError, match="vocabulary size 399"):
        topk.grade_logits(comp, np.zeros((2, 3, 399), np.float32), DEPTHS, 3, 400)
    with pytest.raises(ParityInputError, match="expected 2 x 4"):
        topk.grade_logits(comp, np.zeros((2, 4, 400), np.float32), DEPTHS, 4, 400)


@pytest.mark.parametrize("break_it, message", [
    (lambda r: dataclasses.replace(r, ids=np.where(r.ids == r.ids[0, 0, 1], r.ids[0, 0, 0], r.ids)), "same token twice"),
    (lambda r: dataclasses.replace(r, ids=r.ids + 400), r"ids must lie in \[0, 400\)"),
    (lambda r: dataclasses.replace(r, logp=r.logp[..., ::-1].copy()), "non-increasing"),
    (lambda r: dataclasses.replace(r, log_tail=r.log_tail - 1.0), "sum to"),
    (lambda r: dataclasses.replace(r, entropy=r.entropy * 0 - 1), "entropies"),
    (lambda r: dataclasses.replace(r, next_logp=np.full_like(r.next_logp, np.nan)), "non-finite"),
    (lambda r: dataclasses.replace(r, log_tail=r.log_tail[:, :2]), "log_tail has shape"),
    (lambda r: dataclasses.replace(r, ids=r.ids.astype(np.float64)), "integers"),
])
def test_what_is_not_a_set_of_distributions_is_refused(break_it, message):
    *_, comp = pair()
    topk.check(comp, 2, 3, 400, 16)
    with pytest.raises(ParityInputError, match=message):
        topk.check(break_it(comp), 2, 3, 400, 16)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(2, 6))
def test_ties_at_the_kth_value_keep_the_lowest_ids_whatever_the_row(seed, k, levels):
    # few distinct values: many ties at the k-th, in every position of the row
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, size=64).astype(np.float32)
    got = topk.top_ids(x, k)
    want = sorted(range(64), key=lambda i: (-float(x[i]), i))[:k]
    assert list(got) == want


def test_a_non_finite_row_is_refused_by_name():
    with pytest.raises(ParityInputError):
        topk.top_ids(np.full(8, np.nan, dtype=np.float32), 3)
