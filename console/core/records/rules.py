"""The rules the gate applies, as typed values (pure).

The profile loader produces them from TOML; a receipt stores them (``asdict``) so a
verdict can be re-derived later under the rules that were in force.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any


@dataclass(frozen=True)
class Guard:
    name: str
    depth: int
    tokens: int
    reps: int = 3
    max_drop: float = 0.01          # may fall at most this share below its floor
    metric: str = ""                # what the guard measures; "" = the bench's scored metric


@dataclass(frozen=True)
class LatencyGuard:
    """A serving latency (core.serving.LATENCIES) the candidate may not worsen by more than
    ``max_rise``, read from the timed blocks themselves."""
    metric: str
    max_rise: float = 0.25


@dataclass(frozen=True)
class Bands:
    s: float = 0.035
    m: float = 0.06
    l: float = 0.10
    xl: float = 0.18


@dataclass(frozen=True)
class GateRules:
    top1_min: float = 0.95
    kl_max: float = 0.05
    ratchet: float = 2.0
    drift_floor: float = 0.01           # nats: legal drift against main is reported from this KL up
    # Borderline KL (console.core.records.adjudication): over kl_max, up to this, is adjudicated; 0 = never.
    borderline_kl: float = 0.0
    spread_factor: float = 2.0          # candidate KL at most this x the reference's own kernel spread
    agreement_factor: float = 2.0       # completion disagreements at most this x the reference's kernels'
    # Task accuracy (console.core.decisions.accuracy)
    accuracy_alpha: float = 0.05        # two-sided: the paired interval's level is 1 - alpha
    accuracy_fallback: float = 0.05     # share (5.0 points) when items cannot be paired
    uncheckable_entropy: float = 0.98   # share of log(V) above which a depth is uncheckable
    significance: float = 0.02
    confidence: float = 0.95
    anchor: float = 0.0                 # external reference engine's pinned number; 0 = off
    bands: Bands = field(default_factory=Bands)
    plausibility: float = 5.0
    wall_margin: float = 0.10
    differential_margin: float = 0.25
    overhead_margin: float = 0.25       # candidate's fixed cost per section over main's, a share of main's section
    clock_margin: float = 0.15          # the engine's own section time may read this share under the console's
    seek_memory_fraction: float = 0.9
    guards: tuple[Guard, ...] = ()
    latency: tuple[LatencyGuard, ...] = ()   # serving profiles: [[server.guards]]
    # Sequential decisions (schema-2 receipts; console.core.statistics.sequential says how they are used).
    false_accept: float = 0.01          # α: chance of accepting a candidate that is not `significance` faster
    miss: float = 0.05                  # β: chance of calling `none` on a true gain of `min_gain`
    min_gain: float = 0.035             # the smallest gain the profile cares about (tier s)
    min_pairs: int = 4                  # pairs before the first look
    max_pairs: int = 32                 # budget: pairs of timed reps
    max_minutes: float = 0.0            # budget: minutes of timed reps (0 = pairs only)
    mixture: float = 1.0                # c² of the t-mixture: where the sequence is tightest (8-30 pairs at 1)
    planning_noise: float = 0.05        # pair noise (log SD) assumed for planning when the node has no record
    slower: str = "reject"              # a candidate decided slower than main: "reject" (exit 1) or "record" (exit 0)
    false_slower: float = 0.01          # chance of calling `slower` a candidate that is not slower than main
    settle_pairs: int = 4               # pairs spent, once accepted, to settle the tier's band (then the span is said)
    step_level: float = 0.01            # chance that the step-change check ends an honest round `infra`
    claim_false_refusal: float = 0.001  # chance that a claim check refuses an honest build
    # "lag1": the confidence sequence widens for the serial correlation the pairs show
    # (sequential.serial_factors); "none": pairs taken as independent, as receipts sealed before it
    serial: str = "lag1"
    # "huber": the confidence sequence reads each pair's deviation clipped at a predicted scale
    # (console.core.statistics.robust); "t-mixture": the raw pairs, as receipts sealed before it
    sequence: str = "huber"



def rules_from_dict(d: dict[str, Any]) -> GateRules:
    """Rebuild GateRules from ``asdict`` output (a receipt's stored rules)."""
    d = dict(d)
    d["bands"] = Bands(**d.get("bands", {}))
    d["guards"] = tuple(Guard(**g) for g in d.get("guards", ()))
    d["latency"] = tuple(LatencyGuard(**g) for g in d.get("latency", ()))
    d.setdefault("serial", "none")      # sealed before the correction existed: decided on independent pairs
    d.setdefault("sequence", "t-mixture")   # sealed before the robust sequence: decided on the raw pairs
    return GateRules(**d)


def not_finite(value: Any, where: str = "") -> list[tuple[str, float]]:
    """(key, value) of every number in a rules value (or nested in it) that is not finite."""
    if is_dataclass(value):
        pre = f"{where}." if where else ""
        return [x for f in fields(value) for x in not_finite(getattr(value, f.name), pre + f.name)]
    if isinstance(value, tuple):
        return [x for i, v in enumerate(value) for x in not_finite(v, f"{where}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [(where, value)]
    return []
