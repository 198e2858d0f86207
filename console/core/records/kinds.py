"""The kinds of round, one record each: what a kind compares, whether it decides, what it pools
with, which pins it moves, whether it is a point of main's history, how it is exported and which of
the gate's deciders decides it.

Every reader (the gate, the lock, reruns, history, the exports, the round's hooks) reads the record
of a receipt's kind and never compares the kind's name. A new kind is a record here, registered in
``KINDS``, and its run-time hooks in ``console.round.kinds`` (one module, one line in its registry).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The gate's deciders, by what they decide (``console.core.decisions.gate.DECIDERS``): ``speed``
# the paired gain on one shape, guards first; ``cells`` every cell of a matrix as a family; ``pair-noise``
# a build against itself (the node's pair noise, no candidate); ``none`` nothing (a sweep measures).
Decider = Literal["speed", "cells", "pair-noise", "none"]
# What a sealed receipt of the kind moves in reference.lock: the frontier, guard and cell pins;
# the node's pair noise; or nothing.
Raises = Literal["pins", "node-noise", ""]


@dataclass(frozen=True)
class KindRecord:
    name: str                   # as receipts, journals and plans spell it
    what: str                   # one line, for plans and errors
    decider: Decider
    compares: bool = True       # the candidate is a build of its own (not main again)
    decides: bool = True        # stops once decided at the stated rates (else measures its whole budget)
    sealed: bool = True         # seals a receipt into the ledger (a sweep writes a document of its own)
    looks_back: bool = False    # reads the experiment's earlier rounds: a rerun of a decided one stops at once
    pools: bool = True          # pools its pairs with the experiment's earlier rounds (when it looks back)
    own_experiment: bool = True  # its experiment key names the kind: it never pools with, or is decided
    #                              by, a round of another kind over the same trees
    profile_rules: bool = False  # decided under the profile's rules as written (a bisection step's
    #                              rates are split, a matrix's are the family's): rules may be re-applied
    raises: Raises = ""         # what its sealed receipt moves in reference.lock
    checks_pins: bool = False   # sealing it checks the lock's pins against what it measured (stale pins)
    main_series: bool = False   # its main build is the node's main: a point of main's history
    per_cell: bool = False      # timed over a matrix's cells; its long runs are the home cell's
    exports: tuple[str, ...] = ("junit", "summary")     # the exporters of what is written after it ends, by
    #                                                     their names in console.reports.export.EXPORTERS

    @property
    def builds(self) -> tuple[str, ...]:
        return ("main", "candidate") if self.compares else ("main",)


ROUND = KindRecord("round", "main against a candidate, parity first, pairs until decided", "speed",
                   looks_back=True, own_experiment=False, profile_rules=True, raises="pins", checks_pins=True,
                   main_series=True)
NOISE = KindRecord("noise", "main against itself, interleaved, for the node's pair noise", "pair-noise",
                   compares=False, decides=False, raises="node-noise", main_series=True)
BISECT = KindRecord("bisect", "a bisection's step: a midpoint against the good end", "speed", looks_back=True)
MATRIX = KindRecord("matrix", "main against a candidate over every cell of the profile's [matrix]", "cells",
                    looks_back=True, pools=False, raises="pins", per_cell=True, main_series=True)
SWEEP = KindRecord("sweep", "both builds' servers over load levels, measured, not decided", "none",
                   decides=False, sealed=False, exports=("sweep-page",))

KINDS: dict[str, KindRecord] = {k.name: k for k in (ROUND, NOISE, BISECT, MATRIX, SWEEP)}


class KindError(ValueError):
    pass


def find(name: object) -> KindRecord | None:
    """The record a document names, or None for a name no kind has (a hostile or newer document)."""
    return KINDS.get(name) if isinstance(name, str) else None


def of(name: object) -> KindRecord:
    """The record of a kind a document names; an error that lists the kinds for any other."""
    if (found := find(name)) is None:
        raise KindError(f"unknown kind of round {name!r}; expected one of {', '.join(KINDS)}")
    return found


def sealed_kinds() -> tuple[str, ...]:
    """The kinds a receipt may name."""
    return tuple(k.name for k in KINDS.values() if k.sealed)
