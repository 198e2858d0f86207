"""Verdicts that hold on any receipt: a figure a bar reads that is not a finite number (NaN, ±inf,
or missing where a figure is required) gives a rejection or a refusal naming it, never a pass or a
tier; a gap in main's figures (or in the console's own clock) never rejects the candidate.

The receipts are edited copies of sound rounds (``receipts.make_receipt``) of each outcome that
reaches timing, judged through ``Receipt.from_dict`` and ``gate.decide`` as ``console verdict``
judges a file."""
from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.core.decisions import serving
from console.core.decisions.gate import decide
from console.core.records.receipt import Receipt, ReceiptError
from console.core.records.rules import GateRules, LatencyGuard
from console.core.statistics.sequential import sequence_at, stats_of

from .receipts import MAIN, OUTCOME_RECEIPTS, default_rules, make_receipt, timed

MISSING = object()          # the key removed
NON_FINITE = (math.nan, math.inf, -math.inf)
PASSING = ("accepted", "none", "undecided")
# Sound rounds that reach the speed decision, so that only the edited figure can stop them.
TIMED = ("accepted", "none", "slower", "undecided")


def judged(doc: dict[str, Any]) -> tuple[Any, str | None]:
    """(verdict, None), or (None, the refusal) when the file is not a receipt that can be read."""
    try:
        r = Receipt.from_dict(doc)
    except ReceiptError as e:
        return None, str(e)
    return decide(r, r.rules), None


def put(obj: Any, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if value is MISSING:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


def reps_of(doc: dict[str, Any], build: str, phase: str) -> list[int]:
    return [i for i, r in enumerate(doc["reps"]) if r["build"] == build and r["phase"] == phase]


# --- the candidate's figures: every bar that reads one fails closed -----------------------------

# name -> (where in the receipt, given the receipt and an index; what a reason or refusal must name)
Where = Callable[[dict[str, Any], int], tuple]
CANDIDATE: dict[str, tuple[Where, tuple[str, ...]]] = {
    **{f"depth {k}": ((lambda d, i, k=k: ("parity", "candidate", "depths", i % 7, k)), (k,))
       for k in ("kl", "top1", "ref_entropy", "max_entropy")},
    **{f"scored path {k}": ((lambda d, i, k=k: ("parity", "scored_path", "candidate", k)), (k,))
       for k in ("kl", "top1")},
    **{f"timed path {k}": ((lambda d, i, k=k: ("parity", "timed_path", "candidate", i % 8, k)), (k,))
       for k in ("kl", "top1")},
    **{f"{phase} value": ((lambda d, i, p=phase: ("reps", (ix := reps_of(d, "candidate", p))[i % len(ix)],
                                                  "value")), ("reported value",))
       for phase in ("timed", "short", "guard:decode_ctx128")},
    **{f"reported {k}": ((lambda d, i, k=k: ("reps", (ix := reps_of(d, "candidate", "timed"))[i % len(ix)],
                                             "reported", k)), (k,))
       for k in ("elapsed_s", "tokens")},
    "peak memory": ((lambda d, i: ("reps", (ix := reps_of(d, "candidate", "timed"))[i % len(ix)],
                                   "peak_mem_bytes")), ("peak", "reps[")),
}
# An optional field: absent, the bar that reads it does not apply (the protocol lets an engine
# leave it out); present, it must be a finite number.
OPTIONAL = ("reported elapsed_s", "reported tokens")


def names(v: Any, refusal: str | None, needles: tuple[str, ...]) -> bool:
    said = [refusal] if refusal else [x.message for x in v.reasons] + [x.figure or "" for x in v.reasons]
    return any(n in s for n in needles for s in said)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(TIMED), figure=st.sampled_from(sorted(CANDIDATE)), index=st.integers(0, 40),
       bad=st.sampled_from(NON_FINITE + (MISSING,)))
def test_a_candidate_figure_that_is_not_a_finite_number_rejects_or_is_refused(base, figure, index, bad):
    if bad is MISSING and figure in OPTIONAL:
        bad = math.nan
    doc = OUTCOME_RECEIPTS[base]()
    where, needles = CANDIDATE[figure]
    put(doc, where(doc, index), bad)
    v, refusal = judged(doc)
    if refusal is None:
        assert v.outcome == "rejected", (figure, bad, v.outcome, v.reasons)
        assert v.tier is None and v.exit_code == 1
    assert names(v, refusal, needles), (figure, bad, refusal or v.reasons)


# --- what the round was decided under: refused when not finite ------------------------------------

RULE_KEYS = [f.name for f in fields(GateRules) if isinstance(getattr(GateRules(), f.name), float)]


