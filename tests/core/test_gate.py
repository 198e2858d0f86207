import json
import math
import random
import statistics
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.core.records.verdict import BANDS, Verdict
from console.core.statistics.sequential import band
from console.core.decisions.counting import counted
from console.core.decisions.gate import decide
from console.core.records.receipt import SCHEMA_1
from console.core.statistics.stats import stdev
from console.profile import Bands, Guard, rules_from_dict

from .receipts import MAIN, NOISY_CAND, OUTCOME_RECEIPTS, default_rules, depth_figures, make_receipt, timed, typed, variant

RULES = default_rules()
OUTCOME_MAIN = MAIN


def codes(v):
    return v.codes


def warn_codes(v):
    return [w.code for w in v.warnings]


def scaled(values, k):
    return tuple(x * k for x in values)


# --- the clean path ------------------------------------------------------------------

def test_clean_round_is_accepted_with_a_tier():
    v = decide(typed(make_receipt()), RULES)
    assert v.outcome == "accepted" and v.exit_code == 0
    # the tier is the band of the conservative end of the interval, and says what it spans
    assert v.tier == band(v.speed.basis, RULES.bands) == "s" and v.tier_span == ["s", "m"]
    assert v.tier_label == "s (interval spans s–m)"
    assert v.speed.frontier_source == "main this round" and v.speed.basis_kind == "frontier"
    assert v.speed.basis == pytest.approx(v.speed.interval[0], rel=1e-12)
    assert v.speed.interval[0] < v.speed.gain < v.speed.interval[1]
    assert v.parity["worst_depth"] == 4096
    assert v.speed.interval[0] > RULES.significance and v.speed.pairs == 8


def test_verdict_round_trips_as_strict_json():
    d = decide(typed(make_receipt()), RULES).to_dict()
    text = json.dumps(d, allow_nan=False)
    again = Verdict.from_dict(json.loads(text))
    assert again.to_dict() == d
    assert set(d) == {"outcome", "tier", "tier_span", "would_be_tier", "exit_code", "reasons", "warnings", "parity",
                      "speed"}


def test_rules_stored_in_the_receipt_give_the_same_verdict():
    r = make_receipt()
    assert decide(typed(r), rules_from_dict(r["profile"]["rules"])).to_dict() == decide(typed(r), RULES).to_dict()


# --- parity -------------------------------------------------------------------------

def test_kl_failure_rejects_with_a_readable_reason_and_no_speed():
    r = make_receipt(cand_parity=depth_figures(kl=2e-6, at={2048: {"kl": 0.31}}))
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and v.exit_code == 1 and v.tier is None
    [reason] = v.reasons
    assert reason.message == "depth 2048: mean KL 0.31 nats > bar 0.05"
    assert (reason.depth, reason.figure, reason.bar) == (2048, "kl", 0.05)
    assert v.speed is None and v.suppressed
    assert v.parity["worst_depth"] == 2048


def test_every_failing_depth_is_listed():
    r = make_receipt(cand_parity=depth_figures(at={4: {"top1": 0.5}, 4096: {"kl": 0.2, "top1": 0.9}}))
    v = decide(typed(r), RULES)
    assert sorted((x.depth, x.figure) for x in v.reasons) == [(4, "top1"), (4096, "kl"), (4096, "top1")]


def test_ratchet_regression_rejects():
    r = make_receipt(cand_parity=depth_figures(at={512: {"kl": 0.05}}),
                     main_parity=depth_figures(at={512: {"kl": 0.02}}))
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["parity-ratchet"]
    assert [row["drift"] for row in v.parity["depths"] if row["depth"] == 512] == [2.5]


def test_legal_drift_is_a_warning_with_depths_and_figures_not_a_rejection():
    r = make_receipt(cand_parity=depth_figures(kl=1e-6, at={1024: {"kl": 0.028}, 2048: {"kl": 0.03}}),
                     main_parity=depth_figures(kl=1e-6))
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted"
    [w] = [w for w in v.warnings if w.code == "parity-drift"]
    assert "depth 1024, 2048" in w.message and "KL 0.028 nats, 28,000x main's" in w.message
    assert {row["depth"]: row["status"] for row in v.parity["depths"]}[2048] == "drift"


def test_drift_against_main_exactly_zero_says_main_0_not_a_ratio():
    # the llama profile's reference is main's own release: main's KL is zero by construction
    r = make_receipt(cand_parity=depth_figures(kl=0.0, at={1024: {"kl": 0.028}}),
                     main_parity=depth_figures(kl=0.0))
    [w] = [w for w in decide(typed(r), RULES).warnings if w.code == "parity-drift"]
    assert "depth 1024: KL 0.028 nats, main 0)" in w.message and "∞" not in w.message


def test_candidate_parity_error_rejects():
    v = decide(typed(make_receipt(cand_error="logits file has shape [7, 2048], expected [7, 4, 2048]")), RULES)
    assert v.outcome == "rejected" and codes(v) == ["parity-error"]
    assert "shape" in v.reasons[0].message


