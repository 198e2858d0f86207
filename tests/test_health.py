"""Suspect-rep classification and the retry budget (pure)."""
from __future__ import annotations

import itertools

import pytest

from console.core.decisions.health import (LIMITING_REASONS, Decision, HealthRules, RetryBudget, classify_rep, reason_code,
                                 reference_sm_clock)

PREFLIGHT = {"host": {"load1": 0.5, "cores": 8},
             "gpus": [{"index": 0, "uuid": "GPU-a", "max_clocks_mhz": {"sm": 2000, "mem": 2600}},
                      {"index": 1, "uuid": "GPU-b", "max_clocks_mhz": {"sm": 1800, "mem": 2600}}]}


def gpu(index=0, uuid="GPU-a", median=1950.0, throttle=None, samples=10, busy=10) -> dict:
    return {"index": index, "uuid": uuid, "samples": samples, "busy_samples": busy,
            "metrics": {"sm_clock_mhz": {"min": median, "median": median, "max": median}} if busy else {},
            "throttle": throttle or {}, "energy_j": 10.0}


def summary(gpus=None, xid=(), foreign=(), errors=(), other=0.1, load_max=1.0, engine=None) -> dict:
    return {"source": "nvml" if gpus else "host", "samples": 10, "duration_s": 2.0,
            "host": {"metrics": {"load1": {"min": 0.5, "median": 0.7, "max": load_max}},
                     "cpu": {"cores": 8, "busy_cores": 1.0, "own_cores": 0.9, "other_cores": other},
                     "engine_cpus": engine},
            "gpus": gpus or [], "throttle": {}, "energy_j": None, "xid": list(xid),
            "foreign_processes": list(foreign), "errors": list(errors), "not_supported": []}


def test_clean():
    assert classify_rep(summary([gpu()]), PREFLIGHT) == []
    assert classify_rep(summary(), PREFLIGHT) == []


def test_empty_inputs():
    assert classify_rep(None, None) == []
    assert classify_rep({}, {}) == []
    assert classify_rep(summary([gpu()]), None) == []       # no preflight: no clock reference, nothing else breaks
    assert classify_rep({"gpus": [{}], "host": {"cpu": {}, "metrics": {}}}, {}) == []


@pytest.mark.parametrize("reason", LIMITING_REASONS)
@pytest.mark.parametrize("share, suspect", [(0.0, False), (0.2, False), (0.2001, True), (1.0, True)])
def test_each_limiting_reason_at_the_boundary(reason, share, suspect):
    r = classify_rep(summary([gpu(throttle={reason: share})]), PREFLIGHT)
    assert bool(r) == suspect
    if suspect:
        assert r == [f"throttle: GPU 0 clocks held by {reason} for {share:.0%} of the rep (limit 20%)"]


@pytest.mark.parametrize("reason", ["gpu_idle", "applications_clocks", "sync_boost", "display_clock"])
def test_benign_reasons_never_suspect(reason):
    assert classify_rep(summary([gpu(throttle={reason: 1.0})]), PREFLIGHT) == []


def test_throttle_rules_are_configurable():
    s = summary([gpu(throttle={"sw_power_cap": 0.9})])
    assert classify_rep(s, PREFLIGHT, HealthRules(throttle_reasons=("sw_thermal", "hw_thermal"))) == []
    assert classify_rep(s, PREFLIGHT, HealthRules(throttle_share=0.95)) == []


def test_merged_throttle_without_gpu_detail():
    s = summary()
    s["throttle"] = {"hw_thermal": 0.5}
    assert classify_rep(s, PREFLIGHT) == ["throttle: clocks held by hw_thermal for 50% of the rep (limit 20%)"]


@pytest.mark.parametrize("median, suspect", [(2000, False), (1700, False), (1699.9, True), (300, True)])
def test_sm_clock_floor(median, suspect):
    r = classify_rep(summary([gpu(median=median)]), PREFLIGHT)
    assert bool(r) == suspect
    if suspect:
        assert r[0].startswith("low-clock: GPU 0 SM clock median") and "85% of 2000 MHz" in r[0]


