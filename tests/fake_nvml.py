"""A fake ``pynvml`` module for tests on machines without a GPU.

It implements only the NVML functions ``console.telemetry.nvml`` calls, with the
same names, arguments, units and error classes as nvidia-ml-py (milliwatts,
millijoules, MHz, bit masks; ``NVMLError_NotSupported``, ``NVMLError_Timeout``,
``NVMLError_Uninitialized`` …). State is plain attributes that a test sets, or a
``timeline`` of changes that ``step()`` applies one at a time. It proves only
that the console reads and interprets NVML as documented; real GPUs still need
a real check. It lives with the tests, outside the installed package.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

# --- constants (the values nvml.h defines) ----------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
nvmlEventTypeXidCriticalError = 0x8
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80


class NVMLError(Exception):
    _names = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 10: "Timeout",
              15: "GPU is lost", 999: "Unknown Error"}

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self._names.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_Uninitialized(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_UNINITIALIZED)


class NVMLError_InvalidArgument(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_INVALID_ARGUMENT)


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


class NVMLError_Timeout(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_TIMEOUT)


class NVMLError_GpuIsLost(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_GPU_IS_LOST)


@dataclass
class FakeGPU:
    """One GPU's scriptable state, in NVML's units."""
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    sm_clock: int = 1980
    mem_clock: int = 2619
    max_sm_clock: int = 1980
    max_mem_clock: int = 2619
    temp_c: int = 45
    power_mw: int = 300_000
    power_limit_mw: int = 700_000
    default_power_limit_mw: int = 700_000
    energy_mj: int = 1_000_000
    energy_step_mj: int = 75_000      # added on every energy read (≈ power × time)
    reasons: int = 0                  # clock-event reason bit mask
    persistence: int = 1
    ecc: tuple[int, int] = (1, 1)     # (current, pending)
    ecc_errors: dict[tuple[int, int], int] = field(default_factory=dict)   # (error type, counter) -> n
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)   # corr, unc, pending, failure
    memory: tuple[int, int] = (80 << 30, 79 << 30)       # total, free
    compute_capability: tuple[int, int] = (9, 0)          # (major, minor)
    processes: list[tuple[int, int]] = field(default_factory=list)      # (pid, used bytes)
    unsupported: set[str] = field(default_factory=set)   # NVML function names that raise NotSupported
    lost: bool = False                                    # every query raises GpuIsLost
    timeline: list[dict[str, Any]] = field(default_factory=list)        # changes applied by step()

    def step(self) -> bool:
        if not self.timeline:
            return False
        for k, v in self.timeline.pop(0).items():
            if not hasattr(self, k):
                raise AttributeError(f"FakeGPU has no field {k!r}")
            setattr(self, k, v)
        return True


class FakeNvml:
    """Module-like object: pass it where ``pynvml`` is expected.

    ``auto_step=True`` applies one timeline entry on each GPU whenever its SM clock
    is read, i.e. once per sample, so a running monitor walks the script.
    """

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    def __init__(self, gpus: list[FakeGPU] | None = None, *, driver: str = "550.54.15", cuda: int = 12040,
                 init_error: int | None = None, missing: tuple[str, ...] = (), auto_step: bool = False,
                 process_names: dict[int, str] | None = None):
        self.gpus = [FakeGPU()] if gpus is None else gpus
        self.driver, self.cuda = driver, cuda
        self.init_error = init_error
        self.auto_step = auto_step
        self.process_names = process_names or {}
        self.initialised = 0
        self.calls: list[str] = []
        self._xid: list[tuple[int, int]] = []     # (gpu index, xid)
        self._xid_cv = threading.Condition()
        self._sets: list[dict[str, Any]] = []
        for name in missing:
            # an older pynvml lacking a function: getattr(module, name, None) is None either way
            setattr(self, name, None)

    # --- test controls ---------------------------------------------------------
    def inject_xid(self, gpu_index: int, xid: int) -> None:
        with self._xid_cv:
            self._xid.append((gpu_index, xid))
            self._xid_cv.notify_all()

    def step(self) -> None:
        for g in self.gpus:
            g.step()

    # --- helpers -----------------------------------------------------------------
    def _check(self, fname: str) -> None:
        self.calls.append(fname)
        if not self.initialised:
            raise NVMLError_Uninitialized()

    def _gpu(self, fname: str, handle: Any) -> FakeGPU:
        self._check(fname)
        if not isinstance(handle, SimpleNamespace) or handle.index >= len(self.gpus):
            raise NVMLError_InvalidArgument()
        g = self.gpus[handle.index]
        if g.lost:
            raise NVMLError_GpuIsLost()
        if fname in g.unsupported:
            raise NVMLError_NotSupported()
        return g

    # --- library ---------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised += 1
        self._handles = [SimpleNamespace(index=i) for i in range(len(self.gpus))]

    def nvmlShutdown(self) -> None:
        self._check("nvmlShutdown")
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._check("nvmlSystemGetNVMLVersion")
        return "12." + self.driver

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._check("nvmlSystemGetProcessName")
        if pid not in self.process_names:
            raise NVMLError(4)    # NVML_ERROR_NO_PERMISSION / not found: name unknown
        return self.process_names[pid]

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._check("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise NVMLError_InvalidArgument()
        return self._handles[index]

    # --- device queries -------------------------------------------------------
    def nvmlDeviceGetName(self, h: Any) -> str:
        return self._gpu("nvmlDeviceGetName", h).name

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return self._gpu("nvmlDeviceGetUUID", h).uuid

    def nvmlDeviceGetCudaComputeCapability(self, h: Any) -> tuple[int, int]:
        return tuple(self._gpu("nvmlDeviceGetCudaComputeCapability", h).compute_capability)  # type: ignore[return-value]

    def nvmlDeviceGetPersistenceMode(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetPersistenceMode", h).persistence

    def nvmlDeviceGetEccMode(self, h: Any) -> list[int]:
        return list(self._gpu("nvmlDeviceGetEccMode", h).ecc)

    def nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter_type: int) -> int:
        g = self._gpu("nvmlDeviceGetTotalEccErrors", h)
        if error_type not in (0, 1) or counter_type not in (0, 1):
            raise NVMLError_InvalidArgument()
        return g.ecc_errors.get((error_type, counter_type), 0)

    def nvmlDeviceGetRemappedRows(self, h: Any) -> tuple[int, int, int, int]:
        return tuple(self._gpu("nvmlDeviceGetRemappedRows", h).remapped)  # type: ignore[return-value]

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        g = self._gpu("nvmlDeviceGetClockInfo", h)
        if clock == NVML_CLOCK_SM:
            if self.auto_step:
                g.step()
            return g.sm_clock
        if clock == NVML_CLOCK_MEM:
            return g.mem_clock
        raise NVMLError_InvalidArgument()

    def nvmlDeviceGetMaxClockInfo(self, h: Any, clock: int) -> int:
        g = self._gpu("nvmlDeviceGetMaxClockInfo", h)
        if clock not in (NVML_CLOCK_SM, NVML_CLOCK_MEM):
            raise NVMLError_InvalidArgument()
        return g.max_sm_clock if clock == NVML_CLOCK_SM else g.max_mem_clock

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        g = self._gpu("nvmlDeviceGetTemperature", h)
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError_InvalidArgument()
        return g.temp_c

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", h).power_mw

    def nvmlDeviceGetPowerManagementLimit(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementLimit", h).power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", h).default_power_limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        g = self._gpu("nvmlDeviceGetTotalEnergyConsumption", h)
        g.energy_mj += g.energy_step_mj
        return g.energy_mj

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        g = self._gpu("nvmlDeviceGetMemoryInfo", h)
        total, free = g.memory
        return SimpleNamespace(total=total, free=free, used=total - free)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", h).reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", h).reasons

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        g = self._gpu("nvmlDeviceGetComputeRunningProcesses", h)
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem, gpuInstanceId=0xFFFFFFFF,
                                computeInstanceId=0xFFFFFFFF) for pid, mem in g.processes]

    # --- events -------------------------------------------------------------
    def nvmlEventSetCreate(self) -> Any:
        self._check("nvmlEventSetCreate")
        s = {"gpus": set(), "free": False}
        self._sets.append(s)
        return SimpleNamespace(id=len(self._sets) - 1)

    def nvmlDeviceRegisterEvents(self, h: Any, event_types: int, event_set: Any) -> None:
        g = self._gpu("nvmlDeviceRegisterEvents", h)
        del g
        if event_types & ~nvmlEventTypeXidCriticalError:
            raise NVMLError_NotSupported()
        self._sets[event_set.id]["gpus"].add(h.index)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        self._check("nvmlEventSetWait")
        s = self._sets[event_set.id]
        if s["free"]:
            raise NVMLError_InvalidArgument()
        with self._xid_cv:
            # like the real call: block up to the timeout, return at once on an event
            self._xid_cv.wait_for(lambda: any(i in s["gpus"] for i, _ in self._xid), timeout_ms / 1000.0)
            for k, (i, xid) in enumerate(self._xid):
                if i in s["gpus"]:
                    del self._xid[k]
                    return SimpleNamespace(device=self._handles[i], eventType=nvmlEventTypeXidCriticalError,
                                           eventData=xid, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
        raise NVMLError_Timeout()

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._check("nvmlEventSetFree")
        self._sets[event_set.id]["free"] = True