def test_scored_path_failures_reject():
    for cand, code in (({"depth": 1024, "top1": 0.0, "kl": 0.01, "error": None}, "scored-path-top1"),
                       ({"depth": 1024, "top1": 1.0, "kl": 0.4, "error": None}, "scored-path-kl"),
                       ({"depth": 1024, "top1": None, "kl": None, "error": "no bench_logits.npy"}, "scored-path-error")):
        v = decide(typed(make_receipt(scored_path={"main": None, "candidate": cand})), RULES)
        assert v.outcome == "rejected" and codes(v) == [code]


def test_missing_scored_path_is_a_warning():
    v = decide(typed(make_receipt(scored_path={})), RULES)
    assert v.outcome == "accepted" and "scored-path-unchecked" in warn_codes(v)


def test_uncheckable_depths():
    flat = math.log(2048)
    some = decide(typed(make_receipt(cand_parity=depth_figures(kl=2e-6, at={4: {"ref_entropy": flat, "top1": 0.0}}))), RULES)
    assert some.outcome == "accepted" and "parity-uncheckable" in warn_codes(some)
    assert "depth 4" in next(w.message for w in some.warnings if w.code == "parity-uncheckable")
    all_ = decide(typed(make_receipt(cand_parity=depth_figures(ref_entropy=flat))), RULES)
    assert all_.outcome == "uncheckable" and all_.exit_code == 4 and all_.tier is None


def test_main_parity_error_only_warns():
    r = make_receipt()
    r["parity"]["main"] = {"error": "main's logits run failed", "depths": []}
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and "main-parity-error" in warn_codes(v)


# --- claims --------------------------------------------------------------------------

def test_refused_candidate_rep_rejects():
    r = make_receipt()
    rep = timed(r, "candidate")[1]
    rep.update(status="refused", value=None, refusals=["two BENCH_RESULT lines"])
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["refused"]
    assert "two BENCH_RESULT lines" in v.reasons[0].message


def test_main_claim_problem_is_infra():
    r = make_receipt()
    timed(r, "main")[0].update(status="refused", value=None, refusals=["bad json"])
    v = decide(typed(r), RULES)
    assert v.outcome == "infra" and v.exit_code == 3
    assert v.reasons[0].message.startswith("main invalid")


def test_elapsed_beyond_wall_clock_is_refused():
    r = make_receipt()
    rep = timed(r, "candidate")[0]
    rep["reported"]["elapsed_s"] = rep["wall_s"] * 1.2
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["claim-wall"]


def test_rate_implying_more_time_than_wall_is_refused():
    r = make_receipt()
    rep = timed(r, "candidate")[0]
    rep["value"] = rep["reported"]["value"] = 100.0      # 192 tokens at 100/s is 1.92 s, wall is ~1.16 s
    v = decide(typed(r), RULES)
    assert "claim-wall" in codes(v) and v.outcome == "rejected"


def _padded(pad_s: float):
    """A candidate that claims 2x its real speed and idles ``pad_s`` on every short run."""
    r = make_receipt()
    for rep in r["reps"]:
        if rep["build"] == "candidate" and rep["phase"] in ("timed", "short"):
            real = rep["value"]
            rep["value"] = rep["reported"]["value"] = real * 2
            rep["reported"]["elapsed_s"] = rep["tokens"] / (real * 2)
            if rep["phase"] == "short":
                rep["wall_s"] += pad_s
    return r


def test_differential_refuses_an_inflated_rate():
    # The engine claims 2x its real speed: each run's elapsed is halved, the wall clock is not.
    v = decide(typed(_padded(0.0)), RULES)
    assert v.outcome == "rejected" and codes(v) == ["claim-differential"]
    assert "rate not supported by wall clock" in v.reasons[0].message


def test_short_runs_padded_to_prop_up_an_inflated_rate_are_refused_by_their_fixed_cost():
    r = _padded(0.5)
    claims = counted(typed(r), RULES)
    d = claims.differential["candidate"]
    assert d["rate"] >= d["required_rate"]              # the padding does fool the slope …
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["claim-overhead"]   # … not the intercept
    assert "fixed cost per run" in v.reasons[0].message
    assert d["overhead_s"] > claims.differential["main"]["overhead_s"] + 0.25


def test_an_honest_candidate_has_main_s_fixed_cost():
    claims = counted(typed(make_receipt()), RULES)
    assert abs(claims.differential["candidate"]["overhead_s"] - claims.differential["main"]["overhead_s"]) < 1e-3


def test_differential_refuses_when_long_runs_are_not_longer():
    r = make_receipt()
    for rep in r["reps"]:
        if rep["build"] == "candidate" and rep["phase"] == "short":
            rep["wall_s"] = 5.0
    v = decide(typed(r), RULES)
    assert codes(v) == ["claim-differential"] and "no longer than" in v.reasons[0].message


