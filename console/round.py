"""One round: build both, parity first, then interleaved reps, then the verdict.

The round owns no UI. It runs in a worker thread and hands typed events
(console.events) to whoever iterates ``Round.events()``; every event is also
journaled (fsync'd) as it happens, so a killed round can be resumed. The
measurements it collects go into a receipt whose verdict is computed by the
pure gate, never here.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import queue
import secrets
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from . import events as ev
from . import lockfile, protocol, sources
from .core import apparatus, gate, health, parity, stats
from .errors import ConsoleError, ExitCode, InfraError, UsageError
from .profile import Profile
from .runtime.base import INPUTS_ROOT, OUT_ROOT, BuildResult, RunResult

SCHEMA = "bench-console/receipt/1"
DOC_NAME = "document.tok"
LOGITS_MAX_BYTES = 1 << 30


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_round_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)


@dataclass
class RoundConfig:
    profile: Profile
    main: Any                       # a sources.parse_spec() result
    candidate: Any
    out_dir: Path
    runtime: str = "docker"         # "docker" | "local"
    kind: str = "round"             # "round" | "noise" (candidate is main again)
    reps: int | None = None         # overrides profile.bench.reps
    lock_path: Path | None = None
    resume: Any = None              # journal.JournalRead of an interrupted round
    telemetry: Any = None           # a console.telemetry Telemetry; opened when None
    keep_work: bool = False


@dataclass
class _Item:
    """One scheduled run of the bench."""
    build: str
    phase: str
    index: int
    position: int
    depth: int
    tokens: int
    context: str


class Round:
    def __init__(self, cfg: RoundConfig):
        self.cfg = cfg
        self.p = cfg.profile
        self.round_id = cfg.resume.plan["round_id"] if cfg.resume else new_round_id()
        self._q: queue.Queue = queue.Queue()
        self._abort = threading.Event()
        self._runtime = None
        self.receipt: dict | None = None
        self.receipt_path: Path | None = None
        self.exit_code: int = ExitCode.INFRA
        self._journal = None
        self._worker: threading.Thread | None = None

    # --- public --------------------------------------------------------------

    def abort(self) -> None:
        """Thread-safe: stop the running container and end the round as incomplete."""
        self._abort.set()
        if self._runtime is not None:
            self._runtime.abort()

    def wait(self, timeout: float) -> None:
        """Wait for the round's worker to finish its cleanup (after an abort)."""
        if self._worker is not None:
            self._worker.join(timeout=timeout)

    def events(self) -> Iterator[ev.Event]:
        """Yield the round's events until it ends. Ctrl-C here aborts the round,
        which still ends with a RoundEnded event; a second Ctrl-C gives up waiting."""
        worker = self._worker = threading.Thread(target=self._work, name=f"round-{self.round_id}", daemon=True)
        worker.start()
        interrupts = 0
        while True:
            try:
                item = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                interrupts += 1
                self.abort()
                if interrupts > 1:
                    raise
                continue
            if item is None:
                break
            yield item
        worker.join(timeout=30)

    # --- plumbing ------------------------------------------------------------

    def _emit(self, e: ev.Event) -> None:
        if self._journal is not None:
            self._journal.append(e)
        self._q.put(e)

    def _notice(self, level: str, code: str, message: str) -> None:
        self._emit(ev.Notice(level=level, code=code, message=message))

    def _work(self) -> None:
        from . import journal

        work: Path | None = None
        status, message = "infra", ""
        try:
            work = Path(tempfile.mkdtemp(prefix=f"bench-console-{self.round_id}-"))
            self.cfg.out_dir.mkdir(parents=True, exist_ok=True)
            jpath = self.cfg.out_dir / "journal" / f"{self.round_id}.jsonl"
            self._journal = journal.Journal(jpath)
            status, message = self._run(work)
        except ConsoleError as e:
            self.exit_code = e.exit_code
            status = "infra" if e.exit_code == ExitCode.INFRA else (
                "incomplete" if e.exit_code == ExitCode.INTERRUPTED else "refused")
            message = e.paragraph()
            self._notice("error", type(e).__name__, message)
        except Exception as e:  # a bug must still end the round cleanly
            self.exit_code = ExitCode.INFRA
            message = f"internal error: {type(e).__name__}: {e}"
            self._notice("error", "internal", message)
        finally:
            try:
                if self._runtime is not None:
                    try:
                        self._runtime.cleanup_round()
                    except Exception:
                        pass
                if self._abort.is_set() and status != "complete":
                    status, self.exit_code = "incomplete", ExitCode.INTERRUPTED
                end = ev.RoundEnded(status=status, exit_code=int(self.exit_code),
                                    receipt_path=str(self.receipt_path) if self.receipt_path else None,
                                    message=message)
                try:
                    self._emit(end)
                except Exception as e:  # a journal that cannot be written must not hang the viewer
                    self._q.put(ev.Notice(level="error", code="journal", message=f"journal write failed: {e}"))
                    self._q.put(end)
                if self._journal is not None:
                    self._journal.close()
                if work is not None and not self.cfg.keep_work:
                    shutil.rmtree(work, ignore_errors=True)
            finally:
                self._q.put(None)

    def _check_abort(self) -> None:
        if self._abort.is_set():
            from .errors import Interrupted
            raise Interrupted("the round was interrupted", "Resume it with `console resume JOURNAL`, or run it again.")

    # --- the round -----------------------------------------------------------

    def _run(self, work: Path) -> tuple[str, str]:
        p, cfg = self.p, self.cfg
        started_at = cfg.resume.plan.get("started_at", utc_now()) if cfg.resume else utc_now()
        self._runtime = rt = make_runtime(cfg.runtime, self.round_id, work)
        left = rt.cleanup_leftovers(stale_after_s=max(600.0, 2 * p.run.timeout_s)) \
            if rt.kind == "docker" else 0
        if cfg.resume and rt.kind == "docker":
            # the rep in flight when the console died may still be running: it must not
            # compete with the resumed reps
            left += rt.cleanup_round()
        host = host_facts(rt)
        tele = cfg.telemetry or _open_telemetry()
        host["gpus"] = tele.gpus() if hasattr(tele, "gpus") else []
        reps = cfg.reps or p.bench.reps
        plan = {"round_id": self.round_id, "kind": cfg.kind, "reps": reps, "depth": p.bench.depth,
                "tokens": p.bench.tokens, "short_tokens": p.bench.short_tokens,
                "parity_depths": list(p.parity.depths), "runtime": rt.kind,
                "parity": {"depths": list(p.parity.depths), "top1_min": p.gate.top1_min, "kl_max": p.gate.kl_max,
                           "scored_path_depth": p.parity.scored_path_depth},
                "main": _spec_text(cfg.main), "candidate": _spec_text(cfg.candidate),
                "out_dir": str(cfg.out_dir), "profile_path": p.path, "started_at": started_at,
                "lock_path": str(cfg.lock_path) if cfg.lock_path else None}
        self._emit(ev.RoundStarted(round_id=self.round_id, profile=p.name, profile_sha256=p.sha256,
                                   runtime=rt.kind, host=host, plan=plan))
        if left:
            self._notice("info", "cleanup", f"removed {left} container(s) left behind by an earlier crash")
        if cfg.resume:
            self._notice("info", "resumed", f"resuming round {self.round_id}: "
                         f"{len(cfg.resume.reps)} rep(s) already recorded are kept")

        inputs = work / "inputs"
        inputs.mkdir()
        check_pins(p)
        shutil.copyfile(p.parity.document, inputs / DOC_NAME)
        os.chmod(inputs, 0o755)

        pins = self._lock_pins()

        # Sources: snapshot, then the apparatus guard before anything is built.
        main = sources.snapshot(cfg.main, work / "src-main")
        cand = main if cfg.kind == "noise" else sources.snapshot(cfg.candidate, work / "src-candidate", main)
        touched = apparatus.touched_protected(main.files, cand.files, p.protected)
        if touched:
            self.exit_code = ExitCode.REJECTED
            msg = ("the candidate changes the measuring apparatus: " + ", ".join(touched)
                   + ". Those paths are protected by the profile; propose harness changes on main instead.")
            self._notice("error", "apparatus-touched", msg)
            self._emit(ev.VerdictReady(verdict={
                "outcome": "rejected", "tier": None, "exit_code": int(ExitCode.REJECTED),
                "reasons": [{"code": "apparatus-touched", "message": msg, "files": touched}],
                "warnings": [], "speed": {}, "parity": []}))
            return "refused", msg

        # Preflight: the node must be fit before its numbers mean anything.
        self._emit(ev.PhaseStarted(phase="preflight"))
        preflight = tele.preflight()
        for f in preflight.get("findings", []):
            self._notice("error" if f.get("level") == "refuse" else "warn", f.get("code", "preflight"),
                         f.get("message", ""))
        refusing = [f for f in preflight.get("findings", []) if f.get("level") == "refuse"]
        if refusing:
            raise InfraError("the node is not fit to measure: " + "; ".join(f.get("message", "") for f in refusing),
                             "Fix the node (or relax the profile) and retry; nothing was recorded as a regression.")
        gpus = self._gpu_decision(rt, host)

        # Builds.
        self._emit(ev.PhaseStarted(phase="build"))
        builds = {"main": self._build("main", main)}
        builds["candidate"] = builds["main"] if cfg.kind == "noise" else self._build("candidate", cand)
        snaps = {"main": main, "candidate": cand}

        receipt: dict[str, Any] = {
            "schema": SCHEMA, "kind": cfg.kind, "round_id": self.round_id, "started_at": started_at,
            "status": "complete",
            "profile": {"name": p.name, "path": p.path, "sha256": p.sha256, "node": p.node,
                        "rules": asdict(p.gate), "bench": asdict(p.bench), "parity": asdict(p.parity)},
            "runtime": {"kind": rt.kind, "isolation": list(rt.isolation), "lacks": list(rt.lacks)},
            "host": host, "preflight": preflight,
            "builds": {b: {"source": snaps[b].record, "tree_sha256": snaps[b].record.get("tree_sha256"),
                           "image_id": builds[b].image_id, "base_image_id": builds[b].base_image_id,
                           "compiler": builds[b].compiler, "build_s": round(builds[b].seconds, 3)}
                       for b in ("main", "candidate")},
            "lock": pins,
            "reps": [],
        }

        ctx = _RunCtx(rt=rt, builds=builds, snaps=snaps, inputs=inputs, work=work, gpus=gpus, tele=tele,
                      preflight=preflight)

        # Parity first: a failure here suppresses every speed figure.
        self._emit(ev.PhaseStarted(phase="parity"))
        receipt["parity"] = self._parity(ctx, receipt)
        cand_parity_ok = gate.parity_passes(receipt, p.gate)

        if cand_parity_ok or cfg.kind == "noise":
            self._speed(ctx, receipt, reps)
        else:
            self._notice("warn", "speed-skipped",
                         "speed was not measured: the candidate failed parity, so no speed credit is possible")

        receipt["ended_at"] = utc_now()
        receipt["summary"] = summarize(receipt["reps"])
        decide = gate.decide_noise if cfg.kind == "noise" else gate.decide
        verdict = decide(receipt, p.gate)
        receipt["verdict"] = verdict.to_dict()
        if cfg.kind == "noise":  # what the lock stores per node: the gate's own report
            receipt["noise"] = (receipt["verdict"].get("speed") or {}).get("noise") or {}
        self._emit(ev.PhaseStarted(phase="verdict"))
        self._emit(ev.VerdictReady(verdict=receipt["verdict"]))
        self._seal(receipt)
        self.receipt = receipt
        self.exit_code = verdict.exit_code
        return ("infra" if receipt["verdict"].get("outcome") == "infra" else "complete"), ""

    # --- steps -----------------------------------------------------------------

    def _gpu_decision(self, rt, host: dict) -> bool:
        want = self.p.run.gpus
        if want == "none":
            return False
        have = bool(host.get("gpus"))
        runtime_ok = rt.kind == "local" or getattr(rt, "has_gpu_runtime", lambda: False)()
        if have and runtime_ok:
            return True
        if not have:
            why = "this host has no GPU visible to NVML"
        else:
            why = "Docker has no NVIDIA runtime (install nvidia-container-toolkit and restart dockerd)"
        if want == "required":
            raise InfraError(f"the profile requires a GPU, but {why}.",
                             "Run on a GPU node, or set run.gpus = \"optional\" to allow CPU runs.")
        self._notice("warn", "no-gpu", f"{why}; running on CPU as the profile allows")
        return False

    def _build(self, name: str, snap: sources.Snapshot) -> BuildResult:
        self._check_abort()
        prev = self._resumed_build(name, snap)
        if prev is not None:
            return prev
        self._emit(ev.BuildStarted(build=name, source=snap.record))
        try:
            built = self._runtime.build(name, snap.dir, self.p.image,
                                        lambda line: self._emit(ev.BuildLog(build=name, line=line)))
        except ConsoleError as e:
            self._emit(ev.BuildFailed(build=name, message=e.message, log_tail=getattr(e, "log_tail", [])))
            raise
        recorded = self._recorded_image(name)
        if recorded and self.cfg.resume.reps and built.image_id != recorded:
            # Only a local build can be redone on resume: it must be byte-identical.
            raise InfraError(f"cannot resume: rebuilding {name} gave {built.image_id[:19]}, "
                             f"not the {recorded[:19]} the earlier reps ran", "Run the round again from the start.")
        self._emit(ev.BuildDone(build=name, image_id=built.image_id, base_image_id=built.base_image_id,
                                compiler=built.compiler, seconds=round(built.seconds, 3)))
        return built

    def _recorded_image(self, name: str) -> str | None:
        r = self.cfg.resume
        done = [e for e in (r.events if r else []) if e.get("kind") == "build_done" and e.get("build") == name]
        return done[-1]["image_id"] if done else None

    def _resumed_build(self, name: str, snap: sources.Snapshot) -> BuildResult | None:
        """On resume, reuse an image the journal recorded, if it still exists and the
        source is still the tree it was built from."""
        r = self.cfg.resume
        if not r:
            return None
        started = [e for e in r.events if e.get("kind") == "build_started" and e.get("build") == name]
        was = (started[-1].get("source") or {}).get("tree_sha256") if started else None
        if was and was != snap.record.get("tree_sha256"):
            raise InfraError(f"cannot resume: {name}'s source changed since the interrupted round "
                             f"(tree {was[:12]} then, {snap.record.get('tree_sha256', '')[:12]} now)",
                             "Restore the source, or run the round again from the start.")
        done = [e for e in r.events if e.get("kind") == "build_done" and e.get("build") == name]
        if done and self._runtime.image_exists(done[-1]["image_id"]):
            d = done[-1]
            self._emit(ev.BuildDone(build=name, image_id=d["image_id"], base_image_id=d["base_image_id"],
                                    compiler=d["compiler"], seconds=d["seconds"]))
            return BuildResult(build=name, image_id=d["image_id"], base_image_id=d["base_image_id"],
                               compiler=d["compiler"], seconds=d["seconds"])
        if r.reps and self._runtime.kind == "docker":
            raise InfraError(f"cannot resume: the {name} image recorded by the journal is gone",
                             "Run the round again from the start.")
        return None

    def _parity(self, ctx: "_RunCtx", receipt: dict) -> dict:
        p = self.p
        try:
            ref = protocol.read_logits(p.parity.reference, depths=len(p.parity.depths), rows=p.parity.rows,
                                       vocab=p.parity.vocab, max_bytes=LOGITS_MAX_BYTES)
        except parity.ParityInputError as e:
            raise UsageError(f"{p.path}: key 'parity.reference': the reference logits do not fit the profile: {e}",
                             "Recapture the reference (`console reference capture`) or fix parity.depths/rows/vocab.") from None
        out: dict[str, Any] = {"reference": {"sha256": p.parity.reference_sha256,
                                             "document_sha256": p.parity.document_sha256,
                                             "depths": list(p.parity.depths), "rows": p.parity.rows,
                                             "vocab": p.parity.vocab},
                               "scored_path": {}}
        figures: dict[str, list[parity.DepthFigures]] = {}
        builds = ["main"] if self.cfg.kind == "noise" else ["main", "candidate"]
        for b in builds:
            self._check_abort()
            res, err, figs, sha = self._logits(ctx, b, ref)
            figures[b] = figs
            out[b] = {"error": err, "logits_sha256": sha, "depths": [f.to_dict() for f in figs],
                      "wall_s": round(res.wall_s, 4) if res else None}
            for f in figs:
                st = parity.depth_status(f, _fig_at(figures.get("main"), f.depth) if b == "candidate" else None,
                                         p.gate)
                self._emit(ev.DepthGraded(build=b, depth=f.depth, top1=f.top1, kl=f.kl,
                                          ref_entropy=f.ref_entropy, status=st.status,
                                          reasons=[r.get("message", "") for r in st.reasons]))
            self._emit(ev.ParityDone(build=b, ok=err is None and all(
                parity.depth_status(f, None, p.gate).status != "fail" for f in figs),
                worst_depth=parity.worst_depth(figs, p.gate) if figs else None, error=err))
            out["scored_path"][b] = self._scored_path(ctx, b, ref, receipt)
        if self.cfg.kind == "noise":
            out["candidate"] = out["main"]
            out["scored_path"]["candidate"] = out["scored_path"]["main"]
        return out

    def _logits(self, ctx: "_RunCtx", build: str, ref: np.ndarray):
        p = self.p
        argv = fill(p.parity.command, doc=f"{INPUTS_ROOT}/{DOC_NAME}", out=OUT_ROOT,
                    depths=",".join(str(d) for d in p.parity.depths), rows=str(p.parity.rows))
        out_dir = ctx.work / "runs" / f"parity-{build}"
        res = ctx.rt.run(ctx.builds[build], argv, src_dir=ctx.snaps[build].dir, inputs_dir=ctx.inputs,
                         out_dir=out_dir, run=p.run, label=f"{build}/logits", gpus=ctx.gpus)
        self._check_abort()
        if res.exit_code != 0:
            why = res.killed_reason or f"exit status {res.exit_code}"
            tail = protocol.log_tail(res.stderr or res.stdout)
            return res, f"the logits command failed ({why}): " + " | ".join(tail[-3:]), [], None
        try:
            arr = protocol.read_logits(out_dir / p.parity.output, depths=len(p.parity.depths),
                                       rows=p.parity.rows, vocab=p.parity.vocab, max_bytes=LOGITS_MAX_BYTES)
            figs = parity.grade_logits(ref, arr, p.parity.depths, p.parity.rows, p.parity.vocab)
        except parity.ParityInputError as e:
            return res, str(e), [], None
        return res, None, figs, _sha256_file(out_dir / p.parity.output)

    def _scored_path(self, ctx: "_RunCtx", build: str, ref: np.ndarray, receipt: dict) -> dict:
        """Run the timed path over the real document and grade its final logits."""
        p = self.p
        depth = p.parity.scored_path_depth - p.parity.scored_path_tokens
        item = _Item(build=build, phase="scored_path", index=0, position=-1, depth=depth,
                     tokens=p.parity.scored_path_tokens, context="doc")
        rec, out_dir = self._run_item(ctx, item, attempt=0)
        receipt["reps"].append(rec)
        result = {"depth": p.parity.scored_path_depth, "top1": None, "kl": None, "error": None}
        if rec["status"] not in ("ok", "suspect"):  # a busy node does not change correctness
            result["error"] = f"the bench run over the document did not succeed ({rec['status']}): " \
                              + "; ".join(rec["refusals"] or rec["log_tail"][-2:])
        else:
            try:
                row = protocol.read_row_logits(out_dir / "bench_logits.npy", p.parity.vocab, LOGITS_MAX_BYTES)
                d = p.parity.depths.index(p.parity.scored_path_depth)
                g = parity.grade_row(ref[d, -1], row)
                result.update(top1=g.top1, kl=g.kl)
            except parity.ParityInputError as e:
                result["error"] = f"bench_logits.npy: {e}"
        ok = gate.scored_path_ok(result, p.gate)
        self._emit(ev.ScoredPathChecked(build=build, depth=result["depth"], top1=result["top1"],
                                        kl=result["kl"], ok=ok, error=result["error"]))
        return result

    def _speed(self, ctx: "_RunCtx", receipt: dict, reps: int) -> None:
        p = self.p
        schedule = make_schedule(p, reps)
        done = self._resumed_reps()
        # Warm the page cache for the inputs before any rep (the first build must not eat it).
        for f in ctx.inputs.iterdir():
            f.read_bytes()
        timed_outputs: dict[str, list[tuple[dict, Path]]] = {}
        self._speed_reps(ctx, receipt, schedule, done, health.RetryBudget(p.health.retries), timed_outputs)
        if self.cfg.kind != "noise":
            receipt["parity"]["timed_path"] = self._timed_path(timed_outputs)

    def _speed_reps(self, ctx: "_RunCtx", receipt: dict, schedule: list, done: dict,
                    budget: health.RetryBudget, timed_outputs: dict) -> None:
        p = self.p
        phase = None
        for item in schedule:
            self._check_abort()
            if item.phase != phase:
                phase = item.phase
                if phase in ("warmup", "timed"):
                    self._emit(ev.PhaseStarted(phase="warm" if phase == "warmup" else "reps"))
            key = (item.build, item.phase, item.index)
            attempt = 0
            if key in done:
                receipt["reps"].extend(done[key])
                if item.phase != "warmup":
                    continue
                attempt = len(done[key])   # a resumed round warms up again: the node went cold
            while True:
                rec, out_dir = self._run_item(ctx, item, attempt)
                receipt["reps"].append(rec)
                if item.phase == "timed" and rec["status"] in ("ok", "suspect"):
                    timed_outputs.setdefault(item.build, []).append((rec, out_dir))
                if rec["status"] != "suspect":
                    break
                if not budget.take():
                    diag = "; ".join(rec["suspect"])
                    raise InfraError(f"the node kept misbehaving during reps ({diag}); "
                                     f"the retry budget of {p.health.retries} is spent",
                                     "This is a node fault, not a regression: fix the node and resume or rerun.")
                self._notice("warn", "rep-suspect", f"{item.build} {item.phase} #{item.index} is suspect "
                             f"({'; '.join(rec['suspect'])}); retrying")
                attempt += 1

    def _timed_path(self, outputs: dict[str, list[tuple[dict, Path]]]) -> dict:
        """What the timed runs themselves computed: each candidate timed rep's final logits
        against main's first timed rep (same inputs, same depth, same shortcut).

        The parity depths and the scored-path check run over the document; the timed reps
        may take a shortcut (a seek) at another depth, and a candidate whose math is wrong
        only there would otherwise pass while its wall time really drops. There is no
        reference for a seeked context, so main measured in this round is the basis.
        """
        p = self.p
        out: dict[str, Any] = {"depth": p.bench.depth, "tokens": p.bench.tokens, "basis": "main",
                               "main_rep": None, "candidate": [], "error": None}
        mains, cands = outputs.get("main") or [], outputs.get("candidate") or []
        if not mains or not cands:
            out["error"] = "no timed rep of " + ("main" if not mains else "the candidate") + " ran in this session"
            return out
        main_rec, main_dir = mains[0]
        out["main_rep"] = main_rec["index"]
        try:
            base = protocol.read_row_logits(main_dir / "bench_logits.npy", p.parity.vocab, LOGITS_MAX_BYTES)
        except parity.ParityInputError as e:
            out["error"] = f"main's timed rep {main_rec['index']}: bench_logits.npy: {e}"
            return out
        for rec, d in cands:
            row: dict[str, Any] = {"index": rec["index"], "attempt": rec["attempt"], "kl": None, "top1": None,
                                   "error": None}
            try:
                g = parity.grade_row(base, protocol.read_row_logits(d / "bench_logits.npy", p.parity.vocab,
                                                                     LOGITS_MAX_BYTES))
                row.update(kl=g.kl, top1=g.top1)
            except parity.ParityInputError as e:
                row["error"] = f"bench_logits.npy: {e}"
            out["candidate"].append(row)
        bad = [r for r in out["candidate"] if not gate.scored_path_ok(r, p.gate)]
        if bad:
            self._notice("error", "timed-path", f"{len(bad)} of {len(cands)} candidate timed rep(s) computed "
                         f"something else than main at depth {p.bench.depth}: " + (bad[0]["error"] or
                         f"KL {bad[0]['kl']:.3g}, top-1 {bad[0]['top1']:.2f}"))
        else:
            self._notice("info", "timed-path", f"every candidate timed rep ({len(cands)}) agrees with main's "
                         f"at depth {p.bench.depth}")
        return out

    def _resumed_reps(self) -> dict:
        r = self.cfg.resume
        out: dict = {}
        if r:
            for rec in r.reps:
                if rec.get("status") == "aborted":
                    continue    # interrupted, not measured: it runs again
                out.setdefault((rec["build"], rec["phase"], rec["index"]), []).append(rec)
        # a rep whose last attempt was suspect was waiting for its retry
        return {k: v for k, v in out.items() if v[-1].get("status") != "suspect"}

    def _run_item(self, ctx: "_RunCtx", item: _Item, attempt: int):
        p = self.p
        argv = fill(p.bench.command, depth=str(item.depth), tokens=str(item.tokens), context=item.context,
                    doc=f"{INPUTS_ROOT}/{DOC_NAME}", out=OUT_ROOT)
        out_dir = ctx.work / "runs" / f"{item.position:04d}-{item.build}-{item.phase.replace(':', '_')}-{item.index}-{attempt}"
        settled = ctx.tele.settle(p.health.settle_cores, p.health.settle_max_s)
        self._emit(ev.RepStarted(build=item.build, index=item.index, position=item.position, phase=item.phase))
        # The runtime opens the telemetry window when the engine starts and closes it when
        # it exits: container start and teardown are the apparatus, not a neighbour.
        res = ctx.rt.run(ctx.builds[item.build], argv, src_dir=ctx.snaps[item.build].dir,
                         inputs_dir=ctx.inputs, out_dir=out_dir, run=p.run,
                         label=f"{item.build}/{item.phase}/{item.index}", gpus=ctx.gpus,
                         watch=lambda **kw: ctx.tele.monitor(0.1, **kw))
        summary = res.telemetry or {}
        rec = rep_record(item, attempt, res, p)
        rec["settle"] = settled
        # Under Docker the engine is outside the console's process tree, so its CPU time
        # would read as "other processes"; under the local runtime it is a waited-for child
        # and is already counted as the console's own.
        rec["telemetry"] = (health.attribute_engine_cpu(summary, res.cpu_s, p.run.cpus) if ctx.rt.kind == "docker"
                            else summary)
        if rec["status"] == "ok":
            rec["suspect"] = health.classify_rep(summary, ctx.preflight, p.health)
            if rec["suspect"]:
                rec["status"] = "suspect"
        self._emit(ev.TelemetrySample(source=summary.get("source", "host"), values=_latest(summary),
                                      build=item.build, index=item.index))
        self._emit(ev.RepDone(rep=rec))
        if res.killed_reason == "aborted":
            self._check_abort()
        return rec, out_dir

    def _lock_pins(self) -> dict:
        pins = {"frontier": 0.0, "frontier_slot": "", "anchor": self.p.gate.anchor,
                "guards": {g.name: 0.0 for g in self.p.gate.guards}, "noise_spread": None}
        if self.cfg.lock_path and Path(self.cfg.lock_path).exists():
            pins.update(lockfile.pins_for(Path(self.cfg.lock_path), self.p, ledger_dir=self.cfg.out_dir))
        return pins

    def _seal(self, receipt: dict) -> None:
        from . import store
        from .report import write_reports
        out = self.cfg.out_dir
        rid = store.seal_into(out, receipt)
        self.receipt_path = out / "receipts" / f"{rid}.json"
        store.atomic_write(out / "receipt.json", self.receipt_path.read_bytes())
        write_reports(out, receipt, receipt["verdict"])
        self._notice("info", "sealed", f"receipt {rid[:12]} sealed into {out / 'ledger.jsonl'}")
        if self.cfg.lock_path and Path(self.cfg.lock_path).exists():
            import json
            sealed = json.loads(self.receipt_path.read_bytes())
            try:
                moved, stale = lockfile.update(Path(self.cfg.lock_path), rid, sealed, receipt["verdict"], self.p)
            except Exception as e:  # the round is sealed; a lock that cannot be raised is said, not fatal
                self._notice("error", "lock-update-failed", f"{self.cfg.lock_path} was not updated: {e}. "
                             f"The receipt {rid[:12]} is sealed; fix the lock and verify it with `console lock verify`.")
                return
            for c in moved:
                self._notice("info", "lock-update", f"{c.key}: {c.old:g} -> {c.new:g} ({c.action}, receipt {rid[:12]})")
            for f in stale:
                self._notice("warn", "pin-stale", f.message)


