"""The parts of a sealed verdict, typed: the speed figures and the decision they rest on, a matrix's
cells, the guards and claims, and the parity table. Each is a ``recorded.Part``: read once from the
verdict as it was sealed, written back byte for byte, so reports, exports, replay and the screens
read fields and never the document.

A rate stays the rate it is: every schema so far seals the false-accept rate as its complement
(``confidence``); ``SpeedPart.false_accept`` reads it back here, once, and says None where the
verdict does not record it (no reader supplies a default).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from console.core.records.recorded import Part, parts


def _rows(cls: type[Part]):
    """A READ converter: an object of named rows, each read as ``cls`` (other values kept as written)."""
    return lambda d: {k: cls.from_dict(v) if isinstance(v, Mapping) else v for k, v in d.items()}


@dataclass(frozen=True)
class Summary(Part):
    """``stats.summary`` of one build's counted timed reps."""
    n: int = 0
    median: float | None = None
    min: float | None = None
    max: float | None = None
    spread: float | None = None
    mad_spread: float | None = None


@dataclass(frozen=True)
class Plausibility(Part):
    factor: float | None = None
    reference: float | None = None
    reference_kind: str | None = None
    ceiling: float | None = None


@dataclass(frozen=True)
class DecisionPart(Part):
    """Where the sequential decision left the round (``sequential.Decision.to_dict``); an unbounded
    end was sealed as None."""
    state: str = ""
    pairs: int = 0
    prior_pairs: int = 0
    gain: float | None = None
    interval: tuple[float | None, ...] = ()
    upper_miss: float | None = None
    basis_interval: tuple[float | None, ...] = ()
    basis_upper_miss: float | None = None
    tier: str | None = None
    span: tuple[str, ...] | None = None
    settled: bool = False
    pending: str | None = None
    lower_miss: float | None = None
    upper_slower: float | None = None
    conflict: str | None = None


@dataclass(frozen=True)
class LatencyRow(Part):
    """A serving latency guard: the candidate's latency over main's in the same pair
    (``serving.latency_rows``)."""
    metric: str = ""
    max_rise: float | None = None
    pairs: int = 0
    allowed: float | None = None
    ratio: float | None = None
    lower: float | None = None
    upper: float | None = None
    status: str = ""


@dataclass(frozen=True)
class CellPart(Part):
    """A matrix cell's decision (``matrix.CellResult.to_dict``)."""
    key: str = ""
    axes: Mapping[str, str] = field(default_factory=dict)     # axis -> value, in the profile's order
    role: str = ""
    state: str = ""
    pairs: int = 0
    gain: float | None = None
    interval: tuple[float | None, ...] = ()
    main_median: float | None = None
    candidate_median: float | None = None
    tier: str | None = None
    span: tuple[str, ...] | None = None
    basis_lower: float | None = None
    lower_miss: float | None = None
    upper_miss: float | None = None
    metric: str = ""
    sentence: str = ""
    warnings: tuple[str, ...] = ()
    cleared: bool = False
    ttft_p99_ms: tuple[float | None, ...] | None = None     # a serving cell's: (main's, the candidate's)
    itl_p99_ms: tuple[float | None, ...] | None = None
    latency: tuple[LatencyRow, ...] | None = None
    READ = {"latency": parts(LatencyRow)}


@dataclass(frozen=True)
class MatrixPart(Part):
    """A matrix round's cells, the family's rule and which cells the outcome rests on."""
    cells: tuple[CellPart, ...] = ()
    rule: str = ""
    rule_text: str = ""
    family: str = ""
    cells_n: int = 0
    lead: str | None = None
    sentence: str = ""
    false_accept_per_cell: float | None = None
    false_slower_per_cell: float | None = None
    READ = {"cells": parts(CellPart)}


@dataclass(frozen=True)
class GuardRow(Part):
    """One guard's floor and where the candidate stands against it."""
    floor: float | None = None
    floor_source: str | None = None
    max_drop: float | None = None
    depth: int | None = None
    min_allowed: float | None = None
    enforced: bool = False
    candidate_median: float | None = None
    main_median: float | None = None
    upper: float | None = None
    lower: float | None = None
    level: float | None = None
    breached: bool | None = None
    metric: str | None = None