def test_seek_must_be_announced_and_backed_by_memory():
    r = make_receipt()
    timed(r, "candidate")[2]["reported"]["shortcut"] = "none"
    assert codes(decide(typed(r), RULES)) == ["claim-seek"]
    r = make_receipt()
    timed(r, "candidate")[2]["peak_mem_bytes"] = None
    v = decide(typed(r), RULES)
    assert codes(v) == ["claim-seek-memory"] and "no evidence" in v.reasons[0].message
    r = make_receipt()
    timed(r, "candidate")[2]["peak_mem_bytes"] = 4096 * 4096 // 2
    assert codes(decide(typed(r), RULES)) == ["claim-seek-memory"]


def test_seek_announced_without_the_profile_declaring_it_is_refused():
    r = make_receipt(shortcut="none")
    assert decide(typed(r), RULES).outcome == "accepted"
    timed(r, "candidate")[0]["reported"]["shortcut"] = "seek"
    assert codes(decide(typed(r), RULES)) == ["claim-seek"]


def test_failed_candidate_runs_reject():
    r = make_receipt()
    timed(r, "candidate")[3].update(status="timeout", value=None)
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["failed-run"]


def test_suspect_reps_are_excluded_not_blamed():
    r = make_receipt(cand=(212.0, 213.0, 211.0, 212.5, 400.0, 212.8, 211.4, 212.1))
    timed(r, "candidate")[4]["status"] = "suspect"
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and "reps-excluded" in warn_codes(v)
    assert v.speed.candidate["n"] == 7 and v.speed.candidate_median == 212.1
    assert v.speed.pairs == 7       # the pair that lost its candidate rep is dropped whole


def test_too_few_valid_reps_is_infra():
    r = make_receipt()
    for rep in timed(r, "main")[1:]:
        rep["status"] = "suspect"
    v = decide(typed(r), RULES)
    assert v.outcome == "infra" and codes(v) == ["too-few-reps"] and v.reasons[0].build == "main"


def test_infra_receipt_is_infra():
    r = make_receipt(status="infra", cand_parity=depth_figures(kl=0.9))
    r["diagnosis"] = "GPU fell off the bus during rep 3"
    v = decide(typed(r), RULES)
    assert v.outcome == "infra" and "fell off the bus" in v.reasons[0].message


# --- the timed path's own output -----------------------------------------------------

def _timed_rows(*rows):
    return {"depth": 4096, "tokens": 192, "basis": "main", "main_rep": 0, "error": None,
            "candidate": [dict({"index": i, "attempt": 0, "error": None}, **r) for i, r in enumerate(rows)]}


def test_timed_path_diverging_from_main_rejects_without_speed_credit():
    r = make_receipt(timed_path=_timed_rows({"kl": 0.0, "top1": 1.0}, {"kl": 0.9, "top1": 0.0}))
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and v.tier is None and v.speed is None and v.suppressed
    assert codes(v) == ["timed-path-kl", "timed-path-top1"]
    assert "candidate timed rep 1" in v.reasons[0].message and v.reasons[0].depth == 4096
    assert v.parity["timed_path"]["status"] == "fail"


def test_a_parity_rejection_still_lists_the_refused_claims():
    r = make_receipt(timed_path=_timed_rows({"kl": 0.7, "top1": 1.0}))
    for x in timed(r, "candidate"):
        x["peak_mem_bytes"] = 2**20          # a seek that never allocated its cache
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and v.tier is None
    assert codes(v)[0] == "timed-path-kl" and "claim-seek-memory" in codes(v)


def test_timed_rep_without_its_logits_rejects():
    r = make_receipt(timed_path=_timed_rows({"kl": None, "top1": None, "error": "bench_logits.npy: missing"}))
    assert codes(decide(typed(r), RULES)) == ["timed-path-error"]


def test_timed_path_small_drift_passes():
    r = make_receipt(timed_path=_timed_rows({"kl": 0.004, "top1": 1.0}, {"kl": 0.001, "top1": 1.0}))
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and v.parity["timed_path"]["worst_kl"] == 0.004


def test_timed_path_not_compared_is_said_not_failed():
    r = make_receipt(timed_path={"depth": 4096, "candidate": [], "error": "no timed rep of main ran"})
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and "timed-path-unchecked" in warn_codes(v)
    del r["parity"]["timed_path"]           # a receipt from before the check existed
    assert decide(typed(r), RULES).parity["timed_path"] == {"status": "unchecked"}


# --- guards --------------------------------------------------------------------------

def test_guard_breach_rejects():
    r = make_receipt(guards={"decode_ctx128": (scaled(MAIN[:3], 1.3), (240.0, 241.0, 242.0))})
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["guard-breach"] and v.tier is None
    assert "floor 255" in v.reasons[0].message


def test_guard_within_its_drop_passes():
    r = make_receipt(guards={"decode_ctx128": (scaled(MAIN[:3], 1.3), (252.5, 253.0, 253.5))})
    assert decide(typed(r), RULES).outcome == "accepted"


