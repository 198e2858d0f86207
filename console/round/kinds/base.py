"""What a kind of round owns: which builds it runs, what its timed stage does, what it decides and
what it seals, and what its plan tells the live console. The runner calls these hooks in the same
order for every kind; it never asks which kind it runs."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ... import events as ev
from ...core.decisions import parity_grade
from ...core.records.kinds import KindRecord
from ...core.records.receipt import Receipt, Rep
from ...core.records.verdict import Outcome, Verdict
from ...profile import Profile

TimedOutputs = dict[str, list[tuple[Rep, Path]]]
Bench = Any     # round.reps.Bench: the builds and what runs them (typed there; plan imports the kinds)


class Round(Protocol):
    """What a kind's hooks may use of the round that runs them (round.runner.Round)."""
    p: Profile
    cfg: Any                        # round.plan.RoundConfig
    kind: "Kind"
    reference_is_main: bool         # the reference was captured from main's source (its build is main's)
    round_id: str
    servers: Any                    # round.serving.servers.Servers, in a serving round
    receipt: dict | None
    receipt_path: Path | None
    exit_code: int

    def emit(self, e: ev.Event) -> None: ...
    def notice(self, level: str, code: str, message: str) -> None: ...
    def check_abort(self) -> None: ...
    def speed_stage(self) -> Any: ...       # round.speed.Speed
    def seal_verdict(self, receipt: Receipt) -> None: ...


@dataclass(frozen=True)
class Kind:
    """A kind of round's run-time hooks. What the kind means (what it compares, whether it decides,
    pools, moves pins) is its core record (``console.core.records.kinds``), read here, never restated.
    The defaults are those of a round that compares two builds and seals a verdict; each kind's module
    overrides what differs."""
    record: ClassVar[KindRecord]
    resumable: ClassVar[bool] = True    # an interrupted one can be resumed from its journal

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def compares(self) -> bool:
        return self.record.compares

    @property
    def decides(self) -> bool:
        return self.record.decides

    @property
    def looks_back(self) -> bool:
        return self.record.looks_back

    @property
    def per_cell(self) -> bool:
        return self.record.per_cell

    @property
    def builds(self) -> list[str]:
        return list(self.record.builds)

    def pair_budget(self, p: Profile) -> int:
        """Timed pairs at most when --reps does not say."""
        return p.gate.max_pairs

    def plan(self, plan: dict[str, Any], p: Profile) -> dict[str, Any]:
        """The plan journaled first and shown by every viewer, as this kind runs it."""
        return plan

    def slots(self, p: Profile) -> int:
        """Requests each server is started to hold at once (serving profiles)."""
        return p.server.concurrency

    def times(self, receipt: Receipt, p: Profile) -> bool:
        """Whether the timed stage runs: parity first, so a failed candidate earns no speed figure."""
        return parity_grade.parity_passes(receipt, p.gate)

    def timed(self, rnd: Round, b: Bench, receipt: Receipt) -> TimedOutputs:
        """The timed stage; returns the timed runs' outputs by build (for the timed path's check)."""
        return rnd.speed_stage().run(b, receipt)

    def on_verdict(self, receipt: Receipt, verdict: Verdict) -> None:
        """What this kind keeps of the gate's verdict besides the verdict itself."""

    def finish(self, rnd: Round, receipt: Receipt) -> None:
        """The verdict (the gate's alone), then seal, the lock update and the exports."""
        rnd.seal_verdict(receipt)

    def status(self, receipt: Receipt) -> tuple[str, str]:
        """How the round ended once finished."""
        return ("infra" if receipt.verdict.outcome is Outcome.INFRA else "complete"), ""
