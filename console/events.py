"""The typed events that flow from a round to whoever watches it.

A round (``console.round``) yields these; the headless reporter, the TUI, the
journal and replay consume them. They are plain data: every field is JSON-safe,
so the same stream can be written to a journal, read back and replayed through
the same screen. ``at`` is the wall-clock time (Unix seconds) the event was made;
the round stamps it, viewers only read it.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Protocol, runtime_checkable

from .core.records.facts import HostFacts, SourceRecord
from .core.records.parity import KLStats
from .core.records.receipt import Rep
from .core.records.verdict import VerdictRecord
from .core.records.verdict_parts import AccuracyGrade, CellPart

_REGISTRY: dict[str, type["Event"]] = {}


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    at: float = field(default_factory=time.time, kw_only=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            _REGISTRY[cls.kind] = cls

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kind"] = self.kind
        return d


def event_from_dict(d: dict[str, Any]) -> Event:
    """Rebuild an event from ``Event.to_dict`` output (journal, replay).

    Unknown keys are ignored so that an older viewer can replay a newer journal.
    """
    kind = d.get("kind")
    cls = _REGISTRY.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


# --- round lifecycle -------------------------------------------------------

@dataclass
class RoundStarted(Event):
    kind: ClassVar[str] = "round_started"
    round_id: str
    profile: str            # profile name
    profile_sha256: str
    runtime: str            # "docker" | "local"
    host: HostFacts         # the node's facts (CPU, kernel, Docker, GPUs), as the receipt records them
    plan: dict[str, Any]    # depths, reps, order, tokens … what the round will do

    def __post_init__(self) -> None:
        if not isinstance(self.host, HostFacts):      # a journal's line: read here, once
            self.host = HostFacts.from_dict(self.host or {})

    def to_dict(self) -> dict[str, Any]:
        return {"round_id": self.round_id, "profile": self.profile, "profile_sha256": self.profile_sha256,
                "runtime": self.runtime, "host": self.host.to_dict(), "plan": self.plan,
                "at": self.at, "kind": self.kind}


@dataclass
class PhaseStarted(Event):
    kind: ClassVar[str] = "phase_started"
    phase: str              # "sources" | "preflight" | "build" | "parity" | "warm" | "reps" | "verdict"


@dataclass
class Notice(Event):
    """Something a person should read: a warning, a diagnosis, a refusal."""
    kind: ClassVar[str] = "notice"
    level: str              # "info" | "warn" | "error"
    code: str               # stable machine-readable code, e.g. "pin-stale"
    message: str


# --- builds ----------------------------------------------------------------

@dataclass
class BuildStarted(Event):
    kind: ClassVar[str] = "build_started"
    build: str              # "main" | "candidate" (| "reference")
    source: SourceRecord    # where its tree came from, as the receipt records it

    def __post_init__(self) -> None:
        if not isinstance(self.source, SourceRecord):     # a journal's line: read here, once
            self.source = SourceRecord.from_dict(self.source or {})

    def to_dict(self) -> dict[str, Any]:
        return {"build": self.build, "source": self.source.to_dict(), "at": self.at, "kind": self.kind}


@dataclass
class BuildLog(Event):
    kind: ClassVar[str] = "build_log"
    build: str
    line: str


@dataclass
class BuildDone(Event):
    kind: ClassVar[str] = "build_done"
    build: str
    image_id: str
    base_image_id: str
    compiler: str
    seconds: float
    reused_from: str = ""       # the round whose image of the same build key was reused ("" = built now)
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for k in ("reused_from", "key"):
            if not d[k]:
                del d[k]        # absent, as in journals written before builds had keys
        return d


@dataclass
class BuildFailed(Event):
    kind: ClassVar[str] = "build_failed"
    build: str
    message: str
    log_tail: list[str]


# --- parity ----------------------------------------------------------------

@dataclass
class DepthGraded(Event):
    kind: ClassVar[str] = "depth_graded"
    build: str
    depth: int
    top1: float
    kl: float
    ref_entropy: float
    status: str             # console.core.records.parity.STATUSES
    reasons: list[str] = field(default_factory=list)   # why it fails, or its drift warning
    stats: KLStats | None = None    # the rows' spread, reported only

    def __post_init__(self) -> None:
        if self.stats is not None and not isinstance(self.stats, KLStats):     # a journal's: read once
            self.stats = KLStats.from_dict(self.stats)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if self.stats is None:
            del d["stats"]      # absent, as in journals that predate it
        return d


@dataclass
class ParityDone(Event):
    kind: ClassVar[str] = "parity_done"
    build: str
    ok: bool
    worst_depth: int | None
    error: str | None = None    # a malformed logits file, a failed run …


@dataclass
class ScoredPathChecked(Event):
    kind: ClassVar[str] = "scored_path_checked"
    build: str
    depth: int
    top1: float | None
    kl: float | None
    ok: bool
    error: str | None = None


@dataclass
class AccuracyProgress(Event):
    """Task accuracy as it runs: items answered so far by one side, and how many right."""
    kind: ClassVar[str] = "accuracy_progress"
    build: str              # "reference" | "candidate"
    done: int
    total: int
    correct: int
    error: str | None = None


@dataclass
class AccuracyGraded(Event):
    """The gate's grade of the task accuracy stage (console.core.decisions.gate.grade_accuracy)."""
    kind: ClassVar[str] = "accuracy_graded"
    grade: AccuracyGrade    # scores, delta, tolerance and its estimator, status
    reasons: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.grade, AccuracyGrade):      # a journal's line: read here, once
            self.grade = AccuracyGrade.from_dict(self.grade)

    def to_dict(self) -> dict[str, Any]:
        return {"grade": self.grade.to_dict(), "reasons": list(self.reasons), "at": self.at, "kind": self.kind}


