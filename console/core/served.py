"""What a serving round's server check records (graded by ``core.serving``): each build's greedy
completions beside the reference's tokens, and its answers to one prompt sent again and again."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping


@dataclass
class Completion:
    """One greedy completion through a server, beside the reference's tokens for the same prompt."""
    position: int                   # the prompt is the document's first ``position`` tokens
    tokens: list[int]
    reference: list[int]
    error: str = ""

    def diverged_at(self) -> int | None:
        """The first token that differs from the reference's (None when they agree)."""
        for i, (a, b) in enumerate(zip(self.tokens, self.reference)):
            if a != b:
                return i
        return None if len(self.tokens) == len(self.reference) else min(len(self.tokens), len(self.reference))


@dataclass
class ServedSide:
    """What one build's server answered in the check."""
    asked: int = 0                  # tokens asked per completion
    completions: list[Completion] = field(default_factory=list)
    probe_ttft_s: list[float] = field(default_factory=list)     # one prompt sent again and again
    ready_s: float | None = None    # seconds from start until the server answered its readiness path
    probe_error: str = ""           # the cache probe's request failed (its TTFTs are then partial)
    error: str = ""                 # the server could not be checked at all

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServedSide | None:
        if not d:
            return None
        return cls(asked=int(d.get("asked", 0)), completions=[Completion(**c) for c in d.get("completions", [])],
                   probe_ttft_s=[float(x) for x in d.get("probe_ttft_s", [])], ready_s=d.get("ready_s"),
                   probe_error=str(d.get("probe_error", "")), error=str(d.get("error", "")))


@dataclass
class ServedCheck:
    """Both servers' check, with the thresholds it was graded by (so the receipt re-derives it)."""
    min_match: float = 0.75
    repeat_ratio: float = 0.5
    # whose greedy tokens the servers were graded against: the reference's (main's build of the
    # reference's own source), or main's build when the reference came from another source
    basis: str = "reference"
    main: ServedSide | None = None
    candidate: ServedSide | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"min_match": self.min_match, "repeat_ratio": self.repeat_ratio, "basis": self.basis,
                "main": self.main.to_dict() if self.main else None,
                "candidate": self.candidate.to_dict() if self.candidate else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServedCheck | None:
        if not d:
            return None
        return cls(min_match=float(d.get("min_match", 0.75)), repeat_ratio=float(d.get("repeat_ratio", 0.5)),
                   basis=str(d.get("basis", "reference")),
                   main=ServedSide.from_dict(d.get("main")), candidate=ServedSide.from_dict(d.get("candidate")))
