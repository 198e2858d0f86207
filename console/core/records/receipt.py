"""What a round measured, as typed values: reps, builds, parity figures, pins, the receipt.

These are the one definition of the receipt schema (docs/RECEIPT.md; a test keeps the
two in agreement). Each type has one ``to_dict`` for the documented JSON and one
``from_dict`` that also reads older receipts: every field added after schema 1 first
shipped has a default, so a receipt sealed before it still reads (and re-derives the
same verdict). The node, the runtime and the reference a round ran with are typed
(``records.facts``); the preflight and each rep's telemetry and engine output stay plain JSON,
as they were recorded.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Callable, Mapping, TypeVar

from console.core.records.adjudication import Adjudication
from console.core.records.kinds import sealed_kinds
from console.core.records.figures import finite
from console.core.records.facts import HostFacts, ReferenceFacts, RuntimeFacts, Seal, SourceRecord
from console.core.records.matrix import MatrixSpec
from console.core.records.untrusted import safe_name
from console.core.records.parity import DepthFigures
from console.core.records.recorded import plain   # also what the gate and replay import from here
from console.core.records.rules import GateRules, not_finite, rules_from_dict
from console.core.records.served import ServedCheck
from console.core.records.section import SectionDraw
from console.core.statistics.sizing import Sizing
from console.core.records.verdict import NoiseReport, VerdictRecord

SCHEMA_1 = "bench-console/receipt/1"   # fixed reps; judged by the median gain against a threshold
SCHEMA_2 = "bench-console/receipt/2"   # reps until decided; `none` on the upper end alone
SCHEMA = "bench-console/receipt/3"     # three outcomes at stated rates, own minimum pairs, step check
SCHEMAS = (SCHEMA_1, SCHEMA_2, SCHEMA)  # the receipt schemas this version reads

BUILDS = ("main", "candidate")
REP_STATUSES = ("ok", "failed", "timeout", "refused", "suspect", "aborted")
EXCLUDED = ("suspect", "aborted")       # node problems: kept in the receipt, left out of statistics
BENCH_PHASES = ("short", "timed")       # plus "guard:<name>"; "warmup" and "scored_path" are not timed


class ReceiptError(ValueError):
    """A document that is not a receipt this version can read; ``key`` is where in it (a dotted
    path, grown outwards as the refusal passes up through the parts that hold it)."""

    def __init__(self, message: str, key: str = ""):
        super().__init__(f"{key}: {message}" if key else message)
        self.message, self.key = message, key

    def under(self, where: str) -> "ReceiptError":
        key = where + ("" if self.key.startswith("[") else ".") + self.key if self.key else where
        return ReceiptError(self.message, key)


class FrozenReceiptError(AttributeError):
    """A sealed receipt changed in memory would no longer be what its ledger line vouches for."""


class _Freezable:
    """A part of a receipt that refuses changes once ``freeze`` ran: its attributes refuse
    assignment and its lists and objects become tuples and read-only mappings."""

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen"):
            raise FrozenReceiptError(f"cannot set {type(self).__name__}.{name}: the receipt is sealed; "
                                     "re-read it (Receipt.from_dict) into a new receipt rather than edit it")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__dict__.get("_frozen"):
            raise FrozenReceiptError(f"cannot delete {type(self).__name__}.{name}: the receipt is sealed")
        object.__delattr__(self, name)

    @property
    def frozen(self) -> bool:
        return bool(self.__dict__.get("_frozen"))

    def freeze(self: "F") -> "F":
        for f in fields(self):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, _read_only(getattr(self, f.name)))
        object.__setattr__(self, "_frozen", True)
        return self


F = TypeVar("F", bound=_Freezable)


def _read_only(x: Any) -> Any:
    """``x`` with every list a tuple and every object a read-only mapping, all the way down."""
    if isinstance(x, _Freezable):
        return x.freeze()
    if isinstance(x, Mapping) and not isinstance(x, MappingProxyType):
        return MappingProxyType({k: _read_only(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return tuple(_read_only(v) for v in x)
    return x


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def _finite(x: Any, where: str) -> float:
    """A number the round was decided under (a pin, a pooled log ratio, a check's threshold): a
    value that is not finite could never have been measured, and no bar can read it."""
    v = float(x)
    if not finite(v):
        raise ReceiptError(f"expected a finite number, got {x!r}", where)
    return v


def _opt_finite(x: Any, where: str) -> float | None:
    return None if x is None else _finite(x, where)


def _opt_int(x: Any) -> int | None:
    return None if x is None else int(x)


# --- reps --------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class RepKey:
    """A rep's identity in its round: the same key across retries (``attempt``)."""
    build: str
    phase: str
    index: int

    @classmethod
    def of(cls, rep: "Rep | Mapping[str, Any]") -> "RepKey":
        if isinstance(rep, Rep):
            return rep.key
        return cls(str(rep.get("build")), str(rep.get("phase")), int(rep.get("index") or 0))


def is_bench_phase(phase: str) -> bool:
    """Reps whose figures the gate judges: the timed, short, guard and matrix cell runs."""
    return phase in BENCH_PHASES or phase.startswith(("guard:", "cell:"))


@dataclass
class Rep(_Freezable):
    """One run of the bench command, as the console saw it from outside."""
    build: str                          # "main" | "candidate"
    phase: str                          # "warmup" | "short" | "timed" | "guard:<name>" | "scored_path"
    index: int                          # k-th rep of this build in this phase
    position: int                       # place in the round's schedule (-1: outside it)
    attempt: int = 0                    # retries of a suspect rep count up
    depth: int = 0
    tokens: int = 0
    context: str = "doc"                # "doc" | "seek"
    status: str = "ok"                  # one of REP_STATUSES
    exit_code: int | None = None
    wall_s: float | None = None         # the console's own clock, start to exit
    value: float | None = None          # the reported value, only when its line passed the schema
    reported: dict[str, Any] | None = None   # the parsed result line, as the engine printed it
    refusals: list[str] = field(default_factory=list)
    peak_mem_bytes: int | None = None   # measured from outside (cgroup / rusage)
    log_tail: list[str] = field(default_factory=list)
    telemetry: dict[str, Any] | None = None  # the per-rep telemetry summary
    suspect: list[str] = field(default_factory=list)   # why the node may have moved this rep
    settle: dict[str, Any] | None = None     # the quiet start before it
    repeat: int = 1                     # times the run repeated its timed section (bench.min_seconds); tokens counts all
    # the console's own clock over the section it handed over (docs/PROTOCOL.md, "The handover"):
    # when set, ``value`` is tokens / section_s and the engine's own timing is a cross-check only
    section_s: float | None = None

    @property
    def key(self) -> RepKey:
        return RepKey(self.build, self.phase, self.index)

    @property
    def label(self) -> str:
        return f"{self.build} {self.phase} rep {self.index} (position {self.position})"

    @property
    def schedule_key(self) -> tuple:
        """Order in the round: by schedule position, then retries."""
        return (self.position, self.build, self.phase, self.index, self.attempt)

    @property
    def excluded(self) -> bool:
        """The node, not the build, is in question: left out of every statistic."""
        return self.status in EXCLUDED

    def to_dict(self) -> dict[str, Any]:
        out = plain(self)
        if self.repeat == 1:
            del out["repeat"]       # absent, as in the receipts that predate it
        if self.section_s is None:
            del out["section_s"]    # a self-timed run, as every run before the handover
        return out

    @property
    def console_timed(self) -> bool:
        """Its figure is the console's clock over the section it handed over, not the engine's claim."""
        return self.section_s is not None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Rep":
        return cls(build=str(d["build"]), phase=str(d["phase"]), index=int(d.get("index") or 0),
                   position=int(d.get("position") or 0), attempt=int(d.get("attempt") or 0),
                   depth=int(d.get("depth") or 0), tokens=int(d.get("tokens") or 0),
                   context=str(d.get("context") or "doc"), status=str(d.get("status") or ""),
                   exit_code=_opt_int(d.get("exit_code")), wall_s=_opt_float(d.get("wall_s")),
                   value=_opt_float(d.get("value")), reported=d.get("reported"),
                   refusals=[str(x) for x in d.get("refusals") or []],
                   peak_mem_bytes=_opt_int(d.get("peak_mem_bytes")),
                   log_tail=[str(x) for x in d.get("log_tail") or []], telemetry=d.get("telemetry"),
                   suspect=[str(x) for x in d.get("suspect") or []], settle=d.get("settle"),
                   repeat=int(d.get("repeat") or 1), section_s=_opt_float(d.get("section_s")))


# --- builds ----------------------------------------------------------------------------

@dataclass
class Build(_Freezable):
    """Where one build came from and what it became."""
    source: SourceRecord                # a directory, a commit, an sdist or a patch over one, with its tree's digest
    tree_sha256: str | None = None
    image_id: str | None = None         # None: refused before building
    base_image_id: str | None = None
    compiler: str | None = None         # the asserted first line of the compiler probe
    build_s: float | None = None
    tools: dict[str, str] | None = None     # every other build tool the profile asserts: name -> version line
    engine_sha256: str | None = None        # digest over the built files below
    engine_files: dict[str, str] | None = None  # path under the engine root -> sha256
    key: str | None = None                  # engine.buildkey: sha256 over everything that went into the build
    reused_from: dict[str, Any] | None = None   # {round, image_id, built_at}: an earlier build of the same key, reused
    reproduced: dict[str, Any] | None = None    # a rebuild of a key built before: {of, round, same, changed, ...}
    compiler_cache: dict[str, Any] | None = None    # {tool, hits, misses, store_bytes}: objects reused by ccache

    def __post_init__(self) -> None:
        if not isinstance(self.source, SourceRecord):     # as a snapshot records it: read here, once
            self.source = SourceRecord.from_dict(self.source or {})

    def to_dict(self) -> dict[str, Any]:
        d = plain(self)
        for k in ("tools", "engine_sha256", "engine_files", "key", "reused_from", "reproduced", "compiler_cache"):
            if d[k] is None:
                del d[k]        # absent, as in receipts that predate them
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Build":
        return cls(source=SourceRecord.from_dict(d.get("source") or {}), tree_sha256=d.get("tree_sha256"),
                   image_id=d.get("image_id"), base_image_id=d.get("base_image_id"),
                   compiler=d.get("compiler"), build_s=_opt_float(d.get("build_s")),
                   tools=d.get("tools"), engine_sha256=d.get("engine_sha256"),
                   engine_files=d.get("engine_files"), key=d.get("key"), reused_from=d.get("reused_from"),
                   reproduced=d.get("reproduced"), compiler_cache=d.get("compiler_cache"))


@dataclass
class Inputs(_Freezable):
    """What every run of a round reads besides the document: model files and the harness."""
    model: list[dict[str, Any]] = field(default_factory=list)   # {name, path, bytes, sha256}
    warm: dict[str, Any] | None = None      # the page-cache read before the first rep: {bytes, seconds}
    harness: dict[str, Any] | None = None   # {path, tree_sha256, build}: the profile's, never a candidate's
    fill: str = "decode"                    # how the context before a timed section is filled

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Inputs | None":
        if not d:
            return None
        return cls(model=[dict(x) for x in d.get("model") or []], warm=d.get("warm"),
                   harness=d.get("harness"), fill=str(d.get("fill") or "decode"))


# --- parity -----------------------------------------------------------------------------

@dataclass
class ParitySide(_Freezable):
    """One build's logits at the declared depths, graded against the reference."""
    error: str | None = None            # why the logits could not be graded
    logits_sha256: str | None = None
    depths: list[DepthFigures] = field(default_factory=list)
    wall_s: float | None = None

    def at(self, depth: int) -> DepthFigures | None:
        return next((f for f in self.depths if f.depth == depth), None)

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error, "logits_sha256": self.logits_sha256,
                "depths": [f.to_dict() for f in self.depths], "wall_s": self.wall_s}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "ParitySide | None":
        if not d:
            return None
        return cls(error=d.get("error"), logits_sha256=d.get("logits_sha256"),
                   depths=[DepthFigures.from_dict(x) for x in d.get("depths") or []],
                   wall_s=_opt_float(d.get("wall_s")))


