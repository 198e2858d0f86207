"""Is the node fit for a round, and is a rep trustworthy, or did the node misbehave under it? (pure)

``preflight_findings`` reads the facts telemetry gathered before a round
(``console.telemetry``'s preflight, minus findings) against ``PreflightRules`` and
says what refuses the round, warns or informs. The adapters only report facts;
every threshold lives here.

A busy or dying node must cause a retry with a diagnosis, never a failed round
and never a recorded regression. ``classify_rep`` reads one rep's telemetry
summary (``console.telemetry``) against the round's preflight and returns the
reasons the rep is suspect, each "<code>: <sentence>"; ``RetryBudget`` decides
whether a suspect rep is retried or the round ends as an infrastructure failure
with a diagnosis. No I/O, no clock.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

LIMITING_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


@dataclass(frozen=True)
class HealthRules:
    throttle_share: float = 0.2          # a limiting clock-event reason on more than this share of samples
    throttle_reasons: tuple[str, ...] = LIMITING_REASONS
    sm_clock_floor: float = 0.85         # busy SM clock median below this × the reference clock
    xid: bool = True                     # any XID critical error during the rep
    foreign_process: bool = True         # a compute process not ours on the GPU during the rep
    gpu_errors: bool = True              # a GPU query failing mid-rep (e.g. "GPU is lost")
    other_cpu_cores: float = 0.5         # other processes' CPU use over the rep, in cores
    load_spike: float = 2.0              # 1-min load above preflight + engine CPUs by more than this
    retries: int = 3                     # suspect reps retried per round before it is an infra failure
    settle_cores: float = 0.3            # before a rep, wait until other processes use fewer cores …
    settle_max_s: float = 3.0            # … for at most this long (then run, and let the rep be judged)


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# --- preflight: is the node fit before its numbers mean anything? ------------

@dataclass(frozen=True)
class PreflightRules:
    # host
    other_cores: float = 0.5             # other processes keeping half a core busy make timings noisy
    load_per_core: float = 0.75          # 1-min load above this share of the cores: the run queue is contended
    low_memory_share: float = 0.10       # MemAvailable below this share of MemTotal …
    low_memory_bytes: int = 512 << 20    # … or below this many bytes: the page cache cannot stay warm
    host_hot_c: float = 90.0             # a sensor this hot: the CPUs are at or near thermal throttling
    governor: str = "performance"        # any other governor lets CPU clocks wander between reps (info only)
    # GPU
    gpu_hot_c: float = 85.0              # an idle GPU this hot throttles as soon as the round loads it
    gpu_free_share: float = 0.10         # less free memory than this share: someone else holds the GPU
    power_limit_share: float = 0.99      # a limit below this × the default caps clocks (1% for rounding)
    throttle_reasons: tuple[str, ...] = LIMITING_REASONS   # clock-event reasons that mean the node holds clocks down
    # A GPU already running someone's compute, or held down by a throttle reason, would make
    # every rep suspect and spend the retry budget: refused before anything is built ("warn": said only).
    busy_gpu: str = "refuse"


# a finding's level as a round says it (refuse ends the round, so it is said as an error)
NOTICE_LEVELS = {"refuse": "error", "warn": "warn", "info": "info"}


def finding(code: str, level: str, message: str) -> dict[str, str]:
    assert level in ("refuse", "warn", "info"), level
    return {"code": code, "level": level, "message": message}


def notice_level(level: str) -> str:
    """The notice level of a finding's level; one this version does not know is a warning."""
    return NOTICE_LEVELS.get(level, "warn")


def preflight_findings(facts: dict[str, Any], rules: PreflightRules = PreflightRules()) -> list[dict[str, str]]:
    """What refuses, warns or informs, given a preflight's facts (``host``, ``gpus``, ``errors``,
    ``nvml_unavailable``); ordered host, GPUs, then telemetry errors."""
    out = host_findings(facts.get("host") or {}, rules)
    if facts.get("nvml_unavailable"):
        out.append(finding("no-gpu-telemetry", "info", str(facts["nvml_unavailable"])))
    for g in facts.get("gpus") or []:
        out += gpu_findings(g, rules)
    for e in facts.get("errors") or []:     # a query that failed outright is said, never hidden
        out.append(finding("nvml-error", "warn", e))
    return out


