"""What the gate decides, as typed values: the verdict, its reasons and its speed figures.

``Verdict.to_dict`` is the JSON every reader sees (the receipt's informational copy,
``console verdict --json``, the event stream); ``from_dict`` reads it back.
"""
from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Sequence

from console.errors import ExitCode
from console.core.records.recorded import read_keys, write_keys
from console.core.records.verdict_parts import AccuracyGrade, DecisionPart, NoiseReport, ParityTable, Ruling, SpeedPart


class Outcome(enum.StrEnum):
    """Every outcome the gate can produce, with its exit code (console.errors.ExitCode gives the
    same numbers to the edge). Viewers must handle each one. A str, so receipts keep the word."""
    ACCEPTED = "accepted", 0
    NONE = "none", 0
    UNDECIDED = "undecided", 0
    NOISE = "noise", 0
    REJECTED = "rejected", 1
    SLOWER = "slower", 1        # 0 when the profile records it without rejecting (gate.slower = "record")
    INFRA = "infra", 3
    IMPLAUSIBLE = "implausible", 4
    UNCHECKABLE = "uncheckable", 4

    def __new__(cls, word: str, exit_code: int) -> "Outcome":
        member = str.__new__(cls, word)
        member._value_ = word
        member._exit_code = exit_code
        return member

    @property
    def exit_code(self) -> int:
        return self._exit_code


OUTCOMES = tuple(o.value for o in Outcome)


def unsealed_status(exit_code: int) -> str:
    """What a round that sealed no verdict ended as, by its exit code: "interrupted", "refused"
    (a usage error: it could never be measured as given) or "infra". Anything else is the node's
    fault, never held against the candidate."""
    return {ExitCode.INTERRUPTED: "interrupted", ExitCode.USAGE: "refused"}.get(exit_code, "infra")


BANDS = ("xs", "s", "m", "l", "xl")

# The gate stage each reason code comes from (the reports group reasons by it).
_STAGE_PREFIXES = (("parity", ("parity-", "scored-path-", "timed-path-", "accuracy-")),
                   ("claims", ("claim-", "refused", "failed-run", "rep-status")),
                   ("guards", ("guard-",)))


def stage_of(code: str) -> str:
    """"parity", "claims", "guards", or "verdict" for everything else (significance, node, apparatus)."""
    return next((stage for stage, prefixes in _STAGE_PREFIXES if code.startswith(prefixes)), "verdict")