@dataclass
class PathFigures(_Freezable):
    """A bench run's own final logits graded against a basis (the scored or timed path)."""
    depth: int | None = None
    top1: float | None = None
    kl: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "PathFigures | None":
        if not d:
            return None
        return cls(depth=_opt_int(d.get("depth")), top1=_opt_float(d.get("top1")),
                   kl=_opt_float(d.get("kl")), error=d.get("error"))


@dataclass
class TimedPathRep(_Freezable):
    """One candidate timed rep's final logits against main's."""
    index: int
    attempt: int = 0
    kl: float | None = None
    top1: float | None = None
    error: str | None = None
    # a handed-over section (basis "section"): the rep's phase, the share of its answers per chunk
    # (argmax) that are main's for the same section, and how many chunks it answered
    phase: str = ""
    acks_agree: float | None = None
    chunks: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = plain(self)
        for k in ("phase", "acks_agree", "chunks"):
            if not out[k] and out[k] != 0.0:
                del out[k]      # absent, as in the receipts that predate the handover
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TimedPathRep":
        return cls(index=int(d.get("index") or 0), attempt=int(d.get("attempt") or 0),
                   kl=_opt_float(d.get("kl")), top1=_opt_float(d.get("top1")), error=d.get("error"),
                   phase=str(d.get("phase") or ""), acks_agree=_opt_float(d.get("acks_agree")),
                   chunks=_opt_int(d.get("chunks")))


