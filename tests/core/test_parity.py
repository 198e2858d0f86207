import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from console.core.records.parity import (KL_QUANTILES, DepthFigures, KLStats, ParityInputError, depth_status, drift_ratio,
                                 grade_logits, grade_row, kl_stats, log_softmax, next_token_ids, worst_depth)
from console.profile import GateRules

RULES = GateRules()


def naive(ref, cand):
    """Textbook float64 figures for one [rows, vocab] block."""
    lp, lq = log_softmax(ref), log_softmax(cand)
    p = np.exp(lp)
    kl = np.sum(p * (lp - lq), axis=-1).mean()
    top1 = np.mean(np.argmax(ref, -1) == np.argmax(cand, -1))
    ent = -np.sum(p * lp, axis=-1).mean()
    return kl, top1, ent


def logits(depths, rows, vocab, seed=0, scale=3.0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((depths, rows, vocab)) * scale).astype(dtype)


# --- log_softmax -------------------------------------------------------------

def test_log_softmax_is_stable_and_float64():
    x = np.array([1000.0, 1001.0, 1002.0], dtype=np.float32)
    out = log_softmax(x)
    assert out.dtype == np.float64
    assert np.all(np.isfinite(out))
    assert math.isclose(np.exp(out).sum(), 1.0, rel_tol=1e-12)
    assert np.allclose(out, log_softmax(x - 1000.0))


def test_log_softmax_is_identity_on_log_probs():
    lp = log_softmax(np.random.default_rng(1).standard_normal((3, 50)))
    assert np.allclose(log_softmax(lp), lp, atol=1e-12)


# --- grade_logits ---------------------------------------------------------------

def test_identical_inputs_give_zero_kl_and_full_agreement():
    x = logits(3, 4, 500)
    figs = grade_logits(x, x.copy(), [4, 8, 16], 4, 500)
    assert [f.depth for f in figs] == [4, 8, 16]
    for f in figs:
        assert f.kl == 0.0 and f.top1 == 1.0
        assert math.isclose(f.max_entropy, math.log(500))


def test_matches_naive_float64_computation():
    ref = logits(3, 5, 1000, seed=2)
    cand = ref + logits(3, 5, 1000, seed=3, scale=0.05)
    for f, d in zip(grade_logits(ref, cand, [1, 2, 3], 5, 1000), range(3)):
        kl, top1, ent = naive(ref[d].astype(np.float64), cand[d].astype(np.float64))
        assert math.isclose(f.kl, kl, rel_tol=1e-9)
        assert f.top1 == top1
        assert math.isclose(f.ref_entropy, ent, rel_tol=1e-12)


def test_vocab_larger_than_one_chunk_matches_naive():
    ref = logits(1, 2, 150_000, seed=4)
    cand = ref + logits(1, 2, 150_000, seed=5, scale=0.01)
    [f] = grade_logits(ref, cand, [4], 2, 150_000)
    kl, _, ent = naive(ref[0].astype(np.float64), cand[0].astype(np.float64))
    assert math.isclose(f.kl, kl, rel_tol=1e-8)
    assert math.isclose(f.ref_entropy, ent, rel_tol=1e-12)


def test_tiny_kl_is_resolved():
    ref = logits(1, 1, 4000, seed=6, dtype=np.float64)
    cand = ref + 1e-5 * logits(1, 1, 4000, seed=7, dtype=np.float64)
    [f] = grade_logits(ref, cand, [4], 1, 4000)
    assert 0 < f.kl < 1e-8
    kl, _, _ = naive(ref[0], cand[0])
    assert math.isclose(f.kl, kl, rel_tol=1e-3)


def test_known_two_token_value():
    p, q = np.array([0.75, 0.25]), np.array([0.5, 0.5])
    [f] = grade_logits(np.log(p)[None, :], np.log(q)[None, :], [4], 1, 2)
    assert math.isclose(f.kl, 0.75 * math.log(1.5) + 0.25 * math.log(0.5), rel_tol=1e-12)
    assert f.top1 == 0.0 or f.top1 == 1.0
    assert math.isclose(f.ref_entropy, -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), rel_tol=1e-12)


def test_two_dimensional_input_means_one_row():
    x = logits(3, 1, 64)[:, 0, :]
    y = x + 0.1
    figs = grade_logits(x, y, [4, 8, 16], 1, 64)
    assert all(f.kl < 1e-12 and f.top1 == 1.0 for f in figs)   # a constant shift is no change


