"""A matrix round: many shapes of the same two builds, each decided, one verdict from them all.

**Cells.** A profile's ``[matrix]`` names axes (a bench field or placeholder each: depth, tokens,
threads, or a labelled set of fields such as llama-bench's ``pp512`` / ``tg64``); every combination
is a cell, measured in the same interleaved pairs as the others. A cell is *scored* (it can earn
the round its gain) or *guarded* (it must only not get worse).

**Rates for the family.** Each cell is decided by the same confidence sequence as a one-cell round
(``sequential``), at the false-accept and false-slower rates split evenly over the cells
(Bonferroni): with m cells each is decided at α/m, so the chance that *any* cell is wrongly
accepted (or wrongly called slower) is at most α, whatever the dependence between cells, and at
any stopping time, because each cell's sequence is anytime-valid on its own. Holm's step-down
would buy little here: it helps only after some cells are rejected, and its levels are fixed-time.
The miss rate β is per cell. What the split costs in pairs is measured in
benchmarks/decision_quality.py (``--matrix``).

**One verdict** (``matrix.rule``):

- ``slower`` when any cell is decided slower (exit 1): a regression anywhere is not hidden by a
  gain elsewhere;
- ``accepted`` when a scored cell (``rule = "any"``) or every scored cell (``rule = "all"``) is
  accepted, no cell is slower, and in every cell not decided a regression of ``min_gain`` is
  excluded at the miss rate (a guarded cell must be so cleared; a scored cell still open that
  might be slower holds the acceptance back as well); the tier is the lowest band of the accepted
  scored cells' conservative ends;
- ``none`` when every cell is decided and none of the above;
- ``undecided`` when the budget ends first; ``infra`` when a cell's pairs conflict.

Pure: no I/O; the gate reads each cell's pairs and calls these.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from console.core.records.rules import GateRules
from console.core.statistics.sequential import Decision

FAMILY = ("Bonferroni: each cell at the false-accept and false-slower rates (and the step check's level) "
          "divided by the number of cells")
RULES = {
    "any": "accepted when a scored cell is accepted, no cell is slower and every other cell excludes a regression",
    "all": "accepted when every scored cell is accepted, no cell is slower and every other cell excludes a regression",
}
SHAPE_FIELDS = ("depth", "tokens", "metric")    # the fields of a rep; any other axis is a bench placeholder
ROLES = ("scored", "guarded")


@dataclass(frozen=True)
class Cell:
    """One shape of the bench: its axis values (labels), and the fields and placeholders they set."""
    key: str                                    # "depth=1024,tokens=64": the axes in the profile's order
    axes: tuple[tuple[str, str], ...]
    depth: int
    tokens: int
    metric: str
    args: tuple[tuple[str, str], ...] = ()      # other bench placeholders the cell sets
    role: str = "scored"

    @property
    def phase(self) -> str:
        """The phase of this cell's reps in the receipt."""
        return f"cell:{self.key}"

    @property
    def scored(self) -> bool:
        return self.role == "scored"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "axes": [list(a) for a in self.axes], "depth": self.depth, "tokens": self.tokens,
                "metric": self.metric, "args": [list(a) for a in self.args], "role": self.role}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Cell":
        return cls(key=str(d["key"]), axes=tuple((str(a), str(v)) for a, v in d.get("axes") or ()),
                   depth=int(d["depth"]), tokens=int(d["tokens"]), metric=str(d["metric"]),
                   args=tuple((str(a), str(v)) for a, v in d.get("args") or ()), role=str(d.get("role", "scored")))


@dataclass(frozen=True)
class MatrixSpec:
    """The cells of a matrix profile, the verdict's rule, and the cell the wall-clock differential
    reads (``home``: the bench's own shape, whose long runs the short runs are checked against)."""
    axes: tuple[str, ...]
    cells: tuple[Cell, ...]
    home: str
    rule: str = "any"
    family: str = "bonferroni"

    def cell(self, key: str) -> Cell:
        return next(c for c in self.cells if c.key == key)

    def to_dict(self) -> dict[str, Any]:
        return {"axes": list(self.axes), "cells": [c.to_dict() for c in self.cells], "home": self.home,
                "rule": self.rule, "family": self.family}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "MatrixSpec | None":
        if not d:
            return None
        return cls(axes=tuple(str(a) for a in d.get("axes") or ()),
                   cells=tuple(Cell.from_dict(c) for c in d.get("cells") or ()), home=str(d.get("home") or ""),
                   rule=str(d.get("rule") or "any"), family=str(d.get("family") or "bonferroni"))


def cell_key(axes: Iterable[tuple[str, str]]) -> str:
    return ",".join(f"{a}={v}" for a, v in axes)


def family_rules(rules: GateRules, cells: int) -> GateRules:
    """The rules each of ``cells`` cells is decided under: α, the false-slower rate and the step
    check's level (the chance an honest round ends ``infra``) split evenly."""
    m = max(1, cells)
    return replace(rules, false_accept=rules.false_accept / m, false_slower=rules.false_slower / m,
                   step_level=rules.step_level / m)