def test_without_a_pinned_floor_main_this_round_is_the_guard_floor():
    r = make_receipt(guards={"decode_ctx128": ((100.0, 101.0, 99.0), (70.0, 71.0, 69.0))})
    r["lock"]["guards"]["decode_ctx128"] = 0.0
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["guard-breach"]
    row = v.guards["decode_ctx128"]
    assert (row["floor"], row["floor_source"]) == (100.0, "main this round")


def test_without_a_pinned_floor_a_candidate_level_with_main_passes_the_guard():
    r = make_receipt(guards={"decode_ctx128": ((100.0, 101.0, 99.0), (99.0, 100.0, 98.5))})
    r["lock"]["guards"]["decode_ctx128"] = 0.0
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and v.speed.guards["decode_ctx128"]["enforced"]


def test_guard_with_no_floor_and_no_main_reps_is_said_not_enforced():
    r = make_receipt(guards={"decode_ctx128": ((), (1.0, 1.0, 1.0))})
    r["lock"]["guards"]["decode_ctx128"] = 0.0
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and "guard-unmeasured" in warn_codes(v)


# --- decisions (schema 2): one paired estimand, a confidence sequence, four outcomes ---------

def test_small_gain_is_decided_none():
    v = decide(typed(make_receipt(cand=scaled(MAIN, 1.015))), RULES)
    assert v.outcome == "none" and v.exit_code == 0 and v.tier is None and codes(v) == ["no-gain"]
    assert v.speed.decision["basis_upper_miss"] < RULES.min_gain


def test_a_noisy_gain_is_undecided_and_says_what_a_decision_would_need():
    v = decide(typed(make_receipt(OUTCOME_MAIN, cand=NOISY_CAND)), RULES)
    assert v.outcome == "undecided" and v.exit_code == 0 and codes(v) == ["undecided"]
    assert v.speed.interval[0] < RULES.significance and v.speed.needed_pairs > 8
    assert "budget spent after 8 pairs" in v.reasons[0].message


def test_an_undecided_verdict_names_its_two_miss_ends_when_a_pin_above_main_makes_them_two_scales():
    """Against main the two ends `none` reads form one interval; against a pin 25 % above main the
    gain's lower end and the basis's upper end are on two scales (here they cross), so each is named."""
    alone = decide(typed(make_receipt(OUTCOME_MAIN, cand=NOISY_CAND, lock={"frontier": 0.0})), RULES)
    assert "miss rate" in alone.reasons[0].message and "interval [" in alone.reasons[0].message.split("±")[1]
    frontier = 1.25 * statistics.median(OUTCOME_MAIN)
    pinned = decide(typed(make_receipt(OUTCOME_MAIN, cand=NOISY_CAND, lock={"frontier": frontier})), RULES)
    d = pinned.speed.decision
    assert pinned.outcome == "undecided" and d["basis_upper_miss"] < d["upper_miss"]
    said = pinned.reasons[0].message.split("±")[1]
    assert "gain against main at least" in said and "basis at most" in said and "interval [" not in said


def test_a_slower_candidate_is_decided_slower_and_the_profile_says_whether_that_rejects():
    r = OUTCOME_RECEIPTS["slower"]()
    v = decide(typed(r), RULES)
    assert v.outcome == "slower" and v.exit_code == 1 and v.speed.interval[1] < 0 and codes(v) == ["slower"]
    recorded = decide(typed(r), default_rules(slower="record"))
    assert recorded.outcome == "slower" and recorded.exit_code == 0
    assert Verdict.from_dict(recorded.to_dict()).exit_code == 0


def test_fewer_than_two_valid_pairs_is_infra_and_a_few_pairs_decide_nothing():
    v = decide(typed(make_receipt(main=(200.0,), cand=(230.0,))), RULES)
    assert v.outcome == "infra" and codes(v) == ["too-few-reps", "too-few-reps"]
    v = decide(typed(make_receipt(main=(200.0, 200.0), cand=(230.0, 230.0))), RULES)
    assert v.outcome == "undecided"         # two pairs cannot bound the noise at 1 %


def test_the_node_s_noise_record_is_for_planning_and_warnings_only():
    r = make_receipt()
    assert "noise-unmeasured" in warn_codes(decide(typed(r), RULES))
    r["lock"].update(noise_sd=0.0001, noise_df=40)          # a much quieter node than this round
    v = decide(typed(r), RULES)
    assert "noisier-than-node" in warn_codes(v) and v.outcome == "accepted"
    r["lock"].update(noise_sd=0.01, noise_df=40)
    quiet = decide(typed(r), RULES)
    assert not {"noisier-than-node", "noise-unmeasured"} & set(warn_codes(quiet))
    assert quiet.speed.decision == v.speed.decision          # the decision needs no noise figure


def test_earlier_rounds_of_the_same_candidate_pool_and_say_so():
    r = make_receipt(cand=NOISY_CAND)
    alone = decide(typed(r), RULES)
    earlier = [math.log(1.06) + 0.002 * (-1) ** k for k in range(12)]
    r["sequential"] = {"prior": [{"receipt": "a" * 64, "round_id": "R0", "log_ratios": earlier}],
                       "experiment": "e", "preview": None, "stopped": "decided"}
    pooled = decide(typed(r), RULES)
    assert alone.outcome == "undecided" and pooled.outcome == "accepted"
    assert pooled.speed.decision["prior_pairs"] == 12 and "pooled" in warn_codes(pooled)