@dataclass(frozen=True)
class ClaimRow(Part):
    """One build's reported rate against its own wall clock (``claims.differential``)."""
    checked: bool = False
    why: str | None = None
    reported_median: float | None = None
    rate: float | None = None
    rate_upper: float | None = None
    required_rate: float | None = None
    level: float | None = None
    overhead_s: float | None = None
    extra_s: float | None = None


@dataclass(frozen=True)
class NoiseReport(Part):
    """A noise round's finding: a build against itself on this node (``noise.decide_noise``).
    Rules 2 on: the paired log ratios' SD with its 95 % interval and the gain it leaves decidable;
    rules 1: the largest pair deviation and how often the old threshold was fooled. A round
    with too few pairs reports only its ``pairs`` and ratios."""
    pairs: int = 0
    log_ratios: tuple[float, ...] = ()
    sd: float | None = None
    df: int | None = None
    lower: float | None = None
    upper: float | None = None
    gain: float | None = None
    decidable_gain: float | None = None
    max_pairs: int | None = None
    # rules 1 (stats.noise_report)
    ratios: tuple[float, ...] = ()
    significance: float | None = None
    confidence: float | None = None
    spread: float | None = None
    mad_spread: float | None = None
    interval: tuple[float | None, ...] = ()
    windows: int | None = None
    false_positives: int | None = None
    false_positive_rate: float | None = None
    suggested_significance: float | None = None


@dataclass(frozen=True)
class SpeedPart(Part):
    """The verdict's ``speed``: the figures the decision rests on, or why there are none
    (``suppressed``, the ``guards`` that ended the round, a noise round's ``noise``)."""
    main: Summary | None = None
    candidate: Summary | None = None
    main_median: float | None = None
    candidate_median: float | None = None
    frontier: float | None = None
    frontier_source: str | None = None
    frontier_slot: str | None = None
    lock_frontier: float | None = None
    delta: float | None = None
    gain: float | None = None
    significance: float | None = None
    threshold: float | None = None
    confidence: float | None = None
    pairs: int | None = None
    ratios: tuple[float, ...] = ()
    interval: tuple[float | None, ...] = ()
    anchor: float | None = None
    basis: float | None = None
    basis_kind: str | None = None
    bands: Mapping[str, float] | None = None
    plausibility: Plausibility | None = None
    differential: Mapping[str, Any] | None = None
    guards: Mapping[str, Any] | None = None
    significant: bool = False
    band: str | None = None
    method: str | None = None
    decision: DecisionPart | None = None
    pair_sd: float | None = None
    needed_pairs: int | None = None
    matrix: MatrixPart | None = None
    suppressed: str | None = None
    noise: NoiseReport | None = None
    READ = {"main": Summary.from_dict, "candidate": Summary.from_dict, "plausibility": Plausibility.from_dict,
            "decision": DecisionPart.from_dict, "matrix": MatrixPart.from_dict, "noise": NoiseReport.from_dict,
            "guards": _rows(GuardRow), "differential": _rows(ClaimRow)}

    @property
    def decided_on(self) -> bool:
        """Whether speed figures were computed (else ``suppressed`` says why not)."""
        return self.gain is not None

    @property
    def false_accept(self) -> float | None:
        """The false-accept rate the decision was made at (sealed as its complement)."""
        return None if self.confidence is None else 1.0 - self.confidence

    @property
    def cells(self) -> tuple[CellPart, ...]:
        return self.matrix.cells if self.matrix is not None else ()


