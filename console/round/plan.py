"""What a round will do, decided before anything runs: its config, its pinned inputs, its schedule."""
from __future__ import annotations

import datetime as _dt
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core import stats
from ..errors import UsageError
from ..profile import Profile
from ..runtime.base import INPUTS_ROOT, MODEL_ROOT, OUT_ROOT
from ..engine.sources import sha256_path as sha256_file
from .kinds import Compare, Kind, Matrix, named
from .resume import Resume

DOC_NAME = "document.tok"


def new_round_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)


@dataclass
class RoundConfig:
    profile: Profile
    main: Any                       # a sources.parse_spec() result
    candidate: Any
    out_dir: Path
    runtime: str = "docker"         # "docker" | "local"
    kind: Kind = field(default_factory=Compare)   # round.kinds: a name ("round", "noise") is read as its kind
    reps: int | None = None         # timed pairs at most (rounds stop earlier once decided)
    lock_path: Path | None = None
    resume: Resume | None = None    # an interrupted round read back from its journal
    telemetry: Any = None           # a console.telemetry Telemetry; opened when None
    keep_work: bool = False
    fresh: bool = False             # pool nothing with earlier rounds of the same experiment
    rebuild: bool = False           # build both again even where an image of the same build key exists
    bundle: Any = None              # an engine.bundle.Bundle, checked: sdists come from it alone (no pip)

    def __post_init__(self) -> None:
        if isinstance(self.kind, str):
            self.kind = named(self.kind)
        if isinstance(self.kind, Compare) and self.profile.matrix is not None:
            self.kind = Matrix()        # a round of a matrix profile measures and decides every cell


@dataclass(frozen=True)
class Item:
    """One scheduled run of the bench."""
    build: str
    phase: str
    index: int
    position: int
    depth: int
    tokens: int
    context: str
    metric: str = ""                # "" = the profile's bench.metric
    repeat: int = 1                 # timed sections in the one run (bench.min_seconds, core.sizing)
    args: tuple[tuple[str, str], ...] = ()  # a matrix cell's other placeholders (threads, fill)

    @property
    def label(self) -> str:
        return f"{self.build}/{self.phase}/{self.index}"


def _items(p: Profile, phase: str, order: list[str], start: int, depth: int, tokens: int,
           metric: str = "", first: int = 0, repeat: int = 1) -> list[Item]:
    """Items for ``order`` (one build name per run), the k-th of each build numbered k."""
    ctx = "seek" if p.bench.shortcut == "seek" else "doc"
    counts: dict[str, int] = {}
    out = []
    for b in order:
        i = counts.get(b, first)
        counts[b] = i + 1
        out.append(Item(b, phase, i, start + len(out), depth, tokens, ctx, metric or p.bench.metric, repeat))
    return out


def schedule_head(p: Profile) -> list[Item]:
    """Warm-ups, then the short differential runs, interleaved (a serving round has none: its
    client timed every token, so there is no engine claim for a wall-clock differential to check)."""
    # with bench.min_seconds the warm-ups run one full timed section: they size the timed runs
    warm_tokens = p.bench.tokens if p.bench.min_seconds > 0 else p.bench.short_tokens
    warm = _items(p, "warmup", ["main", "candidate"] * p.bench.warmup, 0, p.bench.depth, warm_tokens)
    if p.serving:
        return warm
    return warm + _items(p, "short", stats.interleaved_order(p.bench.short_reps), len(warm), p.bench.depth,
                         p.bench.short_tokens)


def timed_pair(p: Profile, k: int, start: int, repeat: int = 1) -> list[Item]:
    """The k-th pair of timed reps: main first on even pairs, the candidate first on odd
    ones (A B B A …), so linear drift cancels over pairs."""
    order = ["main", "candidate"] if k % 2 == 0 else ["candidate", "main"]
    return _items(p, "timed", order, start, p.bench.depth, p.bench.tokens, first=k, repeat=repeat)


def cell_pair(p: Profile, cells: list[Any], k: int, start: int, repeat: int = 1) -> list[Item]:
    """The k-th pair of a matrix round over ``cells`` (core.matrix.Cell, in the order they run this
    pair): each cell's two reps adjacent, main first on even pairs (A B, then B A), so each cell's
    own pairs cancel linear drift as a one-cell round's do."""
    order = ["main", "candidate"] if k % 2 == 0 else ["candidate", "main"]
    ctx = "seek" if p.bench.shortcut == "seek" else "doc"
    return [Item(b, cell.phase, k, start + 2 * i + j, cell.depth, cell.tokens, ctx, cell.metric, repeat, cell.args)
            for i, cell in enumerate(cells) for j, b in enumerate(order)]


def schedule_tail(p: Profile, start: int) -> list[Item]:
    """Guard reps, after the timed pairs."""
    items: list[Item] = []
    for g in p.gate.guards:
        items += _items(p, f"guard:{g.name}", stats.interleaved_order(g.reps), start + len(items), g.depth,
                        g.tokens, p.metric_of(g))
    return items