# --- each cell's state -------------------------------------------------------------------------

def cleared(d: Decision, min_gain: float) -> bool:
    """A guarded cell is cleared once a regression of ``min_gain`` is excluded at the miss rate."""
    return d.state in ("accepted", "none") or d.lower_miss > -min_gain


def state_of(cell: Cell, d: Decision, min_gain: float) -> str:
    """accepted | none | slower | conflict | open for a scored cell; slower | conflict | cleared |
    open for a guarded one."""
    if cell.scored or d.state in ("slower", "conflict"):
        return d.state
    return "cleared" if cleared(d, min_gain) else "open"


def done(cell: Cell, d: Decision, min_gain: float) -> bool:
    """Whether the cell needs no more pairs: decided (an accepted tier settled) or cleared."""
    if cell.scored:
        return d.done
    return d.state in ("slower", "conflict") or (cleared(d, min_gain) and not d.pending)


@dataclass(frozen=True)
class CellResult:
    """A cell's decision as the verdict keeps it (the exports and screens read these)."""
    key: str
    axes: tuple[tuple[str, str], ...]
    role: str
    state: str
    pairs: int
    gain: float
    interval: tuple[float, float]
    main_median: float | None = None
    candidate_median: float | None = None
    tier: str | None = None
    span: tuple[str, str] | None = None
    basis_lower: float | None = None
    lower_miss: float | None = None
    upper_miss: float | None = None
    metric: str = ""
    sentence: str = ""
    warnings: tuple[str, ...] = field(default=())
    cleared: bool = False           # a regression of min_gain is excluded at the miss rate
    # a serving cell's latencies, each build's median over its counted blocks (main, candidate), and
    # its latency guards (core.decisions.serving.latency_rows at the cell's rate); none for a bench cell
    ttft_p99_ms: tuple[float | None, float | None] | None = None
    itl_p99_ms: tuple[float | None, float | None] | None = None
    latency: tuple[Mapping[str, Any], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["axes"] = {a: v for a, v in self.axes}
        for k in ("ttft_p99_ms", "itl_p99_ms", "latency"):
            if d[k] is None:        # a bench cell's verdict reads as it always has
                del d[k]
        return d


# --- one verdict from the cells -----------------------------------------------------------------

@dataclass(frozen=True)
class FamilyVerdict:
    outcome: str                    # accepted | none | slower | undecided | infra
    tier: str | None
    sentence: str
    deciding: tuple[str, ...]       # the cells the outcome rests on


_ORDER = ("xs", "s", "m", "l", "xl")


def verdict_of(cells: Sequence[CellResult], rule: str) -> FamilyVerdict:
    """The round's outcome from its cells' states, by ``rule`` (RULES)."""
    def keys(pred) -> tuple[str, ...]:
        return tuple(c.key for c in cells if pred(c))
    if conflicted := keys(lambda c: c.state == "conflict"):
        return FamilyVerdict("infra", None, f"the pairs of {_list(conflicted)} conflict: the node changed mid-round",
                             conflicted)
    if slower := keys(lambda c: c.state == "slower"):
        return FamilyVerdict("slower", None, f"{_list(slower)} decided slower than main: a regression in any "
                             "cell makes the round slower, whatever the other cells gained", slower)
    scored = [c for c in cells if c.role == "scored"]
    accepted = [c for c in scored if c.state == "accepted"]
    # a cell still open that may hide a regression of min_gain holds any acceptance back
    unsafe = keys(lambda c: c.state == "open" and not c.cleared)
    wanted = bool(accepted) if rule == "any" else bool(scored) and len(accepted) == len(scored)
    if wanted and not unsafe:
        tier = min((c.tier for c in accepted if c.tier), key=_ORDER.index, default=None)
        said = ", ".join(f"{c.key} {c.tier}" for c in accepted)
        return FamilyVerdict("accepted", tier, f"accepted in {said}; no cell slower, and a regression of the "
                             f"profile's min_gain excluded in every other cell; the round's tier is the lowest "
                             f"of the accepted cells' ({tier})", tuple(c.key for c in accepted))
    if wanted:
        return FamilyVerdict("undecided", None, f"accepted in {_list([c.key for c in accepted])}, but the budget "
                             f"ended with {_list(unsafe)} still open and a regression there not excluded", unsafe)
    if opened := keys(lambda c: c.state == "open"):
        return FamilyVerdict("undecided", None, f"the budget ended with {_list(opened)} still open", opened)
    return FamilyVerdict("none", None, "every cell decided, and no scored cell gained enough to accept "
                         f"({RULES.get(rule, rule)})", tuple(c.key for c in scored))


def _list(keys: Sequence[str]) -> str:
    return ", ".join(f"[{k}]" for k in keys)


def rotation(keys: Sequence[str], pair: int) -> list[str]:
    """The order the open cells run in for pair ``pair``: rotated by one each pair, so no cell
    always runs first or last (each cell's own pairs stay A B B A)."""
    if not keys:
        return []
    k = pair % len(keys)
    return list(keys[k:]) + list(keys[:k])
