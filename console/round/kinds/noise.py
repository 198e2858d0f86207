"""A noise round: main against itself, interleaved, for the node's own spread. It measures its
whole budget and decides nothing about a candidate; the lock keeps the gate's noise report."""
from __future__ import annotations

from dataclasses import dataclass

from ...core.records.receipt import Receipt
from ...core.records.verdict import NoiseReport, Verdict
from ...profile import Profile
from ...core.records import kinds
from .base import Kind


@dataclass(frozen=True)
class Noise(Kind):
    record = kinds.NOISE

    def pair_budget(self, p: Profile) -> int:
        return p.bench.reps

    def times(self, receipt: Receipt, p: Profile) -> bool:
        return True             # main against itself: there is no candidate to fail parity

    def on_verdict(self, receipt: Receipt, verdict: Verdict) -> None:
        receipt.noise = verdict.noise or NoiseReport()     # what the lock stores per node