def test_lock_frontier_above_main_is_the_frontier_and_stale():
    r = make_receipt()
    r["lock"]["frontier"] = 205.0
    v = decide(typed(r), RULES)
    assert v.speed.frontier == 205.0 and v.speed.frontier_source == "lock"
    lo = v.speed.interval[0]
    assert v.speed.basis == pytest.approx(((1 + lo) * v.speed.main_median - 205.0) / 205.0)
    assert v.speed.basis < lo                       # never above the gain measured against main
    assert "pin-stale" in warn_codes(v)


def test_main_far_above_the_pin_is_stale():
    r = make_receipt()
    r["lock"]["frontier"] = 180.0
    v = decide(typed(r), RULES)
    [msg] = [w.message for w in v.warnings if w.code == "pin-stale"]
    assert "+11.2%" in msg and v.speed.frontier == v.speed.main_median


# --- tier and plausibility ----------------------------------------------------------------

def test_anchor_binds_when_it_is_larger_than_the_frontier():
    rules = default_rules(anchor=800.0)
    v = decide(typed(make_receipt(cand=scaled(MAIN, 1.20))), rules)
    assert v.speed.basis_kind == "anchor"
    lo = v.speed.interval[0]
    assert v.speed.basis == pytest.approx((1 + lo) * v.speed.main_median / 800.0 - v.speed.main_median / 800.0)
    assert v.tier == "s" and v.speed.gain > 0.18      # xl over the frontier, s against the anchor


def test_band_edges():
    b = Bands()
    assert [band(x, b) for x in (0.0, 0.0349, 0.035, 0.06, 0.0999, 0.10, 0.18, 3.0)] == \
        ["xs", "xs", "s", "m", "m", "l", "xl", "xl"]


def test_implausible_result_is_held_with_its_would_be_tier():
    r = make_receipt(cand=scaled(MAIN, 5.5), short_cand=scaled(MAIN[:3], 5.5),
                     guards={"decode_ctx128": (scaled(MAIN[:3], 1.3), scaled(MAIN[:3], 7))})
    v = decide(typed(r), RULES)
    assert v.outcome == "implausible" and v.exit_code == 4
    assert v.tier is None and v.would_be_tier == "xl"


# --- noise receipts ---------------------------------------------------------------------

def test_noise_receipt_measures_pair_noise_with_its_uncertainty():
    r = make_receipt(cand=(200.4, 199.8, 200.9, 200.1, 199.7, 200.6, 199.5, 200.3), kind="noise")
    v = decide(typed(r), RULES)
    assert v == decide(typed(r), RULES)
    assert v.outcome == "noise" and v.exit_code == 0
    n = v.noise
    xs = [math.log(c / m) for m, c in zip(MAIN, (200.4, 199.8, 200.9, 200.1, 199.7, 200.6, 199.5, 200.3))]
    assert n.pairs == 8 and n.df == 7 and n.sd == pytest.approx(stdev(xs))
    assert n.lower < n.sd < n.upper and n.decidable_gain > RULES.significance


def test_a_noise_receipt_with_too_few_pairs_is_infra():
    r = make_receipt(main=MAIN[:2], cand=(200.4, 199.8), kind="noise")
    assert decide(typed(r), RULES).outcome == "infra"


# --- schema 1: old receipts keep the rules they were sealed under ----------------------------

def legacy_receipt(**kw):
    kw.setdefault("main", MAIN[:5])
    kw.setdefault("cand", scaled(MAIN[:5], 1.055))
    return make_receipt(schema=SCHEMA_1, **kw)


def test_a_schema_1_receipt_is_judged_by_its_own_rules_and_says_so():
    v = decide(typed(legacy_receipt()), RULES)
    assert v.outcome == "accepted" and v.tier == "s" and v.speed.decision is None
    assert warn_codes(v)[0] == "legacy-rules"
    assert decide(typed(legacy_receipt(cand=scaled(MAIN[:5], 1.015))), RULES).codes == ["below-significance"]
    noisy = legacy_receipt(main=(200, 200, 200, 200, 200), cand=(260, 150, 270, 140, 230), short_cand=(230, 230, 230))
    assert decide(typed(noisy), RULES).codes == ["interval-includes-zero"]
    two = legacy_receipt(main=(200.0, 200.0), cand=(230.0, 230.0))
    assert decide(typed(two), RULES).outcome == "accepted"     # the old rule: two identical ratios, a point interval


# --- properties --------------------------------------------------------------------------

values = st.lists(st.floats(150.0, 250.0), min_size=2, max_size=7)