def json_safe(x: Any) -> Any:
    """Non-finite floats become None so the verdict is strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def num(x: float) -> str:
    return f"{x:.4g}"


@dataclass(frozen=True)
class Reason:
    """Why the verdict is what it is: one failed rule, with the figure and the bar."""
    code: str
    message: str
    build: str | None = "candidate"     # whose problem: "candidate", "main", or None (the node)
    depth: int | None = None
    figure: str | None = None
    bar: float | None = None
    value: float | None = None
    files: tuple[str, ...] = ()         # paths involved (the apparatus guard)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.files:
            del d["files"]
        else:
            d["files"] = list(self.files)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Reason":
        return cls(code=str(d.get("code")), message=str(d.get("message", "")), build=d.get("build"),
                   depth=d.get("depth"), figure=d.get("figure"), bar=d.get("bar"), value=d.get("value"),
                   files=tuple(d.get("files") or ()))

    def prefixed(self, prefix: str) -> "Reason":
        return Reason(**{**asdict(self), "message": prefix + self.message, "files": self.files})


@dataclass(frozen=True)
class Caveat:
    """Something a reader must know that does not change the outcome."""
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Caveat":
        return cls(code=str(d.get("code")), message=str(d.get("message", "")))


_SEQUENTIAL_KEYS = ("method", "decision", "preview", "node_noise", "pair_sd", "needed_pairs", "shift", "matrix")


@dataclass
class Speed:
    """The speed figures of a round that reached significance (paired against main this round)."""
    main: dict[str, Any]                # stats.summary of main's counted timed reps
    candidate: dict[str, Any]
    main_median: float
    candidate_median: float
    frontier: float
    frontier_source: str                # "lock" | "main this round"
    frontier_slot: str | None
    lock_frontier: float
    delta: float
    gain: float
    significance: float
    threshold: float
    threshold_source: str               # "profile" | "measured noise"
    confidence: float
    pairs: int
    ratios: list[float]
    interval: list[float]
    anchor: float
    basis_frontier: float
    basis_anchor: float | None
    basis: float
    basis_kind: str                     # "frontier" | "anchor"
    bands: dict[str, float]
    plausibility: dict[str, Any]
    differential: dict[str, Any]
    guards: dict[str, Any] = field(default_factory=dict)
    significant: bool = False
    band: str | None = None
    # schema 2: the sequential decision (console.core.statistics.sequential) the figures above come from
    method: str | None = None
    decision: dict[str, Any] | None = None      # sequential.Decision.to_dict
    preview: dict[str, Any] | None = None       # what the node could decide, planned before the reps
    node_noise: dict[str, Any] | None = None    # the node's pair noise record used for planning
    pair_sd: float | None = None                # this round's pair noise (log SD)
    needed_pairs: int | None = None             # undecided: about how many pairs in all would decide
    shift: dict[str, Any] | None = None         # schema 3: the step change that ended the round (Shift.to_dict)
    # a matrix round: every cell's decision (core.matrix.CellResult.to_dict), the family's method and
    # rule, and which cells the outcome rests on; the figures above are those of the first of them
    matrix: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in _SEQUENTIAL_KEYS:      # absent from schema-1 verdicts, as they were sealed
            if d[k] is None:
                del d[k]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Speed":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Verdict:
    outcome: Outcome                              # a word of OUTCOMES becomes its Outcome
    tier: str | None = None                       # only when accepted
    would_be_tier: str | None = None              # implausible: the tier it would have had
    reasons: list[Reason] = field(default_factory=list)
    warnings: list[Caveat] = field(default_factory=list)
    parity: dict[str, Any] = field(default_factory=dict)   # the parity table (parity_grade.grade_parity)
    speed: Speed | None = None                    # the figures, when speed was decided on
    suppressed: str | None = None                 # why no speed credit was computed
    guards: dict[str, Any] | None = None          # guard rows when a guard ended the round
    noise: NoiseReport | None = None              # noise rounds: the pair-noise report
    tier_span: list[str] | None = None            # accepted: the bands the interval still spans
    slower_rejects: bool = True                   # gate.slower: does "slower" exit 1?

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}")
        self.outcome = Outcome(self.outcome)

    @property
    def exit_code(self) -> int:
        if self.outcome is Outcome.SLOWER and not self.slower_rejects:
            return 0
        return self.outcome.exit_code

    @property
    def tier_label(self) -> str | None:
        return tier_label(self.tier, self.tier_span)

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    def speed_dict(self) -> dict[str, Any]:
        """The verdict's ``speed`` key: the figures, or why there are none."""
        if self.speed is not None:
            return self.speed.to_dict()
        out: dict[str, Any] = {}
        if self.suppressed:
            out["suppressed"] = self.suppressed
        if self.guards is not None:
            out["guards"] = self.guards
        if self.noise is not None:
            out["noise"] = self.noise.to_dict()
        return out

    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "outcome": self.outcome.value, "tier": self.tier, "tier_span": self.tier_span,
            "would_be_tier": self.would_be_tier, "exit_code": self.exit_code, "reasons": [r.to_dict() for r in self.reasons],
            "warnings": [w.to_dict() for w in self.warnings], "parity": self.parity,
            "speed": self.speed_dict(),
        })

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        s = dict(d.get("speed") or {})
        full = "gain" in s and "suppressed" not in s
        return cls(outcome=d["outcome"], tier=d.get("tier"), would_be_tier=d.get("would_be_tier"),
                   tier_span=d.get("tier_span"),
                   slower_rejects=not (d["outcome"] == "slower" and d.get("exit_code") == 0),
                   reasons=[Reason.from_dict(r) for r in d.get("reasons") or []],
                   warnings=[Caveat.from_dict(w) for w in d.get("warnings") or []],
                   parity=dict(d.get("parity") or {}),
                   speed=Speed.from_dict(s) if full else None,
                   suppressed=None if full else s.get("suppressed"),
                   guards=None if full else s.get("guards"),
                   noise=NoiseReport.from_dict(s["noise"]) if not full and s.get("noise") is not None else None)


