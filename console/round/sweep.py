"""A sweep: both builds' servers over a list of load levels, for the throughput–latency curve.

The same stages as a round up to the server check (sources, preflight, builds, parity through the
harness and through each server); then, at each level, pairs of blocks alternating between the two
servers (A B B A), and a sweep document with each level's figures and their intervals
(``core.sweep``) instead of a verdict. A sweep measures; it decides nothing and seals nothing into
the ledger (a round at one load level does that).
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import events as ev
from ..core import gate, health
from ..core.receipt import Receipt, Rep
from ..core.sweep import Level, LevelFigures, level_figures
from ..errors import ExitCode
from ..reports.sweep_html import write_sweep_html
from ..serving import metrics
from ..serving.client import Block, RequestRecord
from ..clock import utc_now
from .plan import Item
from .reps import Bench, run_until_trusted
from .runner import Round


class Sweep(Round):
    def __init__(self, cfg, levels: list[Level], blocks: int):
        super().__init__(cfg)
        self.levels, self.blocks = levels, blocks
        self.figures: list[LevelFigures] = []
        self.document_path: Path | None = None

    def _plan(self, runtime: str, started_at: str) -> dict:
        # the progress viewers read: every level's warm-up pair and blocks, no minutes budget
        plan = super()._plan(runtime, started_at)
        return {**plan, "reps": len(self.levels) * (self.blocks + 1), "head_reps": 0, "tail_reps": 0,
                "sequential": False, "levels": [lv.name for lv in self.levels], "blocks": self.blocks}

    def _slots(self) -> int:
        # one server start for the whole sweep: it must hold the largest level
        return max(lv.concurrency for lv in self.levels)

    def _speed(self, b: Bench, receipt: Receipt) -> None:
        budget = health.RetryBudget.from_rules(self.p.health)
        position = 0
        for level in self.levels:
            self._emit(ev.PhaseStarted(phase=f"level {level.name}"))
            self._servers.load = level
            reps: dict[tuple[str, int], Rep] = {}

            def record(rep: Rep, _dir: Path) -> None:
                receipt.reps.append(rep)
                if rep.status == "ok":
                    reps[(rep.build, rep.index)] = rep

            for k in range(-1, self.blocks):       # one warm-up pair at each level, then the blocks
                order = ["main", "candidate"] if k % 2 == 0 else ["candidate", "main"]
                for build in order:
                    self._check_abort()
                    phase = f"sweep:{level.name}" if k >= 0 else f"sweep-warmup:{level.name}"
                    item = Item(build, phase, max(k, 0), position, 0, 0, "serve", self.p.bench.metric)
                    position += 1
                    run_until_trusted(b, item, 0, budget, self._emit, self._notice,
                                      record if k >= 0 else lambda rep, _d: receipt.reps.append(rep))
            pairs = [((reps[("main", k)].reported or {}), (reps[("candidate", k)].reported or {}))
                     for k in range(self.blocks) if ("main", k) in reps and ("candidate", k) in reps]
            fig = level_figures(level, [(_with_goodput(m, self._slo), _with_goodput(c, self._slo)) for m, c in pairs])
            self.figures.append(fig)
            self._emit(ev.SweepLevel(figures=fig.to_dict(), sentence=level_sentence(fig)))

    def _status(self, receipt: Receipt) -> tuple[str, str]:
        return "complete", ""

    @property
    def _slo(self) -> dict:
        return dict(self.p.server.slo or {})

    def _finish(self, receipt: Receipt) -> None:
        """The sweep document (no verdict, nothing sealed): each level's figures, every block."""
        receipt.ended_at = utc_now()
        parity, reasons, _ = gate.grade_parity(receipt, self.p.gate)
        doc = {"kind": "sweep", "round_id": self.round_id, "started_at": receipt.started_at,
               "ended_at": receipt.ended_at, "levels": [f.to_dict() for f in self.figures],
               "refused": [r.message for r in reasons], "slo_ms": self._slo,
               "server_slots": self._slots(), "receipt": receipt.to_dict()}
        out = self.cfg.out_dir / "sweeps"
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{self.round_id}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        html = write_sweep_html(doc, path.with_suffix(".html"))
        self.receipt, self.receipt_path, self.document_path = doc, path, path
        self._notice("info", "sweep-written", f"sweep written to {path} and {html}")
        self.exit_code = ExitCode.REJECTED if reasons else ExitCode.OK


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
