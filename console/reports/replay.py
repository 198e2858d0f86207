"""Replay a recorded round through the same screen that shows a live one.

Two inputs are understood:

* a journal, ``*.jsonl``: one ``Event.to_dict()`` per line, as a round writes it.
  A torn last line (the writer died mid-line) is dropped with a notice.
* a sealed receipt, ``*.json``: the event sequence is synthesized from what the
  receipt keeps (round, builds, parity depths, reps, the stored verdict). Build
  logs and notices are not in a receipt, so a receipt replay has none.

Both sources satisfy :class:`console.tui.messages.EventSource`: ``events()``
blocks while it paces the stream, ``abort()`` ends it with
``RoundEnded(status="incomplete")``.
"""
from __future__ import annotations

import datetime as _dt
import threading
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Iterator

from console import events as ev
from console.core.untrusted import loads
from console.core.sequential import Preview
from console.engine.buildkey import built_by

EXIT_REPLAY_ABORTED = 130
MAX_GAP_S = 2.0  # a replay never sits silent longer than this (at speed 1)
NOT_REDERIVED = ("this receipt cannot be judged by this version of the gate: its verdict is shown "
                 "as recorded, not re-derived")


class _Paced:
    """Pacing and abort shared by the sources below."""

    def __init__(self, speed: float = 1.0, max_gap: float = MAX_GAP_S) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0 (0 = as fast as possible)")
        self.speed = speed
        self.max_gap = max_gap
        self._abort = threading.Event()

    def abort(self) -> None:
        self._abort.set()

    @property
    def aborted(self) -> bool:
        return self._abort.is_set()

    def _paced(self, stream: Iterable[ev.Event]) -> Iterator[ev.Event]:
        prev: float | None = None
        last_at = 0.0
        for event in stream:
            if self.speed > 0 and prev is not None:
                gap = min(max(event.at - prev, 0.0), self.max_gap) / self.speed
                if gap > 0:
                    self._abort.wait(gap)
            if self._abort.is_set():
                yield ev.RoundEnded(status="incomplete", exit_code=EXIT_REPLAY_ABORTED,
                                    message="replay aborted", at=last_at)
                return
            prev = last_at = event.at
            yield event


class ListSource(_Paced):
    """An in-memory stream (tests, benchmarks, embedding)."""

    def __init__(self, events: Iterable[ev.Event], speed: float = 0.0,
                 max_gap: float = MAX_GAP_S) -> None:
        super().__init__(speed, max_gap)
        self._events = list(events)

    def events(self) -> Iterator[ev.Event]:
        return self._paced(self._events)


class ReplaySource(_Paced):
    """Plays a journal (``.jsonl``) or a sealed receipt (``.json``).

    ``speed`` multiplies real pace (gaps between events' ``at`` stamps, each capped at
    ``max_gap`` seconds); ``speed=0`` replays as fast as possible.
    """

    def __init__(self, path: str | Path, speed: float = 1.0, max_gap: float = MAX_GAP_S) -> None:
        super().__init__(speed, max_gap)
        self.path = Path(path)

    def events(self) -> Iterator[ev.Event]:
        if self.path.suffix == ".jsonl":
            stream = read_journal(self.path)
        else:
            stream = events_from_receipt(loads(self.path.read_bytes()), str(self.path))
        return self._paced(stream)


class FollowSource(_Paced):
    """A journal that is still being written, shown as it grows (``tail -f`` for a round).

    Complete lines are shown as soon as they land; the stream ends with the round's own
    ``RoundEnded``. Only the viewer stops on abort: the round, in its own process, goes on.
    ``alive`` says whether the round can still write; once it cannot (its process or batch
    job was killed) and nothing new has come, the stream ends as ``incomplete``.
    """

    def __init__(self, path: str | Path, alive: Callable[[], bool] = lambda: True, poll_s: float = 0.25) -> None:
        super().__init__(speed=0.0)
        self.path, self.alive, self.poll_s = Path(path), alive, poll_s

    def events(self) -> Iterator[ev.Event]:
        last_at, offset, n, pending = 0.0, 0, 0, b""
        while True:
            with self.path.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
            offset += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                n += 1
                event = _event(line, self.path, n, last_at)
                last_at = event.at
                yield event
                if isinstance(event, ev.RoundEnded):
                    return
            if self.aborted:
                yield ev.RoundEnded(status="incomplete", exit_code=EXIT_REPLAY_ABORTED,
                                    message="stopped watching; the round goes on in its own process", at=last_at)
                return
            if not lines and not self.alive():
                yield ev.RoundEnded(status="incomplete", exit_code=EXIT_REPLAY_ABORTED, at=last_at,
                                    message="the round stopped without ending (its process or job was killed); "
                                            "nothing was sealed for it")
                return
            self._abort.wait(self.poll_s)