@dataclass
class _RunCtx:
    rt: Any
    builds: dict[str, BuildResult]
    snaps: dict[str, sources.Snapshot]
    inputs: Path
    work: Path
    gpus: bool
    tele: Any
    preflight: dict


# --- pure helpers (tested directly) ------------------------------------------


def make_schedule(p: Profile, reps: int) -> list[_Item]:
    """Warm-ups, the short differential runs, the timed reps and guard reps, interleaved."""
    items: list[_Item] = []

    def add(phase: str, order: list[str], depth: int, tokens: int, context: str) -> None:
        counts: dict[str, int] = {}
        for b in order:
            i = counts.get(b, 0)
            counts[b] = i + 1
            items.append(_Item(b, phase, i, len(items), depth, tokens, context))

    ctx = "seek" if p.bench.shortcut == "seek" else "doc"
    add("warmup", ["main", "candidate"] * p.bench.warmup, p.bench.depth, p.bench.short_tokens, ctx)
    add("short", stats.interleaved_order(2), p.bench.depth, p.bench.short_tokens, ctx)
    add("timed", stats.interleaved_order(reps), p.bench.depth, p.bench.tokens, ctx)
    for g in p.gate.guards:
        add(f"guard:{g.name}", stats.interleaved_order(g.reps), g.depth, g.tokens, ctx)
    return items


