"""Node telemetry: NVML when a GPU answers, host /proc and /sys otherwise.

See ``base`` for the dict shapes that preflight and rep summaries return.
"""
from __future__ import annotations

from typing import Any

from .base import RepMonitor, Telemetry, finding, refused
from .host import HostTelemetry

__all__ = ["Telemetry", "RepMonitor", "HostTelemetry", "open_telemetry", "finding", "refused"]


def open_telemetry(prefer: str = "auto", *, nvml: Any = None, root: str = "/") -> Telemetry:
    """``auto``: NVML when it initialises and finds a GPU, else host; ``nvml``: NVML or
    ``NvmlUnavailable``; ``host``: host only. ``nvml`` may be a stand-in module (tests)."""
    if prefer not in ("auto", "nvml", "host"):
        raise ValueError(f"prefer must be 'auto', 'nvml' or 'host', not {prefer!r}")
    host = HostTelemetry(root)
    if prefer == "host":
        return host
    from .nvml import NvmlTelemetry, NvmlUnavailable
    try:
        return NvmlTelemetry(nvml, host=host)
    except NvmlUnavailable as e:
        if prefer == "nvml":
            raise
        host.nvml_unavailable = str(e)   # kept so preflight can say why there is no GPU telemetry
        return host