def round_with(main_vals, factor, jitter):
    cand = [m * factor * (1 + j) for m, j in zip(main_vals, jitter)]
    return make_receipt(main=main_vals, cand=cand, short_main=main_vals[:2], short_cand=cand[:2],
                        guards={"decode_ctx128": (main_vals[:2], cand[:2])},
                        lock={"frontier": 0.0, "frontier_slot": "S", "anchor": 0.0,
                              "guards": {"decode_ctx128": 0.0}, "noise_spread": 0.01})


jitters = st.lists(st.floats(-0.03, 0.03), min_size=7, max_size=7)
settings_ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(values, st.floats(0.8, 1.6), jitters, st.sampled_from([0.0, 150.0, 300.0]))
def test_tier_never_exceeds_the_measured_gain_band(main_vals, factor, jitter, anchor):
    v = decide(typed(round_with(main_vals, factor, jitter)), default_rules(anchor=anchor))
    if v.tier is not None:
        assert BANDS.index(v.tier) <= BANDS.index(band(v.speed.gain, RULES.bands))
        # identical pairs make the interval one point: its end and the mean may differ in the last bit
        assert v.speed.basis <= v.speed.gain + 1e-12


@settings_
@given(values, st.floats(0.8, 1.6), jitters, st.integers(0, 6), st.sampled_from(["kl", "top1"]))
def test_parity_failure_never_yields_a_tier_or_speed_credit(main_vals, factor, jitter, depth_i, figure):
    r = round_with(main_vals, factor, jitter)
    bad = {"kl": {"kl": 0.5}, "top1": {"top1": 0.5}}[figure]
    r["parity"]["candidate"]["depths"] = depth_figures(at={(4, 128, 256, 512, 1024, 2048, 4096)[depth_i]: bad})
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and v.tier is None and v.would_be_tier is None
    assert v.speed is None and not {"gain", "basis", "band"} & set(v.to_dict()["speed"])


@settings_
@given(values, st.floats(0.8, 1.6), jitters, st.randoms(use_true_random=False))
def test_verdict_is_invariant_to_rep_listing_order(main_vals, factor, jitter, rnd):
    r = round_with(main_vals, factor, jitter)
    shuffled = variant(r)
    rnd.shuffle(shuffled["reps"])
    assert decide(typed(shuffled), RULES).to_dict() == decide(typed(r), RULES).to_dict()


@settings_
@given(values, st.floats(0.8, 1.02), jitters)
def test_gain_at_or_below_the_threshold_is_never_accepted(main_vals, factor, jitter):
    v = decide(typed(round_with(main_vals, factor, jitter)), RULES)
    if v.speed is not None and v.speed.gain <= RULES.significance:
        assert v.outcome != "accepted" and v.tier is None


def test_gain_exactly_at_the_threshold_is_none():
    main = (200.0,) * 8
    v = decide(typed(make_receipt(main=main, cand=(204.0,) * 8)), default_rules(significance=0.02))
    assert v.speed.gain <= 0.02 + 1e-15
    assert v.outcome == "none"


def test_listing_order_of_the_default_round():
    r = make_receipt()
    s = variant(r)
    random.Random(3).shuffle(s["reps"])
    assert decide(typed(s), RULES).to_dict() == decide(typed(r), RULES).to_dict()


def test_measured_noise_raised_the_schema_1_significance_threshold():
    """Schema 1: a gain inside the node's measured noise was never significant."""
    r = legacy_receipt()
    rules = default_rules()
    assert decide(typed(r), rules).outcome == "accepted"
    r["lock"]["noise_spread"] = 0.08
    v = decide(typed(r), rules)
    assert v.outcome == "none" and v.tier is None
    assert v.to_dict()["speed"]["threshold"] == 0.08
    assert any(w["code"] == "threshold-below-noise" for w in v.to_dict()["warnings"])


def test_two_noisy_guard_reps_do_not_reject_an_unchanged_candidate():
    # measured on the 2-core node: the `noise` candidate (main's own code) had two guard reps 20 % low
    guards = {"decode_ctx128": ((696.37, 704.22, 701.88), (560.59, 539.97, 705.61))}
    r = make_receipt(guards=guards)
    r["lock"]["guards"]["decode_ctx128"] = 0.0
    v = decide(typed(r), default_rules(guards=(Guard("decode_ctx128", 128, 768, reps=3, max_drop=0.10),)))
    assert "guard-breach" not in codes(v)
    row = v.speed.guards["decode_ctx128"]
    assert row["candidate_median"] < row["min_allowed"] < row["upper"]
    # the schema-1 rule, the median against the floor, did reject it
    old = make_receipt(guards=guards, schema=SCHEMA_1, main=MAIN[:5], cand=scaled(MAIN[:5], 1.055))
    old["lock"]["guards"]["decode_ctx128"] = 0.0
    assert codes(decide(typed(old), default_rules(guards=(Guard("decode_ctx128", 128, 768, reps=3, max_drop=0.10),)))) \
        == ["guard-breach"]


