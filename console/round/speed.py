"""The speed stage: what the stopping rule reads (the plan), warm-up, timed pairs until the
outcome is decided or the budget is spent, the tail (guards), and the timed path's check.

``timed_pairs`` is the loop every round runs (and benchmarks/decision_quality.py drives):
``speed.progress`` after every pair, the same code the verdict runs.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from .. import events as ev
from ..core.decisions import speed, health
from ..core.provenance import reruns
from ..core.statistics import sequential, sizing
from ..core.records.receipt import Receipt, Rep, RepKey, Sequential
from ..core.records.verdict import json_safe
from .inputs import warm_read
from .plan import RoundConfig, pair_budget
from .schedule import Item, schedule_head, schedule_tail, timed_pair
from .reps import Bench, run_until_trusted


class Speed:
    def __init__(self, cfg: RoundConfig, emit: ev.Emit, notice: ev.Notify,
                 check_abort: ev.CheckAbort, look: Callable[[dict], reruns.LookBack]):
        self.cfg, self.p = cfg, cfg.profile
        self._emit, self._notice, self._check_abort, self._look = emit, notice, check_abort, look
        self.claims_refused = False     # set by timed_pairs when it stopped on refused claims
        # the phase whose runs the timed path's check reads (a matrix round: its home cell's, the
        # bench's own shape, whose inputs and depth main's first timed rep shares)
        self.long_phase = "timed"

    def run(self, b: Bench, receipt: Receipt) -> dict[str, list[tuple[Rep, Path]]]:
        """Warm-up, timed pairs until decided, the tail (guards); returns the timed runs' outputs by
        build (the timed path's check reads them)."""
        p, cfg = self.p, self.cfg
        done = cfg.resume.done_reps() if cfg.resume else {}
        if done and p.serving:
            # what those blocks served (to be graded) was in the interrupted round's work directory, and
            # their workload's seed was never revealed: a serving round's blocks are all measured anew
            done = {}
            self._notice("warn", "blocks-anew", "a resumed serving round measures its blocks anew: the "
                         "interrupted round's served tokens and workload seed are not kept")
        elif done and b.sections is not None:
            # the seeds of the sections handed over before the interruption died with that console: those
            # reps keep their figures, but what they computed cannot be re-derived or checked against main
            self._notice("warn", "sections-lost", "the reps measured before the interruption are kept, but the "
                         "sections they were handed are not revealed (their seeds were never written) and are "
                         "not compared with main's; a pair split by the interruption paired two drawn sections")
        # Warm the page cache for the inputs before any rep (the first build must not eat it).
        for f in b.inputs.iterdir():
            f.read_bytes()
        if receipt.inputs is not None and p.model:
            receipt.inputs.warm = warm_read([f.path for f in p.model])
            self._notice("info", "model-warm", f"read {receipt.inputs.warm['bytes'] / 1e6:.0f} MB of model files "
                         f"in {receipt.inputs.warm['seconds']:.2f} s before the first rep")
        budget = health.RetryBudget.from_rules(p.health)
        timed_outputs: dict[str, list[tuple[Rep, Path]]] = {}

        def record(rep: Rep, out_dir: Path) -> None:
            receipt.reps.append(rep)
            # a console-timed round checks every handed-over section against main's; else the long runs'
            checked = rep.phase == self.long_phase or (b.sections is not None and rep.phase != "warmup")
            if checked and rep.status in ("ok", "suspect"):
                timed_outputs.setdefault(rep.build, []).append((rep, out_dir))

        def run(items: list[Item]) -> None:
            for item in items:
                self._check_abort()
                attempt = self.resumed(item, done, receipt)
                if attempt is not None:
                    run_until_trusted(b, item, attempt, budget, self._emit, self._notice, record)

        self.plan(receipt)
        head = schedule_head(p)
        self._emit(ev.PhaseStarted(phase="warm"))
        run(head)
        repeat = self.size(receipt, [r for k, reps in done.items() if k.phase == "timed" for r in reps])
        self._emit(ev.PhaseStarted(phase="reps"))
        pairs = self.timed_pairs(receipt, run, len(head), done, repeat)
        if self.claims_refused:
            # the verdict stops at the refused claims, before any guard is read: guard reps
            # could not change it
            self._notice("info", "guards-skipped", "the guards are not measured: a build's claims were refused")
        else:
            run(schedule_tail(p, len(head) + 2 * pairs))
        self.check_sized(receipt)
        if b.sections is not None:
            receipt.sections = b.sections.reveal_all()
        return timed_outputs

    def size(self, receipt: Receipt, resumed: list[Rep]) -> int:
        """Repeats per timed run (bench.min_seconds), from the full-length warm-ups; recorded. A resumed
        round keeps the size its timed reps already ran with, so all its pairs are alike."""
        if self.p.bench.min_seconds <= 0:
            return 1
        if resumed:
            receipt.sizing = sizing.Sizing(self.p.bench.min_seconds, resumed[0].repeat, None,
                                           "kept from the timed reps before the interruption")
            return resumed[0].repeat
        probes = [(r.build, section_time(r)) for r in receipt.reps
                  if r.phase == "warmup" and r.status in ("ok", "suspect") and section_time(r) is not None]
        s = sizing.size_repeats(self.p.bench.min_seconds, probes)
        receipt.sizing = s
        self._notice("info", "sized", f"timed runs repeat their section {s.repeat} time(s): {s.basis}")
        return s.repeat

    def check_sized(self, receipt: Receipt) -> None:
        if not receipt.sizing:
            return
        short = sizing.short_of(receipt.sizing, [t for r in receipt.reps if r.phase == "timed" and r.status == "ok"
                                                 and (t := section_time(r)) is not None])
        receipt.sizing = replace(receipt.sizing, reached=short is None)
        if short:
            self._notice("warn", "under-sized", short)

    def timed_pairs(self, receipt: Receipt, run: Callable[[list[Item]], None], start: int, done: dict,
                    repeat: int = 1) -> int:
        """Timed pairs until the outcome is decided or the budget is spent; returns the pairs run.

        A noise round runs its whole budget (it measures, it decides nothing). A round looks
        after every pair (``speed.progress``: the same code the verdict runs), stops when
        the decision is made (and an accepted tier is settled), when a build's claims are
        already refused, or when the pairs or minutes of the budget are spent.
        """
        p, cfg = self.p, self.cfg
        limit = pair_budget(cfg)
        recorded = [k for k in done if k.phase == "timed"]
        if any(k.phase.startswith("guard:") for k in done):
            # a resumed round that had reached its guards had closed its timed pairs
            limit = max((k.index for k in recorded), default=-1) + 1
        seq = receipt.sequential
        started, k, stopped, decided_at = time.monotonic(), 0, "budget-pairs", None
        while k < limit:
            run(timed_pair(p, k, start + 2 * k, repeat))
            k += 1
            if not cfg.kind.decides:    # it measures its whole budget
                continue
            d = speed.progress(receipt, p.gate)
            if d is None:
                stopped, self.claims_refused = "claims", True
                self._notice("warn", "claims-refused", "a build's runs or claims were refused: no more timed pairs "
                             "are run (the verdict says which and why)")
                break
            self._emit(ev.DecisionStep.of(json_safe(d.to_dict())))
            if d.done:
                stopped = "decided"
                break
            if d.decided and not d.pending:
                # decided, an accepted tier still spanning bands: settling it has its own budget
                decided_at = k if decided_at is None else decided_at
                if k - decided_at >= p.gate.settle_pairs:
                    stopped = "settle-budget"
                    break
            if p.gate.max_minutes and time.monotonic() - started > 60 * p.gate.max_minutes and k < limit:
                stopped = "budget-minutes"
                break
        if seq is not None:
            seq.stopped = stopped if cfg.kind.decides else ""
            seq.minutes = round((time.monotonic() - started) / 60, 3)
            if stopped in ("decided", "settle-budget"):
                seq.decided_at = decided_at or k
        return k

    def plan(self, receipt: Receipt) -> None:
        """What the stopping rule reads besides the reps: earlier rounds of this candidate
        (pooled) and the node's noise (planning only); said before the timed reps."""
        p = self.p
        if not self.cfg.kind.looks_back:
            return
        look = self._look({b: x.tree_sha256 for b, x in receipt.builds.items()})
        prior, exp = look.prior, look.experiment
        design = replace(sequential.Design.of(p.gate), max_pairs=pair_budget(self.cfg))
        pv = sequential.preview(receipt.lock.noise_sd, design, p.gate.planning_noise)
        receipt.sequential = Sequential(prior=prior, experiment=exp, preview=pv.to_dict(),
                                        settle_pairs=p.gate.settle_pairs, fresh=self.cfg.fresh)
        n = sum(len(r.log_ratios) for r in prior)
        self._emit(ev.PlanReady(preview=pv.to_dict(), sentence=pv.sentence(), prior_rounds=len(prior), prior_pairs=n))
        if prior:
            self._notice("info", "rerun", f"this candidate was measured against this main in {len(prior)} earlier "
                         f"round(s) ({', '.join(r.round_id for r in prior[-3:])}; {n} pairs): they pool with this "
                         "one, and one confidence sequence runs across all")
        if look.others and not prior:
            self._notice("info", "pools-nothing", f"{len(look.others)} earlier round(s) of this profile in "
                         f"{self.cfg.out_dir} measured another experiment, so none pools with this one: "
                         + "; ".join(look.others[-3:]))

    @staticmethod
    def resumed(item: Item, done: dict, receipt: Receipt) -> int | None:
        """Reps a resumed round already has are kept; None skips the item, else the attempt to run."""
        earlier = done.get(RepKey(item.build, item.phase, item.index))
        if not earlier:
            return 0
        receipt.reps.extend(earlier)
        # a resumed round warms up again: the node went cold
        return len(earlier) if item.phase == "warmup" else None


def section_time(r: Rep) -> float | None:
    """A run's timed section: the console's clock where it handed the section over, else the engine's
    own report (a self-timed bench)."""
    if r.section_s is not None:
        return r.section_s
    x = (r.reported or {}).get("elapsed_s")
    return float(x) if isinstance(x, (int, float)) else None
