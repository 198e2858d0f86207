"""What a round will do, decided before anything runs: its config, its pinned inputs, its schedule."""
from __future__ import annotations

import datetime as _dt
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..profile import Profile
from ..engine.sources import sha256_path as sha256_file
from .kinds import Compare, Kind, Matrix, named
from .resume import Resume
from .schedule import document_problem, schedule_head, schedule_tail

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