RECEIPT_SCHEMA_PREFIX = "bench-console/receipt/"
_GIVE = ("Give a sealed receipt (results/<profile>/receipt.json) or a round's journal "
         "(results/<profile>/journal/<round>.jsonl).")


def check_replayable(path: Path, follow: bool = False) -> None:
    """Raise a UsageError (what is wrong, what to give) unless ``path`` is a receipt or a
    journal ``ReplaySource``/``FollowSource`` can play: asked before the console opens,
    which would otherwise sit empty on a file it cannot read."""
    from ..errors import UsageError
    from ..results import journal, store
    data = store.read_file(path, "a receipt or a journal", _GIVE)
    if follow or path.suffix == ".jsonl":
        jr = journal.parse_journal(data)
        if jr.damaged_line is not None:
            raise UsageError(f"{path} is not a journal: line {jr.damaged_line} is not a JSON event", _GIVE)
        if follow and not jr.events:
            return      # a round that has only just opened its journal: the first line is on its way
        if not jr.events or jr.events[0].get("kind") != "round_started":
            raise UsageError(f"{path} is not a journal: a round's journal starts with a round_started event",
                             _GIVE)
        return
    try:
        doc = loads(data)
    except ValueError as e:
        raise UsageError(f"{path} is neither a receipt nor a journal: {e}", _GIVE) from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    # a newer schema is still replayed, its verdict shown as recorded (NOT_REDERIVED)
    if not (isinstance(schema, str) and schema.startswith(RECEIPT_SCHEMA_PREFIX)):
        raise UsageError(f"{path} is not a receipt: its schema is {schema!r}, not {RECEIPT_SCHEMA_PREFIX}N", _GIVE)


def _event(line: dict[str, Any] | bytes, path: Path, n: int, last_at: float) -> ev.Event:
    """Line ``n``'s event (parsed, or raw bytes), or a notice that it was skipped (an unknown
    kind, not JSON)."""
    try:
        return ev.event_from_dict(loads(line) if isinstance(line, bytes) else line)
    except (ValueError, TypeError) as exc:
        return ev.Notice(level="warn", code="journal-unknown-event",
                         message=f"{path.name}:{n}: skipped ({exc})", at=last_at)


def read_journal(path: Path) -> Iterator[ev.Event]:
    """Events of a journal, in order; a torn last line is dropped with a notice, unknown
    kinds are skipped with one, and a bad line before the end is an error."""
    from ..results import journal
    jr = journal.read_journal(path)
    if jr.damaged_line is not None:
        raise ValueError(f"{path}:{jr.damaged_line}: not a JSON event line")
    last_at = 0.0
    for n, d in enumerate(jr.events, start=1):
        event = _event(d, path, n, last_at)
        last_at = event.at
        yield event
    if jr.torn_tail:
        yield ev.Notice(level="warn", code="journal-torn",
                        message=f"{path.name}: last line {len(jr.events) + 1} is torn; replayed up to "
                                f"line {len(jr.events)}", at=last_at)


def _epoch(iso: Any, default: float = 0.0) -> float:
    try:
        return _dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def _regrade(receipt: dict[str, Any]) -> dict[str, Any] | None:
    """Depth statuses, worst depths and the verdict, recomputed by the gate's own rules."""
    from ..core import gate, parity
    from ..core.receipt import Receipt, ReceiptError
    try:
        r = Receipt.from_dict(receipt)
        rules = r.rules
        verdict = gate.decide(r, rules).to_dict()
    except (ReceiptError, KeyError, TypeError, ValueError):
        return None     # not a receipt this version can judge: show it as recorded
    par = r.parity
    depths, worst, parity_ok = {}, {}, {}
    for b in ("main", "candidate"):
        side, basis = par.side(b), (par.main if b == "candidate" else None)
        adj = par.adjudication if b == "candidate" else None
        for st in gate.grade_depths(side, basis, rules, adj):
            depths[(b, st.depth)] = {"status": st.status, "reasons": st.messages}
        worst[b] = parity.worst_depth(side.depths if side else [], rules)
        parity_ok[b] = gate.parity_ok(side, basis, rules, adj)
    scored = {b: gate.path_ok(sp, rules) for b, sp in par.scored_path.items()}
    return {"verdict": verdict, "depths": depths, "worst": worst, "scored": scored, "parity_ok": parity_ok}