@settings(max_examples=120, deadline=None)
@given(key=st.sampled_from([((k,), k) for k in RULE_KEYS] + [(("bands", "s"), "bands.s"), (("bands", "xl"), "bands.xl"),
                                                             (("guards", 0, "max_drop"), "guards[0].max_drop")]),
       bad=st.sampled_from(NON_FINITE))
def test_a_rule_that_is_not_finite_refuses_the_receipt_naming_the_rule(key, bad):
    path, name = key
    doc = make_receipt()
    put(doc, ("profile", "rules") + path, bad)
    v, refusal = judged(doc)
    assert v is None and refusal.startswith(f"profile.rules.{name}: expected a finite number"), refusal


@pytest.mark.parametrize("where", [("lock", "frontier"), ("lock", "anchor"), ("lock", "noise_sd"),
                                   ("lock", "guards", "decode_ctx128")])
@pytest.mark.parametrize("bad", NON_FINITE)
def test_a_pin_that_is_not_finite_refuses_the_receipt(where, bad):
    doc = make_receipt()
    put(doc, where, bad)
    v, refusal = judged(doc)
    assert v is None and refusal.startswith(".".join(where) + ": expected a finite number")


@pytest.mark.parametrize("bad", NON_FINITE)
def test_a_pooled_round_with_a_non_finite_log_ratio_refuses_the_file_naming_it(bad):
    doc = make_receipt()
    doc["sequential"] = {"prior": [{"receipt": "a" * 64, "round_id": "R0", "log_ratios": [0.05, bad, 0.06]}],
                         "experiment": "e", "preview": None, "stopped": "decided"}
    v, refusal = judged(doc)
    assert v is None and refusal.startswith("sequential.prior[0].log_ratios[1]: expected a finite number")


# --- gaps: main's figures and the console's clock never reject the candidate --------------------

MAIN_FIGURES: dict[str, Where] = {
    **{f"main depth {k}": (lambda d, i, k=k: ("parity", "main", "depths", i % 7, k))
       for k in ("kl", "top1", "ref_entropy", "max_entropy")},
    "main scored path kl": lambda d, i: ("parity", "scored_path", "main", "kl"),
    **{f"{b} {p} wall": (lambda d, i, b=b, p=p: ("reps", (ix := reps_of(d, b, p))[i % len(ix)], "wall_s"))
       for b in ("main", "candidate") for p in ("timed", "short", "guard:decode_ctx128")},
    **{f"main {p} value": (lambda d, i, p=p: ("reps", (ix := reps_of(d, "main", p))[i % len(ix)], "value"))
       for p in ("timed", "short")},
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(TIMED), figure=st.sampled_from(sorted(MAIN_FIGURES)), index=st.integers(0, 40),
       bad=st.sampled_from(NON_FINITE + (MISSING,)))
def test_a_gap_in_main_s_figures_or_the_clock_never_rejects_the_candidate(base, figure, index, bad):
    doc = OUTCOME_RECEIPTS[base]()
    put(doc, MAIN_FIGURES[figure](doc, index), bad)
    v, refusal = judged(doc)
    if refusal is None:
        assert v.outcome != "rejected", (figure, bad, v.reasons)
        assert v.outcome != "slower" or base == "slower", (figure, bad, v.reasons)


@pytest.mark.parametrize("bad", NON_FINITE)
def test_a_nan_wall_clock_is_a_gap_said_as_such_on_either_side(bad):
    for build in ("main", "candidate"):
        doc = make_receipt(MAIN * 2, tuple(m * 1.06 for m in MAIN * 2))
        timed(doc, build)[3]["wall_s"] = bad
        v, _ = judged(doc)
        assert v.outcome == "accepted", (build, v.reasons)
        assert any(w.code == "reps-no-wall" and f"1 {build} rep" in w.message for w in v.warnings)


def test_an_infinite_candidate_rate_is_the_candidate_s_not_the_node_s():
    doc = make_receipt()
    timed(doc, "candidate")[2]["value"] = math.inf
    v, _ = judged(doc)
    assert v.outcome == "rejected" and [x.code for x in v.reasons] == ["claim-no-value"]
    assert "+inf" in v.reasons[0].message and v.reasons[0].build == "candidate"


def test_a_nan_parity_figure_names_the_depth_and_the_figure():
    doc = make_receipt()
    doc["parity"]["candidate"]["depths"][4]["kl"] = math.nan
    v, _ = judged(doc)
    assert v.outcome == "rejected" and v.speed is None
    assert v.reasons[0].code == "parity-not-finite" and v.reasons[0].depth == 1024
    assert "mean KL is NaN" in v.reasons[0].message and v.parity["worst_depth"] == 1024


def test_main_s_nan_parity_figure_drops_the_ratchet_and_is_said():
    doc = make_receipt()
    doc["parity"]["main"]["depths"][2]["kl"] = math.nan
    v, _ = judged(doc)
    assert v.outcome == "accepted"
    assert any(w.code == "main-parity-fail" and "256" in w.message for w in v.warnings)


