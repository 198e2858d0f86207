"""Host telemetry from /proc and /sys: what a node without a GPU can say about itself.

CPU frequency, load and the CPU share other processes take, memory and page
cache, temperature where the kernel exposes it. Every path is read under
``root`` so tests can point it at a fake tree; a file that is missing or
unreadable is "not known" (None), never an error.

The share of CPU "from other processes" over a rep is the machine's busy time
(/proc/stat) minus the console's own process tree (which includes the engine
under the local runtime once it has been waited for) minus, for an engine
outside that tree (a container), either its measured CPU time (``own_cpu_s``)
or, failing that, its CPU quota (``engine_cpus``) as an upper bound of what it
could have used, so that the engine is never mistaken for a neighbour.
"""
from __future__ import annotations

import glob
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from .base import RepMonitor, Telemetry, metric_stats

HOST_METRICS = ["cpu_mhz", "busy_cores", "load1", "procs_running", "mem_available_bytes",
                "page_cache_bytes", "temp_c"]


class ProcReader:
    """Parsers for the few /proc and /sys files the console reads, all under ``root``."""

    def __init__(self, root: str | os.PathLike[str] = "/"):
        self.root = Path(root)
        try:
            self.clk_tck = os.sysconf("SC_CLK_TCK")
        except (ValueError, OSError, AttributeError):
            self.clk_tck = 100

    def _p(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def _text(self, rel: str | Path, limit: int = 1 << 20) -> str | None:
        p = rel if isinstance(rel, Path) else self._p(rel)
        try:
            with open(p, "rb") as f:
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    # --- CPU ---------------------------------------------------------------
    def stat(self) -> dict[str, Any] | None:
        """Aggregate jiffies from /proc/stat: busy, total, cores, procs_running."""
        text = self._text("proc/stat")
        if text is None:
            return None
        out: dict[str, Any] = {"cores": 0}
        for line in text.splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "cpu":
                try:
                    v = [int(x) for x in parts[1:9]]
                except ValueError:
                    return None
                v += [0] * (8 - len(v))
                # user nice system idle iowait irq softirq steal (guest is inside user)
                total = sum(v)
                out["total"] = total
                out["busy"] = total - v[3] - v[4]
            elif parts[0].startswith("cpu") and parts[0][3:].isdigit():
                out["cores"] += 1
            elif parts[0] == "procs_running" and len(parts) > 1 and parts[1].isdigit():
                out["procs_running"] = int(parts[1])
        return out if "total" in out else None

    def cpu_mhz(self) -> list[float]:
        vals = []
        for p in sorted(glob.glob(str(self._p("sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq")))):
            t = self._text(Path(p), 64)
            if t and t.strip().isdigit():
                vals.append(int(t.strip()) / 1000.0)   # kHz
        if vals:
            return vals
        text = self._text("proc/cpuinfo") or ""
        for line in text.splitlines():
            if line.lower().startswith("cpu mhz"):
                try:
                    vals.append(float(line.split(":", 1)[1]))
                except (IndexError, ValueError):
                    pass
        return vals

    def cpu_max_mhz(self) -> float | None:
        t = self._text("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", 64)
        return int(t.strip()) / 1000.0 if t and t.strip().isdigit() else None

    def governor(self) -> str | None:
        t = self._text("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", 64)
        return t.strip() if t else None

    def cpu_model(self) -> str | None:
        for line in (self._text("proc/cpuinfo") or "").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")) and ":" in line:
                return line.split(":", 1)[1].strip()
        return None

    def loadavg(self) -> dict[str, float] | None:
        t = self._text("proc/loadavg", 256)
        try:
            p = (t or "").split()
            return {"load1": float(p[0]), "load5": float(p[1]), "load15": float(p[2])}
        except (IndexError, ValueError):
            return None

    # --- memory ------------------------------------------------------------
    def meminfo(self) -> dict[str, int]:
        out = {}
        for line in (self._text("proc/meminfo") or "").splitlines():
            name, _, rest = line.partition(":")
            p = rest.split()
            if p and p[0].isdigit():
                out[name.strip()] = int(p[0]) * (1024 if len(p) > 1 and p[1].lower() == "kb" else 1)
        return out

    # --- temperature -------------------------------------------------------
    def temps_c(self) -> list[float]:
        vals = []
        pats = ["sys/class/thermal/thermal_zone*/temp", "sys/class/hwmon/hwmon*/temp*_input"]
        for pat in pats:
            for p in sorted(glob.glob(str(self._p(pat)))):
                t = self._text(Path(p), 64)
                try:
                    v = int((t or "").strip()) / 1000.0   # millidegrees
                except ValueError:
                    continue
                if -40.0 < v < 150.0:      # firmware reports junk (e.g. -273 or 0x7fff…) on some zones
                    vals.append(v)
        return vals

    def kernel(self) -> str | None:
        t = self._text("proc/sys/kernel/osrelease", 256)
        return t.strip() if t else None

    # --- processes ---------------------------------------------------------
    def proc_times(self, pid: int) -> tuple[int, float] | None:
        """(ppid, utime+stime+cutime+cstime seconds) of one process."""
        t = self._text(f"proc/{pid}/stat", 4096)
        if not t or ")" not in t:
            return None
        rest = t.rsplit(")", 1)[1].split()    # the name may contain spaces and parentheses
        try:
            ppid = int(rest[1])
            ticks = sum(int(x) for x in rest[11:15])
        except (IndexError, ValueError):
            return None
        return ppid, ticks / self.clk_tck

    def tree_cpu_s(self, pid: int) -> float:
        """CPU seconds used by ``pid`` and its live descendants, reaped children included."""
        procs: dict[int, tuple[int, float]] = {}
        for d in os.listdir(self._p("proc")) if self._p("proc").is_dir() else []:
            if d.isdigit():
                r = self.proc_times(int(d))
                if r is not None:
                    procs[int(d)] = r
        if pid not in procs:
            r = self.proc_times(pid)
            if r is None:
                return 0.0
            procs[pid] = r
        children: dict[int, list[int]] = {}
        for p, (pp, _) in procs.items():
            children.setdefault(pp, []).append(p)
        total, stack, seen = 0.0, [pid], set()
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            total += procs[p][1] if p in procs else 0.0
            stack.extend(children.get(p, []))
        return total


def _median(v: list[float]) -> float | None:
    return float(statistics.median(v)) if v else None


class HostTelemetry(Telemetry):
    source = "host"

    def __init__(self, root: str | os.PathLike[str] = "/", pid: int | None = None):
        self.proc = ProcReader(root)
        self.pid = os.getpid() if pid is None else pid
        self.nvml_unavailable: str | None = None

    def facts(self) -> dict[str, Any]:
        st = self.proc.stat() or {}
        mem = self.proc.meminfo()
        temps = self.proc.temps_c()
        return {
            "cpu_model": self.proc.cpu_model(),
            "cores": st.get("cores") or os.cpu_count(),
            "cpu_mhz": _median(self.proc.cpu_mhz()),
            "cpu_max_mhz": self.proc.cpu_max_mhz(),
            "governor": self.proc.governor(),
            "kernel": self.proc.kernel(),
            **(self.proc.loadavg() or {"load1": None, "load5": None, "load15": None}),
            "mem_total_bytes": mem.get("MemTotal"),
            "mem_available_bytes": mem.get("MemAvailable"),
            "page_cache_bytes": mem.get("Cached"),
            "temp_c": max(temps) if temps else None,
        }

    def other_busy_cores(self, window_s: float) -> float | None:
        """Cores kept busy by processes other than the console's tree over ``window_s``."""
        s0, own0, t0 = self.proc.stat(), self.proc.tree_cpu_s(self.pid), time.monotonic()
        time.sleep(window_s)
        s1, own1, t1 = self.proc.stat(), self.proc.tree_cpu_s(self.pid), time.monotonic()
        if not (s0 and s1 and s1["total"] > s0["total"]):
            return None
        busy = (s1["busy"] - s0["busy"]) / (s1["total"] - s0["total"]) * (s1.get("cores") or 1)
        return max(0.0, busy - (own1 - own0) / max(t1 - t0, 1e-6))

    def settle(self, quiet_cores: float, max_s: float, window_s: float = 0.1) -> dict[str, Any]:
        """Wait (at most ``max_s``) until other processes use fewer than ``quiet_cores``.

        A container's teardown goes on in the daemon after its removal returns; without
        a quiet start the next rep would time itself against the previous one's cleanup.
        Returns how long it waited and the last reading, for the rep's record.
        """
        t0 = time.monotonic()
        other = None
        while True:
            other = self.other_busy_cores(window_s)
            if other is None or other < quiet_cores or time.monotonic() - t0 >= max_s:
                break
        return {"waited_s": round(time.monotonic() - t0, 3), "other_cores": None if other is None else round(other, 3),
                "quiet": other is None or other < quiet_cores}

    def preflight_facts(self, window_s: float = 0.5) -> dict[str, Any]:
        facts = self.facts()
        # other processes' CPU over a short window: the console itself is idle here
        other = self.other_busy_cores(window_s)
        facts["other_busy_cores"] = None if other is None else round(other, 3)
        return {"source": "host", "at": time.time(), "host": facts, "gpus": [], "not_supported": [],
                "nvml_unavailable": self.nvml_unavailable}

    def monitor(self, interval_s: float = 0.25, *, start: bool = True,
                own_cpu_s: Callable[[], float] | None = None, engine_cpus: float | None = None,
                **_: Any) -> "HostMonitor":
        return HostMonitor(self, interval_s, start=start, own_cpu_s=own_cpu_s, engine_cpus=engine_cpus)


class HostMonitor(RepMonitor):
    def __init__(self, tel: HostTelemetry, interval_s: float = 0.25, *, start: bool = True,
                 own_cpu_s: Callable[[], float] | None = None, engine_cpus: float | None = None):
        self.tel, self.proc = tel, tel.proc
        self.own_cpu_s, self.engine_cpus = own_cpu_s, engine_cpus
        self._own_first: float | None = None
        self._own_last: float | None = None
        self._prev_stat: dict[str, Any] | None = None
        super().__init__(interval_s, start=start)

    def _read_own(self) -> None:
        if self.own_cpu_s is None:
            return
        try:
            v = float(self.own_cpu_s())
        except Exception as e:    # e.g. the container's cgroup is gone after it exited
            self._error(f"engine CPU reading failed: {type(e).__name__}")
            return
        if self._own_first is None:
            self._own_first = v
        self._own_last = v

    def _begin(self) -> None:
        self._stat0 = self.proc.stat()
        self._tree0 = self.proc.tree_cpu_s(self.tel.pid)
        self._prev_stat = self._stat0
        self._read_own()

    def _sample(self) -> dict[str, Any]:
        s: dict[str, Any] = {}
        mhz = self.proc.cpu_mhz()
        s["cpu_mhz"] = _median(mhz)
        st = self.proc.stat()
        if st:
            s["procs_running"] = st.get("procs_running")
            p = self._prev_stat
            if p and st["total"] > p["total"]:
                s["busy_cores"] = round((st["busy"] - p["busy"]) / (st["total"] - p["total"])
                                        * (st.get("cores") or 1), 3)
            self._prev_stat = st
        la = self.proc.loadavg()
        s["load1"] = la["load1"] if la else None
        mem = self.proc.meminfo()
        s["mem_available_bytes"] = mem.get("MemAvailable")
        s["page_cache_bytes"] = mem.get("Cached")
        temps = self.proc.temps_c()
        s["temp_c"] = max(temps) if temps else None
        self._read_own()
        return s

    def _end(self) -> None:
        self._stat1 = self.proc.stat()
        self._tree1 = self.proc.tree_cpu_s(self.tel.pid)
        self._read_own()

    def _summary(self, samples: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
        cpu: dict[str, Any] = {"cores": None, "busy_cores": None, "own_cores": None,
                               "other_cores": None, "own_basis": None}
        s0, s1 = self._stat0, getattr(self, "_stat1", None)
        if s0 and s1 and s1["total"] > s0["total"] and duration_s > 0:
            cores = s1.get("cores") or 1
            busy = (s1["busy"] - s0["busy"]) / (s1["total"] - s0["total"]) * cores
            own = max(0.0, self._tree1 - self._tree0) / duration_s
            basis = "process tree"
            if self._own_first is not None and self._own_last is not None:
                own += max(0.0, self._own_last - self._own_first) / duration_s
                basis = "process tree + engine CPU time"
            elif self.engine_cpus:
                own += float(self.engine_cpus)
                basis = "process tree + engine CPU quota"
            cpu.update(cores=cores, busy_cores=round(busy, 3), own_cores=round(own, 3),
                       other_cores=round(max(0.0, busy - own), 3), own_basis=basis)
        host = {"metrics": metric_stats(samples, HOST_METRICS), "cpu": cpu, "engine_cpus": self.engine_cpus}
        return {"source": "host", "metrics": dict(host["metrics"]), "host": host, "gpus": [], "throttle": {}, "energy_j": None,
                "xid": [], "foreign_processes": [], "errors": [], "not_supported": []}
