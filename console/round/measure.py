"""How a round times its builds: runs of the bench command (the harness), or blocks of requests
through each build's server. ``measure_of`` is the one place a round asks whether its profile
serves (``Profile.serving``); the runner asks the measure, never the profile, what to check before
anything is built, before the timed stage and after it."""
from __future__ import annotations

from .. import events as ev
from ..core.records.receipt import Receipt
from ..core.records.served import WorkloadDraw
from ..engine.adapters import ADAPTERS
from ..profile import Profile
from . import parity as checks
from .serving.blocks import run_block
from .serving.check import check as check_servers
from .serving.draw import check_workload
from .serving.grade import grade as grade_served
from .serving.servers import Servers
from .kinds.base import Round, TimedOutputs
from .reps import Bench


class Harness:
    """The bench command, run once per rep; its logits (where it writes them) are graded too."""

    def __init__(self, p: Profile):
        self.writes_logits = ADAPTERS[p.bench.adapter].writes_logits

    def unchecked(self, p: Profile) -> str | None:
        """Said once when what the timed runs compute cannot be compared with the reference."""
        if self.writes_logits:
            return None
        return (f"the {p.bench.adapter} adapter's bench writes no logits: what the timed runs compute is not "
                "compared with the reference")

    def check_inputs(self, p: Profile) -> None:
        """Nothing beyond the bench's own inputs, checked with every profile's."""

    def before_timed(self, rnd: Round, b: Bench, receipt: Receipt) -> None:
        """Nothing to start: each rep runs the bench command afresh."""

    def after_timed(self, rnd: Round, b: Bench, receipt: Receipt, outputs: TimedOutputs) -> None:
        """The timed runs' own logits against the reference (the timed path)."""
        if self.writes_logits:
            receipt.parity.timed_path = checks.timed_path(b, outputs, rnd.notice)


class Served:
    """Each build's server, started and checked against the reference's tokens before anything is
    timed; the timed blocks go through the same servers; what they served is graded afterwards."""
    writes_logits = False       # its bench is the server: checked through it, not through logits

    def __init__(self, p: Profile):
        self.draw: WorkloadDraw | None = None      # the timed workload's seed, drawn when the blocks begin

    def unchecked(self, p: Profile) -> str | None:
        return None

    def check_inputs(self, p: Profile) -> None:
        """A workload that cannot be drawn is refused before anything is built (``draw``)."""
        check_workload(p)

    def before_timed(self, rnd: Round, b: Bench, receipt: Receipt) -> None:
        rnd.emit(ev.PhaseStarted(phase="server"))
        servers = rnd.servers = Servers(b, rnd.notice, slots=rnd.kind.slots(rnd.p))
        check = receipt.parity.server = check_servers(b, servers, rnd.kind.builds, rnd.emit, rnd.check_abort,
                                                      rnd.reference_is_main)
        if not rnd.kind.compares:
            check.candidate = check.main
        # both servers are up: only now is the timed workload drawn, and only its hash is said
        self.draw = servers.draw()
        rnd.emit(ev.WorkloadCommitted(commitment=self.draw.commitment, drawn=self.draw.drawn,
                                      space_log10=self.draw.space_log10))
        b.blocks = lambda item, attempt, out_dir: run_block(b, servers, item, attempt, out_dir)

    def after_timed(self, rnd: Round, b: Bench, receipt: Receipt, outputs: TimedOutputs) -> None:
        """After the timed blocks, outside the clock, with every server stopped: the workload's seed
        revealed, and the served tokens of both builds teacher-forced through the reference build
        (round.serving.grade)."""
        if rnd.servers is not None:
            rnd.servers.stop_all()
        if receipt.parity.server is not None and self.draw is not None:
            receipt.parity.server.workload = self.draw
        grade_served(b, receipt, rnd.emit, rnd.reference_is_main)


Measure = Harness | Served


def measure_of(p: Profile) -> Measure:
    """The one place that asks whether a profile serves."""
    return Served(p) if p.serving else Harness(p)