def test_a_real_guard_drop_on_a_quiet_node_is_still_rejected():
    guards = {"decode_ctx128": ((700.0, 702.0, 699.0, 701.0, 700.5), (560.0, 563.0, 559.0, 561.0, 562.0))}
    r = make_receipt(guards=guards)
    r["lock"]["guards"]["decode_ctx128"] = 0.0
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["guard-breach"] and "paired with main" in v.reasons[0].message


# --- task accuracy and borderline KL --------------------------------------------------

def _with_accuracy(r, ref_outputs, cand_outputs, answers):
    r["accuracy"] = {"tasks_sha256": "x", "ids": [f"i{k}" for k in range(len(answers))], "answers": answers,
                     "kinds": ["add"] * len(answers), "tokens": 8,
                     "reference": {"build": "main", "outputs": ref_outputs, "error": None, "wall_s": 1.0},
                     "candidate": {"build": "candidate", "outputs": cand_outputs, "error": None, "wall_s": 1.0}}
    return r


def test_accuracy_within_tolerance_passes_and_is_in_the_parity_table():
    answers = [str(k) for k in range(40)]
    r = _with_accuracy(make_receipt(), [f" {a}\n" for a in answers], [f" {a}\n" for a in answers[:39]] + [" 0\n"],
                       answers)
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted", v.reasons
    acc = v.parity["accuracy"]
    assert acc["status"] == "pass" and acc["candidate_correct"] == 39 and acc["reference_correct"] == 40
    assert acc["estimator"] == "paired t interval over items"


def test_a_systematic_accuracy_loss_rejects_with_its_figures():
    answers = [str(k) for k in range(40)]
    r = _with_accuracy(make_receipt(), [f" {a}" for a in answers], [" 7"] * 40, answers)
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["accuracy-score"]
    assert "task accuracy 2.5% against the reference's 100.0% (-97.5 points over 40 items)" in v.reasons[0].message
    assert v.speed is None


def test_the_reference_side_failing_is_infra_not_the_candidates_fault():
    answers = ["1", "2"]
    r = _with_accuracy(make_receipt(), None, [" 1", " 2"], answers)
    r["accuracy"]["reference"]["error"] = "exit status 3"
    v = decide(typed(r), RULES)
    assert v.outcome == "infra" and codes(v) == ["accuracy-error"]


def _borderline(adjudication):
    r = make_receipt(cand_parity=depth_figures(kl=1e-3, at={2048: {"kl": 0.0586}}), main_parity=depth_figures(kl=0.0))
    if adjudication is not None:
        r["parity"]["adjudication"] = adjudication
    return r


BAND = default_rules(borderline_kl=0.10)


def _adjudication(cand_tokens):
    ref = [[1, 2, 3, 4]] * 10
    return {"depths": [2048], "positions": list(range(10)), "tokens": 4, "reference": ref, "candidate": cand_tokens,
            "variants": [{"name": "flash-attn", "args": ["--flash-attn", "1"], "kl": {"2048": 0.0412},
                          "followed": [[1, 2, 3, 9]] * 4 + ref[4:], "error": None}], "error": None}


def test_borderline_kl_without_adjudication_stays_a_failure():
    v = decide(typed(_borderline(None)), BAND)
    assert v.outcome == "rejected" and codes(v) == ["parity-kl"]


def test_borderline_kl_adjudicated_passes_with_the_evidence():
    v = decide(typed(_borderline(_adjudication([[1, 2, 3, 4]] * 10))), BAND)
    assert v.outcome == "accepted", v.reasons
    assert {row["depth"]: row["status"] for row in v.parity["depths"]}[2048] == "adjudicated"
    ruling = v.parity["adjudication"]
    assert ruling["passed"] and ruling["depths"]["2048"]["line"] == pytest.approx(0.0824)
    [w] = [w for w in v.warnings if w.code == "parity-adjudicated"]
    assert "pass (adjudicated)" in w.message and "0 of 40 positions" in w.message


def test_borderline_kl_that_disagrees_is_rejected_by_the_adjudication():
    v = decide(typed(_borderline(_adjudication([[0, 0, 0, 0]] * 10))), BAND)
    assert v.outcome == "rejected" and codes(v) == ["parity-kl", "parity-adjudication"]
    assert "40 of 40 positions" in v.reasons[1].message


# --- decision rules 3: three outcomes, a step check, what the verdict says beside them -------

def test_a_step_within_the_round_is_infra_with_its_evidence():
    main = MAIN * 2
    cand = scaled(main[:8], 1.0) + scaled(main[8:], 1.25)
    v = decide(typed(make_receipt(main, cand)), RULES)
    assert v.outcome == "infra" and codes(v) in (["step-change"], ["interval-empty"]), v.reasons
    assert "pair" in v.reasons[0].message and v.exit_code == 3