def test_sm_clock_matched_by_uuid_then_index():
    # GPU-b's max is 1800: 1600 is fine there, though it is below 85 % of GPU-a's 2000
    assert classify_rep(summary([gpu(index=0, uuid="GPU-b", median=1600)]), PREFLIGHT) == []
    assert classify_rep(summary([gpu(index=1, uuid=None, median=1600)]), PREFLIGHT) == []
    assert classify_rep(summary([gpu(index=0, uuid=None, median=1600)]), PREFLIGHT) != []


def test_sm_clock_reference_and_missing_data():
    assert reference_sm_clock({"reference_sm_clock_mhz": 1500, "max_clocks_mhz": {"sm": 2000}}) == 1500.0
    assert reference_sm_clock({"max_clocks_mhz": {"sm": "not supported"}}) is None
    assert reference_sm_clock({"max_clocks_mhz": "not supported"}) is None
    assert reference_sm_clock({"reference_sm_clock_mhz": True, "max_clocks_mhz": {"sm": 0}}) is None
    pf = {"gpus": [{"index": 0, "uuid": "GPU-a", "max_clocks_mhz": "not supported"}]}
    assert classify_rep(summary([gpu(median=10)]), pf) == []
    # no busy samples: the GPU idled (CPU engine); no clock verdict
    assert classify_rep(summary([gpu(median=10, busy=0)]), PREFLIGHT) == []


def test_xid_any():
    r = classify_rep(summary([gpu()], xid=[{"gpu": "GPU-a", "xid": 79, "t": 1.0},
                                            {"gpu": None, "xid": 13, "t": 1.5}]), PREFLIGHT)
    assert r == ["xid: XID 79 critical error on GPU-a during the rep",
                 "xid: XID 13 critical error on a GPU during the rep"]
    assert classify_rep(summary([gpu()], xid=[{"xid": 79}]), PREFLIGHT, HealthRules(xid=False)) == []


def test_foreign_process():
    r = classify_rep(summary([gpu()], foreign=[{"gpu": "GPU-a", "pid": 9, "name": "miner"},
                                                {"gpu": "GPU-a", "pid": 10, "name": None}]), PREFLIGHT)
    assert r == ["foreign-process: process 9 (miner) ran on GPU-a during the rep",
                 "foreign-process: process 10 ran on GPU-a during the rep"]


def test_gpu_errors_only_from_gpu_queries():
    s = summary([gpu()], errors=["gpu0 sm_clock: GPU is lost", "engine CPU reading failed: OSError"])
    assert classify_rep(s, PREFLIGHT) == ["gpu-error: gpu0 sm_clock: GPU is lost"]
    assert classify_rep(s, PREFLIGHT, HealthRules(gpu_errors=False)) == []


@pytest.mark.parametrize("other, suspect", [(0.0, False), (0.5, False), (0.51, True), (3.0, True)])
def test_host_other_cpu(other, suspect):
    r = classify_rep(summary(other=other), PREFLIGHT)
    assert bool(r) == suspect
    if suspect:
        assert r == [f"host-busy: other processes used {other:.2f} cores during the rep (limit 0.5)"]


@pytest.mark.parametrize("load_max, engine, suspect", [
    (3.5, None, False),    # 0.5 + 1 (default engine allowance) + 2.0 = 3.5: at the limit
    (3.51, None, True),
    (6.0, 4.0, False),     # a 4-CPU engine may push the load to 6.5
    (6.6, 4.0, True),
])
def test_load_spike(load_max, engine, suspect):
    r = classify_rep(summary(load_max=load_max, engine=engine), PREFLIGHT)
    assert bool(r) == suspect
    if suspect:
        assert r[0].startswith(f"load-spike: load average rose from 0.50 to {load_max:.2f}")


def test_load_spike_needs_both_numbers():
    assert classify_rep(summary(load_max=50), {"host": {"load1": None}}) == []
    assert classify_rep(summary(load_max=None), PREFLIGHT) == []


def test_non_numbers_are_ignored_not_raised():
    s = summary([gpu()], other="lots", load_max=True)
    s["gpus"][0]["throttle"] = {"sw_thermal": "high"}
    s["gpus"][0]["metrics"]["sm_clock_mhz"]["median"] = None
    assert classify_rep(s, PREFLIGHT) == []


def test_everything_at_once_keeps_a_stable_order():
    s = summary([gpu(median=100, throttle={"hw_thermal": 0.9})], xid=[{"gpu": "GPU-a", "xid": 79}],
                foreign=[{"gpu": "GPU-a", "pid": 1}], errors=["gpu0 x: GPU is lost"], other=2.0, load_max=9.0)
    assert [reason_code(x) for x in classify_rep(s, PREFLIGHT)] == \
        ["xid", "throttle", "low-clock", "foreign-process", "gpu-error", "host-busy", "load-spike"]


