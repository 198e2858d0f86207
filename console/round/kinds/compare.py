"""A round: main against a candidate, parity first, timed pairs until decided, a sealed verdict."""
from __future__ import annotations

from dataclasses import dataclass

from ...core.records import kinds
from .base import Kind


@dataclass(frozen=True)
class Compare(Kind):
    record = kinds.ROUND
