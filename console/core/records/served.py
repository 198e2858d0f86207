"""What a serving round's server check records (graded by ``core.serving``): each build's greedy
completions beside the reference's tokens, and its answers to one prompt sent again and again."""
from __future__ import annotations

import hashlib
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
    ready_cpu_s: float | None = None    # CPU seconds the server spent before it was ready
    probe_error: str = ""           # the cache probe's request failed (its TTFTs are then partial)
    error: str = ""                 # the server could not be checked at all
    probe_skipped: str = ""         # why the cache probe was not run (the timed requests ask for the cache)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.probe_skipped:      # absent where the probe ran, as in rounds sealed before it could be skipped
            del out["probe_skipped"]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServedSide | None:
        if not d:
            return None
        return cls(asked=int(d.get("asked", 0)), completions=[Completion(**c) for c in d.get("completions", [])],
                   probe_ttft_s=[float(x) for x in d.get("probe_ttft_s", [])], ready_s=d.get("ready_s"),
                   ready_cpu_s=d.get("ready_cpu_s"),
                   probe_error=str(d.get("probe_error", "")), error=str(d.get("error", "")),
                   probe_skipped=str(d.get("probe_skipped", "")))


@dataclass
class GradedRequest:
    """One served request, teacher-forced through the reference build: at each served token, the
    reference's own argmax (``best``) and how far the served token's logit is below it (``gap``,
    nats of log-probability; 0 where they agree)."""
    build: str
    phase: str
    block: int
    attempt: int
    request: int
    served: list[int]
    best: list[int]
    gap: list[float]
    prompt: list[int] = field(default_factory=list)     # the request's prompt ids, to grade it again

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GradedRequest:
        return cls(build=str(d["build"]), phase=str(d["phase"]), block=int(d["block"]), attempt=int(d["attempt"]),
                   request=int(d["request"]), served=[int(x) for x in d["served"]],
                   best=[int(x) for x in d["best"]], gap=[float(x) for x in d["gap"]],
                   prompt=[int(x) for x in d.get("prompt") or []])


@dataclass
class ServedGrade:
    """The timed blocks' served tokens, graded after the blocks and outside the clock: which
    requests were drawn (after serving, so no server could know), and each one's grade."""
    margin: float                   # a served token this far below the argmax (nats) is a departure
    false_reject: float             # the rate at which an honest candidate is rejected
    basis: str = "reference"        # whose build teacher-forced the tokens (as the server check's)
    available: dict[str, int] = field(default_factory=dict)     # served requests per build
    seed: str = ""                  # the draw's seed, made after the blocks
    requests: list[GradedRequest] = field(default_factory=list)
    seconds: float | None = None    # what the grading cost, outside the clock
    error: str = ""                 # the yardstick could not grade (the round is then infra)
    # responses in each build's counted timed blocks, and those of them the console could not grade
    # (no ids, ids that are not the streamed text, an id outside the vocabulary): a response the
    # console cannot grade counts against the build that served it. Absent (None) before this rule.
    counted: dict[str, int] | None = None
    ungradable: dict[str, list[str]] = field(default_factory=dict)     # build -> why, one per response
    # the served tokens graded as parity grades (absent before this rule): the share that are the
    # reference's argmax and their mean gap below it, against absolute bars, ratcheted against main
    agree_min: float | None = None
    gap_max: float | None = None
    gap_floor: float | None = None
    ratchet: float | None = None
    # the candidate's gaps and agreement decided against main's on the same requests, pair by pair, at
    # false_reject, beyond main's own spread between its blocks (core.decisions.served_tokens.paired);
    # False in receipts sealed before, which ratchet the mean gap against main's above gap_floor
    paired: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {**{k: v for k, v in asdict(self).items() if k != "requests"},
               "requests": [r.to_dict() for r in self.requests]}
        if not self.paired:
            del out["paired"]   # absent, as in the receipts that predate it
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServedGrade | None:
        if not d:
            return None
        return cls(margin=float(d["margin"]), false_reject=float(d["false_reject"]), basis=str(d.get("basis") or ""),
                   available={str(k): int(v) for k, v in (d.get("available") or {}).items()},
                   seed=str(d.get("seed") or ""), seconds=d.get("seconds"), error=str(d.get("error") or ""),
                   requests=[GradedRequest.from_dict(r) for r in d.get("requests") or []],
                   counted=None if d.get("counted") is None else {str(k): int(v) for k, v in d["counted"].items()},
                   ungradable={str(k): [str(x) for x in v] for k, v in (d.get("ungradable") or {}).items()},
                   paired=bool(d.get("paired")),
                   **{k: None if d.get(k) is None else float(d[k])
                      for k in ("agree_min", "gap_max", "gap_floor", "ratchet")})


@dataclass
class WorkloadDraw:
    """A serving round's timed workload: its seed, drawn from the operating system when the blocks
    began (kept from both servers), the seed's sha256 journaled before the first block, and the seed
    itself recorded here after the last. With the document and the profile it re-derives every
    block's requests (``workload_sha256`` of each)."""
    seed: str                       # hex
    commitment: str                 # sha256 of the seed's text, hex
    drawn: int = 0                  # positions per prompt overwritten with drawn ids
    space_log10: float = 0.0        # log10 of the prompts the workload could send
    # how many ids the drawn ones (and each prompt's planted run, workload.plant_copies) come from: the
    # ids the model's tokenizer makes from text; 0 in receipts sealed when they came from the document's
    pool: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.pool:
            del out["pool"]     # absent, as in the receipts that predate it
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> WorkloadDraw | None:
        if not d:
            return None
        return cls(seed=str(d["seed"]), commitment=str(d["commitment"]), drawn=int(d.get("drawn") or 0),
                   space_log10=float(d.get("space_log10") or 0.0), pool=int(d.get("pool") or 0))

    def holds(self) -> bool:
        """Whether the revealed seed is the one committed to."""
        return commitment_of(self.seed) == self.commitment


def commitment_of(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


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
    graded: ServedGrade | None = None   # the timed blocks' tokens, graded after them
    workload: WorkloadDraw | None = None    # the timed workload's seed, revealed after the blocks

    def to_dict(self) -> dict[str, Any]:
        out = {"min_match": self.min_match, "repeat_ratio": self.repeat_ratio, "basis": self.basis,
               "main": self.main.to_dict() if self.main else None,
               "candidate": self.candidate.to_dict() if self.candidate else None}
        if self.graded is not None:     # absent from rounds sealed before the timed tokens were graded
            out["graded"] = self.graded.to_dict()
        if self.workload is not None:   # absent from rounds sealed before the seed was drawn per round
            out["workload"] = self.workload.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServedCheck | None:
        if not d:
            return None
        return cls(min_match=float(d.get("min_match", 0.75)), repeat_ratio=float(d.get("repeat_ratio", 0.5)),
                   basis=str(d.get("basis", "reference")),
                   main=ServedSide.from_dict(d.get("main")), candidate=ServedSide.from_dict(d.get("candidate")),
                   graded=ServedGrade.from_dict(d.get("graded")), workload=WorkloadDraw.from_dict(d.get("workload")))