def test_reason_code():
    assert reason_code("xid: XID 79 …") == "xid"
    assert reason_code("plain") == "plain"


# --- the retry budget ------------------------------------------------------------

def test_budget_accepts_clean_reps_without_spending():
    b = RetryBudget(retries=2)
    for _ in range(10):
        assert b.decide([]) == Decision("accept", (), 2)
    assert b.used == 0 and b.diagnosis() == "no suspect reps"


def test_budget_retries_then_infra():
    b = RetryBudget.from_rules(HealthRules(retries=3))
    r = ["throttle: GPU 0 clocks held by sw_thermal for 40% of the rep (limit 20%)"]
    assert [b.decide(r, f"main timed #{i}").action for i in range(3)] == ["retry"] * 3
    assert b.left == 0
    d = b.decide(["xid: XID 79 critical error on GPU-a during the rep"], "candidate timed #2")
    assert d.action == "infra" and d.retries_left == 0
    assert d.diagnosis == ("node unfit for timing: 4 suspect reps with a retry budget of 3 "
                           "(throttle (3×), xid (1×)); last candidate timed #2: "
                           "xid: XID 79 critical error on GPU-a during the rep")


def test_budget_counts_retries_left():
    b = RetryBudget(retries=2)
    assert b.decide(["host-busy: x"]) == Decision("retry", ("host-busy: x",), 1)
    assert b.decide([]) == Decision("accept", (), 1)
    assert b.decide(["host-busy: x"]).retries_left == 0
    assert b.decide(["host-busy: x"]).action == "infra"


def test_zero_budget_is_infra_at_once():
    d = RetryBudget(retries=0).decide(["xid: XID 79"])
    assert d.action == "infra" and "retry budget of 0" in d.diagnosis


def test_diagnosis_counts_each_code_once_per_rep():
    b = RetryBudget(retries=5)
    b.decide(["foreign-process: process 1 …", "foreign-process: process 2 …", "host-busy: …"])
    assert "(foreign-process (1×), host-busy (1×))" in b.diagnosis()


@pytest.mark.parametrize("retries, pattern", list(itertools.product(range(4), [
    [1, 0, 1, 1, 0, 1, 1], [0] * 5, [1] * 6, [0, 1] * 4])))
def test_budget_exhaustively(retries, pattern):
    b = RetryBudget(retries=retries)
    suspects = 0
    for bad in pattern:
        d = b.decide(["xid: X"] if bad else [])
        if not bad:
            assert d.action == "accept"
            continue
        suspects += 1
        assert d.action == ("retry" if suspects <= retries else "infra")
        assert (d.diagnosis is None) == (d.action == "retry")
    assert b.used == min(suspects, retries)


def test_the_budget_is_spent_by_suspect_reps_only():
    b = RetryBudget(2)
    assert [b.decide(r).action for r in ([], ["xid: 79"], [], ["xid: 79"], ["xid: 79"])] == \
        ["accept", "retry", "accept", "retry", "infra"]
    assert b.left == 0
    with pytest.raises(ValueError):
        RetryBudget(-1)


def test_engine_cpu_is_moved_out_of_other_processes():
    from console.core.decisions.health import attribute_engine_cpu
    s = {"duration_s": 2.0, "host": {"cpu": {"busy_cores": 1.2, "other_cores": 1.1}}}
    out = attribute_engine_cpu(s, engine_cpu_s=1.8, engine_cpus=1.0)
    assert out["host"]["cpu"]["engine_cores"] == 0.9
    assert out["host"]["cpu"]["other_cores"] == 0.2 and out["host"]["engine_cpus"] == 1.0
    # no reading (a run shorter than one poll): the engine is assumed to have used its whole limit
    unknown = attribute_engine_cpu({"duration_s": 0.2, "host": {"cpu": {"other_cores": 1.1}}}, None, 1.0)
    assert unknown["host"]["cpu"]["other_cores"] == 0.1 and unknown["host"]["cpu"]["engine_cores_assumed"]
    assert attribute_engine_cpu({}, 1.0, 1.0) == {}