def host_findings(host: dict[str, Any], rules: PreflightRules = PreflightRules()) -> list[dict[str, str]]:
    out = []
    cores = host.get("cores") or 1
    other = host.get("other_busy_cores")
    if _num(other) and other > rules.other_cores:
        out.append(finding("host-busy", "warn",
                           f"other processes keep {other:.2f} of {cores} cores busy; timings will be noisy"))
    load1 = host.get("load1")
    if _num(load1) and load1 > rules.load_per_core * cores:
        out.append(finding("host-load", "warn", f"load average {load1:.2f} on {cores} cores before the round"))
    total, avail = host.get("mem_total_bytes"), host.get("mem_available_bytes")
    if total and _num(avail) and (avail < rules.low_memory_share * total or avail < rules.low_memory_bytes):
        out.append(finding("low-memory", "warn",
                           f"only {avail / 2**20:.0f} MiB of {total / 2**20:.0f} MiB available; "
                           "the page cache cannot stay warm"))
    temp = host.get("temp_c")
    if _num(temp) and temp >= rules.host_hot_c:
        out.append(finding("host-hot", "warn", f"a thermal sensor reads {temp:.0f} °C"))
    gov = host.get("governor")
    if gov and gov != rules.governor:
        out.append(finding("cpu-governor", "info", f"CPU frequency governor is '{gov}', not '{rules.governor}'"))
    return out


def gpu_findings(g: dict[str, Any], rules: PreflightRules = PreflightRules()) -> list[dict[str, str]]:
    out = []
    tag = f"GPU {g['index']} ({g.get('name') or g.get('uuid')})"
    ee = g.get("ecc_errors")
    if isinstance(ee, dict):
        vu, au = ee.get("volatile_uncorrected"), ee.get("aggregate_uncorrected")
        # uncorrected errors since the driver loaded: the memory may hold wrong values right now
        if isinstance(vu, int) and vu > 0:
            out.append(finding("ecc-uncorrected", "refuse",
                               f"{tag} has {vu} uncorrected ECC errors since the driver loaded; it needs a reset"))
        elif isinstance(au, int) and au > 0:
            out.append(finding("ecc-history", "warn", f"{tag} has {au} uncorrected ECC errors in its lifetime"))
    elif isinstance(g.get("ecc_mode"), dict) and not g["ecc_mode"]["current"]:
        out.append(finding("ecc-off", "info", f"{tag} runs with ECC off"))
    rr = g.get("remapped_rows")
    if isinstance(rr, dict):
        if rr["failure"]:
            out.append(finding("row-remap-failure", "refuse", f"{tag} failed a row remapping; its memory is unreliable"))
        if rr["pending"]:
            out.append(finding("row-remap-pending", "refuse", f"{tag} has a row remapping pending; it needs a reset"))
    if g.get("persistence_mode") == "disabled":
        out.append(finding("persistence-off", "warn",
                           f"{tag}: persistence mode is off; the driver may tear down between runs"))
    out += busy_findings(g, tag, rules)
    lim, dflt = g.get("power_limit_w"), g.get("default_power_limit_w")
    if _num(lim) and _num(dflt) and lim < rules.power_limit_share * dflt:
        out.append(finding("power-limit-lowered", "warn", f"{tag} power limit {lim:.0f} W is below its default {dflt:.0f} W"))
    t = g.get("temp_c")
    if _num(t) and t >= rules.gpu_hot_c:
        out.append(finding("gpu-hot", "warn", f"{tag} is at {t:.0f} °C before the round"))
    mem = g.get("memory")
    if isinstance(mem, dict) and mem["total_bytes"] and mem["free_bytes"] < rules.gpu_free_share * mem["total_bytes"]:
        out.append(finding("low-gpu-memory", "warn",
                           f"{tag} has {mem['free_bytes'] / 2**30:.1f} GiB free of {mem['total_bytes'] / 2**30:.1f} GiB"))
    out.append(finding("gpu", "info", f"{tag} uuid {g.get('uuid')}"))
    return out


