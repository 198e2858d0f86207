"""Preflight findings (pure): each fires at its threshold and not on the safe side of it,
and the rules, not the telemetry adapters, say where that threshold is."""
from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest

from console.core.decisions.health import PreflightRules, finding, gpu_findings, host_findings, preflight_findings

GiB, MiB = 1 << 30, 1 << 20
TENTH = math.ceil(0.10 * 64 * GiB)      # the first byte count not below a tenth of 64 GiB


def host(**kw) -> dict:
    return {"cores": 4, "other_busy_cores": 0.0, "load1": 0.1, "mem_total_bytes": 64 * GiB,
            "mem_available_bytes": 60 * GiB, "temp_c": 40.0, "governor": "performance", **kw}


def gpu(**kw) -> dict:
    """A healthy GPU as NVML preflight reports it."""
    return {"index": 0, "uuid": "GPU-a", "name": "H100", "persistence_mode": "enabled",
            "ecc_mode": {"current": True, "pending": True},
            "ecc_errors": {"volatile_uncorrected": 0, "volatile_corrected": 0,
                           "aggregate_uncorrected": 0, "aggregate_corrected": 0},
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
            "power_limit_w": 700.0, "default_power_limit_w": 700.0, "temp_c": 40,
            "memory": {"total_bytes": 80 * GiB, "free_bytes": 79 * GiB, "used_bytes": GiB},
            "throttle": [], "processes": [], **kw}


def levels(findings: list[dict]) -> dict[str, str]:
    return {f["code"]: f["level"] for f in findings}


def test_clean_node_only_names_its_gpu():
    f = preflight_findings({"host": host(), "gpus": [gpu()]})
    assert f == [finding("gpu", "info", "GPU 0 (H100) uuid GPU-a")]
    assert preflight_findings({}) == []


@pytest.mark.parametrize("facts, code, fires", [
    (host(other_busy_cores=0.5), "host-busy", False),
    (host(other_busy_cores=0.51), "host-busy", True),
    (host(load1=3.0), "host-load", False),                  # 0.75 × 4 cores
    (host(load1=3.01), "host-load", True),
    (host(mem_available_bytes=TENTH), "low-memory", False),     # 10% of 64 GiB
    (host(mem_available_bytes=TENTH - 1), "low-memory", True),
    (host(mem_total_bytes=GiB, mem_available_bytes=512 * MiB), "low-memory", False),
    (host(mem_total_bytes=GiB, mem_available_bytes=512 * MiB - 1), "low-memory", True),
    (host(temp_c=89.9), "host-hot", False),
    (host(temp_c=90.0), "host-hot", True),
    (host(governor="powersave"), "cpu-governor", True),
    (host(governor=None), "cpu-governor", False),
])
def test_host_thresholds(facts, code, fires):
    assert (code in levels(host_findings(facts))) is fires


@pytest.mark.parametrize("facts, code, level", [
    (gpu(ecc_errors={"volatile_uncorrected": 1, "aggregate_uncorrected": 1}), "ecc-uncorrected", "refuse"),
    (gpu(ecc_errors={"volatile_uncorrected": 0, "aggregate_uncorrected": 1}), "ecc-history", "warn"),
    (gpu(ecc_mode={"current": False, "pending": False}, ecc_errors=None), "ecc-off", "info"),
    (gpu(remapped_rows={"pending": False, "failure": True}), "row-remap-failure", "refuse"),
    (gpu(remapped_rows={"pending": True, "failure": False}), "row-remap-pending", "refuse"),
    (gpu(persistence_mode="disabled"), "persistence-off", "warn"),
    (gpu(processes=[{"pid": 7, "name": "train"}]), "gpu-busy", "refuse"),
    (gpu(power_limit_w=692.9), "power-limit-lowered", "warn"),
    (gpu(throttle=["gpu_idle", "sw_thermal"]), "throttled-now", "refuse"),
    (gpu(temp_c=85), "gpu-hot", "warn"),
    (gpu(memory={"total_bytes": 80 * GiB, "free_bytes": 8 * GiB - 1}), "low-gpu-memory", "warn"),
])
def test_gpu_finding_fires(facts, code, level):
    assert levels(gpu_findings(facts)).get(code) == level