def test_top1_is_a_share_of_rows():
    ref = logits(1, 4, 10, seed=8)
    cand = ref.copy()
    cand[0, 0] = -ref[0, 0]
    [f] = grade_logits(ref, cand, [4], 4, 10)
    assert f.top1 == 0.75


def test_workers_do_not_change_the_result():
    ref = logits(4, 3, 2000, seed=9)
    cand = ref + logits(4, 3, 2000, seed=10, scale=0.2)
    one = grade_logits(ref, cand, [1, 2, 3, 4], 3, 2000, workers=1)
    assert grade_logits(ref, cand, [1, 2, 3, 4], 3, 2000, workers=2) == one
    assert grade_logits(ref, cand, [1, 2, 3, 4], 3, 2000, workers=5) == one


def test_memmapped_float64_input(tmp_path):
    ref = logits(2, 2, 300, seed=11, dtype=np.float64)
    np.save(tmp_path / "r.npy", ref)
    np.save(tmp_path / "c.npy", ref * 1.01)
    figs = grade_logits(np.load(tmp_path / "r.npy", mmap_mode="r"), np.load(tmp_path / "c.npy", mmap_mode="r"),
                        [4, 8], 2, 300)
    assert all(f.top1 == 1.0 and 0 < f.kl < 1e-2 for f in figs)


def test_depth_figures_round_trip():
    f = DepthFigures(4, 1.0, 1e-6, 3.1, 7.6)
    assert DepthFigures.from_dict(f.to_dict()) == f


# --- malformed inputs -------------------------------------------------------------

@pytest.mark.parametrize("ref_shape,depths,rows,vocab,needle", [
    ((3, 4), [4, 8, 16], 2, 4, "expected shape"),              # 2-D only allowed when rows == 1
    ((3, 2, 4, 1), [4, 8, 16], 2, 4, "4-D"),
    ((3, 2, 5), [4, 8, 16], 2, 4, "vocabulary size 5"),
    ((2, 2, 4), [4, 8, 16], 2, 4, "missing depths"),
    ((4, 2, 4), [4, 8, 16], 2, 4, "4 depth rows for 3 depths"),
    ((3, 3, 4), [4, 8, 16], 2, 4, "3 rows per depth"),
])
def test_shape_errors_are_named(ref_shape, depths, rows, vocab, needle):
    bad = np.zeros(ref_shape, dtype=np.float32)
    good = np.zeros((len(depths), rows, vocab), dtype=np.float32)
    with pytest.raises(ParityInputError, match=needle) as e:
        grade_logits(good, bad, depths, rows, vocab)
    assert "candidate logits" in str(e.value)


def test_integer_dtype_is_refused():
    with pytest.raises(ParityInputError, match="dtype int32"):
        grade_logits(np.zeros((1, 1, 4), np.int32), np.zeros((1, 1, 4), np.float32), [4], 1, 4)


@pytest.mark.parametrize("value,label", [(np.nan, "NaN"), (np.inf, "+inf"), (-np.inf, "-inf")])
@pytest.mark.parametrize("which", ["reference", "candidate"])
def test_non_finite_values_name_the_depth(value, label, which):
    ref, cand = logits(3, 2, 50, seed=12), logits(3, 2, 50, seed=13)
    (ref if which == "reference" else cand)[2, 1, 7] = value
    with pytest.raises(ParityInputError, match=rf"{which} logits: .*{re.escape(label)}.*depth 16, row 1") as e:
        grade_logits(ref, cand, [4, 8, 16], 2, 50)
    assert "token 7" in str(e.value)


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(0, 2), row=st.integers(0, 1), tok=st.integers(0, 20),
       value=st.sampled_from([np.nan, np.inf, -np.inf]), in_ref=st.booleans(),
       fill=st.floats(-1e30, 1e30))
def test_any_non_finite_value_is_caught(depth, row, tok, value, in_ref, fill):
    ref = np.full((3, 2, 21), fill, dtype=np.float64)
    cand = logits(3, 2, 21, seed=14, dtype=np.float64)
    (ref if in_ref else cand)[depth, row, tok] = value
    with pytest.raises(ParityInputError, match=f"depth {[4, 8, 16][depth]}"):
        grade_logits(ref, cand, [4, 8, 16], 2, 21)


@settings(max_examples=80, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=4),
       dtype=st.sampled_from([np.float32, np.float64, np.int64, np.bool_, np.complex64, object]),
       depths=st.lists(st.integers(1, 100), min_size=1, max_size=4), rows=st.integers(1, 3),
       vocab=st.integers(2, 5))
