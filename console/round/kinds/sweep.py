"""A sweep: both builds' servers over a list of load levels, for the throughput–latency curve, or
over the levels a capacity search picks as it goes.

The same stages as a round up to the server check (sources, preflight, builds, parity through the
harness and through each server); then, at each level, pairs of blocks alternating between the two
servers (A B B A), and a sweep document with each level's figures and their intervals
(``core.sweep``) instead of a verdict. With a capacity search (``core.decisions.capacity``) each level
is also called against the profile's SLO targets for both builds, the stepper picks the next level,
and the document gains each build's capacity and the change, decided at the search's stated rate.
A sweep seals nothing into the ledger (a round at one load level does that). Its HTML page is an
export of the document.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import events as ev
from ...clock import utc_now
from ...core.decisions import capacity as cap, parity_grade, health
from ...core.decisions.counting import SWEEP_PHASE
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

Pairs = list[tuple[dict, dict]]


@dataclass(frozen=True)
class Sweep(Kind):
    record = kinds.SWEEP
    resumable = False           # run it again: its builds are reused by their keys
    levels: tuple[Level, ...] = ()      # a capacity search's: its two ends (the servers hold the larger)
    blocks: int = 2
    capacity: cap.Search | None = None  # levels picked by the search instead of the list
    figures: list[LevelFigures] = field(default_factory=list, compare=False)   # filled as it runs
    found: list[cap.CapacityResult] = field(default_factory=list, compare=False)

    def plan(self, plan: dict[str, Any], p: Profile) -> dict[str, Any]:
        # the progress viewers read: every level's warm-up pair and blocks (a search's most), no minutes budget
        levels = self.capacity.budget if self.capacity else len(self.levels)
        out = {**plan, "reps": levels * (self.blocks + 1), "head_reps": 0, "tail_reps": 0,
               "sequential": False, "levels": [lv.name for lv in self.levels], "blocks": self.blocks}
        if self.capacity:
            out["capacity"] = {"low": self.capacity.low, "high": self.capacity.high, "budget": self.capacity.budget,
                               "axis": "concurrency" if self.capacity.whole else "rate"}
        return out

    def slots(self, p: Profile) -> int:
        # one server start for the whole sweep: it must hold the largest level
        return max(lv.concurrency for lv in self.levels)

    def timed(self, rnd: Round, b: Bench, receipt: Receipt) -> TimedOutputs:
        budget = health.RetryBudget.from_rules(rnd.p.health)
        position = [0]
        if self.capacity:
            self._search(rnd, b, receipt, budget, position)
            return {}
        for level in self.levels:
            fig, _ = self._measure(rnd, b, receipt, level, budget, position)
            rnd.emit(ev.SweepLevel(figures=fig.to_dict(), sentence=level_sentence(fig)))
        return {}

    def _measure(self, rnd: Round, b: Bench, receipt: Receipt, level: Level, budget,
                 position: list[int]) -> tuple[LevelFigures, Pairs]:
        """One level's blocks: its figures (kept for the document) and its pairs, goodput added."""
        rnd.emit(ev.PhaseStarted(phase=f"level {level.name}"))
        rnd.servers.load = level
        reps: dict[tuple[str, int], Rep] = {}
        position[0] = self._level(rnd, b, receipt, level, budget, position[0], reps)
        slo = dict(rnd.p.server.slo or {})
        pairs = [(with_goodput(reps[("main", k)].reported or {}, slo),
                  with_goodput(reps[("candidate", k)].reported or {}, slo))
                 for k in range(self.blocks) if ("main", k) in reps and ("candidate", k) in reps]
        fig = level_figures(level, pairs)
        self.figures.append(fig)
        return fig, pairs

    def _search(self, rnd: Round, b: Bench, receipt: Receipt, budget, position: list[int]) -> None:
        """The capacity search: the stepper picks each level, both builds are measured there and called."""
        figs: dict[float, LevelFigures] = {}

        def measure(x: float) -> Pairs:
            figs[x], pairs = self._measure(rnd, b, receipt, self.level_at(x, rnd.p), budget, position)
            return pairs

        def heard(x: float, calls: dict[str, cap.LevelCall]) -> None:
            rnd.emit(ev.SweepLevel(figures=figs[x].to_dict(), sentence=level_sentence(figs[x], calls)))

        self.found.append(cap.run(self.capacity, dict(rnd.p.server.slo or {}), measure, heard))

    def level_at(self, x: float, p: Profile) -> Level:
        """A searched value as a load level: a concurrency, or a rate under the profile's cap."""
        return Level(int(x)) if self.capacity and self.capacity.whole else Level(p.server.concurrency, float(x))

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
                phase = f"{SWEEP_PHASE}{level.name}" if k >= 0 else f"sweep-warmup:{level.name}"
                item = Item(build, phase, max(k, 0), position, 0, 0, "serve", rnd.p.bench.metric)
                position += 1
                run_until_trusted(b, item, 0, budget, rnd.emit, rnd.notice,
                                  record if k >= 0 else lambda rep, _d: receipt.reps.append(rep))
        return position

    def finish(self, rnd: Round, receipt: Receipt) -> None:
        """The sweep document (no verdict, nothing sealed): each level's figures, every block."""
        receipt.ended_at = utc_now()
        reasons = parity_grade.grade_parity(receipt, rnd.p.gate).reasons
        figures = self.figures
        if self.capacity:       # measured in the search's order, shown in the load's
            figures = sorted(figures, key=lambda f: (f.level.rate, f.level.concurrency))
        doc = {"kind": self.name, "round_id": rnd.round_id, "started_at": receipt.started_at,
               "ended_at": receipt.ended_at, "levels": [f.to_dict() for f in figures],
               "refused": [r.message for r in reasons], "slo_ms": dict(rnd.p.server.slo or {}),
               "server_slots": self.slots(rnd.p), "receipt": receipt.to_dict()}
        if self.found:
            doc["capacity"] = self.found[-1].to_dict(name=lambda x: self.level_at(x, rnd.p).name)
            said = self.found[-1].said()
            if reasons:     # a candidate refused (its check, or what it served) earns no capacity change
                doc["capacity"]["change"] = {**doc["capacity"]["change"], "stands": False,
                                             "refused": [r.message for r in reasons]}
                said += f"; the candidate was refused ({reasons[0].message}): no change stands"
            rnd.notice("info" if not reasons else "warn", "capacity", said)
        path = rnd.cfg.out_dir / "sweeps" / f"{rnd.round_id}.json"
        atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        rnd.receipt, rnd.receipt_path = doc, path
        rnd.notice("info", "sweep-written", f"sweep written to {path}")
        rnd.exit_code = ExitCode.REJECTED if reasons else ExitCode.OK

    def status(self, receipt: Receipt) -> tuple[str, str]:
        return "complete", ""


def with_goodput(fig: dict, slo: dict) -> dict:
    """A block's goodput under the profile's targets, from its requests' own timings."""
    if not slo:
        return fig
    blk = Block([RequestRecord.from_dict(q) for q in fig.get("requests", [])], float(fig.get("duration", 0.0)), "", 0)
    return {**fig, "goodput": metrics.goodput(blk, slo)}


def level_sentence(fig: LevelFigures, calls: dict[str, cap.LevelCall] | None = None) -> str:
    """One line per level: each build's throughput and latencies with their intervals, and the gain;
    in a capacity search, each build's call against the targets."""
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
    said = "; ".join(cap.call_sentence(b, c) for b, c in calls.items()) if calls else ""
    return f"{fig.level.said}: " + "; ".join(parts) + gain + (f"; SLO: {said}" if said else "")