@dataclass
class AdjudicationStep(Event):
    """Borderline KL being settled: a kernel variant measured, the completions, the ruling."""
    kind: ClassVar[str] = "adjudication_step"
    step: str               # "started" | "variant" | "completions" | "ruling"
    message: str
    figures: dict[str, Any] = field(default_factory=dict)
    ok: bool | None = None  # the ruling: passed or not


# --- reps ------------------------------------------------------------------

@dataclass
class RepStarted(Event):
    kind: ClassVar[str] = "rep_started"
    build: str
    index: int              # index within this build and phase
    position: int           # position in the round's interleaved order
    phase: str              # "warmup" | "short" | "timed" | "guard:<name>"


@dataclass
class RepDone(Event):
    """One finished run: the rep as the receipt keeps it, typed."""
    kind: ClassVar[str] = "rep_done"
    rep: Rep

    def __post_init__(self) -> None:
        if not isinstance(self.rep, Rep):      # a journal's line: read here, once
            self.rep = Rep.from_dict(self.rep)

    def to_dict(self) -> dict[str, Any]:
        return {"rep": self.rep.to_dict(), "at": self.at, "kind": self.kind}


@dataclass
class TelemetrySample(Event):
    kind: ClassVar[str] = "telemetry"
    source: str             # "nvml" | "host"
    values: dict[str, Any]  # e.g. {"sm_clock_mhz": …, "temp_c": …} or host figures
    build: str | None = None
    index: int | None = None


@dataclass
class SweepLevel(Event):
    """A sweep finished one load level: both builds' figures there (``core.sweep.LevelFigures``)."""
    kind: ClassVar[str] = "sweep_level"
    figures: dict[str, Any]
    sentence: str


@dataclass
class WorkloadCommitted(Event):
    """A serving round's timed workload is drawn: its seed's sha256, journaled before the first
    block (the seed itself is revealed in the receipt after the last)."""
    kind: ClassVar[str] = "workload_committed"
    commitment: str         # sha256 of the seed, hex
    drawn: int              # positions per prompt overwritten with drawn ids
    space_log10: float      # log10 of the prompts the workload could send


@dataclass
class SectionCommitted(Event):
    """A timed section is drawn (core.records.section): its seed's sha256, journaled before either
    build runs it; the seed is revealed when the timed stage is over (``SectionRevealed``)."""
    kind: ClassVar[str] = "section_committed"
    phase: str
    index: int
    commitment: str


@dataclass
class SectionRevealed(Event):
    """The timed stage is over: a drawn section's seed, which re-derives every id handed over."""
    kind: ClassVar[str] = "section_revealed"
    phase: str
    index: int
    seed: str


