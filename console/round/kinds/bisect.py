"""A step of a bisection (`console bisect`): a midpoint (the candidate) against the good end (main).

It runs and decides as a round does (parity first, pairs until decided at the stated rates, the
gate's verdict), with three differences that follow from what a step is:

- its receipt says ``kind = "bisect"``, so it is an experiment of its own: a step pools with, and
  is decided by, earlier steps of the same two trees only, never an ordinary round (and a second
  bisection over the same range reads its steps' decisions instead of measuring them again);
- its rates are the bisection's split (``core.bisection.step_rules``), carried in the receipt's
  rules, so ``console verdict`` re-derives the step as it was decided;
- it reads no pins and raises none: the good end is an old commit, not the node's main.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...core.records import kinds
from .base import Kind


@dataclass(frozen=True)
class Bisect(Kind):
    record = kinds.BISECT
