"""A bisection's record on disk: ``OUT/bisect/<id>.json``, rewritten whole (atomically) after every
step, so an interrupted bisection keeps the steps it finished and a reader never sees half a file.
Its rounds are sealed receipts chained in the same results directory's ledger."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..core.provenance.bisection import RESULTS, Step
from ..core.records.untrusted import safe_name
from ..errors import UsageError
from ..results import store

SCHEMA = "bench-console/bisect/1"


@dataclass
class BisectRecord:
    bisect_id: str
    profile: str
    items: list[dict[str, Any]]             # {label, source}: good end first, bad end last
    error_rate: float                       # the whole bisection's target
    step_rate: float                        # each decided step's share of it
    planned_steps: int
    started_at: str
    runtime: str = "docker"
    metric: str = ""
    profile_sha256: str = ""
    direction: str | None = None            # "slower" | "faster", once the endpoints decided it
    step_min_gain: float | None = None      # what a probe must rule out to be like good (core.bisection)
    steps: list[Step] = field(default_factory=list)
    result: str | None = None               # core.bisection.RESULTS, once finished
    first_bad: int | None = None
    suspects: list[int] = field(default_factory=list)
    last_good: int | None = None
    sentence: str = ""
    ended_at: str | None = None

    @property
    def exit_code(self) -> int:
        return RESULTS.get(self.result or "interrupted", 130)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "steps"}
        return {"schema": SCHEMA, **d, "steps": [s.to_dict() for s in self.steps], "exit_code": self.exit_code}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "the record") -> "BisectRecord":
        if not isinstance(d, Mapping) or d.get("schema") != SCHEMA:
            raise UsageError(f"{where} is not a bisection record ({SCHEMA})", "Give OUT/bisect/<id>.json.")
        if not (isinstance(d.get("bisect_id"), str) and safe_name(d["bisect_id"])):
            raise UsageError(f"{where}: bisect_id {d.get('bisect_id')!r} is not a name", "Give a record the console wrote.")
        names = set(cls.__dataclass_fields__)
        try:
            return cls(**{k: v for k, v in d.items() if k in names and k != "steps"},
                       steps=[Step.from_dict(s) for s in d.get("steps") or []])
        except (TypeError, ValueError, KeyError) as e:
            raise UsageError(f"{where}: not a bisection record this version reads ({e})",
                             "Give a record the console wrote.") from None

    def path(self, out: Path) -> Path:
        return out / "bisect" / f"{self.bisect_id}.json"

    def write(self, out: Path) -> Path:
        p = self.path(out)
        store.atomic_write(p, json.dumps(self.to_dict(), indent=1, allow_nan=False).encode() + b"\n")
        return p


def read(path: Path) -> BisectRecord:
    _, doc = store.read_json(path, "a bisection record", "Give OUT/bisect/<id>.json.")
    return BisectRecord.from_dict(doc, str(path))
