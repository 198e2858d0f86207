"""The rules the gate applies, as typed values (pure).

The profile loader produces them from TOML; a receipt stores them (``asdict``) so a
verdict can be re-derived later under the rules that were in force.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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
    uncheckable_entropy: float = 0.98   # share of log(V) above which a depth is uncheckable
    significance: float = 0.02
    confidence: float = 0.95
    anchor: float = 0.0                 # external reference engine's pinned number; 0 = off
    bands: Bands = field(default_factory=Bands)
    plausibility: float = 5.0
    wall_margin: float = 0.10
    differential_margin: float = 0.25
    overhead_margin: float = 0.25       # candidate's fixed cost per run over main's, as a share of main's run
    seek_memory_fraction: float = 0.9
    guards: tuple[Guard, ...] = ()



def rules_from_dict(d: dict[str, Any]) -> GateRules:
    """Rebuild GateRules from ``asdict`` output (a receipt's stored rules)."""
    d = dict(d)
    d["bands"] = Bands(**d.get("bands", {}))
    d["guards"] = tuple(Guard(**g) for g in d.get("guards", ()))
    return GateRules(**d)
