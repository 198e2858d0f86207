"""The one telemetry interface the round uses, whatever the node has.

``Telemetry.preflight()`` describes the node before a round: the adapter's facts
(``preflight_facts()``) and the findings ``console.core.decisions.health.preflight_findings``
decides over them under ``PreflightRules``; adapters judge nothing themselves.
``Telemetry.monitor()`` samples it in a background thread around one rep, and
``RepMonitor.stop()`` returns that rep's summary. Both return plain JSON-safe dicts
(they go into the receipt as ``preflight`` and ``rep["telemetry"]``).

Preflight::

    {"source": "nvml" | "host", "at": unix_s,
     "host": {...host facts...}, "driver": {...} (nvml), "gpus": [{...per GPU...}],
     "findings": [{"code": str, "level": "refuse" | "warn" | "info", "message": str}],
     "not_supported": ["gpu0 remapped_rows", ...],
     "errors": [str] (nvml), "nvml_unavailable": str | None (host: why there is no GPU telemetry)}

Rep summary::

    {"source": "nvml" | "host", "samples": int, "duration_s": float,
     "metrics": {name: {"min", "median", "max"}},   # flat view for display: host figures, then
                                                    # the first GPU's busy figures, others as gpuN_name
     "host": {"metrics": {name: {"min", "median", "max"}}, "cpu": {...}, "engine_cpus": float | None},
     "gpus": [{"index", "uuid", "samples", "busy_samples", "metrics": {...},
               "throttle": {reason: share}, "energy_j": float | None}],
     "throttle": {reason: share of samples, the largest over GPUs},
     "energy_j": float | None, "xid": [{"gpu", "xid", "t"}],
     "foreign_processes": [{"gpu", "pid", "name", "used_memory_bytes"}],
     "errors": [str], "not_supported": [str]}

A sample (``RepMonitor.samples``, ``RepMonitor.latest()``; what TelemetrySample
events carry) is a flat-ish dict: ``{"t": s since start, host figures...,
"gpus": [{"index", "sm_clock_mhz", "mem_clock_mhz", "temp_c", "power_w", "throttle": [...]}]}``.
"""
from __future__ import annotations

import abc
import statistics
import threading
import time
from typing import Any, Callable

from console.core.decisions.health import PreflightRules, finding, preflight_findings

MAX_SAMPLES = 20000      # about 80 min at 0.25 s; beyond that samples are thinned, never unbounded


def refused(preflight: dict[str, Any]) -> list[dict[str, str]]:
    """The findings that forbid a round on this node."""
    return [f for f in preflight.get("findings", []) if f.get("level") == "refuse"]


def stats(values: list[float]) -> dict[str, float] | None:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not vals:
        return None
    return {"min": min(vals), "median": float(statistics.median(vals)), "max": max(vals)}


def metric_stats(samples: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, float]]:
    out = {}
    for n in names:
        s = stats([x.get(n) for x in samples])
        if s is not None:
            out[n] = s
    return out


class Telemetry(abc.ABC):
    source: str = "?"

    @abc.abstractmethod
    def preflight_facts(self, window_s: float = 0.5) -> dict[str, Any]:
        """Facts about the node before a round: the preflight dict without findings."""

    def preflight(self, window_s: float = 0.5, rules: PreflightRules | None = None) -> dict[str, Any]:
        """Facts about the node and the core's findings over them (refuse, warn, inform)."""
        facts = self.preflight_facts(window_s)
        return {**facts, "findings": preflight_findings(facts, rules or PreflightRules())}

    def gpus(self) -> list[dict[str, Any]]:
        """The GPUs this telemetry watches: [{"index", "uuid", "name"}]; none on a host."""
        return []

    def driver_version(self) -> str | None:
        """The GPU driver's version ("550.54.15"); None without GPU telemetry."""
        return None

    @abc.abstractmethod
    def monitor(self, interval_s: float = 0.25, **kwargs: Any) -> "RepMonitor":
        """Start sampling around one rep (a background thread)."""

    def settle(self, quiet_cores: float, max_s: float) -> dict[str, Any]:
        """Wait for a quiet node before a rep; telemetry that cannot tell does not wait."""
        return {"waited_s": 0.0, "other_cores": None, "quiet": True}

    def close(self) -> None:
        """Release the library handle, if any."""

    def __enter__(self) -> "Telemetry":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RepMonitor(abc.ABC):
    """Samples in a background thread from construction until ``stop()``.

    Subclasses implement ``_sample()`` (one reading, a dict), ``_wait(timeout)``
    (sleep, or wait for device events, until the next sample) and ``_summary()``.
    With ``start=False`` no thread runs and the caller drives ``sample_once()``,
    which makes tests deterministic.
    """

    def __init__(self, interval_s: float = 0.25, start: bool = True):
        if not interval_s > 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = float(interval_s)
        self._t0 = time.monotonic()
        self._samples: list[dict[str, Any]] = []
        self._stride = 1          # keep every _stride-th sample once MAX_SAMPLES is reached
        self._seen = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._summary_cache: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []
        self._begin()
        if start:
            self._thread = threading.Thread(target=self._run, name=f"telemetry-{type(self).__name__}",
                                            daemon=True)
            self._thread.start()

    # --- subclass hooks -------------------------------------------------------
    def _begin(self) -> None:
        """Readings taken once at the start (energy counters, CPU time)."""

    @abc.abstractmethod
    def _sample(self) -> dict[str, Any]: ...

    def _wait(self, timeout: float) -> None:
        self._stop.wait(timeout)

    def _end(self) -> None:
        """Readings taken once at the end."""

    @abc.abstractmethod
    def _summary(self, samples: list[dict[str, Any]], duration_s: float) -> dict[str, Any]: ...

    # --- driving --------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            if self._stop.is_set():
                break
            self._wait(self.interval_s)

    def sample_once(self) -> dict[str, Any]:
        try:
            s = self._sample()
        except Exception as e:  # a sampler fault must not kill the rep; it is reported
            s = {}
            self._error(f"sample failed: {type(e).__name__}: {e}")
        s["t"] = round(time.monotonic() - self._t0, 4)
        with self._lock:
            self._seen += 1
            if self._seen % self._stride == 0:
                self._samples.append(s)
                if len(self._samples) >= MAX_SAMPLES:
                    self._samples = self._samples[::2]
                    self._stride *= 2
        return s

    def _error(self, msg: str) -> None:
        if msg not in self.errors and len(self.errors) < 50:
            self.errors.append(msg)

    @property
    def samples(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._samples)

    def latest(self) -> dict[str, Any] | None:
        with self._lock:
            return dict(self._samples[-1]) if self._samples else None

    def stop(self) -> dict[str, Any]:
        """Stop sampling (idempotent) and return the rep's summary."""
        if self._summary_cache is not None:
            return self._summary_cache
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 4 * self.interval_s))
        if not self._samples:
            self.sample_once()      # a rep shorter than one interval still gets one reading
        duration = time.monotonic() - self._t0
        try:
            self._end()
        except Exception as e:
            self._error(f"final reading failed: {type(e).__name__}: {e}")
        samples = self.samples
        summary = self._summary(samples, duration)
        summary.setdefault("errors", [])
        summary["errors"] = list(dict.fromkeys(summary["errors"] + self.errors))
        summary["samples"] = self._seen
        summary["duration_s"] = round(duration, 4)
        self._summary_cache = summary
        return summary

    def __enter__(self) -> "RepMonitor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


OwnCpu = Callable[[], float]