def events_from_receipt(receipt: dict[str, Any], path: str | None = None) -> Iterator[ev.Event]:
    """The event sequence a sealed receipt implies, stamped along its recorded durations.

    Values are copied as recorded. Grades and the verdict are not taken as stored:
    they are re-derived by the core (parity statuses, ``gate.decide``) under the
    rules the receipt itself records, exactly as `console verdict` does.
    """
    graded = _regrade(receipt)
    verdict = graded["verdict"] if graded else _as_recorded(receipt.get("verdict") or {})
    parity = receipt.get("parity") or {}
    t = _epoch(receipt.get("started_at"))
    yield from _opening(receipt, parity, graded is not None, t)
    t = yield from _build_events(receipt.get("builds") or {}, t)
    t = yield from _parity_events(parity, graded, t)
    yield from _ruling_events(graded, t)
    t = yield from _rep_events(receipt, t)
    d = (verdict.get("speed") or {}).get("decision")
    if isinstance(d, dict):     # where the round's last look left it (the verdict's own decision)
        yield ev.DecisionStep.of(d, at=t)
    yield ev.PhaseStarted(phase="verdict", at=t)
    yield ev.VerdictReady(verdict=verdict, at=t)
    end = _epoch(receipt.get("ended_at"), t)
    yield ev.RoundEnded(status=str(receipt.get("status", "complete")),
                        exit_code=int(verdict.get("exit_code") or 0), receipt_path=path,
                        message="replayed from a sealed receipt", at=max(end, t))