def test_schema_2_receipts_keep_the_rules_they_were_sealed_under():
    from console.core.records.receipt import SCHEMA_2
    wobble = (0.986, 0.95, 0.984, 0.952, 0.985, 0.951, 0.983, 0.953)    # about −3.3 %, noisy
    cand = tuple(m * k for m, k in zip(MAIN, wobble))
    assert decide(typed(make_receipt(cand=cand, schema=SCHEMA_2)), RULES).outcome == "none"
    raw = replace(RULES, sequence="t-mixture")
    now = decide(typed(make_receipt(cand=cand)), raw)
    assert now.outcome == "undecided", now.reasons      # a regression of 3.5 % is not excluded
    assert now.speed.decision["lower_miss"] < -RULES.min_gain
    # the robust sequence reads the two levels' wobble as spread clipped at its scale: every one
    # of the eight pairs is slower than main, and it says so
    assert decide(typed(make_receipt(cand=cand)), RULES).outcome == "slower"


def test_a_guard_whose_interval_reaches_below_its_floor_is_shown_though_it_does_not_reject():
    guards = {"decode_ctx128": ((260.0, 262.0, 259.0), (262.0, 236.0, 250.0))}
    v = decide(typed(make_receipt(guards=guards)), default_rules(guards=(Guard("decode_ctx128", 128, 192, 3, 0.05),)))
    assert v.outcome == "accepted", v.reasons
    said = [w.message for w in v.warnings if w.code == "guard-uncertain"]
    assert said and "[" in said[0] and "not rejected" in said[0]


def test_an_unsettled_tier_and_a_pinned_basis_are_said_in_the_verdict():
    v = decide(typed(make_receipt()), RULES)
    assert v.tier_span == ["s", "m"] and "tier-span" in warn_codes(v)
    r = make_receipt()
    r["lock"]["frontier"] = 199.0                       # a pin just under main's level does not bind
    assert "basis-unmeasured" not in warn_codes(decide(typed(r), RULES))
    r["lock"]["frontier"] = 203.0                       # above main this round: the pin binds
    v = decide(typed(r), RULES)
    assert v.speed.frontier_source == "lock"
    if v.outcome == "accepted":
        assert "basis-unmeasured" in warn_codes(v)


def test_undecided_reports_do_not_say_decided_and_junit_fails_only_a_failing_exit():
    from console.core.records.verdict import VerdictRecord
    from console.reports.export.junit import junit_xml
    from console.reports.export.summary import markdown_summary
    r = typed(OUTCOME_RECEIPTS["undecided"]())
    v = VerdictRecord.of(decide(r, RULES))
    assert "Not decided on 8 pairs" in markdown_summary(r, v) and "Decided on" not in markdown_summary(r, v)
    assert 'failures="0"' in junit_xml(r, v) and "<failure" not in junit_xml(r, v)
    slow = typed(OUTCOME_RECEIPTS["slower"]())
    sv = VerdictRecord.of(decide(slow, RULES))
    assert 'failures="1"' in junit_xml(slow, sv) and "Decided on" in markdown_summary(slow, sv)
    recorded = VerdictRecord.of(decide(slow, default_rules(slower="record")))
    assert "<failure" not in junit_xml(slow, recorded)


def test_a_step_whose_two_sides_both_decide_the_outcome_leaves_it_standing_and_says_so():
    main = MAIN * 2
    wobble = (1.0, 0.99, 1.01, 1.0, 0.995, 1.005, 1.0, 0.99)
    cand = tuple(m * 0.95 * w for m, w in zip(main[:8], wobble)) + tuple(m * 0.80 * w for m, w in zip(main[8:], wobble))
    v = decide(typed(make_receipt(main, cand, short_cand=scaled(MAIN[:3], 0.9))), RULES)
    assert v.outcome == "slower" and "step-change" in warn_codes(v), (v.outcome, v.reasons)
    assert v.speed.shift["before"] < 0 and v.speed.shift["after"] < 0


def test_an_undecided_round_with_a_step_stays_undecided_and_says_its_pairs_will_not_pool():
    main = MAIN * 2
    wobble = tuple(1 + 0.02 * (-1) ** k for k in range(8))         # too noisy to decide in 16 pairs
    cand = tuple(m * 1.05 * w for m, w in zip(main[:8], wobble)) + tuple(m * 0.95 * w for m, w in zip(main[8:], wobble))
    v = decide(typed(make_receipt(main, cand, short_cand=scaled(MAIN[:3], 1.0))), RULES)
    assert v.outcome == "undecided" and v.exit_code == 0, v.reasons
    said = [w.message for w in v.warnings if w.code == "step-change"]
    assert said and "will not pool" in said[0]


@pytest.mark.parametrize("module, entry", [("gate", "decide"), ("speed", "progress"), ("counting", "summarize"),
                                           ("counting", "counted"), ("parity_grade", "grade_parity"),
                                           ("parity_grade", "grade_accuracy"), ("parity_grade", "parity_passes")])
def test_the_gate_takes_a_read_receipt_and_says_so_when_given_a_document(module, entry):
    import importlib
    stage = importlib.import_module(f"console.core.decisions.{module}")
    with pytest.raises(TypeError, match="Receipt.from_dict"):
        getattr(stage, entry)(make_receipt(), RULES)