def make_schedule(p: Profile, pairs: int, repeat: int = 1) -> list[Item]:
    """The whole schedule for a fixed number of timed pairs (a noise round's; a round's
    timed pairs run until decided, between ``schedule_head`` and ``schedule_tail``)."""
    items = schedule_head(p)
    for k in range(pairs):
        items += timed_pair(p, k, len(items), repeat)
    return items + schedule_tail(p, len(items))


def plan_record(cfg: RoundConfig, round_id: str, runtime: str, started_at: str) -> dict[str, Any]:
    """The plan a round starts with: journaled first, so ``console resume`` can rebuild the round."""
    p = cfg.profile
    # a round from a bundle says which, so that a resumed one reads the same bundle
    bundle = {"bundle": str(cfg.bundle.root)} if cfg.bundle is not None else {}
    return {"round_id": round_id, "kind": cfg.kind.name, "reps": pair_budget(cfg), "depth": p.bench.depth,
            "sequential": cfg.kind.decides,
            # for progress: reps before and after the timed pairs, and the timed part's minutes budget
            "head_reps": len(schedule_head(p)), "tail_reps": len(schedule_tail(p, 0)),
            "max_minutes": p.gate.max_minutes,
            "tokens": p.bench.tokens, "short_tokens": p.bench.short_tokens,
            "parity_depths": list(p.parity.depths), "runtime": runtime,
            "parity": {"depths": list(p.parity.depths), "top1_min": p.gate.top1_min, "kl_max": p.gate.kl_max,
                       "scored_path_depth": p.parity.scored_path_depth},
            "main": spec_text(cfg.main), "candidate": spec_text(cfg.candidate),
            "out_dir": str(cfg.out_dir), "profile_path": p.path, "started_at": started_at,
            "lock_path": str(cfg.lock_path) if cfg.lock_path else None, "fresh": cfg.fresh,
            "rebuild": cfg.rebuild, **bundle}


def pair_budget(cfg: RoundConfig) -> int:
    """Timed pairs at most: ``--reps``, else the kind's budget (a round's gate.max_pairs; a noise round
    runs bench.reps, all of them)."""
    return cfg.reps or cfg.kind.pair_budget(cfg.profile)


def fill(template: tuple[str, ...], p: Profile | None = None, **values: str) -> list[str]:
    """A command with its placeholders filled; with ``p``, also those every command may use."""
    if p is not None:
        values = {"threads": str(p.run.threads), "model": MODEL_ROOT, "fill": p.bench.fill, **values}
    return [part.format(**values) for part in template]


def logits_argv(template: tuple[str, ...], p: Profile) -> list[str]:
    """A logits command (a build's, or the reference's) over the round's document."""
    return fill(template, p, doc=f"{INPUTS_ROOT}/{DOC_NAME}", out=OUT_ROOT,
                depths=",".join(str(d) for d in p.parity.depths), rows=str(p.parity.rows))


def spec_text(spec: Any) -> Any:
    """A build's spec as the plan records it; ``resume.spec_from_plan`` reads it back."""
    if isinstance(spec, tuple):
        return {"patch": spec[1]}
    return {k: v for k, v in asdict(spec).items() if v}


def check_pins(p: Profile) -> None:
    """The document and the reference must be the pinned bytes, or nothing is comparable."""
    if not Path(p.parity.document).is_file():
        raise UsageError(f"{p.path}: key 'parity.document': {p.parity.document} does not exist",
                         "Make it from parity.text with `console reference capture --profile PROFILE`."
                         if p.parity.text else "Restore the pinned document.")
    doc = sha256_file(Path(p.parity.document))
    if doc != p.parity.document_sha256:
        raise UsageError(f"{p.path}: key 'parity.document_sha256': the document {p.parity.document} has sha256 "
                         f"{doc}, not the pinned {p.parity.document_sha256}",
                         "Restore the pinned document, or re-pin it deliberately and recapture the reference.")
    bad = document_problem(Path(p.parity.document).read_bytes(), p.parity.vocab)
    if bad:
        raise UsageError(f"{p.path}: key 'parity.document': {p.parity.document}: {bad}",
                         "Tokenise the document with the model's own tokenizer (parity.tokenize).")
    ref = Path(p.parity.reference)
    if not ref.exists():
        raise UsageError(f"{p.path}: key 'parity.reference': no reference logits at {ref}",
                         "Capture them once with `console reference capture --profile PROFILE`.")
    got = sha256_file(ref)
    if got != p.parity.reference_sha256:
        raise UsageError(f"{p.path}: key 'parity.reference_sha256': {ref} has sha256 {got}, "
                         f"not the pinned {p.parity.reference_sha256}",
                         "Restore the pinned reference, or recapture it and update the pin deliberately.")



def document_problem(data: bytes, vocab: int) -> str | None:
    """Why a token-id document cannot be read by a model of ``vocab`` tokens, or None."""
    for i, word in enumerate(data.split()):
        if not word.isdigit():
            return f"item {i} ({word[:20]!r}) is not a token id"
        if int(word) >= vocab:
            return f"token {int(word)} at index {i} is outside the model's vocabulary of {vocab} (parity.vocab)"
    return None