def fill(template: tuple[str, ...], **values: str) -> list[str]:
    return [part.format(**values) for part in template]


def rep_record(item: _Item, attempt: int, res: RunResult, p: Profile) -> dict:
    parse = protocol.parse_bench_output(res.stdout, metric=p.bench.metric, tokens=item.tokens,
                                        depth=item.depth, context=item.context)
    if res.killed_reason == "timeout":
        status = "timeout"
    elif res.killed_reason == "aborted":
        status = "aborted"
    elif res.killed_reason:
        status = "failed"
    elif res.exit_code != 0:
        status = "failed"
    elif not parse.ok:
        status = "refused"
    else:
        status = "ok"
    tail = parse.log_tail + protocol.log_tail(res.stderr)[-10:]
    refusals = list(parse.refusals) if res.exit_code == 0 else []
    if res.killed_reason == "output limit":
        refusals.append(f"the output directory passed its limit of {p.run.output_limit_mb} MB")
    return {
        "build": item.build, "phase": item.phase, "index": item.index, "position": item.position,
        "attempt": attempt, "depth": item.depth, "tokens": item.tokens, "context": item.context,
        "status": status, "exit_code": res.exit_code, "wall_s": round(res.wall_s, 6),
        "value": parse.result["value"] if (parse.ok and status == "ok") else None,
        "reported": parse.result, "refusals": refusals, "peak_mem_bytes": res.peak_mem_bytes,
        "log_tail": tail[-40:], "telemetry": None, "suspect": [],
    }