@pytest.mark.parametrize("facts", [
    gpu(),
    gpu(ecc_errors={"volatile_uncorrected": 0, "aggregate_uncorrected": 0}),
    gpu(ecc_mode="not supported", ecc_errors="not supported", remapped_rows="not supported",
        persistence_mode="not supported", processes="not supported", throttle="not supported",
        memory="not supported", power_limit_w="not supported", temp_c="not supported"),
    gpu(power_limit_w=693.0),                                  # 0.99 × 700: rounding, not a lowered limit
    gpu(throttle=["gpu_idle", "applications_clocks", "sync_boost", "display_clock"]),
    gpu(temp_c=84.9),
    gpu(memory={"total_bytes": 80 * GiB, "free_bytes": 8 * GiB}),   # exactly 10% free
])
def test_gpu_finding_stays_quiet_below_threshold(facts):
    assert levels(gpu_findings(facts)) == {"gpu": "info"}


def test_volatile_ecc_errors_outrank_history():
    f = levels(gpu_findings(gpu(ecc_errors={"volatile_uncorrected": 2, "aggregate_uncorrected": 9})))
    assert f["ecc-uncorrected"] == "refuse" and "ecc-history" not in f


def test_order_host_then_no_gpu_telemetry_then_gpus_then_errors():
    f = preflight_findings({"host": host(temp_c=95.0), "nvml_unavailable": "NVML found no GPU",
                            "gpus": [gpu(temp_c=90), gpu(index=1, uuid="GPU-b")],
                            "errors": ["gpu1 memory: Unknown Error"]})
    assert [x["code"] for x in f] == ["host-hot", "no-gpu-telemetry", "gpu-hot", "gpu", "gpu", "nvml-error"]
    assert f[1] == finding("no-gpu-telemetry", "info", "NVML found no GPU")
    assert f[-1] == finding("nvml-error", "warn", "gpu1 memory: Unknown Error")


def test_non_default_rules_change_the_outcome():
    facts = {"host": host(other_busy_cores=1.0, temp_c=92.0, governor="schedutil"),
             "gpus": [gpu(temp_c=88, throttle=["sw_power_cap"], power_limit_w=650.0,
                          memory={"total_bytes": 80 * GiB, "free_bytes": 10 * GiB})]}
    default = levels(preflight_findings(facts))
    assert {"host-busy", "host-hot", "cpu-governor", "gpu-hot", "throttled-now", "power-limit-lowered"} <= set(default)
    assert "low-gpu-memory" not in default
    relaxed = PreflightRules(other_cores=1.5, host_hot_c=95.0, governor="schedutil", gpu_hot_c=90.0,
                             throttle_reasons=("hw_thermal",), power_limit_share=0.9, gpu_free_share=0.2)
    assert levels(preflight_findings(facts, relaxed)) == {"gpu": "info", "low-gpu-memory": "warn"}
    strict = PreflightRules(load_per_core=0.01, low_memory_bytes=61 * GiB)
    assert {"host-load", "low-memory"} <= set(levels(host_findings(host(), strict)))


def test_rules_are_frozen_with_todays_defaults():
    r = PreflightRules()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.gpu_hot_c = 99.0      # type: ignore[misc]
    assert (r.other_cores, r.load_per_core, r.low_memory_share, r.low_memory_bytes, r.host_hot_c,
            r.gpu_hot_c, r.gpu_free_share) == (0.5, 0.75, 0.10, 512 << 20, 90.0, 85.0, 0.10)


def test_the_core_imports_no_edge():
    code = ("import sys, console.core.decisions.health, console.core.provenance.lock; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('tomlkit', 'docker', 'textual', 'pynvml')"
            " or m.startswith('console.telemetry')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