def test_malformed_inputs_raise_parity_input_error_only(shape, dtype, depths, rows, vocab):
    bad = np.zeros(shape, dtype=dtype)
    good = np.zeros((len(depths), rows, vocab), dtype=np.float32)
    try:
        grade_logits(good, bad, depths, rows, vocab)
    except ParityInputError:
        pass


def test_grade_row():
    ref = np.log(np.array([0.7, 0.2, 0.1]))
    g = grade_row(ref, ref.astype(np.float32))
    assert g.kl < 1e-7 and g.top1 == 1.0
    g = grade_row(ref, ref[::-1].copy())
    assert g.top1 == 0.0 and g.kl > 0.5
    with pytest.raises(ParityInputError, match="vocabulary size 2"):
        grade_row(ref, ref[:2])
    with pytest.raises(ParityInputError, match="NaN"):
        grade_row(ref, np.array([0.0, np.nan, 1.0]))
    with pytest.raises(ParityInputError, match="dtype"):
        grade_row(ref, np.array([1, 2, 3]))


# --- status against the rules -------------------------------------------------------

def fig(depth=4, kl=1e-6, top1=1.0, ref_entropy=3.0, vocab=2048):
    return DepthFigures(depth, top1, kl, ref_entropy, math.log(vocab))


def test_status_pass_and_failures():
    assert depth_status(fig(), fig(), RULES).status == "pass"
    st_ = depth_status(fig(depth=2048, kl=0.31), fig(), RULES)
    assert st_.status == "fail"
    assert st_.reasons[0].message == "depth 2048: mean KL 0.31 nats > bar 0.05"
    st_ = depth_status(fig(top1=0.9), None, RULES)
    assert st_.status == "fail" and st_.reasons[0].figure == "top1"
    assert st_.reasons[0].bar == 0.95


def test_uncheckable_unless_kl_is_over_the_bar_anyway():
    flat = math.log(2048) * 0.99
    assert depth_status(fig(ref_entropy=flat, top1=0.0), None, RULES).status == "uncheckable"
    assert depth_status(fig(ref_entropy=flat, kl=1.0), None, RULES).status == "fail"


def test_ratchet_fires_only_at_the_bar():
    at_bar = fig(kl=RULES.kl_max)
    assert depth_status(at_bar, fig(kl=0.02), RULES).status == "regressed"
    assert depth_status(at_bar, fig(kl=0.03), RULES).status == "pass"   # only 1.67x main
    assert depth_status(fig(kl=0.004), fig(kl=0.001), RULES).drift == 4.0


@settings(max_examples=300)
@given(cand=st.floats(0, RULES.kl_max, exclude_max=True), main=st.floats(0, 1))
def test_below_the_bar_never_rejects_and_warns_exactly_on_drift(cand, main):
    got = depth_status(fig(kl=cand), fig(kl=main), RULES)
    assert got.passing and not got.reasons
    drifting = cand >= RULES.drift_floor and cand >= RULES.ratchet * main
    assert got.status == ("drift" if drifting else "pass")
    assert (got.warning is not None) == drifting


def test_drift_warning_names_the_depth_and_figures():
    # the demo's deep-drift candidate: exact to 512, then KL 0.028 against main's 1.1e-6
    got = depth_status(fig(1024, kl=0.028), fig(1024, kl=1.1e-6), RULES)
    assert got.status == "drift" and got.passing
    assert got.warning.code == "parity-drift" and got.warning.depth == 1024
    assert "25,455x main's 1.1e-06" in got.warning.message and "legal" in got.warning.message
    assert got.messages == [got.warning.message]


def test_tiny_ratios_do_not_cry_wolf():
    # 1000x of a rounding-level KL is still rounding: under the floor, plain pass
    assert depth_status(fig(kl=1e-4), fig(kl=1e-7), RULES).status == "pass"
    # no main to compare with: no drift either
    assert depth_status(fig(kl=0.04), None, RULES).status == "pass"
    # main exactly 0 (a reference captured from main's own release) and the candidate over the
    # floor: drift, said as main's figure, not as a ratio to zero
    zero = depth_status(fig(kl=0.02), fig(kl=0.0), RULES)
    assert zero.status == "drift" and zero.drift is None
    assert "mean KL 0.02 nats, main 0 (under the bar" in zero.warning.message and "∞" not in zero.warning.message