def summarize(reps: list[dict]) -> dict:
    """Per-build figures of the valid timed reps, for the receipt's readers (the gate recomputes)."""
    return {b: stats.summary([r["value"] for r in reps if r["build"] == b and r["phase"] == "timed"
                              and r["status"] == "ok" and r["value"] is not None])
            for b in ("main", "candidate")}



def check_pins(p: Profile) -> None:
    """The document and the reference must be the pinned bytes, or nothing is comparable."""
    doc = _sha256_file(Path(p.parity.document))
    if doc != p.parity.document_sha256:
        raise UsageError(f"{p.path}: key 'parity.document_sha256': the document {p.parity.document} has sha256 "
                         f"{doc}, not the pinned {p.parity.document_sha256}",
                         "Restore the pinned document, or re-pin it deliberately and recapture the reference.")
    ref = Path(p.parity.reference)
    if not ref.exists():
        raise UsageError(f"{p.path}: key 'parity.reference': no reference logits at {ref}",
                         "Capture them once with `console reference capture --profile PROFILE`.")
    got = _sha256_file(ref)
    if got != p.parity.reference_sha256:
        raise UsageError(f"{p.path}: key 'parity.reference_sha256': {ref} has sha256 {got}, "
                         f"not the pinned {p.parity.reference_sha256}",
                         "Restore the pinned reference, or recapture it and update the pin deliberately.")



