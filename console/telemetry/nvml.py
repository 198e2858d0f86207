"""GPU telemetry through NVML (the ``pynvml`` module of nvidia-ml-py).

Preflight reads the facts that decide whether a node can be trusted for a round
(driver, ECC state and error counts, remapped rows, clocks, power limit, other
processes, free memory; ``console.core.decisions.health`` decides); per rep it samples clocks, temperature, power, clock-event
(throttle) reasons and compute processes, takes the energy counter's delta, and
listens for XID critical errors. Any query a GPU does not support is recorded as
"not supported" and the rest carries on. Host telemetry is gathered alongside.

The NVML module is a parameter so that tests can pass a fake one (``tests/fake_nvml.py``).
"""
from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Iterable

from .base import RepMonitor, Telemetry, metric_stats
from .host import HostMonitor, HostTelemetry

NOT_SUPPORTED = "not supported"

# NVML clock-event reason bits (stable across driver versions; the names follow nvml.h)
REASON_BITS: list[tuple[int, str]] = [
    (0x001, "gpu_idle"), (0x002, "applications_clocks"), (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"), (0x010, "sync_boost"), (0x020, "sw_thermal"),
    (0x040, "hw_thermal"), (0x080, "hw_power_brake"), (0x100, "display_clock"),
]

NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
XID_CRITICAL_ERROR = 0x8          # nvmlEventTypeXidCriticalError
GPU_METRICS = ["sm_clock_mhz", "mem_clock_mhz", "temp_c", "power_w"]


class NvmlUnavailable(RuntimeError):
    """NVML did not initialise or found no GPU."""


def reasons(mask: int) -> list[str]:
    return [name for bit, name in REASON_BITS if mask & bit]


def _s(x: Any) -> Any:
    return x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else x


def _handle_key(h: Any) -> Any:
    """Comparable identity of an NVML device handle (a ctypes pointer in pynvml)."""
    try:
        return ctypes.cast(h, ctypes.c_void_p).value
    except Exception:   # not a ctypes object (the test fake): identity
        return id(h)


class NvmlTelemetry(Telemetry):
    source = "nvml"

    def __init__(self, nvml: Any = None, *, host: HostTelemetry | None = None,
                 indices: Iterable[int] | None = None):
        if nvml is None:
            try:
                import pynvml as nvml  # type: ignore[no-redef]
            except ImportError as e:
                raise NvmlUnavailable(f"pynvml is not installed ({e})") from None
        self.nv = nvml
        try:
            nvml.nvmlInit()
        except Exception as e:   # library missing, driver not loaded …
            raise NvmlUnavailable(f"NVML did not initialise: {e}") from None
        self._open = True
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as e:
            self.close()
            raise NvmlUnavailable(f"NVML could not count GPUs: {e}") from None
        if count == 0:
            self.close()
            raise NvmlUnavailable("NVML found no GPU")
        self.indices = list(range(count)) if indices is None else list(indices)
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self.uuids = [str(_s(self.q(h, "uuid", nvml.nvmlDeviceGetUUID, h, record=[]) or f"gpu{i}"))
                      for i, h in zip(self.indices, self.handles)]
        self.host = host or HostTelemetry()

    def close(self) -> None:
        if getattr(self, "_open", False):
            self._open = False
            try:
                self.nv.nvmlShutdown()
            except Exception:
                pass

    # --- one query, NotSupported-tolerant ----------------------------------
    def q(self, where: Any, what: str, fn: Callable[..., Any] | None, *args: Any,
          record: list[str] | None = None, errors: list[str] | None = None) -> Any:
        """Call ``fn``; NotSupported (or a function this pynvml lacks) gives NOT_SUPPORTED.

        Other NVML errors give None and are noted in ``errors``.
        """
        pos = next((k for k, h in enumerate(getattr(self, "handles", [])) if h is where), None)
        label = str(what) if where is None or pos is None else f"gpu{self.indices[pos]} {what}"
        if fn is None:
            if record is not None:
                record.append(label)
            return NOT_SUPPORTED
        try:
            return fn(*args)
        except Exception as e:
            if self._not_supported(e):
                if record is not None and label not in record:
                    record.append(label)
                return NOT_SUPPORTED
            if errors is not None:
                msg = f"{label}: {e}"
                if msg not in errors:
                    errors.append(msg)
            return None

    def _not_supported(self, e: Exception) -> bool:
        ns = getattr(self.nv, "NVMLError_NotSupported", None)
        fnf = getattr(self.nv, "NVMLError_FunctionNotFound", None)
        return any(c is not None and isinstance(e, c) for c in (ns, fnf))

    def fn(self, name: str) -> Callable[..., Any] | None:
        return getattr(self.nv, name, None)

    # --- preflight ---------------------------------------------------------
    def settle(self, quiet_cores: float, max_s: float) -> dict[str, Any]:
        return self.host.settle(quiet_cores, max_s)

    def preflight_facts(self, window_s: float = 0.5) -> dict[str, Any]:
        ns: list[str] = []
        errs: list[str] = []
        host = self.host.preflight_facts(window_s=window_s)
        cuda = self.q(None, "cuda_driver_version", self.fn("nvmlSystemGetCudaDriverVersion"), record=ns, errors=errs)
        driver = {
            "driver_version": _s(self.q(None, "driver_version", self.fn("nvmlSystemGetDriverVersion"),
                                        record=ns, errors=errs)),
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda,
            "nvml_version": _s(self.q(None, "nvml_version", self.fn("nvmlSystemGetNVMLVersion"),
                                      record=ns, errors=errs)),
        }
        gpus = [self._gpu_facts(i, h, ns, errs) for i, h in zip(self.indices, self.handles)]
        return {"source": "nvml", "at": time.time(), "host": host["host"], "driver": driver, "gpus": gpus,
                "not_supported": ns, "errors": errs}

    def _gpu_facts(self, index: int, h: Any, ns: list[str], errs: list[str]) -> dict[str, Any]:
        def q(what: str, name: str, *args: Any) -> Any:
            return self.q(h, what, self.fn(name), h, *args, record=ns, errors=errs)

        g: dict[str, Any] = {"index": index, "uuid": self.uuids[self.indices.index(index)],
                             "name": _s(q("name", "nvmlDeviceGetName"))}
        # which kernels a CUDA build runs on it: a parity reference is only valid on the same one
        cc = q("compute_capability", "nvmlDeviceGetCudaComputeCapability")
        g["compute_capability"] = (f"{int(cc[0])}.{int(cc[1])}" if isinstance(cc, (list, tuple)) and len(cc) >= 2
                                   else cc)
        pm = q("persistence_mode", "nvmlDeviceGetPersistenceMode")
        g["persistence_mode"] = pm if pm in (NOT_SUPPORTED, None) else ("enabled" if pm else "disabled")
        ecc = q("ecc_mode", "nvmlDeviceGetEccMode")
        g["ecc_mode"] = ({"current": bool(ecc[0]), "pending": bool(ecc[1])}
                         if isinstance(ecc, (list, tuple)) and len(ecc) >= 2 else ecc)
        if isinstance(g["ecc_mode"], dict) and g["ecc_mode"]["current"]:
            g["ecc_errors"] = {
                f"{counter}_{kind}": q(f"ecc_errors {counter} {kind}", "nvmlDeviceGetTotalEccErrors", etype, ctype)
                for counter, ctype in (("volatile", NVML_VOLATILE_ECC), ("aggregate", NVML_AGGREGATE_ECC))
                for kind, etype in (("uncorrected", NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
                                    ("corrected", NVML_MEMORY_ERROR_TYPE_CORRECTED))
            }
        else:
            g["ecc_errors"] = NOT_SUPPORTED if g["ecc_mode"] == NOT_SUPPORTED else None
        rr = q("remapped_rows", "nvmlDeviceGetRemappedRows")
        g["remapped_rows"] = ({"correctable": int(rr[0]), "uncorrectable": int(rr[1]),
                               "pending": bool(rr[2]), "failure": bool(rr[3])}
                              if isinstance(rr, (list, tuple)) and len(rr) >= 4 else rr)
        g["clocks_mhz"] = {"sm": q("sm_clock", "nvmlDeviceGetClockInfo", NVML_CLOCK_SM),
                           "mem": q("mem_clock", "nvmlDeviceGetClockInfo", NVML_CLOCK_MEM)}
        g["max_clocks_mhz"] = {"sm": q("max_sm_clock", "nvmlDeviceGetMaxClockInfo", NVML_CLOCK_SM),
                               "mem": q("max_mem_clock", "nvmlDeviceGetMaxClockInfo", NVML_CLOCK_MEM)}
        g["power_limit_w"] = _watts(q("power_limit", "nvmlDeviceGetPowerManagementLimit"))
        g["default_power_limit_w"] = _watts(q("default_power_limit", "nvmlDeviceGetPowerManagementDefaultLimit"))
        g["power_w"] = _watts(q("power", "nvmlDeviceGetPowerUsage"))
        g["temp_c"] = q("temperature", "nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU)
        mem = q("memory", "nvmlDeviceGetMemoryInfo")
        g["memory"] = ({"total_bytes": int(mem.total), "free_bytes": int(mem.free), "used_bytes": int(mem.used)}
                       if hasattr(mem, "total") else mem)
        g["throttle"] = self._reasons(h, ns, errs)
        g["processes"] = self._processes(h, ns, errs)
        return g

    def _reasons(self, h: Any, ns: list[str], errs: list[str]) -> Any:
        f = self.fn("nvmlDeviceGetCurrentClocksEventReasons")
        mask = self.q(h, "clocks_event_reasons", f, h, record=None, errors=errs) if f else NOT_SUPPORTED
        if mask == NOT_SUPPORTED:   # older drivers only have the throttle-reasons name
            mask = self.q(h, "clocks_event_reasons", self.fn("nvmlDeviceGetCurrentClocksThrottleReasons"), h,
                          record=ns, errors=errs)
        return reasons(int(mask)) if isinstance(mask, int) else mask

    def _processes(self, h: Any, ns: list[str], errs: list[str]) -> Any:
        procs = self.q(h, "compute_processes", self.fn("nvmlDeviceGetComputeRunningProcesses"), h,
                       record=ns, errors=errs)
        if not isinstance(procs, (list, tuple)):
            return procs
        out = []
        for p in procs:
            pid = int(getattr(p, "pid", -1))
            mem = getattr(p, "usedGpuMemory", None)
            name = self.q(None, "process_name", self.fn("nvmlSystemGetProcessName"), pid)
            out.append({"pid": pid, "name": _s(name) if isinstance(name, (str, bytes)) else None,
                        "used_memory_bytes": int(mem) if isinstance(mem, int) else None})
        return out

    # --- per rep -----------------------------------------------------------
    def gpus(self) -> list[dict[str, Any]]:
        return [{"index": i, "uuid": u, "name": _s(self.q(h, "name", self.fn("nvmlDeviceGetName"), h))}
                for i, h, u in zip(self.indices, self.handles, self.uuids)]

    def driver_version(self) -> str | None:
        v = _s(self.q(None, "driver_version", self.fn("nvmlSystemGetDriverVersion")))
        return v if isinstance(v, str) and v != NOT_SUPPORTED else None

    def monitor(self, interval_s: float = 0.25, *, start: bool = True,
                own_pids: Callable[[], Iterable[int]] | Iterable[int] | None = None,
                own_cpu_s: Callable[[], float] | None = None, engine_cpus: float | None = None,
                **_: Any) -> "NvmlMonitor":
        return NvmlMonitor(self, interval_s, start=start, own_pids=own_pids, own_cpu_s=own_cpu_s,
                           engine_cpus=engine_cpus)


def _watts(mw: Any) -> Any:
    return round(mw / 1000.0, 3) if isinstance(mw, (int, float)) and not isinstance(mw, bool) else mw


class NvmlMonitor(RepMonitor):
    def __init__(self, tel: NvmlTelemetry, interval_s: float = 0.25, *, start: bool = True,
                 own_pids: Callable[[], Iterable[int]] | Iterable[int] | None = None,
                 own_cpu_s: Callable[[], float] | None = None, engine_cpus: float | None = None):
        self.tel, self.nv = tel, tel.nv
        self._own_pids = own_pids
        self._ancestry: dict[int, bool] = {}
        self.ns: list[str] = []
        self.nerrs: list[str] = []
        self.xid: list[dict[str, Any]] = []
        self.foreign: dict[tuple[str, int], dict[str, Any]] = {}
        self.host = HostMonitor(tel.host, interval_s, start=False, own_cpu_s=own_cpu_s, engine_cpus=engine_cpus)
        self._evset: Any = None
        super().__init__(interval_s, start=start)

    def _energy(self) -> list[Any]:
        return [self.tel.q(h, "total_energy", self.tel.fn("nvmlDeviceGetTotalEnergyConsumption"), h,
                           record=self.ns, errors=self.nerrs) for h in self.tel.handles]

    def _begin(self) -> None:
        self._e0 = self._energy()
        create = self.tel.fn("nvmlEventSetCreate")
        register = self.tel.fn("nvmlDeviceRegisterEvents")
        if create is None or register is None or self.tel.fn("nvmlEventSetWait") is None:
            self.ns.append("xid events")
            return
        try:
            self._evset = create()
        except Exception as e:
            self.ns.append("xid events") if self.tel._not_supported(e) else self._error(f"event set: {e}")
            return
        registered = 0
        for i, h in zip(self.tel.indices, self.tel.handles):
            try:
                register(h, XID_CRITICAL_ERROR, self._evset)
                registered += 1
            except Exception as e:
                if self.tel._not_supported(e):
                    self.ns.append(f"gpu{i} xid events")
                else:
                    self._error(f"gpu{i} xid events: {e}")
        if not registered:
            self._free_events()

    def _free_events(self) -> None:
        if self._evset is not None:
            try:
                self.nv.nvmlEventSetFree(self._evset)
            except Exception:
                pass
            self._evset = None

    def _own(self, pid: int) -> bool:
        own = self._own_pids
        if own is not None:
            try:
                pids = own() if callable(own) else own
                if pid in set(pids):
                    return True
            except Exception as e:
                self._error(f"own pid lookup failed: {type(e).__name__}")
        # the console itself or a process it started (the local runtime's engine)
        if pid not in self._ancestry:
            me, p, seen = self.tel.host.pid, pid, 0
            mine = False
            while p > 1 and seen < 64:
                if p == me:
                    mine = True
                    break
                r = self.tel.host.proc.proc_times(p)
                if r is None:
                    break
                p, seen = r[0], seen + 1
            self._ancestry[pid] = mine
        return self._ancestry[pid]

    def _sample(self) -> dict[str, Any]:
        s = self.host.sample_once()
        s = {k: v for k, v in s.items() if k != "t"}
        gpus = []
        for i, h, uuid in zip(self.tel.indices, self.tel.handles, self.tel.uuids):
            def q(what: str, name: str, *args: Any) -> Any:
                v = self.tel.q(h, what, self.tel.fn(name), h, *args, record=self.ns, errors=self.nerrs)
                return None if v == NOT_SUPPORTED else v
            g: dict[str, Any] = {"index": i,
                                 "sm_clock_mhz": q("sm_clock", "nvmlDeviceGetClockInfo", NVML_CLOCK_SM),
                                 "mem_clock_mhz": q("mem_clock", "nvmlDeviceGetClockInfo", NVML_CLOCK_MEM),
                                 "temp_c": q("temperature", "nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU),
                                 "power_w": _watts(q("power", "nvmlDeviceGetPowerUsage"))}
            thr = self.tel._reasons(h, self.ns, self.nerrs)
            g["throttle"] = thr if isinstance(thr, list) else None
            procs = self.tel._processes(h, self.ns, self.nerrs)
            if isinstance(procs, list):
                g["processes"] = len(procs)
                for p in procs:
                    if not self._own(p["pid"]):
                        key = (uuid, p["pid"])
                        if key not in self.foreign:
                            self.foreign[key] = {"gpu": uuid, **p, "first_t": round(time.monotonic() - self._t0, 3)}
            gpus.append(g)
        s["gpus"] = gpus
        return s

    def _wait(self, timeout: float) -> None:
        if self._evset is None:
            self._stop.wait(timeout)
            return
        deadline = time.monotonic() + timeout
        timeout_cls = getattr(self.nv, "NVMLError_Timeout", None)
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                # short waits keep stop() prompt whatever the interval
                data = self.nv.nvmlEventSetWait(self._evset, max(1, int(min(left, 0.1) * 1000)))
            except Exception as e:
                if timeout_cls is not None and isinstance(e, timeout_cls):
                    continue
                self._error(f"xid wait: {e}")
                self._free_events()
                self._stop.wait(max(0.0, deadline - time.monotonic()))
                return
            self._on_event(data)

    def _on_event(self, data: Any) -> None:
        if not int(getattr(data, "eventType", 0)) & XID_CRITICAL_ERROR:
            return
        key = _handle_key(getattr(data, "device", None))
        gpu = next((u for h, u in zip(self.tel.handles, self.tel.uuids) if _handle_key(h) == key), None)
        if len(self.xid) < 100:
            self.xid.append({"gpu": gpu, "xid": int(getattr(data, "eventData", 0)),
                             "t": round(time.monotonic() - self._t0, 3)})

    def _end(self) -> None:
        self._e1 = self._energy()
        # drain events that arrived after the last wait
        if self._evset is not None:
            for _ in range(100):
                try:
                    data = self.nv.nvmlEventSetWait(self._evset, 1)
                except Exception:
                    break
                self._on_event(data)
        self._free_events()

    def _summary(self, samples: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
        host = self.host.stop()
        gpus = []
        top_throttle: dict[str, float] = {}
        energy_total: float | None = 0.0
        for pos, (i, uuid) in enumerate(zip(self.tel.indices, self.tel.uuids)):
            rows = [s["gpus"][pos] for s in samples if len(s.get("gpus", [])) > pos]
            busy = [r for r in rows if r.get("throttle") is None or "gpu_idle" not in r["throttle"]]
            with_reasons = [r for r in rows if isinstance(r.get("throttle"), list)]
            throttle: dict[str, float] = {}
            for _, name in REASON_BITS:
                n = sum(name in r["throttle"] for r in with_reasons)
                if n:
                    throttle[name] = round(n / len(with_reasons), 4)
            for k, v in throttle.items():
                top_throttle[k] = max(top_throttle.get(k, 0.0), v)
            e0, e1 = self._e0[pos], self._e1[pos] if pos < len(self._e1) else None
            energy = round((e1 - e0) / 1000.0, 3) if isinstance(e0, int) and isinstance(e1, int) and e1 >= e0 else None
            if energy is None:
                energy_total = None
            elif energy_total is not None:
                energy_total += energy
            gpus.append({"index": i, "uuid": uuid, "samples": len(rows), "busy_samples": len(busy),
                         # clocks over busy samples only: container start and teardown idle the GPU
                         "metrics": metric_stats(busy, GPU_METRICS),
                         "all_metrics": metric_stats(rows, GPU_METRICS),
                         "throttle": throttle, "energy_j": energy})
        flat = dict(host["metrics"])
        for pos, g in enumerate(gpus):
            flat.update({(k if pos == 0 else f"gpu{g['index']}_{k}"): v for k, v in g["metrics"].items()})
        return {"source": "nvml", "metrics": flat, "host": host["host"], "gpus": gpus, "throttle": top_throttle,
                "energy_j": None if energy_total is None else round(energy_total, 3),
                "xid": list(self.xid), "foreign_processes": list(self.foreign.values()),
                "errors": self.nerrs + host["errors"], "not_supported": sorted(set(self.ns))}