# --- pooled rounds that contradict each other at the miss level only ----------------------------

def _pooled_contradiction() -> tuple[list[float], list[float]]:
    """Two rounds of 8 pairs whose pooled sequence is empty at 5 % but not at 1 %."""
    z = np.array([0.3, -1.2, 0.8, 1.5, -0.4, -0.9, 1.1, -1.2])
    z = (z - z.mean()) / z.std(ddof=1)
    prior, now = list(0.01 * z), list(0.026 + 0.01 * z[::-1])
    assert math.isfinite(sequence_at([stats_of(prior), stats_of(now)], 0.01, 1.0)[0])
    assert math.isnan(sequence_at([stats_of(prior), stats_of(now)], 0.05, 1.0)[0])
    return prior, now


def test_rounds_that_disagree_only_at_the_miss_level_are_infra_with_both_levels_said():
    prior, now = _pooled_contradiction()
    main = (200.0,) * len(now)
    doc = make_receipt(main, tuple(200.0 * math.exp(x) for x in now), short_main=main[:3],
                       short_cand=tuple(200.0 * math.exp(x) for x in now[:3]))
    doc["sequential"] = {"prior": [{"receipt": "a" * 64, "round_id": "R0", "log_ratios": prior}],
                         "experiment": "e", "preview": None, "stopped": "decided"}
    v, refusal = judged(doc)
    assert refusal is None and v.outcome == "infra" and v.exit_code == 3, v.reasons
    (r,) = v.reasons
    assert r.code == "rounds-disagree" and r.build is None
    assert "at the 5% miss level no gain is consistent with all of them" in r.message
    assert "at the 1% false-accept level [" in r.message and "unbounded" not in r.message


# --- serving figures ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", NON_FINITE)
def test_a_candidate_latency_that_is_not_finite_rejects_and_a_missing_one_is_a_gap(bad):
    ok = {"p99_ttft_ms": 100.0}
    pairs = [(ok, {"p99_ttft_ms": 101.0}), (ok, {"p99_ttft_ms": bad}), (ok, {"p99_ttft_ms": 99.0})]
    row = serving.latency_rows(pairs, [LatencyGuard("ttft_p99_ms", 0.25)], 0.01)["ttft_p99_ms"]
    assert row["status"] == "unreadable" and row["unreadable"][0]["pair"] == 1
    gap = [(ok, {"p99_ttft_ms": 101.0}), (ok, {"p99_ttft_ms": None}), ({"p99_ttft_ms": bad}, ok), (ok, ok)]
    assert serving.latency_rows(gap, [LatencyGuard("ttft_p99_ms", 0.25)], 0.01)["ttft_p99_ms"]["status"] == "pass"


@pytest.mark.parametrize("bad", NON_FINITE)
def test_a_cache_probe_time_that_is_not_finite_fails_the_server_check(bad):
    side = serving.ServedSide(asked=4, probe_ttft_s=[bad, 0.5, 0.5])
    assert any("not all finite numbers" in p for p in serving.side_problems(side, 0.75, 0.5))


def test_rules_keep_a_finite_default_everywhere():
    assert not [k for k, v in asdict(default_rules()).items() if isinstance(v, float) and not math.isfinite(v)]


@pytest.mark.parametrize("bad", (math.inf, math.nan))
def test_a_kernel_spread_that_is_not_finite_excuses_no_borderline_depth(bad):
    from .test_gate import BAND, _adjudication, _borderline
    adj = _adjudication([[1, 2, 3, 4]] * 10)
    assert decide(Receipt.from_dict(_borderline(adj)), BAND).outcome == "accepted"        # the sound adjudication passes
    adj["variants"][0]["kl"]["2048"] = bad
    v = decide(Receipt.from_dict(_borderline(adj)), BAND)
    assert v.outcome == "rejected" and [x.code for x in v.reasons] == ["parity-kl", "parity-adjudication"]
    assert "not a finite number" in v.reasons[1].message


def test_an_interval_that_empties_at_the_miss_level_only_names_that_level_s_crossed_ends():
    from console.core.decisions.speed import conflict
    from console.core.statistics.sequential import Decision
    d = Decision("conflict", 12, 0, 0.03, (0.01, 0.05), 0.02, (0.01, 0.05), 0.02, lower_miss=0.025,
                 conflict="narrowed")
    r = conflict(d, default_rules())
    assert r.code == "interval-empty" and (r.value, r.bar) == (0.025, 0.02)
    assert "at the 1% false-accept level [+1.0%, +5.0%]" in r.message
    assert "at the 5% miss level the lower end +2.5% is above the upper end +2.0%" in r.message