@dataclass
class TimedPath(_Freezable):
    depth: int
    tokens: int
    basis: str = "main"
    main_rep: int | None = None
    error: str | None = None
    candidate: list[TimedPathRep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"depth": self.depth, "tokens": self.tokens, "basis": self.basis, "main_rep": self.main_rep,
                "candidate": [r.to_dict() for r in self.candidate], "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "TimedPath | None":
        if d is None:
            return None
        return cls(depth=int(d.get("depth") or 0), tokens=int(d.get("tokens") or 0),
                   basis=str(d.get("basis") or "main"), main_rep=_opt_int(d.get("main_rep")),
                   error=d.get("error"), candidate=[TimedPathRep.from_dict(r) for r in d.get("candidate") or []])


@dataclass
class ParityRecord(_Freezable):
    reference: ReferenceFacts = field(default_factory=ReferenceFacts)
    main: ParitySide | None = None
    candidate: ParitySide | None = None
    scored_path: dict[str, PathFigures | None] = field(default_factory=dict)
    timed_path: TimedPath | None = None  # absent before the timed reps ran
    adjudication: Adjudication | None = None   # borderline depths only (console.core.records.adjudication)
    server: ServedCheck | None = None   # serving profiles: each server's answers (console.core.decisions.serving)

    def __post_init__(self) -> None:
        if not isinstance(self.reference, ReferenceFacts):    # as a round names it: read here, once
            self.reference = ReferenceFacts.from_dict(self.reference)

    def side(self, build: str) -> ParitySide | None:
        return self.main if build == "main" else self.candidate

    @property
    def declared_depths(self) -> list[int]:
        ref = [int(d) for d in self.reference.depths or ()]
        return ref or sorted(f.depth for f in (self.candidate.depths if self.candidate else []))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reference": plain(self.reference)}
        for b in BUILDS:
            side = self.side(b)
            if side is not None:
                out[b] = side.to_dict()
        out["scored_path"] = {b: (f.to_dict() if f else None) for b, f in self.scored_path.items()}
        if self.timed_path is not None:
            out["timed_path"] = self.timed_path.to_dict()
        if self.adjudication is not None:
            out["adjudication"] = self.adjudication.to_dict()
        if self.server is not None:
            out["server"] = self.server.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "ParityRecord":
        d = d or {}
        return cls(reference=ReferenceFacts.from_dict(d.get("reference") or {}), main=ParitySide.from_dict(d.get("main")),
                   candidate=ParitySide.from_dict(d.get("candidate")),
                   scored_path={b: PathFigures.from_dict(f) for b, f in (d.get("scored_path") or {}).items()},
                   timed_path=TimedPath.from_dict(d.get("timed_path")),
                   adjudication=Adjudication.from_dict(d["adjudication"]) if d.get("adjudication") else None,
                   server=ServedCheck.from_dict(d.get("server")))


@dataclass
class AccuracySide(_Freezable):
    """One build's answers to the task set, as it generated them (scored by the gate)."""
    build: str = ""                     # the image that answered: "main" stands in for the reference
    outputs: list[str] | None = None    # the continuation per item, in task order
    error: str | None = None
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "AccuracySide | None":
        if not d:
            return None
        return cls(build=str(d.get("build") or ""), outputs=[str(x) for x in d["outputs"]] if d.get("outputs")
                   is not None else None, error=d.get("error"), wall_s=float(d.get("wall_s") or 0.0))


@dataclass
class AccuracyRecord(_Freezable):
    """The task accuracy stage: the items (ids and answers, so the score is re-derivable from
    the receipt alone), the generation settings, and each side's outputs."""
    tasks_sha256: str = ""
    ids: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    tokens: int = 0                     # at most this many generated tokens per item (greedy)
    reference: AccuracySide | None = None
    candidate: AccuracySide | None = None

    def to_dict(self) -> dict[str, Any]:
        d = plain(self)
        d["reference"] = self.reference.to_dict() if self.reference else None
        d["candidate"] = self.candidate.to_dict() if self.candidate else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "AccuracyRecord | None":
        if not d:
            return None
        return cls(tasks_sha256=str(d.get("tasks_sha256") or ""), ids=[str(x) for x in d.get("ids") or []],
                   answers=[str(x) for x in d.get("answers") or []], kinds=[str(x) for x in d.get("kinds") or []],
                   tokens=int(d.get("tokens") or 0), reference=AccuracySide.from_dict(d.get("reference")),
                   candidate=AccuracySide.from_dict(d.get("candidate")))


# --- pins, profile, apparatus ---------------------------------------------------------------

@dataclass
class Pins(_Freezable):
    """The lock's pins in force for the round; 0 means not measured."""
    frontier: float = 0.0
    frontier_slot: str = ""
    anchor: float = 0.0
    guards: dict[str, float] = field(default_factory=dict)
    guard_slots: dict[str, str] = field(default_factory=dict)   # guard name -> its lock slot
    cells: dict[str, float] = field(default_factory=dict)       # a matrix round: cell key -> its pin
    cell_slots: dict[str, str] = field(default_factory=dict)    # cell key -> its lock slot
    noise_spread: float | None = None   # schema 1: the largest pair deviation of the latest noise round
    noise_sd: float | None = None       # the node's pair noise (log SD), pooled over its noise rounds
    noise_df: int | None = None         # its degrees of freedom
    lock_path: str | None = None        # the lock the pins were read from
    # pins of the same name measured on another node (another fingerprint), not used:
    # {key, value, fingerprint, facts, differs}
    passed_over: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Pins":
        d = d or {}
        return cls(frontier=_finite(d.get("frontier") or 0.0, "frontier"),
                   frontier_slot=str(d.get("frontier_slot") or ""), anchor=_finite(d.get("anchor") or 0.0, "anchor"),
                   guards={str(k): _finite(v or 0.0, f"guards.{k}") for k, v in (d.get("guards") or {}).items()},
                   guard_slots={str(k): str(v) for k, v in (d.get("guard_slots") or {}).items()},
                   cells={str(k): _finite(v or 0.0, f"cells.{k}") for k, v in (d.get("cells") or {}).items()},
                   cell_slots={str(k): str(v) for k, v in (d.get("cell_slots") or {}).items()},
                   noise_spread=_opt_finite(d.get("noise_spread"), "noise_spread"),
                   noise_sd=_opt_finite(d.get("noise_sd"), "noise_sd"),
                   noise_df=_opt_int(d.get("noise_df")), lock_path=d.get("lock_path"),
                   passed_over=[dict(x) for x in d.get("passed_over") or [] if isinstance(x, Mapping)])


@dataclass
class ProfileRecord(_Freezable):
    """The profile as the round used it: its hash, and the rules and specs in force."""
    name: str = ""
    path: str = ""
    sha256: str = ""
    node: str = ""
    rules: GateRules = field(default_factory=GateRules)
    bench: dict[str, Any] = field(default_factory=dict)
    parity: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)    # a serving profile's [server]; else empty
    matrix: MatrixSpec | None = None                        # a matrix profile's cells (core.matrix)
    # [run] and [image] as the round used them: part of what it measured (core.identity); empty in
    # receipts sealed before they were recorded
    run: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] = field(default_factory=dict)

    @property
    def serves(self) -> bool:
        """Whether the round timed servers under load (the console's own client timed every token)."""
        return self.bench.get("mode") == "serve"

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "path": self.path, "sha256": self.sha256, "node": self.node,
               "rules": asdict(self.rules), "bench": plain(self.bench), "parity": plain(self.parity)}
        if self.matrix is not None:
            out["matrix"] = self.matrix.to_dict()
        out.update({k: plain(v) for k, v in (("run", self.run), ("image", self.image)) if v})  # absent before them
        return {**out, "server": plain(self.server)} if self.server else out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "ProfileRecord":
        d = d or {}
        if "rules" not in d:
            raise ReceiptError("the receipt records no gate rules (profile.rules)")
        return cls(name=str(d.get("name") or ""), path=str(d.get("path") or ""), sha256=str(d.get("sha256") or ""),
                   node=str(d.get("node") or ""), rules=_read("rules", _rules, d["rules"]),
                   bench=dict(d.get("bench") or {}), parity=dict(d.get("parity") or {}),
                   server=dict(d.get("server") or {}), matrix=MatrixSpec.from_dict(d.get("matrix")),
                   run=dict(d.get("run") or {}), image=dict(d.get("image") or {}))