@dataclass(frozen=True)
class DepthCell(Part):
    """One build's parity figures at one depth (``parity.DepthFigures.to_dict``)."""
    depth: int | None = None
    top1: float | None = None
    kl: float | None = None
    kl_mean: float | None = None
    kl_max: float | None = None
    kl_p99: float | None = None
    kl_se: float | None = None
    top1_se: float | None = None
    rms_dp: float | None = None
    ref_entropy: float | None = None
    max_entropy: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class DepthRow(Part):
    """A depth's grade: both builds' figures, the status and the drift against main."""
    depth: int | None = None
    main: DepthCell | None = None
    candidate: DepthCell | None = None
    status: str = ""
    drift: float | None = None
    READ = {"main": DepthCell.from_dict, "candidate": DepthCell.from_dict}


@dataclass(frozen=True)
class PathGrade(Part):
    """The scored path's or the timed path's grade."""
    status: str = ""
    depth: int | None = None
    main: DepthCell | None = None
    candidate: DepthCell | None = None
    reps: int | None = None
    worst_kl: float | None = None
    why: str | None = None
    READ = {"main": DepthCell.from_dict, "candidate": DepthCell.from_dict}


@dataclass(frozen=True)
class SideGrade(Part):
    """One server's check: pass or fail, and its problems."""
    status: str = ""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerGrade(Part):
    """Both servers' checks, and the timed blocks' served tokens graded (``served_tokens.rule``)."""
    main: SideGrade | None = None
    candidate: SideGrade | None = None
    graded: Mapping[str, Any] | None = None
    READ = {"main": SideGrade.from_dict, "candidate": SideGrade.from_dict}


@dataclass(frozen=True)
class AccuracyGrade(Part):
    """Task accuracy: the candidate's score against the reference's, within its tolerance
    (``accuracy.AccuracyGrade.to_dict`` and the items it was scored on)."""
    status: str = ""
    items: int = 0
    tokens: int | None = None
    reference_build: str | None = None
    reference_score: float | None = None
    candidate_score: float | None = None
    delta: float | None = None
    tolerance: float | None = None
    estimator: str | None = None
    level: float | None = None
    only_candidate: int | None = None
    only_reference: int | None = None
    per_kind: Mapping[str, Mapping[str, int]] = field(default_factory=dict)   # kind -> items, reference, candidate
    reference_correct: int | None = None
    candidate_correct: int | None = None
    passed: bool | None = None


@dataclass(frozen=True)
class KLLine(Part):
    """One borderline depth of the ruling: the candidate's mean KL against the line its reference's own
    kernel spread draws (``line``: None where the spread was not measured)."""
    kl: float | None = None
    spread: float | None = None
    line: float | None = None
    within: bool = False


@dataclass(frozen=True)
class Ruling(Part):
    """The borderline-KL ruling (``adjudication.Ruling.to_dict``): per depth and over the completions."""
    passed: bool = False
    depths: Mapping[str, KLLine] = field(default_factory=dict)     # depth (a JSON key) -> its line
    positions: int = 0
    candidate_disagree: int | None = None
    variant_disagree: int | None = None
    agreement_line: float | None = None
    agrees: bool = False
    summary: str = ""
    READ = {"depths": _rows(KLLine)}


@dataclass(frozen=True)
class ParityTable(Part):
    """The verdict's ``parity``: every declared depth graded, the paths, the server and accuracy."""
    depths: tuple[DepthRow, ...] = ()
    worst_depth: int | None = None
    scored_path: PathGrade | None = None
    timed_path: PathGrade | None = None
    candidate_error: str | None = None
    main_error: str | None = None
    all_uncheckable: bool = False
    adjudication: Ruling | None = None
    server: ServerGrade | None = None
    accuracy: AccuracyGrade | None = None
    READ = {"depths": parts(DepthRow), "scored_path": PathGrade.from_dict, "timed_path": PathGrade.from_dict,
            "adjudication": Ruling.from_dict, "server": ServerGrade.from_dict, "accuracy": AccuracyGrade.from_dict}

    @property
    def statuses(self) -> dict[int | None, str]:
        """The gate's status per depth."""
        return {row.depth: row.status for row in self.depths}

    def row(self, depth: int) -> DepthRow | None:
        return next((r for r in self.depths if r.depth == depth), None)