def test_ratchet_against_main_exactly_zero_says_main_0():
    at_bar = depth_status(fig(kl=RULES.kl_max), fig(kl=0.0), RULES)
    assert at_bar.status == "regressed" and "main 0 (ratchet" in at_bar.reasons[0].message
    assert "∞" not in at_bar.reasons[0].message


def test_drift_ratio():
    assert drift_ratio(0.0, 0.0) == 1.0
    assert drift_ratio(1e-3, 0.0) is None
    assert drift_ratio(1e-3, None) is None


def test_worst_depth_ties():
    figs = [fig(4, kl=0.01), fig(128, kl=0.02, top1=1.0), fig(256, kl=0.02, top1=0.97), fig(512, kl=0.02, top1=0.97)]
    assert worst_depth(figs, RULES) == 512
    figs.append(fig(1024, kl=0.5, ref_entropy=math.log(2048)))    # uncheckable … but failing KL
    assert worst_depth(figs, RULES) == 1024
    assert worst_depth([fig(4, ref_entropy=math.log(2048))], RULES) is None


# --- the rows' spread (KLStats): reported beside the gated figures ---------------

row_kls = st.lists(st.floats(0, 50, allow_nan=False), min_size=1, max_size=300)


@settings(max_examples=300)
@given(kls=row_kls)
def test_kl_quantiles_are_ordered_and_bounded_by_the_rows(kls):
    s = kl_stats(kls, [True] * len(kls), [None] * len(kls))
    qs = [getattr(s, k) for k in KL_QUANTILES]
    assert qs == sorted(qs)
    assert min(kls) <= qs[0] and qs[-1] <= s.kl_max == max(kls)
    assert s.rows == len(kls) and s.kl_median == pytest.approx(float(np.median(kls)), rel=1e-12, abs=1e-300)


@settings(max_examples=300)
@given(kls=row_kls.filter(lambda x: len(x) > 1))
def test_kl_se_is_the_sample_sd_over_root_n(kls):
    s = kl_stats(kls, [True] * len(kls), [None] * len(kls))
    assert s.kl_se == pytest.approx(float(np.std(kls, ddof=1)) / math.sqrt(len(kls)), rel=1e-12, abs=1e-300)


@given(kl=st.floats(0, 50), n=st.integers(2, 200))
def test_kl_se_vanishes_for_identical_rows(kl, n):
    s = kl_stats([kl] * n, [True] * n, [None] * n)
    assert s.kl_se == pytest.approx(0.0, abs=1e-15 * max(kl, 1e-300))
    assert s.kl_median == s.kl_p999 == s.kl_max == kl


@given(agree=st.lists(st.booleans(), min_size=1, max_size=300))
def test_top1_se_is_binomial(agree):
    s = kl_stats([0.0] * len(agree), agree, [None] * len(agree))
    p = sum(agree) / len(agree)
    assert s.top1_se == pytest.approx(math.sqrt(p * (1 - p) / len(agree)), rel=1e-12, abs=0)


@given(dp=st.lists(st.one_of(st.none(), st.floats(-1, 1)), min_size=1, max_size=100))
def test_rms_dp_covers_only_rows_with_a_next_token(dp):
    s = kl_stats([0.0] * len(dp), [True] * len(dp), dp)
    known = [x for x in dp if x is not None]
    assert s.dp_rows == len(known)
    if known:
        assert s.rms_dp == pytest.approx(math.sqrt(math.fsum(x * x for x in known) / len(known)), rel=1e-12, abs=1e-300)
    else:
        assert s.rms_dp is None


def test_one_row_has_no_kl_se():
    s = kl_stats([0.25], [False], [0.1])
    assert s.kl_se is None and s.top1_se == 0.0 and s.kl_median == s.kl_max == 0.25
    assert s.rms_dp == pytest.approx(0.1)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 6), vocab=st.integers(2, 300))
def test_identical_logits_have_no_spread(seed, rows, vocab):
    x = logits(2, rows, vocab, seed=seed)
    tokens = np.random.default_rng(seed).integers(0, vocab, (2, rows))
    for f in grade_logits(x, x.copy(), [8, 16], rows, vocab, next_tokens=tokens):
        s = f.stats
        assert s.rms_dp == 0.0 and s.dp_rows == rows and s.kl_max == 0.0 and s.top1_se == 0.0
        assert s.kl_se in (0.0, None) and all(getattr(s, k) == 0.0 for k in KL_QUANTILES)


