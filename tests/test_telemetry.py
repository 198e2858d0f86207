"""Telemetry: NVML through the honest fake (each node misbehaviour injected), host
telemetry against a fake /proc tree and against this machine's real /proc."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.decisions.health import HealthRules, PreflightRules, classify_rep, host_findings
from console.telemetry import HostTelemetry, open_telemetry, refused
from console.telemetry.host import ProcReader
from console.telemetry.nvml import NOT_SUPPORTED, NvmlTelemetry, NvmlUnavailable, reasons

from fake_nvml import FakeGPU, FakeNvml

THERMAL, POWER_CAP, IDLE, BRAKE = 0x20, 0x4, 0x1, 0x80


def nvml(*gpus: FakeGPU, **kw) -> tuple[FakeNvml, NvmlTelemetry]:
    fake = FakeNvml(list(gpus) or [FakeGPU()], **kw)
    return fake, NvmlTelemetry(fake)


def codes(pf: dict) -> dict[str, str]:
    return {f["code"]: f["level"] for f in pf["findings"]}


def run_manual(tel: NvmlTelemetry, fake: FakeNvml, n: int, **kw) -> dict:
    """Drive a monitor without its thread: one sample per timeline step."""
    m = tel.monitor(0.05, start=False, **kw)
    for _ in range(n):
        fake.step()
        m.sample_once()
    return m.stop()


# --- NVML preflight ----------------------------------------------------------

def test_clean_gpu_preflight():
    _, tel = nvml()
    pf = tel.preflight(window_s=0.05)
    json.dumps(pf)    # JSON-safe, it goes into the receipt
    assert pf["source"] == "nvml"
    assert pf["driver"] == {"driver_version": "550.54.15", "cuda_driver_version": "12.4",
                            "nvml_version": "12.550.54.15"}
    g = pf["gpus"][0]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["uuid"].startswith("GPU-")
    assert g["persistence_mode"] == "enabled"
    assert g["ecc_mode"] == {"current": True, "pending": True}
    assert g["ecc_errors"] == {"volatile_uncorrected": 0, "volatile_corrected": 0,
                               "aggregate_uncorrected": 0, "aggregate_corrected": 0}
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert g["clocks_mhz"] == {"sm": 1980, "mem": 2619} and g["max_clocks_mhz"]["sm"] == 1980
    assert g["power_limit_w"] == 700.0 and g["default_power_limit_w"] == 700.0
    assert g["memory"]["free_bytes"] == 79 << 30
    assert g["processes"] == [] and g["throttle"] == []
    assert refused(pf) == []
    assert set(codes(pf)) - {"host-busy", "host-load", "cpu-governor", "low-memory"} == {"gpu"}
    assert pf["not_supported"] == []


@pytest.mark.parametrize("gpu, code, level", [
    (FakeGPU(ecc_errors={(1, 0): 2}), "ecc-uncorrected", "refuse"),
    (FakeGPU(ecc_errors={(1, 1): 5}), "ecc-history", "warn"),
    (FakeGPU(remapped=(0, 1, 1, 0)), "row-remap-pending", "refuse"),
    (FakeGPU(remapped=(0, 1, 0, 1)), "row-remap-failure", "refuse"),
    (FakeGPU(persistence=0), "persistence-off", "warn"),
    (FakeGPU(power_limit_mw=400_000), "power-limit-lowered", "warn"),
    (FakeGPU(processes=[(4242, 8 << 30)]), "gpu-busy", "refuse"),
    (FakeGPU(reasons=THERMAL), "throttled-now", "refuse"),
    (FakeGPU(temp_c=91), "gpu-hot", "warn"),
    (FakeGPU(memory=(80 << 30, 2 << 30)), "low-gpu-memory", "warn"),
    (FakeGPU(ecc=(0, 0)), "ecc-off", "info"),
])
def test_preflight_findings(gpu, code, level):
    _, tel = nvml(gpu)
    pf = tel.preflight(window_s=0.01)
    assert codes(pf).get(code) == level, pf["findings"]


def test_adapters_return_facts_and_the_rules_decide():
    _, tel = nvml(FakeGPU(temp_c=91, reasons=POWER_CAP))
    facts = tel.preflight_facts(window_s=0.01)
    assert "findings" not in facts and facts["gpus"][0]["temp_c"] == 91
    assert {"gpu-hot", "throttled-now"} <= set(codes(tel.preflight(window_s=0.01)))
    relaxed = PreflightRules(gpu_hot_c=95.0, throttle_reasons=("hw_thermal",))
    assert not {"gpu-hot", "throttled-now"} & set(codes(tel.preflight(window_s=0.01, rules=relaxed)))
    host = open_telemetry(nvml=FakeNvml(init_error=12))
    assert "findings" not in host.preflight_facts(window_s=0.01) and host.preflight_facts(0.01)["nvml_unavailable"]


def test_foreign_process_named_in_preflight():
    _, tel = nvml(FakeGPU(processes=[(4242, 1 << 30)]), process_names={4242: "python3 train.py"})
    pf = tel.preflight(window_s=0.01)
    assert pf["gpus"][0]["processes"] == [{"pid": 4242, "name": "python3 train.py", "used_memory_bytes": 1 << 30}]
    assert "4242 (python3 train.py)" in next(f["message"] for f in pf["findings"] if f["code"] == "gpu-busy")


def test_unsupported_queries_recorded_not_fatal():
    gpu = FakeGPU(unsupported={"nvmlDeviceGetRemappedRows", "nvmlDeviceGetEccMode", "nvmlDeviceGetPersistenceMode",
                               "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPowerManagementDefaultLimit",
                               "nvmlDeviceRegisterEvents"})
    fake, tel = nvml(gpu)
    pf = tel.preflight(window_s=0.01)
    g = pf["gpus"][0]
    assert g["remapped_rows"] == NOT_SUPPORTED and g["ecc_mode"] == NOT_SUPPORTED
    assert g["ecc_errors"] == NOT_SUPPORTED and g["persistence_mode"] == NOT_SUPPORTED
    assert g["default_power_limit_w"] == NOT_SUPPORTED
    assert {"gpu0 remapped_rows", "gpu0 ecc_mode", "gpu0 persistence_mode"} <= set(pf["not_supported"])
    assert refused(pf) == []
    s = run_manual(tel, fake, 3)
    assert s["energy_j"] is None and s["gpus"][0]["energy_j"] is None
    assert "gpu0 total_energy" in s["not_supported"] and "gpu0 xid events" in s["not_supported"]
    assert s["gpus"][0]["metrics"]["sm_clock_mhz"]["median"] == 1980


def test_old_pynvml_falls_back_to_throttle_reasons():
    fake, tel = nvml(FakeGPU(reasons=THERMAL), missing=("nvmlDeviceGetCurrentClocksEventReasons",
                                                        "nvmlEventSetCreate"))
    pf = tel.preflight(window_s=0.01)
    assert pf["gpus"][0]["throttle"] == ["sw_thermal"]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls
    s = run_manual(tel, fake, 2)
    assert s["throttle"] == {"sw_thermal": 1.0}
    assert "xid events" in s["not_supported"]


def test_reason_bits():
    assert reasons(0) == []
    assert reasons(THERMAL | POWER_CAP | IDLE) == ["gpu_idle", "sw_power_cap", "sw_thermal"]


# --- NVML per rep: each misbehaviour -------------------------------------------

def test_clean_rep_is_not_suspect():
    fake, tel = nvml(FakeGPU(energy_step_mj=50_000))
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 8)
    json.dumps(s)
    g = s["gpus"][0]
    assert s["samples"] == 8 and g["samples"] == 8 and g["busy_samples"] == 8
    assert g["metrics"]["sm_clock_mhz"] == {"min": 1980.0, "median": 1980.0, "max": 1980.0}
    assert g["metrics"]["power_w"]["median"] == 300.0 and g["metrics"]["temp_c"]["max"] == 45.0
    assert s["energy_j"] == 50.0 and g["energy_j"] == 50.0      # one counter delta: start → stop
    assert s["xid"] == [] and s["foreign_processes"] == [] and s["throttle"] == {}
    assert classify_rep({**s, "host": {}}, pf, HealthRules()) == []


def test_thermal_throttle_share():
    gpu = FakeGPU(timeline=[{"reasons": THERMAL if i in (2, 3, 4, 5) else 0, "sm_clock": 1700 if i in (2, 3, 4, 5)
                             else 1980} for i in range(10)])
    fake, tel = nvml(gpu)
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 10)
    assert s["gpus"][0]["throttle"] == {"sw_thermal": 0.4} and s["throttle"] == {"sw_thermal": 0.4}
    assert s["gpus"][0]["metrics"]["sm_clock_mhz"] == {"min": 1700.0, "median": 1980.0, "max": 1980.0}
    r = classify_rep({**s, "host": {}}, pf)
    assert r == ["throttle: GPU 0 clocks held by sw_thermal for 40% of the rep (limit 20%)"]
    assert classify_rep({**s, "host": {}}, pf, HealthRules(throttle_share=0.5)) == []


def test_power_cap_and_power_brake():
    gpu = FakeGPU(timeline=[{"reasons": POWER_CAP if i < 3 else (BRAKE if i < 6 else 0)} for i in range(10)])
    fake, tel = nvml(gpu)
    s = run_manual(tel, fake, 10)
    assert s["throttle"] == {"sw_power_cap": 0.3, "hw_power_brake": 0.3}
    r = classify_rep({**s, "host": {}}, tel.preflight(window_s=0.01))
    assert [x.split(" by ")[1].split(" for")[0] for x in r] == ["sw_power_cap", "hw_power_brake"]


def test_low_clocks_without_a_reason():
    fake, tel = nvml(FakeGPU(timeline=[{"sm_clock": 1500}] * 6))
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 6)
    r = classify_rep({**s, "host": {}}, pf)
    assert r == ["low-clock: GPU 0 SM clock median 1500 MHz is below 85% of 1980 MHz"]
    # a measured reference (e.g. from warm-up reps) replaces the max clock
    pf["gpus"][0]["reference_sm_clock_mhz"] = 1600
    assert classify_rep({**s, "host": {}}, pf) == []


def test_idle_samples_do_not_count_for_clocks():
    # container start and teardown idle the GPU at low clocks; those samples are left out
    tl = [{"sm_clock": 345, "reasons": IDLE}] * 3 + [{"sm_clock": 1980, "reasons": 0}] * 4 + \
         [{"sm_clock": 345, "reasons": IDLE}] * 3
    fake, tel = nvml(FakeGPU(timeline=tl))
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 10)
    g = s["gpus"][0]
    assert g["busy_samples"] == 4 and g["metrics"]["sm_clock_mhz"]["median"] == 1980.0
    assert g["all_metrics"]["sm_clock_mhz"]["median"] == 345.0
    assert g["throttle"] == {"gpu_idle": 0.6}
    assert classify_rep({**s, "host": {}}, pf) == []


def test_all_idle_rep_skips_the_clock_check():
    # a CPU engine on a GPU node: the GPU idles throughout; that is not a slow GPU
    fake, tel = nvml(FakeGPU(timeline=[{"sm_clock": 210, "reasons": IDLE}] * 4))
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 4)
    assert s["gpus"][0]["busy_samples"] == 0 and s["gpus"][0]["metrics"] == {}
    assert classify_rep({**s, "host": {}}, pf) == []


def test_xid_event_during_a_threaded_rep():
    fake, tel = nvml(FakeGPU(uuid="GPU-aaaa"))
    pf = tel.preflight(window_s=0.01)
    m = tel.monitor(0.05)
    time.sleep(0.12)
    fake.inject_xid(0, 79)
    time.sleep(0.12)
    s = m.stop()
    assert [x["xid"] for x in s["xid"]] == [79] and s["xid"][0]["gpu"] == "GPU-aaaa"
    assert s["samples"] >= 2
    assert "xid: XID 79 critical error on GPU-aaaa during the rep" in classify_rep(s, pf)
    assert m.stop() is s      # idempotent


def test_xid_just_before_stop_is_drained():
    fake, tel = nvml()
    m = tel.monitor(10.0)          # long interval: the thread sits in the event wait
    time.sleep(0.05)
    fake.inject_xid(0, 48)
    s = m.stop()
    assert [x["xid"] for x in s["xid"]] == [48]


def test_xid_on_second_gpu_names_it():
    fake, tel = nvml(FakeGPU(uuid="GPU-0"), FakeGPU(uuid="GPU-1"))
    m = tel.monitor(0.05)
    fake.inject_xid(1, 63)
    time.sleep(0.1)
    s = m.stop()
    assert s["xid"][0]["gpu"] == "GPU-1" and len(s["gpus"]) == 2


def test_foreign_process_appears_mid_rep():
    me = os.getpid()
    tl = [{"processes": [(me, 1 << 30)]}] * 3 + [{"processes": [(me, 1 << 30), (777001, 4 << 30),
                                                                (555, 1 << 20)]}] * 3
    fake, tel = nvml(FakeGPU(uuid="GPU-x", timeline=tl), process_names={777001: "miner"})
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 6, own_pids=lambda: {555})
    # the console's own process and the declared engine pid are ours; 777001 is not
    assert [(p["pid"], p["name"], p["gpu"]) for p in s["foreign_processes"]] == [(777001, "miner", "GPU-x")]
    r = classify_rep(s, pf)
    assert "foreign-process: process 777001 (miner) ran on GPU-x during the rep" in r
    assert classify_rep(s, pf, HealthRules(foreign_process=False, other_cpu_cores=99, load_spike=99)) == []


def test_child_process_of_the_console_is_ours():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        fake, tel = nvml(FakeGPU(processes=[(child.pid, 1 << 30)]))
        s = run_manual(tel, fake, 2)
        assert s["foreign_processes"] == []
    finally:
        child.kill()
        child.wait()


def test_gpu_lost_mid_rep():
    fake, tel = nvml(FakeGPU(timeline=[{}, {}, {"lost": True}, {}]))
    pf = tel.preflight(window_s=0.01)
    s = run_manual(tel, fake, 4)
    assert any("GPU is lost" in e for e in s["errors"])
    assert any(r.startswith("gpu-error: gpu0") and "GPU is lost" in r for r in classify_rep(s, pf))


def test_auto_step_walks_the_timeline_in_a_threaded_rep():
    tl = [{"temp_c": 40 + i, "sm_clock": 1900 + i} for i in range(5)]
    fake = FakeNvml([FakeGPU(timeline=tl)], auto_step=True)
    tel = NvmlTelemetry(fake)
    m = tel.monitor(0.02)
    time.sleep(0.25)
    s = m.stop()
    assert s["gpus"][0]["metrics"]["temp_c"]["max"] == 44.0
    assert s["gpus"][0]["metrics"]["sm_clock_mhz"]["min"] == 1900.0
    latest = m.latest()
    assert latest["gpus"][0]["temp_c"] == 44 and "t" in latest and "load1" in latest
    assert len(m.samples) == s["samples"]


def test_host_figures_ride_along_with_nvml():
    fake, tel = nvml()
    s = run_manual(tel, fake, 3)
    assert "cpu" in s["host"] and "load1" in s["host"]["metrics"]


# --- open_telemetry ------------------------------------------------------------

def test_open_telemetry_prefers_nvml_when_a_gpu_answers():
    t = open_telemetry(nvml=FakeNvml())
    assert t.source == "nvml"
    t.close()


def test_open_telemetry_falls_back_to_host():
    t = open_telemetry(nvml=FakeNvml(init_error=12))   # library not found
    assert isinstance(t, HostTelemetry) and t.source == "host"
    assert any(f["code"] == "no-gpu-telemetry" for f in t.preflight(window_s=0.01)["findings"])
    assert open_telemetry(nvml=FakeNvml(gpus=[])).source == "host"
    assert open_telemetry("host", nvml=FakeNvml()).source == "host"
    with pytest.raises(NvmlUnavailable):
        open_telemetry("nvml", nvml=FakeNvml(gpus=[]))
    with pytest.raises(ValueError):
        open_telemetry("gpu")


def test_open_telemetry_on_this_machine():
    # real pynvml: without a GPU driver it must fall back to host telemetry, not fail
    t = open_telemetry()
    pf = t.preflight(window_s=0.05)
    assert pf["source"] in ("nvml", "host")
    t.close()


def test_close_shuts_nvml_down():
    fake, tel = nvml()
    assert fake.initialised == 1
    tel.close()
    tel.close()
    assert fake.initialised == 0


# --- host: a fake /proc tree ------------------------------------------------------

def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def stat_text(busy: int, idle: int, cores: int = 4, running: int = 1) -> str:
    return (f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n" + "".join(f"cpu{i} 0 0 0 0 0 0 0 0 0 0\n" for i in range(cores))
            + f"intr 0\nctxt 0\nprocs_running {running}\nprocs_blocked 0\n")


@pytest.fixture
def tree(tmp_path) -> Path:
    r = tmp_path
    write(r, "proc/stat", stat_text(1000, 9000))
    write(r, "proc/loadavg", "0.50 0.40 0.30 1/123 4567\n")
    write(r, "proc/meminfo", "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n"
                             "MemAvailable:    8192000 kB\nCached:          4096000 kB\n")
    write(r, "proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake CPU 3000\ncpu MHz\t\t: 2999.998\n")
    write(r, "proc/sys/kernel/osrelease", "6.1.0-fake\n")
    for i, khz in enumerate([3_000_000, 3_100_000, 2_900_000, 3_050_000]):
        write(r, f"sys/devices/system/cpu/cpu{i}/cpufreq/scaling_cur_freq", f"{khz}\n")
    write(r, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "3500000\n")
    write(r, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n")
    write(r, "sys/class/thermal/thermal_zone0/temp", "47000\n")
    write(r, "sys/class/thermal/thermal_zone1/temp", "-273000\n")   # junk zone, ignored
    write(r, "sys/class/hwmon/hwmon0/temp1_input", "52500\n")
    # the console (pid 100) with one child (101) and an unrelated process (200)
    write(r, "proc/100/stat", "100 (console) S 1 100 100 0 -1 0 0 0 0 0 50 10 30 10 20 0 1 0 0 0 0\n")
    write(r, "proc/101/stat", "101 (eng (x) ine) R 100 100 100 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0 0 0 0\n")
    write(r, "proc/200/stat", "200 (other) R 1 200 200 0 -1 0 0 0 0 0 9999 0 0 0 20 0 1 0 0 0 0\n")
    return r


def test_fake_tree_facts(tree):
    t = HostTelemetry(tree, pid=100)
    f = t.facts()
    assert f["cpu_model"] == "Fake CPU 3000" and f["cores"] == 4 and f["kernel"] == "6.1.0-fake"
    assert f["cpu_mhz"] == 3025.0 and f["cpu_max_mhz"] == 3500.0 and f["governor"] == "powersave"
    assert (f["load1"], f["load5"], f["load15"]) == (0.5, 0.4, 0.3)
    assert f["mem_total_bytes"] == 16384000 * 1024 and f["mem_available_bytes"] == 8192000 * 1024
    assert f["page_cache_bytes"] == 4096000 * 1024
    assert f["temp_c"] == 52.5


def test_fake_tree_cpu_falls_back_to_cpuinfo(tree):
    import shutil
    shutil.rmtree(tree / "sys/devices")
    assert ProcReader(tree).cpu_mhz() == [2999.998]


def test_fake_tree_process_tree_cpu(tree):
    p = ProcReader(tree)
    p.clk_tck = 100
    # console: 50+10+30+10 ticks, child 101: 100 ticks; 200 is not ours
    assert p.tree_cpu_s(100) == pytest.approx(2.0)
    assert p.proc_times(101) == (100, 1.0)


def test_fake_tree_preflight_findings(tree):
    write(tree, "proc/loadavg", "7.90 6.00 5.00 9/123 4567\n")
    write(tree, "proc/meminfo", "MemTotal: 16384000 kB\nMemAvailable: 400000 kB\nCached: 100 kB\n")
    pf = HostTelemetry(tree, pid=100).preflight(window_s=0.01)
    assert codes(pf) == {"host-load": "warn", "low-memory": "warn", "cpu-governor": "info"}
    assert pf["gpus"] == [] and pf["source"] == "host"


def test_host_findings_busy_and_hot():
    f = host_findings({"cores": 2, "other_busy_cores": 1.2, "load1": 0.1, "temp_c": 95.0,
                       "mem_total_bytes": 100 << 30, "mem_available_bytes": 90 << 30, "governor": "performance"})
    assert [x["code"] for x in f] == ["host-busy", "host-hot"]
    assert host_findings({}) == []


def test_fake_tree_rep_other_cpu_and_load_spike(tree):
    t = HostTelemetry(tree, pid=100)
    pf = t.preflight(window_s=0.01)
    m = t.monitor(0.05, start=False)
    m.sample_once()
    # during the rep: 3 of 4 cores busy, the console tree did not move, load jumped
    write(tree, "proc/stat", stat_text(1000 + 300, 9000 + 100, running=4))
    write(tree, "proc/loadavg", "4.60 1.00 0.50 5/123 4567\n")
    m.sample_once()
    s = m.stop()
    cpu = s["host"]["cpu"]
    assert cpu["busy_cores"] == 3.0 and cpu["own_cores"] == 0.0 and cpu["other_cores"] == 3.0
    assert s["host"]["metrics"]["busy_cores"]["max"] == 3.0
    assert s["host"]["metrics"]["load1"]["max"] == 4.6
    assert s["host"]["metrics"]["cpu_mhz"]["median"] == 3025.0
    assert s["host"]["metrics"]["temp_c"]["max"] == 52.5
    r = classify_rep(s, pf)
    assert r[0] == "host-busy: other processes used 3.00 cores during the rep (limit 0.5)"
    assert r[1].startswith("load-spike: load average rose from 0.50 to 4.60")


def test_engine_quota_is_never_counted_as_a_neighbour(tree):
    t = HostTelemetry(tree, pid=100)
    m = t.monitor(0.05, start=False, engine_cpus=3.0)
    write(tree, "proc/stat", stat_text(1000 + 300, 9000 + 100))
    s = m.stop()
    assert s["host"]["cpu"]["other_cores"] == 0.0 and s["host"]["cpu"]["own_basis"].endswith("quota")
    assert s["host"]["engine_cpus"] == 3.0


def test_engine_cpu_time_callable(tree):
    t = HostTelemetry(tree, pid=100)
    readings = iter([10.0, 10.0, 12.0])

    def own() -> float:
        try:
            return next(readings)
        except StopIteration:
            raise FileNotFoundError("cgroup gone")   # the container exited: keep the last reading

    m = t.monitor(0.05, start=False, own_cpu_s=own)
    m.sample_once()
    write(tree, "proc/stat", stat_text(1000 + 300, 9000 + 100))
    m.sample_once()
    s = m.stop()
    assert s["host"]["cpu"]["own_basis"] == "process tree + engine CPU time"
    assert s["host"]["cpu"]["own_cores"] > 0
    assert any("engine CPU reading failed" in e for e in s["errors"])


def test_empty_tree_is_not_an_error(tmp_path):
    t = HostTelemetry(tmp_path, pid=1)
    pf = t.preflight(window_s=0.01)
    assert pf["host"]["load1"] is None and pf["host"]["other_busy_cores"] is None
    s = t.monitor(0.05, start=False).stop()
    assert s["host"]["cpu"]["busy_cores"] is None and s["samples"] == 1
    assert classify_rep(s, pf) == []


# --- host: the real /proc of this machine -------------------------------------------

def test_real_proc_preflight_values_are_plausible():
    t = HostTelemetry()
    pf = t.preflight(window_s=0.2)
    f = pf["host"]
    assert f["cores"] >= 1 and f["cores"] >= len(os.sched_getaffinity(0))
    assert f["mem_total_bytes"] == pytest.approx(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), rel=0.01)
    assert 0 < f["mem_available_bytes"] <= f["mem_total_bytes"]
    assert 0 <= f["page_cache_bytes"] <= f["mem_total_bytes"]
    assert f["load1"] >= 0 and f["load1"] == pytest.approx(os.getloadavg()[0], abs=1.0)
    if f["cpu_mhz"] is not None:
        assert 100 < f["cpu_mhz"] < 10000
    if f["temp_c"] is not None:
        assert 0 < f["temp_c"] < 120
    assert f["kernel"] == os.uname().release
    assert 0 <= f["other_busy_cores"] <= f["cores"] + 0.1
    json.dumps(pf)


def test_real_proc_rep_counts_own_cpu():
    t = HostTelemetry()
    m = t.monitor(0.05)
    # burn CPU in a child the console starts and waits for, as the local runtime does
    subprocess.run([sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<0.4: pass"],
                   check=True)
    s = m.stop()
    cpu = s["host"]["cpu"]
    assert s["samples"] >= 3
    assert cpu["cores"] >= 1
    assert cpu["own_cores"] * s["duration_s"] >= 0.3       # the child's 0.4 s of CPU is ours
    assert cpu["busy_cores"] >= 0.3 * 0.9 / s["duration_s"] - 0.1
    assert cpu["other_cores"] >= 0
    mx = s["host"]["metrics"]
    assert mx["mem_available_bytes"]["min"] > 0 and mx["load1"]["min"] >= 0
    assert mx["procs_running"]["max"] >= 1


def test_flat_metrics_and_gpu_list():
    fake, tel = nvml(FakeGPU(uuid="GPU-0", name="A"), FakeGPU(uuid="GPU-1", name="B", sm_clock=1500))
    assert tel.gpus() == [{"index": 0, "uuid": "GPU-0", "name": "A"}, {"index": 1, "uuid": "GPU-1", "name": "B"}]
    s = run_manual(tel, fake, 2)
    assert s["metrics"]["sm_clock_mhz"]["median"] == 1980.0
    assert s["metrics"]["gpu1_sm_clock_mhz"]["median"] == 1500.0
    assert "load1" in s["metrics"]
    assert HostTelemetry().gpus() == []


class _BusyNeighbour(ProcReader):
    """/proc/stat of a 2-core node whose neighbour keeps ``busy[i]`` cores busy in window i."""

    def __init__(self, busy: list[float]):
        super().__init__("/nonexistent")
        self.busy, self.reads, self.t = list(busy), 0, [0, 0]

    def stat(self):
        if self.reads % 2 == 1:         # the second read of a window: advance by its load
            b = self.busy[min(self.reads // 2, len(self.busy) - 1)]
            self.t[0] += int(b * 100)
            self.t[1] += 200
        self.reads += 1
        return {"busy": self.t[0], "total": self.t[1], "cores": 2}

    def tree_cpu_s(self, pid):
        return 0.0


def test_settle_waits_for_the_daemon_to_finish_its_teardown():
    tel = HostTelemetry("/nonexistent")
    tel.proc = _BusyNeighbour([1.2, 0.9, 0.1])
    got = tel.settle(quiet_cores=0.3, max_s=5.0, window_s=0.01)
    assert got["quiet"] and got["other_cores"] == pytest.approx(0.1) and tel.proc.reads == 6


def test_settle_gives_up_after_its_limit_and_says_so():
    tel = HostTelemetry("/nonexistent")
    tel.proc = _BusyNeighbour([1.5])
    got = tel.settle(quiet_cores=0.3, max_s=0.05, window_s=0.01)
    assert not got["quiet"] and got["other_cores"] == pytest.approx(1.5) and got["waited_s"] >= 0.05


# --- a busy or throttled GPU is refused at preflight, before anything is built ---------------

def _said(pf: dict):
    """refuse_unfit over a preflight: the notices it says (level, code, message) and its refusal."""
    from console.errors import InfraError
    from console.round.node import refuse_unfit
    notices: list[tuple[str, str, str]] = []
    try:
        refuse_unfit(pf, lambda *n: notices.append(n))
    except InfraError as e:
        return notices, e
    return notices, None


def test_a_gpu_running_another_compute_process_is_refused_naming_its_pids_and_names():
    _, tel = nvml(FakeGPU(processes=[(4242, 8 << 30), (77, 1 << 30)]), process_names={4242: "python3 train.py"})
    pf = tel.preflight(window_s=0.01)
    [busy] = refused(pf)
    assert busy["code"] == "gpu-busy"
    assert "pid 4242 (python3 train.py)" in busy["message"] and "pid 77 (name unknown)" in busy["message"]
    notices, err = _said(pf)
    assert err is not None and err.exit_code == 3 and "4242 (python3 train.py)" in str(err)
    assert ("error", "gpu-busy", busy["message"]) in notices


@pytest.mark.parametrize("mask, named", [(POWER_CAP, "sw_power_cap"), (THERMAL | IDLE, "sw_thermal"),
                                         (BRAKE, "hw_power_brake")])
def test_a_gpu_throttled_before_the_round_is_refused_naming_the_reasons(mask, named):
    _, tel = nvml(FakeGPU(reasons=mask))
    [thr] = refused(tel.preflight(window_s=0.01))
    assert thr["code"] == "throttled-now" and named in thr["message"] and "gpu_idle" not in thr["message"]
    assert _said(tel.preflight(window_s=0.01))[1] is not None


def test_a_profile_that_allows_a_busy_gpu_gets_warnings_and_the_round_starts():
    _, tel = nvml(FakeGPU(processes=[(4242, 1 << 30)], reasons=POWER_CAP), process_names={4242: "llm"})
    pf = tel.preflight(window_s=0.01, rules=PreflightRules(busy_gpu="warn"))
    assert refused(pf) == [] and {"gpu-busy": "warn", "throttled-now": "warn"}.items() <= codes(pf).items()
    notices, err = _said(pf)
    assert err is None and {(lvl, code) for lvl, code, _ in notices} >= {("warn", "gpu-busy"), ("warn", "throttled-now")}


def test_an_idle_gpu_is_fit_and_its_info_is_said_as_info():
    _, tel = nvml(FakeGPU(reasons=IDLE))
    pf = tel.preflight(window_s=0.01)
    assert refused(pf) == [] and "throttled-now" not in codes(pf)
    notices, err = _said({"findings": [f for f in pf["findings"] if f["code"] == "gpu"]})
    assert err is None and [(lvl, code) for lvl, code, _ in notices] == [("info", "gpu")]


def test_an_info_notice_prints_as_info_not_as_a_warning():
    import io

    from console import events as ev
    from console.reports.text import LineReporter
    out = io.StringIO()
    LineReporter(out, colour=False, github=False)(ev.Notice(level="info", code="gpu", message="GPU 0 (H100) uuid x"))
    assert "info: GPU 0 (H100) uuid x" in out.getvalue() and "warn" not in out.getvalue()


def test_a_round_on_a_busy_gpu_ends_infra_before_anything_is_built(tmp_path):
    from console import events as ev
    from console.engine import sources
    from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
    from console.profile import load_profile
    from console.results import lockfile
    from console.round import Round, RoundConfig
    profile = load_profile(DEMO_PROFILE)
    _, tel = nvml(FakeGPU(processes=[(4242, 1 << 30)]), process_names={4242: "python3 train.py"})
    cfg = RoundConfig(profile=profile, main=sources.parse_spec(str(DEMO_MAIN)),
                      candidate=("patch", str(DEMO_CANDIDATES / "fast.patch")), out_dir=tmp_path / "out",
                      runtime="local", reps=2, lock_path=lockfile.ensure(tmp_path / "reference.lock", profile),
                      telemetry=tel)
    rnd = Round(cfg)
    events = list(rnd.events())
    assert rnd.exit_code == 3 and not any(isinstance(e, ev.BuildStarted) for e in events)
    [end] = [e for e in events if isinstance(e, ev.RoundEnded)]
    assert end.status == "infra" and "pid 4242 (python3 train.py)" in end.message
    # the node the round ran on: its GPU and driver are in the host facts the fingerprint is made of
    [started] = [e for e in events if isinstance(e, ev.RoundStarted)]
    facts = started.host.fingerprint["facts"]
    assert (facts["gpu_model"], facts["gpus"], facts["driver_major"]) == ("NVIDIA H100 80GB HBM3", 1, "550")
    assert [(e.level, e.code) for e in events if isinstance(e, ev.Notice) and e.code == "gpu"] == [("info", "gpu")]