def _fig_at(figs, depth):
    for f in figs or []:
        if f.depth == depth:
            return f
    return None


def _latest(summary: dict) -> dict:
    return {k: (v.get("median") if isinstance(v, dict) and "median" in v else v)
            for k, v in (summary.get("metrics") or summary).items()
            if isinstance(v, (int, float, str)) or (isinstance(v, dict) and "median" in v)}


def _sha256_file(path: Path) -> str:
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _spec_text(spec: Any) -> Any:
    if isinstance(spec, tuple):
        return {"patch": spec[1]}
    return {k: v for k, v in asdict(spec).items() if v}


def spec_from_plan(d: dict):
    from .profile import Source
    if "patch" in d:
        return ("patch", d["patch"])
    return Source(**d)


def _open_telemetry():
    from .telemetry import open_telemetry
    return open_telemetry()


def make_runtime(kind: str, round_id: str, work: Path):
    if kind == "docker":
        from .runtime.docker import DockerRuntime
        return DockerRuntime(round_label=round_id)
    if kind == "local":
        from .runtime.local import LocalRuntime
        return LocalRuntime(work / "local")
    raise UsageError(f"unknown runtime {kind!r}", "Use --runtime docker or --runtime local.")


def host_facts(rt) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {"hostname": platform.node(), "cpu_model": cpu, "cores": os.cpu_count(),
             "kernel": platform.release(), "python": platform.python_version()}
    facts.update(rt.host_facts())
    return facts
