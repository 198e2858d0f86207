"""A round: main against a candidate, parity first, timed pairs until decided, a sealed verdict."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Kind


@dataclass(frozen=True)
class Compare(Kind):
    name = "round"
    looks_back = True       # a rerun pools with, or is decided by, the experiment's earlier rounds