def busy_findings(g: dict[str, Any], tag: str, rules: PreflightRules = PreflightRules()) -> list[dict[str, str]]:
    """Someone else's compute on the GPU, or clocks held down (a limiting reason, not idle), before
    the round: refused unless the profile's ``preflight.busy_gpu`` is "warn". Each rep would be
    suspect for the same cause, so the round would only spend its retry budget and end infra."""
    level = "warn" if rules.busy_gpu == "warn" else "refuse"
    then = "" if level == "warn" else " (preflight.busy_gpu = \"warn\" lets the round start anyway)"
    out = []
    procs = g.get("processes")
    if isinstance(procs, list) and procs:
        named = [f"pid {p.get('pid')}" + (f" ({p['name']})" if p.get("name") else " (name unknown)")
                 for p in procs if isinstance(p, dict)]
        more = f" and {len(named) - 8} more" if len(named) > 8 else ""
        out.append(finding("gpu-busy", level, f"{tag} already runs {len(named)} compute process(es) not "
                           f"this round's: {', '.join(named[:8])}{more}{then}"))
    thr = g.get("throttle")
    if isinstance(thr, list):
        bad = [r for r in thr if r in rules.throttle_reasons]
        if bad:
            out.append(finding("throttled-now", level, f"{tag} is throttled before the round: "
                               f"{', '.join(bad)}{then}"))
    return out


# --- per rep: did the node misbehave under it? ----------------------------------


def _preflight_gpu(preflight: dict[str, Any], g: dict[str, Any]) -> dict[str, Any]:
    for p in preflight.get("gpus") or []:
        if g.get("uuid") is not None and p.get("uuid") == g.get("uuid"):
            return p
    for p in preflight.get("gpus") or []:
        if p.get("index") == g.get("index"):
            return p
    return {}


def reference_sm_clock(pg: dict[str, Any]) -> float | None:
    """The clock a busy rep should reach: a measured reference if the round set one
    (``reference_sm_clock_mhz``, e.g. from warm-up reps), else the GPU's max SM clock."""
    ref = pg.get("reference_sm_clock_mhz")
    if _num(ref) and ref > 0:
        return float(ref)
    mx = (pg.get("max_clocks_mhz") or {}).get("sm") if isinstance(pg.get("max_clocks_mhz"), dict) else None
    return float(mx) if _num(mx) and mx > 0 else None


def classify_rep(summary: dict[str, Any] | None, preflight: dict[str, Any] | None,
                 rules: HealthRules = HealthRules()) -> list[str]:
    """Reasons this rep's numbers may reflect the node rather than the engine; [] when clean."""
    if not summary:
        return []
    preflight = preflight or {}
    out: list[str] = []

    if rules.xid:
        for x in summary.get("xid") or []:
            out.append(f"xid: XID {x.get('xid')} critical error on {x.get('gpu') or 'a GPU'} during the rep")

    gpus = summary.get("gpus") or []
    for g in gpus:
        tag = f"GPU {g.get('index')}"
        samples = g.get("samples") or 0
        for reason in rules.throttle_reasons:
            share = (g.get("throttle") or {}).get(reason, 0.0)
            if _num(share) and share > rules.throttle_share:
                out.append(f"throttle: {tag} clocks held by {reason} for {share:.0%} of the rep "
                           f"(limit {rules.throttle_share:.0%})")
        med = ((g.get("metrics") or {}).get("sm_clock_mhz") or {}).get("median")
        ref = reference_sm_clock(_preflight_gpu(preflight, g))
        if samples and (g.get("busy_samples") or 0) > 0 and _num(med) and ref is not None \
                and med < rules.sm_clock_floor * ref:
            out.append(f"low-clock: {tag} SM clock median {med:.0f} MHz is below "
                       f"{rules.sm_clock_floor:.0%} of {ref:.0f} MHz")
    if not gpus:   # a summary without per-GPU detail may still carry the merged shares
        for reason in rules.throttle_reasons:
            share = (summary.get("throttle") or {}).get(reason, 0.0)
            if _num(share) and share > rules.throttle_share:
                out.append(f"throttle: clocks held by {reason} for {share:.0%} of the rep "
                           f"(limit {rules.throttle_share:.0%})")

    if rules.foreign_process:
        for p in summary.get("foreign_processes") or []:
            name = f" ({p['name']})" if p.get("name") else ""
            out.append(f"foreign-process: process {p.get('pid')}{name} ran on {p.get('gpu') or 'the GPU'} "
                       "during the rep")

    if rules.gpu_errors:
        for e in summary.get("errors") or []:
            if isinstance(e, str) and e.startswith("gpu"):
                out.append(f"gpu-error: {e}")

    host = summary.get("host") or {}
    other = (host.get("cpu") or {}).get("other_cores")
    if _num(other) and other > rules.other_cpu_cores:
        out.append(f"host-busy: other processes used {other:.2f} cores during the rep "
                   f"(limit {rules.other_cpu_cores:g})")
    peak = ((host.get("metrics") or {}).get("load1") or {}).get("max")
    base = (preflight.get("host") or {}).get("load1")
    if _num(peak) and _num(base):
        engine = host.get("engine_cpus")
        allowance = float(engine) if _num(engine) and engine > 0 else 1.0
        if peak - base - allowance > rules.load_spike:
            out.append(f"load-spike: load average rose from {base:.2f} to {peak:.2f} during the rep "
                       f"(engine allowance {allowance:g}, limit +{rules.load_spike:g})")
    return out