def _as_recorded(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored verdict this version cannot re-derive: shown, never passed off as re-derived."""
    return {**stored, "warnings": list(stored.get("warnings") or []) + [
        {"code": "not-rederived", "message": NOT_REDERIVED}]}


def _opening(receipt: dict[str, Any], parity: dict[str, Any], rederived: bool, t: float) -> Iterator[ev.Event]:
    profile = receipt.get("profile") or {}
    depths = sorted({d.get("depth") for b in ("main", "candidate")
                     for d in (parity.get(b) or {}).get("depths") or [] if "depth" in d})
    yield ev.RoundStarted(round_id=str(receipt.get("round_id", "")),
                          profile=str(profile.get("name", "")),
                          profile_sha256=str(profile.get("sha256", "")),
                          runtime=str((receipt.get("runtime") or {}).get("kind", "")), host=receipt.get("host") or {},
                          plan={"depths": depths, "parity": profile.get("parity") or {}}, at=t)
    yield ev.Notice(level="info", code="replay-receipt",
                    message="replay of a sealed receipt: build logs, telemetry samples and "
                            "notices are not kept in a receipt", at=t)
    if not rederived:
        yield ev.Notice(level="warn", code="not-rederived", message=NOT_REDERIVED, at=t)


def _build_events(builds: dict[str, Any], t: float) -> Generator[ev.Event, None, float]:
    """Each build, stamped along its recorded build time; returns the time after the last."""
    yield ev.PhaseStarted(phase="build", at=t)
    for name, b in builds.items():
        yield ev.BuildStarted(build=name, source=b.get("source") or {}, at=t)
        t += float(b.get("build_s") or 0.0)
        yield ev.BuildDone(build=name, image_id=str(b.get("image_id", "")),
                           base_image_id=str(b.get("base_image_id", "")),
                           compiler=str(b.get("compiler", "")),
                           seconds=float(b.get("build_s") or 0.0), at=t,
                           reused_from=built_by(b.get("reused_from")), key=str(b.get("key") or ""))
    return t


def _parity_events(parity: dict[str, Any], graded: dict[str, Any] | None,
                   t: float) -> Generator[ev.Event, None, float]:
    """Each build's depths and parity result, then the scored path; returns the time after."""
    yield ev.PhaseStarted(phase="parity", at=t)
    for name in ("main", "candidate"):
        p = parity.get(name)
        if not isinstance(p, dict):
            continue
        for d in p.get("depths") or []:
            t += 0.05
            if graded:
                d = {**d, **graded["depths"].get((name, d.get("depth")), {})}
            yield _depth_graded(name, d, t)
        statuses = [d.get("status") for d in p.get("depths") or []]
        ok = (graded["parity_ok"].get(name, False) if graded
              else p.get("ok", p.get("error") is None and "fail" not in statuses))
        worst = graded["worst"].get(name) if graded else p.get("worst_depth")
        yield ev.ParityDone(build=name, ok=bool(ok), worst_depth=worst,
                            error=p.get("error"), at=t)
    for name, sp in (parity.get("scored_path") or {}).items():
        if isinstance(sp, dict):
            yield ev.ScoredPathChecked(build=name, depth=int(sp.get("depth") or 0),
                                       top1=sp.get("top1"), kl=sp.get("kl"),
                                       ok=bool(graded["scored"].get(name)) if graded else bool(sp.get("ok", False)),
                                       error=sp.get("error"), at=t)
    return t


def _depth_graded(build: str, d: dict[str, Any], t: float) -> ev.DepthGraded:
    return ev.DepthGraded(build=build, depth=int(d.get("depth", 0)),
                          top1=float(d.get("top1", float("nan"))),
                          kl=float(d.get("kl", float("nan"))),
                          ref_entropy=float(d.get("ref_entropy", float("nan"))),
                          status=str(d.get("status") or "recorded"),
                          reasons=list(d.get("reasons") or []),
                          stats=d.get("stats") if isinstance(d.get("stats"), dict) else None, at=t)


def _ruling_events(graded: dict[str, Any] | None, t: float) -> Iterator[ev.Event]:
    """The re-derived adjudication ruling and task accuracy grade, where the round had them."""
    regraded = (graded or {}).get("verdict", {}).get("parity") or {}
    if isinstance(regraded.get("adjudication"), dict):
        ruling = regraded["adjudication"]
        yield ev.AdjudicationStep(step="ruling", message=str(ruling.get("summary", "")), figures=ruling,
                                  ok=bool(ruling.get("passed")), at=t)
    if isinstance(regraded.get("accuracy"), dict):
        grade = {k: v for k, v in regraded["accuracy"].items() if k not in ("reference_ok", "candidate_ok")}
        yield ev.AccuracyGraded(grade=grade, reasons=[r.get("message", "") for r in
                                                      (graded or {})["verdict"].get("reasons") or []
                                                      if str(r.get("code", "")).startswith("accuracy-")], at=t)


def _rep_events(receipt: dict[str, Any], t: float) -> Generator[ev.Event, None, float]:
    """The plan, then every rep stamped along its wall time; returns the time after the last."""
    yield ev.PhaseStarted(phase="reps", at=t)
    seq = receipt.get("sequential") or {}
    if isinstance(seq.get("preview"), dict):
        preview = Preview(**seq["preview"])
        prior = seq.get("prior") or []
        yield ev.PlanReady(preview=seq["preview"], sentence=preview.sentence(), prior_rounds=len(prior),
                           prior_pairs=sum(len(p.get("log_ratios") or []) for p in prior), at=t)
    for rep in receipt.get("reps") or []:
        yield ev.RepStarted(build=str(rep.get("build", "")), index=int(rep.get("index") or 0),
                            position=int(rep.get("position") or 0),
                            phase=str(rep.get("phase", "")), at=t)
        if isinstance(rep.get("telemetry"), dict) and rep["telemetry"]:
            tel = rep["telemetry"]
            values = {k: v.get("median") for k, v in (tel.get("metrics") or {}).items() if isinstance(v, dict)}
            yield ev.TelemetrySample(source=str(tel.get("source", "host")), values=values or tel,
                                     build=rep.get("build"), index=rep.get("index"), at=t)
        t += float(rep.get("wall_s") or 0.0)
        yield ev.RepDone(rep=rep, at=t)
    return t