def _rules(d: Mapping[str, Any]) -> GateRules:
    """The rules a receipt was decided under: a bar of NaN is one no figure can fail."""
    rules = rules_from_dict(dict(d))
    if bad := not_finite(rules):
        key, got = bad[0]
        raise ReceiptError(f"expected a finite number, got {got!r}"
                           + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""), key)
    return rules


@dataclass
class Apparatus(_Freezable):
    """The candidate changed paths the profile protects: refused before anything was built."""
    protected: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Apparatus | None":
        if d is None:
            return None
        return cls(protected=list(d.get("protected") or []), touched=list(d.get("touched") or []))


@dataclass
class PriorRound(_Freezable):
    """An earlier sealed round of the same candidate against the same main: its pairs pool."""
    receipt: str                        # its ledger id
    round_id: str
    log_ratios: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PriorRound":
        return cls(receipt=str(d.get("receipt") or ""), round_id=str(d.get("round_id") or ""),
                   log_ratios=[_finite(x, f"log_ratios[{i}]") for i, x in enumerate(d.get("log_ratios") or [])])


@dataclass
class Sequential(_Freezable):
    """The inputs of a round's stopping rule beyond its own reps, and how the round stopped."""
    prior: list[PriorRound] = field(default_factory=list)
    experiment: str = ""                # what makes rounds pool (core.reruns): both trees, the identity's parts
    preview: dict[str, Any] | None = None   # sequential.Preview, as planned from the node's noise
    stopped: str = ""                   # "decided" | "settle-budget" | "budget-pairs" | "budget-minutes" | "claims"
    minutes: float | None = None        # wall minutes the timed pairs took
    decided_at: int | None = None       # the pair after which the outcome was decided
    settle_pairs: int | None = None     # the budget for settling an accepted tier's band after that
    fresh: bool = False                 # --fresh: earlier rounds of the experiment were not pooled

    def to_dict(self) -> dict[str, Any]:
        d = {"prior": [p.to_dict() for p in self.prior], "experiment": self.experiment,
             "preview": plain(self.preview), "stopped": self.stopped, "minutes": self.minutes}
        if self.settle_pairs is not None:       # schema 3 on
            d.update(decided_at=self.decided_at, settle_pairs=self.settle_pairs, fresh=self.fresh)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Sequential | None":
        if d is None:
            return None
        return cls(prior=[_read(f"prior[{i}]", PriorRound.from_dict, p) for i, p in enumerate(d.get("prior") or [])],
                   experiment=str(d.get("experiment") or ""), preview=d.get("preview"),
                   stopped=str(d.get("stopped") or ""), minutes=_opt_float(d.get("minutes")),
                   decided_at=d.get("decided_at"), settle_pairs=d.get("settle_pairs"), fresh=bool(d.get("fresh")))


