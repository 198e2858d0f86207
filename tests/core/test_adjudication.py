import pytest
from hypothesis import given, settings, strategies as st

from console.core.records import adjudication as adj
from console.core.records.adjudication import Adjudication, Variant
from console.core.records.rules import GateRules

RULES = GateRules(kl_max=0.05, borderline_kl=0.10, top1_min=0.75)
REF = [[1, 2, 3, 4]] * 10          # 40 positions


def record(cand_followed, variant_followed=None, spread=0.041, depth=768):
    variant_followed = variant_followed if variant_followed is not None else [[1, 2, 3, 9]] * 10   # 10 differ
    return Adjudication(depths=[depth], variants=[Variant("flash-attn", ["--flash-attn", "1"], {depth: spread},
                                                          variant_followed),
                                                  Variant("batch-64", ["--batch", "64"], {depth: 0.0}, REF)],
                        positions=list(range(64, 74)), tokens=4, reference=REF, candidate=cand_followed)


def test_the_band_is_over_the_bar_up_to_the_edge_with_top1_within():
    assert adj.is_borderline(0.0586, 1.0, RULES)
    assert adj.is_borderline(0.10, 0.75, RULES)
    assert not adj.is_borderline(0.05, 1.0, RULES)          # at the bar: not over it
    assert not adj.is_borderline(0.1001, 1.0, RULES)
    assert not adj.is_borderline(0.06, 0.5, RULES)          # top-1 fails too: not a rounding matter
    assert not adj.is_borderline(0.06, 1.0, GateRules(kl_max=0.05))   # no band: never


def test_within_twice_the_spread_and_agreeing_passes():
    # the measured kv-cache-q8 figures: KL 0.0586 at 768 against flash attention's 0.0412
    r = adj.rule(record([[1, 2, 3, 9]] * 5 + REF[:5], spread=0.0412), {768: 0.0586}, RULES)
    assert r.passed and r.depths[768]["line"] == pytest.approx(0.0824) and r.depths[768]["within"]
    assert (r.candidate_disagree, r.variant_disagree, r.agreement_line) == (5, 10, 20)
    assert r.summary.startswith("pass (adjudicated): depth 768: KL 0.0586 ≤ 2x spread 0.0412")


def test_over_twice_the_spread_rejects_with_the_figures():
    r = adj.rule(record(REF, spread=0.0265, depth=256), {256: 0.0538}, RULES)
    assert not r.passed
    [reason] = r.reasons
    assert reason.depth == 256 and reason.bar == pytest.approx(0.053) and reason.value == 0.0538
    assert "over 2x the reference's own kernel spread 0.0265 (0.053)" in reason.message


def test_too_many_disagreements_reject():
    r = adj.rule(record([[9, 9, 9, 9]] * 10), {768: 0.06}, RULES)
    assert not r.passed and r.candidate_disagree == 40
    assert "at 40 of 40 positions, more than 2x the 10 of the reference's own kernels (20)" in r.reasons[0].message


def test_missing_evidence_never_passes():
    no_variants = Adjudication(depths=[768], error="the reference was not captured from main's source")
    r = adj.rule(no_variants, {768: 0.06}, RULES)
    assert not r.passed and "not measured" in r.reasons[0].message and "main's source" in r.reasons[0].message
    no_completions = record(None)
    assert not adj.rule(no_completions, {768: 0.06}, RULES).passed
    ragged = record([[1, 2, 3]] * 10)                        # not the reference's shape
    assert not adj.rule(ragged, {768: 0.06}, RULES).passed


@settings(max_examples=200)
@given(kl=st.floats(0.0501, 0.1), spread=st.floats(0.0, 0.1), cand=st.integers(0, 40), var=st.integers(0, 40))
def test_the_ruling_is_exactly_the_two_stated_conditions(kl, spread, cand, var):
    cand_f = [[1, 2, 3, 4] if i >= cand else [0, 2, 3, 4] for i in range(40)]
    var_f = [[1, 2, 3, 4] if i >= var else [0, 2, 3, 4] for i in range(40)]
    rec = Adjudication(depths=[768], variants=[Variant("v", ["-x"], {768: spread}, var_f)], positions=list(range(40)),
                       tokens=4, reference=[[1, 2, 3, 4]] * 40, candidate=cand_f)
    r = adj.rule(rec, {768: kl}, RULES)
    assert r.passed == (kl <= 2 * spread and cand <= 2 * var)


def test_positions_spread_evenly_over_the_depths():
    p = adj.positions([16, 128, 256, 512, 768, 1024], 40)
    assert len(p) == 40 and p[0] == 16 and p[-1] == 1024 and p == sorted(set(p))
    assert adj.positions([4, 6], 40) == [4, 5, 6]


def test_the_record_round_trips():
    r = record(REF)
    assert Adjudication.from_dict(r.to_dict()).to_dict() == r.to_dict()