@dataclass(frozen=True)
class VerdictRecord:
    """The verdict a receipt was sealed with, as it was written (``Verdict.to_dict``), typed to its
    last figure (``verdict_parts``). It is informational: every reader that judges re-derives the
    verdict from the receipt. ``keys``: those it was written with (a verdict sealed under rules 1 has
    no ``tier_span``)."""
    outcome: Outcome
    exit_code: int | None = None
    tier: str | None = None
    tier_span: tuple[str, ...] | None = None
    would_be_tier: str | None = None
    reasons: tuple[Reason, ...] = ()
    warnings: tuple[Caveat, ...] = ()
    parity: ParityTable = field(default_factory=ParityTable)    # the parity table (parity_grade.grade_parity)
    speed: SpeedPart = field(default_factory=SpeedPart)         # Verdict.speed_dict, as written
    keys: tuple[str, ...] = field(default=(), repr=False)

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    @property
    def tier_label(self) -> str | None:
        return tier_label(self.tier, self.tier_span)

    @property
    def gain(self) -> float | None:
        return self.speed.gain

    @property
    def interval(self) -> tuple[float | None, ...]:
        """The gain's interval (None ends unbounded); () when speed was not decided on."""
        return self.speed.interval

    @property
    def false_accept(self) -> float | None:
        """The false-accept rate the speed decision was made at; None where it was not made."""
        return self.speed.false_accept

    @property
    def suppressed(self) -> str | None:
        """Why no speed figures were computed."""
        return self.speed.suppressed

    @property
    def decision(self) -> DecisionPart | None:
        """Where the sequential decision left the round (``sequential.Decision.to_dict``)."""
        return self.speed.decision

    @property
    def noise(self) -> NoiseReport | None:
        """A noise round's report."""
        return self.speed.noise

    @property
    def depth_grades(self) -> dict[Any, Any]:
        """The gate's status per parity depth."""
        return self.parity.statuses

    @property
    def adjudication(self) -> Ruling | None:
        """The borderline-KL ruling, where the round had one."""
        return self.parity.adjudication

    @property
    def accuracy(self) -> AccuracyGrade | None:
        """The task accuracy grade, where the round had one."""
        return self.parity.accuracy

    def to_dict(self) -> dict[str, Any]:
        return write_keys(self, _RECORD_WRITE)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "VerdictRecord":
        return cls(**read_keys(cls, d, _RECORD_READ))

    @classmethod
    def of(cls, verdict: Verdict) -> "VerdictRecord":
        return cls.from_dict(verdict.to_dict())


_RECORD_READ = {"outcome": Outcome, "reasons": lambda rs: tuple(Reason.from_dict(r) for r in rs),
                "warnings": lambda ws: tuple(Caveat.from_dict(w) for w in ws), "parity": ParityTable.from_dict,
                "speed": SpeedPart.from_dict, "tier_span": lambda t: None if t is None else tuple(t)}
_RECORD_WRITE = {"outcome": lambda o: o.value, "reasons": lambda rs: [r.to_dict() for r in rs],
                 "warnings": lambda ws: [w.to_dict() for w in ws]}


def tier_label(tier: str | None, span: Sequence[str] | None) -> str | None:
    """A tier as said to people: ``l (interval spans l–xl)`` while it is not settled."""
    if tier is None:
        return None
    if span and span[0] != span[-1]:
        return f"{tier} (interval spans {span[0]}–{span[-1]})"
    return tier


def reason(code: str, message: str, build: str | None = "candidate", depth: int | None = None,
           figure: str | None = None, bar: float | None = None, value: float | None = None) -> Reason:
    return Reason(code, message, build, depth, figure, bar, value)


def warning(code: str, message: str) -> Caveat:
    return Caveat(code, message)