# --- the figures the gate decided on --------------------------------------------------------

@dataclass(frozen=True)
class Figures:
    """One build's timed reps that count, summarised (``stats.summary``; ``counting.summarize``).
    Values stay as the JSON held them, so a sealed receipt writes back the same bytes."""
    n: int = 0
    median: float | None = None
    min: float | None = None
    max: float | None = None
    spread: float | None = None
    mad_spread: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Figures":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


# --- the receipt -----------------------------------------------------------------------------

@dataclass
class Receipt(_Freezable):
    """Everything one round measured, as raw numbers: the gate's only input.

    The round fills it in; once sealed (read from a document with a seal, or frozen by the
    round as it seals it) it is frozen: the ledger vouches for these figures, so a change is a
    new document read again, never an edit (``FrozenReceiptError``)."""
    round_id: str
    kind: str = "round"                 # a sealed kind's name (console.core.records.kinds)
    schema: str = SCHEMA
    started_at: str = ""
    ended_at: str | None = None
    status: str = "complete"            # "complete" | "infra"
    diagnosis: str | None = None        # why an infra round was a node fault
    profile: ProfileRecord = field(default_factory=ProfileRecord)
    runtime: RuntimeFacts = field(default_factory=RuntimeFacts)
    host: HostFacts = field(default_factory=HostFacts)
    preflight: dict[str, Any] = field(default_factory=dict)
    apparatus: Apparatus | None = None
    inputs: Inputs | None = None
    bundle: dict[str, Any] | None = None    # a round from a bundle: {path, manifest_sha256, …} (console bundle)
    builds: dict[str, Build] = field(default_factory=dict)
    lock: Pins = field(default_factory=Pins)
    parity: ParityRecord = field(default_factory=ParityRecord)
    accuracy: AccuracyRecord | None = None  # profiles with [accuracy]: the task accuracy stage
    reps: list[Rep] = field(default_factory=list)
    summary: dict[str, Figures] | None = None   # per-build figures of the reps that count (counting.summarize)
    verdict: VerdictRecord | None = None    # informational copy; readers re-derive it
    noise: NoiseReport | None = None        # noise receipts: the gate's noise report
    sequential: Sequential | None = None    # schema 2 rounds: what the stopping rule read besides the reps
    sizing: Sizing | None = None            # bench.min_seconds: how the timed runs were sized (core.sizing)
    # the sections the console handed over (core.records.section): each seed revealed after both builds ran it
    sections: list[SectionDraw] | None = None
    seal: Seal | None = None                # added by the ledger when sealed (console.core.provenance.ledger)

    def __post_init__(self) -> None:
        # the node's and the runtime's facts as a round or a test gathers them: read here, once
        if not isinstance(self.host, HostFacts):
            self.host = HostFacts.from_dict(self.host)
        if not isinstance(self.runtime, RuntimeFacts):
            self.runtime = RuntimeFacts.from_dict(self.runtime)

    @property
    def rules_version(self) -> int:
        """The decision rules it was sealed under: its schema's number (1 fixed reps, 2 sequential,
        3 three-way). The gate picks what each version decides differently by it, once."""
        return SCHEMAS.index(self.schema) + 1

    @property
    def rules(self) -> GateRules:
        return self.profile.rules

    @property
    def sealed_at(self) -> str | None:
        """When the ledger sealed it (None before sealing, or in a seal without the time)."""
        return self.seal.sealed_at if self.seal is not None else None

    def sealed_verdict(self) -> VerdictRecord:
        """The verdict it was sealed with: every sealed round has one."""
        if self.verdict is None:
            raise ReceiptError(f"receipt {self.round_id} was sealed without a verdict", "verdict")
        return self.verdict

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in _OPTIONAL_KEYS:
                continue        # absent, as in the receipts that predate the key
            if f.name in ("builds", "summary"):
                v = {b: x.to_dict() for b, x in v.items()}
            elif f.name in ("reps", "sections"):
                v = [r.to_dict() for r in v]
            elif hasattr(v, "to_dict"):
                v = v.to_dict()
            else:
                v = plain(v)       # the plain JSON parts, read-only in a sealed receipt
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Receipt":
        if not isinstance(d, Mapping):
            raise ReceiptError(f"expected a receipt object, got {type(d).__name__}")
        schema = d.get("schema")
        if schema not in SCHEMAS:
            raise ReceiptError(f"unknown receipt schema {schema!r}; this version reads {', '.join(SCHEMAS)}")
        kind = d.get("kind", "round")
        if kind not in sealed_kinds():
            raise ReceiptError(f"unknown receipt kind {kind!r}; expected one of {', '.join(sealed_kinds())}")
        round_id = d.get("round_id") or ""
        if round_id and not (isinstance(round_id, str) and safe_name(round_id)):
            # it names files (a journal, --save-result's exports): a path in it would write elsewhere
            raise ReceiptError(f"{round_id!r} is not a round id (letters, digits, '.', '_', '-'; "
                               "no path)", "round_id")
        try:
            r = cls(round_id=round_id, kind=kind, schema=schema,
                    started_at=str(d.get("started_at") or ""), ended_at=d.get("ended_at"),
                    status=str(d.get("status") or "complete"), diagnosis=d.get("diagnosis"),
                    profile=_read("profile", ProfileRecord.from_dict, d.get("profile")),
                    runtime=_read("runtime", RuntimeFacts.from_dict, d.get("runtime") or {}),
                    host=_read("host", HostFacts.from_dict, d.get("host") or {}), preflight=dict(d.get("preflight") or {}),
                    apparatus=Apparatus.from_dict(d.get("apparatus")), inputs=Inputs.from_dict(d.get("inputs")),
                    bundle=d.get("bundle"),
                    builds={b: _read(f"builds.{b}", Build.from_dict, x) for b, x in (d.get("builds") or {}).items()},
                    lock=_read("lock", Pins.from_dict, d.get("lock")),
                    parity=_read("parity", ParityRecord.from_dict, d.get("parity")),
                    accuracy=_read("accuracy", AccuracyRecord.from_dict, d.get("accuracy")),
                    reps=[_read(f"reps[{i}]", Rep.from_dict, r) for i, r in enumerate(d.get("reps") or [])],
                    summary=_read("summary", _summary, d.get("summary")),
                    verdict=_read("verdict", _optional(VerdictRecord.from_dict), d.get("verdict")),
                    noise=_read("noise", _optional(NoiseReport.from_dict), d.get("noise")),
                    sequential=_read("sequential", Sequential.from_dict, d.get("sequential")),
                    sizing=_read("sizing", _optional(Sizing.from_dict), d.get("sizing")),
                    sections=_read("sections", _sections, d.get("sections")),
                    seal=_read("seal", _optional(Seal.from_dict), d.get("seal")))
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as e:
            if isinstance(e, ReceiptError):
                raise
            raise ReceiptError(f"not a readable receipt: {type(e).__name__}: {e}") from None
        return r.freeze() if r.seal is not None else r


T = TypeVar("T")


def _sections(d: list | None) -> list[SectionDraw] | None:
    return None if d is None else [_read(f"[{i}]", SectionDraw.from_dict, x) for i, x in enumerate(d)]


def _summary(d: Mapping[str, Any] | None) -> dict[str, Figures] | None:
    return None if d is None else {str(b): _read(b, Figures.from_dict, x) for b, x in d.items()}


def _optional(read: Callable[[Any], T]) -> Callable[[Any], T | None]:
    return lambda d: None if d is None else read(d)


def _read(where: str, read: Callable[[Any], T], value: Any) -> T:
    """One part of a receipt read, any failure refused with the place it happened."""
    try:
        return read(value)
    except ReceiptError as e:
        raise e.under(where) from None
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as e:
        raise ReceiptError(f"not a readable receipt: {type(e).__name__}: {e}", where) from None


# Keys written only when they hold something (they were added after schema 1 first shipped,
# or belong to one kind of round only).
_OPTIONAL_KEYS = ("ended_at", "diagnosis", "apparatus", "inputs", "bundle", "accuracy", "summary", "verdict", "noise",
                  "sequential", "sizing", "sections", "seal")