def test_delta_p_is_the_change_in_the_next_tokens_probability():
    ref = logits(2, 3, 700, seed=12)
    cand = ref + logits(2, 3, 700, seed=13, scale=0.3)
    tokens = np.array([[5, 17, -1], [699, 0, 42]])
    pr, pc = np.exp(log_softmax(ref)), np.exp(log_softmax(cand))
    for i, f in enumerate(grade_logits(ref, cand, [4, 8], 3, 700, next_tokens=tokens)):
        dp = [pc[i, r, t] - pr[i, r, t] for r, t in enumerate(tokens[i]) if t >= 0]
        assert f.stats.dp_rows == len(dp)
        assert f.stats.rms_dp == pytest.approx(math.sqrt(np.mean(np.square(dp))), rel=1e-9)
        kls = np.sum(pr[i] * (log_softmax(ref[i]) - log_softmax(cand[i])), axis=-1)
        assert f.stats.kl_max == pytest.approx(kls.max(), rel=1e-9)
        assert f.stats.kl_se == pytest.approx(np.std(kls, ddof=1) / math.sqrt(3), rel=1e-6)
        assert f.kl == pytest.approx(kls.mean(), rel=1e-9)   # the gated mean is unchanged


def test_without_next_tokens_rms_dp_is_not_reported():
    x = logits(1, 2, 50)
    [f] = grade_logits(x, x + 0.01, [4], 2, 50)
    assert f.stats.rms_dp is None and f.stats.dp_rows == 0


def test_next_tokens_follow_the_row_layout():
    doc = list(range(100, 110))                        # 10 tokens
    got = next_token_ids(doc, [3, 9, 10], rows=3)
    # row r of depth d predicts doc[d - rows + 1 + r]; past the end there is none
    assert got.tolist() == [[101, 102, 103], [107, 108, 109], [108, 109, -1]]


@pytest.mark.parametrize("tokens,needle", [
    (np.zeros((2, 2), dtype=np.int64), "shape"),
    (np.zeros((1, 2), dtype=np.float64), "integer"),
    (np.array([[0, 10]]), "must lie in"),
    (np.array([[-2, 0]]), "must lie in"),
])
def test_bad_next_tokens_are_refused(tokens, needle):
    x = logits(1, 2, 10)
    with pytest.raises(ParityInputError, match=needle):
        grade_logits(x, x, [4], 2, 10, next_tokens=tokens)


def test_depth_figures_carry_their_stats_and_read_without_them():
    x = logits(1, 4, 30)
    [f] = grade_logits(x, x * 1.1, [4], 4, 30, next_tokens=np.arange(4)[None, :])
    assert isinstance(f.stats, KLStats) and DepthFigures.from_dict(f.to_dict()) == f
    old = {"depth": 4, "top1": 1.0, "kl": 1e-6, "ref_entropy": 3.1, "max_entropy": 7.6}   # before stats
    assert DepthFigures.from_dict(old).stats is None and DepthFigures.from_dict(old).to_dict() == old


def test_old_receipts_load_without_stats_and_re_derive_their_verdict():
    import json
    from pathlib import Path

    from console.core.decisions import gate
    from console.core.records.receipt import Receipt
    sealed = sorted((Path(__file__).resolve().parents[1] / "data" / "receipts-v1" / "receipts").glob("*.json"))
    assert sealed
    for path in sealed:
        d = json.loads(path.read_text())
        r = Receipt.from_dict(d)
        sides = [s for s in (r.parity.main, r.parity.candidate) if s is not None]
        assert sides and all(f.stats is None for s in sides for f in s.depths)
        v = gate.decide(r, r.rules).to_dict()
        assert (v["outcome"], v["tier"], v["exit_code"]) == \
            (d["verdict"]["outcome"], d["verdict"]["tier"], d["verdict"]["exit_code"])
        assert [x["code"] for x in v["reasons"]] == [x["code"] for x in d["verdict"]["reasons"]]


def test_stats_are_reported_never_gated():
    from console.core.decisions import gate
    from console.core.records.receipt import Receipt
    from core.receipts import default_rules, make_receipt
    bare = make_receipt()
    spread = kl_stats([1e-6, 2.0], [True, False], [0.5, -0.5]).to_dict()   # a wild spread
    with_stats = make_receipt()
    for side in ("main", "candidate"):
        for d in with_stats["parity"][side]["depths"]:
            d["stats"] = spread
    a, b = (gate.decide(Receipt.from_dict(x), default_rules()).to_dict() for x in (bare, with_stats))
    for v in (a, b):
        for row in v["parity"]["depths"]:
            for side in ("main", "candidate"):
                (row[side] or {}).pop("stats", None)
    assert a == b
