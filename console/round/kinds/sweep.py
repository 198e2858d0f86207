"""A sweep: both builds' servers over a list of load levels, for the throughput–latency curve.

The same stages as a round up to the server check (sources, preflight, builds, parity through the
harness and through each server); then, at each level, pairs of blocks alternating between the two
servers (A B B A), and a sweep document with each level's figures and their intervals
(``core.sweep``) instead of a verdict. A sweep measures; it decides nothing and seals nothing into
the ledger (a round at one load level does that). Its HTML page is an export of the document.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import events as ev
from ...clock import utc_now
from ...core.decisions import parity_grade, health
from ...core.records.receipt import Receipt, Rep
from ...core.decisions.sweep import Level, LevelFigures, level_figures
from ...errors import ExitCode
from ...profile import Profile
from ...results.store import atomic_write
from ...serving import metrics
from ...serving.client import Block, RequestRecord
from ..schedule import Item
from ..reps import Bench, run_until_trusted
from ...core.records import kinds
from .base import Kind, Round, TimedOutputs


@dataclass(frozen=True)
class Sweep(Kind):
    record = kinds.SWEEP
    resumable = False           # run it again: its builds are reused by their keys
    levels: tuple[Level, ...] = ()
    blocks: int = 2
    figures: list[LevelFigures] = field(default_factory=list, compare=False)   # filled as it runs

    def plan(self, plan: dict[str, Any], p: Profile) -> dict[str, Any]:
        # the progress viewers read: every level's warm-up pair and blocks, no minutes budget
        return {**plan, "reps": len(self.levels) * (self.blocks + 1), "head_reps": 0, "tail_reps": 0,
                "sequential": False, "levels": [lv.name for lv in self.levels], "blocks": self.blocks}

    def slots(self, p: Profile) -> int:
        # one server start for the whole sweep: it must hold the largest level
        return max(lv.concurrency for lv in self.levels)

    def timed(self, rnd: Round, b: Bench, receipt: Receipt) -> TimedOutputs:
        budget = health.RetryBudget.from_rules(rnd.p.health)
        position = 0
        for level in self.levels:
            rnd.emit(ev.PhaseStarted(phase=f"level {level.name}"))
            rnd.servers.load = level
            reps: dict[tuple[str, int], Rep] = {}
            position = self._level(rnd, b, receipt, level, budget, position, reps)
            pairs = [((reps[("main", k)].reported or {}), (reps[("candidate", k)].reported or {}))
                     for k in range(self.blocks) if ("main", k) in reps and ("candidate", k) in reps]
            slo = dict(rnd.p.server.slo or {})
            fig = level_figures(level, [(_with_goodput(m, slo), _with_goodput(c, slo)) for m, c in pairs])
            self.figures.append(fig)
            rnd.emit(ev.SweepLevel(figures=fig.to_dict(), sentence=level_sentence(fig)))
        return {}

    def _level(self, rnd: Round, b: Bench, receipt: Receipt, level: Level, budget, position: int,
               reps: dict[tuple[str, int], Rep]) -> int:
        """One warm-up pair at the level, then its blocks, A B B A; returns the next position."""
        def record(rep: Rep, _dir: Path) -> None:
            receipt.reps.append(rep)
            if rep.status == "ok":
                reps[(rep.build, rep.index)] = rep

        for k in range(-1, self.blocks):
            order = ["main", "candidate"] if k % 2 == 0 else ["candidate", "main"]
            for build in order:
                rnd.check_abort()
                phase = f"sweep:{level.name}" if k >= 0 else f"sweep-warmup:{level.name}"
                item = Item(build, phase, max(k, 0), position, 0, 0, "serve", rnd.p.bench.metric)
                position += 1
                run_until_trusted(b, item, 0, budget, rnd.emit, rnd.notice,
                                  record if k >= 0 else lambda rep, _d: receipt.reps.append(rep))
        return position

    def finish(self, rnd: Round, receipt: Receipt) -> None:
        """The sweep document (no verdict, nothing sealed): each level's figures, every block."""
        receipt.ended_at = utc_now()
        reasons = parity_grade.grade_parity(receipt, rnd.p.gate).reasons
        doc = {"kind": self.name, "round_id": rnd.round_id, "started_at": receipt.started_at,
               "ended_at": receipt.ended_at, "levels": [f.to_dict() for f in self.figures],
               "refused": [r.message for r in reasons], "slo_ms": dict(rnd.p.server.slo or {}),
               "server_slots": self.slots(rnd.p), "receipt": receipt.to_dict()}
        path = rnd.cfg.out_dir / "sweeps" / f"{rnd.round_id}.json"
        atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        rnd.receipt, rnd.receipt_path = doc, path
        rnd.notice("info", "sweep-written", f"sweep written to {path}")
        rnd.exit_code = ExitCode.REJECTED if reasons else ExitCode.OK

    def status(self, receipt: Receipt) -> tuple[str, str]:
        return "complete", ""


def _with_goodput(fig: dict, slo: dict) -> dict:
    """A block's goodput under the profile's targets, from its requests' own timings."""
    if not slo:
        return fig
    blk = Block([RequestRecord.from_dict(q) for q in fig.get("requests", [])], float(fig.get("duration", 0.0)), "", 0)
    return {**fig, "goodput": metrics.goodput(blk, slo)}


def level_sentence(fig: LevelFigures) -> str:
    """One line per level: each build's throughput and latencies with their intervals, and the gain."""
    def est(e: dict, unit: str, fmt: str = ".1f") -> str:
        if e.get("mean") is None:
            return "-"
        iv = f" [{e['low']:{fmt}}, {e['high']:{fmt}}]" if e.get("low") is not None else ""
        return f"{e['mean']:{fmt}}{iv} {unit}"
    d = fig.to_dict()
    parts = []
    for build, f in d["builds"].items():
        parts.append(f"{build} {est(f['output_throughput'], 'tok/s')}, TTFT p50 {est(f['median_ttft_ms'], 'ms', '.0f')}, "
                     f"TPOT p50 {est(f['median_tpot_ms'], 'ms', '.0f')}")
    g = d["gain"]
    gain = (f"; candidate {g['mean']:+.1%}" + (f" [{g['low']:+.1%}, {g['high']:+.1%}]" if g.get("low") is not None
                                                else "")) if g else ""
    return f"{fig.level.said}: " + "; ".join(parts) + gain
