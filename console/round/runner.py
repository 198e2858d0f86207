"""One round, top to bottom: node → sources → builds → parity → reps → verdict → seal.

The round owns no UI. It runs in a worker thread and hands typed events
(console.events) to whoever iterates ``Round.events()``; every event is also
journaled (fsync'd) as it happens, so a killed round can be resumed. What it measures
goes into a typed receipt (``core.receipt``) whose verdict only the gate decides.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .. import events as ev
from ..core.decisions import apparatus, counting, gate, parity_grade
from ..core.provenance import fingerprint, identity, reruns
from ..core.provenance.backend import BackendCheck
from ..core.provenance import lock as lockrules
from ..core.records.facts import HostFacts, RuntimeFacts
from ..core.records.receipt import AccuracySide, Apparatus, Build, Inputs, Pins, Receipt
from ..core.records.verdict import VerdictRecord
from ..engine import sources
from ..results import lockfile, store
from ..clock import utc_now
from ..runtime import make_runtime
from ..runtime.base import BuildResult, Runtime
from ..telemetry import open_telemetry
from . import accuracy as accuracy_stage
from . import after
from . import parity as checks
from .adjudicate import settle
from .builds import Builder
from .lifecycle import Lifecycle
from .inputs import check_model, check_protected, reference_meta, same_as_main, snapshot_harness
from .node import backend, check_backend, node_facts, refuse_unfit, use_gpus
from .plan import RoundConfig, check_pins, new_round_id, plan_record
from .schedule import DOC_NAME
from .sections import Sections
from .reps import Bench
from .measure import measure_of
from .serving.servers import Servers
from .cells import CellPairs
from .speed import Speed


class Round(Lifecycle):
    """The stages of a round, in order; how it runs as a thread is ``Lifecycle``'s."""

    def __init__(self, cfg: RoundConfig):
        super().__init__(cfg, cfg.resume.plan["round_id"] if cfg.resume else new_round_id())
        self.p = cfg.profile
        self.kind = cfg.kind            # what differs between kinds of round (round.kinds)
        self.measure = measure_of(self.p)   # how the builds are timed: the harness, or their servers
        self._runtime: Runtime | None = None
        self._ref_meta: dict = {}
        self._harness = None            # the profile's harness as copied at the start of the round
        self._harness_sha256: str | None = None
        self._tele = None               # the round's telemetry
        self._gpus = False              # whether the reps get the node's GPUs
        self._look_back: reruns.LookBack | None = None   # the experiment's earlier rounds in this ledger
        self._identity: identity.Identity | None = None  # what this round measures (core.identity): pools, pins
        self.servers: Servers | None = None       # a serving round's servers
        self._backend: BackendCheck | None = None      # the round's backend against the reference's

    # --- public --------------------------------------------------------------

    @property
    def decided_by(self) -> tuple[str, str, str, int] | None:
        """(ledger id, round id, outcome, exit code) of the earlier round that had already decided
        this experiment, when this round therefore measured nothing."""
        return self._look_back.decided_by if self._look_back is not None else None     # None under --fresh

    def _stop_running(self) -> None:
        if self._runtime is not None:
            self._runtime.abort()
        if self.servers is not None:     # a block in flight fails at once, and is not timed
            self.servers.stop_all()

    def _clean_up(self) -> None:
        if self.servers is not None:
            self.servers.stop_all()
        if self._runtime is not None:
            try:
                self._runtime.cleanup_round()
            except Exception:
                pass

    # --- the round -----------------------------------------------------------

    def _run(self, work: Path) -> tuple[str, str]:
        """The round's stages, in order. Each may end the round: an earlier round decided the
        experiment, the apparatus was touched, the node is unfit, a build or parity failed."""
        receipt = self._start(work)
        snaps = self._sources(work)
        if (decided := self._earlier_rounds(snaps)) is not None:
            return "decided", decided
        if self._touches_apparatus(snaps, receipt):
            return "refused", receipt.verdict.reasons[0].message
        self._preflight(receipt)
        bench = self._builds(snaps, receipt, work)
        self.emit(ev.PhaseStarted(phase="parity"))     # parity first: a failure suppresses every speed figure
        self._parity(bench, receipt)
        self.measure.before_timed(self, bench, receipt)
        if self.kind.times(receipt, self.p):
            outputs = self.kind.timed(self, bench, receipt)
            if self.kind.compares:
                self.measure.after_timed(self, bench, receipt, outputs)
        else:
            self.notice("warn", "speed-skipped",
                        "speed was not measured: the candidate failed parity, so no speed credit is possible")
        self.kind.finish(self, receipt)
        return self.kind.status(receipt)

    # --- stages ----------------------------------------------------------------

    def _start(self, work: Path) -> Receipt:
        """The runtime, the host, the round's plan, and every pinned input checked before anything
        is built (the document, the lock's pins, the model files, the harness)."""
        p, cfg = self.p, self.cfg
        started_at = cfg.resume.plan.get("started_at", utc_now()) if cfg.resume else utc_now()
        self._runtime = rt = make_runtime(cfg.runtime, self.round_id, work)
        left = self._clear_leftovers(rt)
        self._tele = tele = cfg.telemetry or open_telemetry("host" if p.run.gpus == "none" else "auto")
        host = node_facts(rt, tele)
        self.emit(ev.RoundStarted(round_id=self.round_id, profile=p.name, profile_sha256=p.sha256, runtime=rt.kind,
                                   host=host, plan=self._plan(rt.kind, started_at)))
        if left:
            self.notice("info", "cleanup", f"removed {left} container(s) left behind by an earlier crash")
        if cfg.resume:
            self.notice("info", "resumed", f"resuming round {self.round_id}: "
                         f"{len(cfg.resume.reps)} rep(s) already recorded are kept")
        if cfg.bundle is not None:
            self.notice("info", "bundle", f"from the bundle {cfg.bundle.root} (manifest sha256 "
                         f"{cfg.bundle.manifest_sha256[:12]}), checked against its manifest: no pip, no index")
        inputs = work / "inputs"
        inputs.mkdir()
        check_pins(p)
        shutil.copyfile(p.parity.document, inputs / DOC_NAME)
        os.chmod(inputs, 0o755)
        model = check_model(p)
        self.measure.check_inputs(p)
        self._harness, harness = snapshot_harness(p, work / "harness")
        self._harness_sha256 = (harness or {}).get("tree_sha256")
        self._ref_meta = reference_meta(p)
        receipt = Receipt(round_id=self.round_id, kind=self.kind.name, started_at=started_at, profile=p.record(),
                          runtime=RuntimeFacts.from_dict({"kind": rt.kind, "isolation": list(rt.isolation),
                                                          "lacks": list(rt.lacks)}),
                          host=host,
                          inputs=Inputs(model=model, harness=harness, fill=p.bench.fill) if (model or harness) else None,
                          bundle=cfg.bundle.record() if cfg.bundle is not None else None)
        self._identity = identity.of_receipt(receipt)
        receipt.lock = self._lock_pins(fingerprint.of_host(host))
        return receipt

    def _sources(self, work: Path) -> dict[str, sources.Snapshot]:
        """Both trees, snapshotted once: what is hashed is what is built. From a bundle, a pinned
        sdist is taken from it alone: no pip, no index."""
        p, cfg = self.p, self.cfg
        self.emit(ev.PhaseStarted(phase="sources"))
        sdists = cfg.bundle.sdists if cfg.bundle is not None else None
        main = sources.snapshot(cfg.main, work / "src-main", exclude=p.exclude, sdists=sdists)
        check_protected(p, main)
        cand = main if not self.kind.compares else sources.snapshot(cfg.candidate, work / "src-candidate", main,
                                                                 exclude=p.exclude, sdists=sdists)
        self._ref_meta = same_as_main(self._ref_meta, main)
        return {"main": main, "candidate": cand}

    def _touches_apparatus(self, snaps: dict[str, sources.Snapshot], receipt: Receipt) -> bool:
        """A candidate that edits what measures it is refused before anything is built."""
        main, cand = snaps["main"], snaps["candidate"]
        touched = apparatus.touched_protected(main.files, cand.files, self.p.protected, cand.links, main.links)
        if not touched:
            return False
        receipt.apparatus = Apparatus(protected=list(self.p.protected), touched=list(touched))
        receipt.builds = {b: _build_record(s) for b, s in snaps.items()}
        self.seal_verdict(receipt)
        return True

    def _preflight(self, receipt: Receipt) -> None:
        """The node must be fit before its numbers mean anything."""
        self.emit(ev.PhaseStarted(phase="preflight"))
        receipt.preflight = self._tele.preflight(rules=self.p.preflight)
        refuse_unfit(receipt.preflight, self.notice)
        self._gpus = use_gpus(self.p.run.gpus, self._runtime, receipt.host, self.notice, self.p.run)
        if self._gpus and hasattr(self._runtime, "gpu_request"):     # how Docker was asked for them
            receipt.runtime = RuntimeFacts.from_dict({**receipt.runtime.to_dict(),
                                                      "gpu_request": self._runtime.gpu_request(self.p.run)})
        # the reference must have been computed where these builds will compute (core.backend)
        here = backend(self.p, self._runtime.kind, receipt.host, receipt.preflight, self._gpus)
        self._backend = check_backend(self.p, here, self._ref_meta, self.notice)

    def _builds(self, snaps: dict[str, sources.Snapshot], receipt: Receipt, work: Path) -> Bench:
        """main, then the candidate (main's own build in a noise round), and the bench over them."""
        self.emit(ev.PhaseStarted(phase="build"))
        builder = Builder(self.cfg, self._runtime, self.round_id, self._harness, self._harness_sha256,
                          self.emit, self.notice, self.check_abort)
        builds = {"main": builder.build("main", snaps["main"])}
        builds["candidate"] = builder.build("candidate", snaps["candidate"]) if self.kind.compares else builds["main"]
        receipt.builds = {b: _build_record(snaps[b], builds[b]) for b in ("main", "candidate")}
        return Bench(rt=self._runtime, builds=builds, src_dirs={b: s.dir for b, s in snaps.items()},
                     inputs=work / "inputs", work=work, gpus=self._gpus, tele=self._tele,
                     preflight=receipt.preflight, profile=self.p, models={f.name: f.path for f in self.p.model},
                     keep_work=self.cfg.keep_work, sections=self._sections(work))

    def _sections(self, work: Path) -> Sections | None:
        """What the console hands over to a console-timed bench (None: a self-timed bench, or a server)."""
        if self.p.serving or not self.p.bench.console_timed:
            return None
        doc = [int(t) for t in (work / "inputs" / DOC_NAME).read_bytes().split()]
        return Sections(doc, self.p.parity.vocab, self.emit)

    # --- steps -----------------------------------------------------------------

    def _clear_leftovers(self, rt: Runtime) -> int:
        left = rt.cleanup_leftovers(stale_after_s=max(600.0, 2 * self.p.run.timeout_s))
        if self.cfg.resume:
            # the rep in flight when the console died may still be running: it must not
            # compete with the resumed reps
            left += rt.cleanup_round()
        return left

    def _earlier_rounds(self, snaps: dict[str, sources.Snapshot]) -> str | None:
        """Read the experiment's earlier rounds before anything is built: when they already decided
        it, the round ends here (with that round's exit code, nothing sealed) and says by which round."""
        if not self.kind.looks_back:
            return None
        look = self._look({b: s.record.get("tree_sha256") for b, s in snaps.items()})
        if look.decided_by is None or self.cfg.resume:
            return None
        self.exit_code = look.decided_by[3]     # a decided regression still fails the job that reruns it
        said = look.decided_sentence()
        self.notice("info", "already-decided", said)
        return said

    def _look(self, trees: dict[str, str | None]) -> reruns.LookBack:
        """The experiment's earlier rounds in this ledger, read once per round."""
        if self._look_back is None:
            # stages driven without _start (a simulation) measure the profile under the configured runtime
            ident = self._identity or identity.of(self.p.record(), RuntimeFacts.from_dict({"kind": self.cfg.runtime}),
                                                   HostFacts(), None)
            self._look_back = reruns.look_back(store.ledger_receipts(self.cfg.out_dir), self.p.record(), trees,
                                               ident, fresh=self.cfg.fresh, kind=self.kind.name)
        return self._look_back

    def _lock_pins(self, node: fingerprint.Fingerprint) -> Pins:
        """This node's pins of this round's experiment identity; a pin of the same name measured on
        another node, or under another identity, is said and not used."""
        pins = Pins(anchor=self.p.gate.anchor, guards={g.name: 0.0 for g in self.p.gate.guards})
        lock = self.cfg.lock_path
        if lock and Path(lock).exists():
            found = lockfile.pins_for(Path(lock), self.p, node, ledger_dir=self.cfg.out_dir, ident=self._identity)
            pins = Pins.from_dict({**pins.to_dict(), **found})
        for x in pins.passed_over:
            self.notice("warn", lockrules.passed_over_code(x), lockrules.passed_over_sentence(x, node.digest))
        return pins

    def _parity(self, b: Bench, receipt: Receipt) -> None:
        ref = checks.read_reference(b)
        par = receipt.parity = checks.new_record(b, self._ref_meta, self._backend)
        record = lambda rep, _dir: receipt.reps.append(rep)  # noqa: E731
        # the bench's own output can be checked (a serving round's is checked through its server)
        logits_out = self.measure.writes_logits
        for build in self.kind.builds:
            self.check_abort()
            side = checks.logits_side(b, build, ref, self.check_abort)
            setattr(par, build, side)
            checks.emit_grades(side, build, par.main if build == "candidate" else None, b, self.emit)
            if logits_out:
                par.scored_path[build] = checks.scored_path(b, build, ref, self.emit, record)
        if (unchecked := self.measure.unchecked(self.p)) is not None:     # said once; the gate says "unchecked"
            self.notice("warn", "scored-path", unchecked)
        if not self.kind.compares:
            par.candidate = par.main
            if "main" in par.scored_path:      # absent when the bench writes no logits
                par.scored_path["candidate"] = par.scored_path["main"]
            return
        self._adjudicate(b, par, ref)
        if self.p.accuracy is None:
            return
        if not parity_grade.grade_parity(receipt, self.p.gate).passed:
            # the round stops at the stage that rejects it: no score could undo a parity failure
            self.notice("info", "accuracy-skipped", "task accuracy was not measured: parity already rejects "
                         "the candidate, and no score could change that")
        else:
            self._accuracy(b, receipt)

    def _adjudicate(self, b: Bench, par, ref) -> None:
        """Borderline depths (over the bar, inside the band) are settled before anything else."""
        if self.p.adjudication is None or par.candidate is None or par.main is None or par.candidate.error:
            return
        rules = self.p.gate
        graded = parity_grade.grade_depths(par.candidate, par.main, rules)
        border = parity_grade.borderline(par.candidate, graded, rules)
        if not border:
            return
        par.adjudication = settle(b, border, ref, self.reference_is_main,
                                  self.emit, self.check_abort)
        ruling = parity_grade.adjudicate(par.candidate, graded, rules, par.adjudication)
        if ruling is not None:
            self.emit(ev.AdjudicationStep(step="ruling", message=ruling.summary, figures=ruling.to_dict(),
                                           ok=ruling.passed))
        # the depths as the gate now grades them
        checks.emit_grades(par.candidate, "candidate", par.main, b, self.emit, par.adjudication)

    def _accuracy(self, b: Bench, receipt: Receipt) -> None:
        """Task accuracy, before speed: the reference's build (main's image when the reference is
        main's own source) and the candidate answer the task set; the gate scores both."""
        self.emit(ev.PhaseStarted(phase="accuracy"))
        record, tasks = accuracy_stage.new_record(b)
        receipt.accuracy = record
        if not self.reference_is_main:
            record.reference = AccuracySide(build="", error="the reference was not captured from main's source: "
                                            "there is no reference build in the round to answer the task set")
        else:
            record.reference = accuracy_stage.answer(b, "reference", "main", tasks, self.emit, self.check_abort)
        record.candidate = accuracy_stage.answer(b, "candidate", "candidate", tasks, self.emit, self.check_abort)
        table, reasons = parity_grade.grade_accuracy(receipt, self.p.gate)
        self.emit(ev.AccuracyGraded(grade={k: v for k, v in (table or {}).items()
                                            if k not in ("reference_ok", "candidate_ok")},
                                     reasons=[r.message for r in reasons]))

    def _plan(self, runtime: str, started_at: str) -> dict:
        """What the round will do, journaled first and shown by every viewer's progress."""
        return self.kind.plan(plan_record(self.cfg, self.round_id, runtime, started_at), self.p)

    @property
    def reference_is_main(self) -> bool:
        """Whether the reference was captured from main's own source (its build is main's)."""
        return bool((self._ref_meta or {}).get("same_as_main"))

    def speed_stage(self) -> Speed:
        stage = Speed(self.cfg, self.emit, self.notice, self.check_abort, self._look)
        if self.kind.per_cell:      # a matrix round: pairs over its open cells
            CellPairs(stage)
        return stage

    def seal_verdict(self, receipt: Receipt) -> None:
        """The verdict (the gate's alone), then seal, reports and the lock."""
        rules = self.p.gate
        receipt.ended_at = utc_now()
        receipt.summary = counting.summarize(receipt, rules)
        verdict = gate.decide(receipt, rules)
        receipt.verdict = VerdictRecord.of(verdict)
        self.kind.on_verdict(receipt, verdict)
        self.emit(ev.PhaseStarted(phase="verdict"))
        self.emit(ev.VerdictReady(verdict=receipt.verdict))
        receipt.freeze()        # what is sealed is final: nothing after this may edit it
        sealed = after.seal(self.cfg.out_dir, receipt, self.notice)
        self.receipt, self.receipt_path, self.sealed = sealed.document, sealed.path, sealed.receipt
        self.exit_code = verdict.exit_code
        after.raise_pins(self.cfg.lock_path, sealed, self.p, self.notice)


def _build_record(snap: sources.Snapshot, built: BuildResult | None = None) -> Build:
    """A build as the receipt keeps it; without ``built`` it was refused before building."""
    b = Build(source=snap.record, tree_sha256=snap.record.get("tree_sha256"))
    if built is not None:
        b.image_id, b.base_image_id = built.image_id, built.base_image_id
        b.compiler, b.build_s = built.compiler, round(built.seconds, 3)
        b.tools = built.tools or None
        b.key, b.reused_from, b.reproduced = built.key or None, built.reused_from, built.reproduced
        b.compiler_cache = built.compiler_cache
        if built.engine_files is not None:
            b.engine_files = built.engine_files
            b.engine_sha256 = sources.digest_of(built.engine_files)
    return b