def reason_code(reason: str) -> str:
    return reason.split(":", 1)[0] if ":" in reason else reason


@dataclass(frozen=True)
class Decision:
    action: str                  # "accept" | "retry" | "infra"
    reasons: tuple[str, ...] = ()
    retries_left: int = 0
    diagnosis: str | None = None


@dataclass
class RetryBudget:
    """Suspect reps are retried until the round's budget is spent; then the round is
    an infrastructure failure whose diagnosis names what the node kept doing."""
    retries: int = 3
    used: int = 0
    suspects: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)   # (rep label, reasons)

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError("retries must be >= 0")

    @classmethod
    def from_rules(cls, rules: HealthRules) -> "RetryBudget":
        return cls(retries=rules.retries)

    @property
    def left(self) -> int:
        return max(0, self.retries - self.used)

    def decide(self, reasons: list[str] | tuple[str, ...], label: str = "") -> Decision:
        if not reasons:
            return Decision("accept", (), self.left)
        self.suspects.append((label, tuple(reasons)))
        if self.used < self.retries:
            self.used += 1
            return Decision("retry", tuple(reasons), self.left)
        return Decision("infra", tuple(reasons), 0, self.diagnosis())

    def diagnosis(self) -> str:
        if not self.suspects:
            return "no suspect reps"
        codes = Counter(c for _, rs in self.suspects for c in dict.fromkeys(reason_code(x) for x in rs))
        parts = ", ".join(f"{c} ({n}×)" for c, n in codes.most_common())
        last_label, last = self.suspects[-1]
        where = f" {last_label}" if last_label else ""
        return (f"node unfit for timing: {len(self.suspects)} suspect reps with a retry budget of "
                f"{self.retries} ({parts}); last{where}: {'; '.join(last)}")


def attribute_engine_cpu(summary: dict[str, Any], engine_cpu_s: float | None, engine_cpus: float) -> dict[str, Any]:
    """Move the engine's own CPU time out of "other processes".

    Host telemetry sees the whole machine; the container is not in the console's
    process tree, so without this the engine itself would make every rep look
    like a busy node.
    """
    host = (summary or {}).get("host")
    if not host:
        return summary
    host["engine_cpus"] = engine_cpus
    cpu = host.get("cpu") or {}
    dur = summary.get("duration_s") or 0
    if dur > 0 and isinstance(cpu.get("other_cores"), (int, float)):
        if engine_cpu_s is None:
            # No reading of the engine's cgroup: a run shorter than one poll is gone before
            # the first one. Its CPU is then assumed at its limit, so the engine itself cannot
            # make the node look busy; a neighbour must exceed the limit by that much more.
            engine_cores = float(engine_cpus)
            cpu["engine_cores_assumed"] = True
        else:
            engine_cores = engine_cpu_s / dur
        cpu["engine_cores"] = round(engine_cores, 3)
        cpu["other_cores"] = round(max(0.0, cpu["other_cores"] - engine_cores), 3)
    return summary
