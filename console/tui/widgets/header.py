"""The round's header: what is being measured, on what, and for how long."""
from __future__ import annotations

from typing import Any, Callable

from rich.text import Text
from textual.widgets import Static

from ...core.records.facts import HostFacts

# Telemetry keys worth a glance, in display order: (candidate keys, label, unit).
_GLANCE: list[tuple[tuple[str, ...], str, str]] = [
    (("sm_clock_mhz", "clock_sm_mhz", "sm_mhz", "graphics_clock_mhz"), "sm", " MHz"),
    (("mem_clock_mhz", "clock_mem_mhz", "mem_mhz"), "mem", " MHz"),
    (("temp_c", "temperature_c", "gpu_temp_c"), "", " °C"),
    (("power_w", "power_draw_w"), "", " W"),
    (("cpu_mhz", "cpu_clock_mhz"), "cpu", " MHz"),
    (("cpu_temp_c",), "cpu", " °C"),
]


def _fmt_elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def telemetry_glance(values: dict[str, Any]) -> list[str]:
    parts = []
    for keys, label, unit in _GLANCE:
        for key in keys:
            v = values.get(key)
            if isinstance(v, (int, float)):
                num = f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}"
                parts.append(f"{label} {num}{unit}".strip())
                break
    return parts


class RoundHeader(Static):
    """Two lines: the round and its status; the node and its live telemetry."""

    DEFAULT_CSS = """
    RoundHeader { height: 2; background: $panel; padding: 0 1;
                  text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, clock: Callable[[], float], **kw: Any) -> None:
        super().__init__(**kw)
        self._clock = clock
        self.round_id = ""
        self.profile = ""
        self.profile_sha = ""
        self.runtime = ""
        self.host = HostFacts()
        self.phase = ""
        self.status = "idle"
        self.progress = ""          # "rep k/N, ≤ T left", set by the screen as reps finish
        self.telemetry: dict[str, dict[str, Any]] = {}
        self._started: float | None = None
        self._ended: float | None = None

    def on_mount(self) -> None:
        self.redraw()
        # One tick a second keeps the elapsed time live at negligible cost.
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self._started is not None and self._ended is None:
            self.redraw()

    def round_started(self, round_id: str, profile: str, sha: str, runtime: str,
                      host: HostFacts) -> None:
        self.round_id, self.profile, self.profile_sha = round_id, profile, sha
        self.runtime, self.host = runtime, host
        self.status = "running"
        self.progress = ""
        self._started, self._ended = self._clock(), None
        self.redraw()

    def round_ended(self, status: str) -> None:
        self.status = status
        if self._started is not None:
            self._ended = self._clock()
        self.redraw()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.redraw()

    def set_status(self, status: str) -> None:
        self.status = status
        self.redraw()

    def set_telemetry(self, source: str, values: dict[str, Any], redraw: bool = True) -> None:
        self.telemetry[source] = values or {}
        if redraw:
            self.redraw()

    @property
    def elapsed(self) -> float:
        if self._started is None:
            return 0.0
        end = self._ended if self._ended is not None else self._clock()
        return end - self._started

    def redraw(self) -> None:
        t = Text()
        if self.round_id:
            t.append(f"round {self.round_id}", style="bold")
        else:
            t.append("bench-console", style="bold")
        if self.profile:
            t.append("  profile ")
            t.append(self.profile, style="bold")
            if self.profile_sha:
                t.append(f" ({self.profile_sha[:8]})", style="dim")
        if self.runtime:
            t.append(f"  {self.runtime}")
        if self.phase:
            t.append("  phase ")
            t.append(self.phase, style="bold cyan")
        t.append("  ")
        style = {"running": "bold green", "complete": "bold green", "aborting…": "bold yellow",
                 "idle": "dim"}.get(self.status, "bold red")
        t.append(self.status, style=style)
        t.append(f"  elapsed {_fmt_elapsed(self.elapsed)}", style="bold")
        if self.progress and self._ended is None:
            t.append(f"  {self.progress}", style="bold")
        t.append("\n")
        host = self.host
        if host.cpu_model:
            t.append(f"CPU {host.cpu_model}" + (f" ×{host.cores}" if host.cores else ""))
        gpus = host.gpu_names()
        if gpus:
            first = gpus[0] + (f" ×{len(gpus)}" if len(gpus) > 1 else "")
            t.append(f"  GPU {first}")
        glance = telemetry_glance(self.telemetry.get("nvml", {}))
        glance += telemetry_glance(self.telemetry.get("host", {}))
        if glance:
            t.append("  " + " · ".join(glance), style="cyan")
        self.update(t, layout=False)  # two lines, always: a repaint, not a re-layout of the screen