@dataclass
class PlanReady(Event):
    """Before the timed reps: what this node can decide within the budget (``sequential.Preview``)."""
    kind: ClassVar[str] = "plan_ready"
    preview: dict[str, Any]
    sentence: str
    prior_rounds: int = 0       # earlier rounds of the same candidate pooled with this one
    prior_pairs: int = 0


@dataclass
class DecisionStep(Event):
    """After a pair of timed reps: the decision so far (``sequential.Decision``)."""
    kind: ClassVar[str] = "decision_step"
    pairs: int
    prior_pairs: int
    state: str              # "open" | "accepted" | "none" | "slower" | "conflict"
    gain: float | None
    interval: list[float | None]    # the gain's sequence at the false-accept level
    tier: str | None = None
    span: list[str] | None = None

    @classmethod
    def of(cls, d: Mapping[str, Any], **kw: Any) -> "DecisionStep":
        """From a decision as JSON (``Decision.to_dict`` made JSON-safe): the round's live
        looks and a replay's last look are the same event."""
        return cls(pairs=int(d.get("pairs") or 0), prior_pairs=int(d.get("prior_pairs") or 0),
                   state=str(d.get("state")), gain=d.get("gain"), interval=list(d.get("interval") or [None, None]),
                   tier=d.get("tier"), span=list(d["span"]) if d.get("span") else None, **kw)


@dataclass
class CellsStep(Event):
    """After a pair of a matrix round: each cell's decision so far, at the family's rates."""
    kind: ClassVar[str] = "cells_step"
    KEYS: ClassVar[tuple[str, ...]] = ("key", "role", "state", "pairs", "gain", "interval", "tier")
    pair: int
    cells: tuple[CellPart, ...]     # each cell's KEYS, in the profile's order

    def __post_init__(self) -> None:    # a journal's cells are read here, once
        self.cells = tuple(c if isinstance(c, CellPart) else CellPart.from_dict(c) for c in self.cells)

    @classmethod
    def of(cls, pair: int, cells: Iterable[Mapping[str, Any] | CellPart], **kw: Any) -> "CellsStep":
        """From cells as JSON (a live look) or a sealed verdict's cells: the same event either way."""
        docs = (c.to_dict() if isinstance(c, CellPart) else c for c in cells)
        return cls(pair=pair, cells=tuple(CellPart.from_dict({k: d.get(k) for k in cls.KEYS}) for d in docs), **kw)

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair, "cells": [c.to_dict() for c in self.cells], "at": self.at, "kind": self.kind}


# --- outcome ---------------------------------------------------------------

@dataclass
class VerdictReady(Event):
    kind: ClassVar[str] = "verdict"
    verdict: VerdictRecord      # the verdict as sealed, typed to its last figure

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, VerdictRecord):     # a journal's line: read here, once
            self.verdict = VerdictRecord.from_dict(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.to_dict(), "at": self.at, "kind": self.kind}


@dataclass
class RoundEnded(Event):
    kind: ClassVar[str] = "round_ended"
    status: str             # "complete" | "incomplete" | "infra" | "refused"
    exit_code: int
    receipt_path: str | None = None
    message: str = ""


# The callbacks every stage of a round is handed, named once.
Emit = Callable[[Event], None]                  # hand an event to the journal and the viewers
Notify = Callable[[str, str, str], None]        # (level, code, message): a notice
CheckAbort = Callable[[], None]                 # raises Interrupted once the round is aborted


# --- who yields them -------------------------------------------------------

@runtime_checkable
class EventSource(Protocol):
    """A round's event stream, as a viewer consumes it: a live round, or a replay of a recorded one
    (``console.reports.replay``); the console app (``console.tui``) renders either.

    ``events()`` is a blocking iterator (it may take minutes); the app runs it on a
    thread worker. ``abort()`` is called from the UI thread, must be thread-safe and
    return promptly; the source then tears down what it started and ends the stream,
    normally with ``RoundEnded(status="incomplete")``.

    A source that has not started yet is given to the app as a zero-argument
    factory (``console.tui.messages.SourceFactory``): the app opens idle and calls it when the user
    presses ``s``.
    """

    def events(self) -> Iterator[Event]: ...

    def abort(self) -> None: ...
