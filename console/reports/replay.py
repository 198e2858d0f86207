"""Replay a recorded round through the same screen that shows a live one.

Two inputs are understood:

* a journal, ``*.jsonl``: one ``Event.to_dict()`` per line, as a round writes it.
  A torn last line (the writer died mid-line) is dropped with a notice.
* a sealed receipt, ``*.json``: the event sequence is synthesized from what the
  receipt keeps (round, builds, parity depths, reps), with the verdict the gate
  re-derives from it. Build logs and notices are not in a receipt, so a receipt
  replay has none. A receipt this version cannot read is an error that names the
  file and why; one whose verdict the gate cannot re-derive is shown with its
  stored verdict, marked ``not-rederived``.

Both sources satisfy :class:`console.events.EventSource`: ``events()``
blocks while it paces the stream, ``abort()`` ends it with
``RoundEnded(status="incomplete")``.
"""
from __future__ import annotations

import datetime as _dt
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Iterator, Mapping

from console import events as ev
from console.core.records.parity import DepthFigures, DepthStatus
# events carry plain JSON (journals, replays): a sealed receipt's frozen parts go in through plain()
from console.core.records.receipt import BUILDS, Build, ParityRecord, Receipt, ReceiptError, plain
from console.core.records.untrusted import loads
from console.core.statistics.sequential import Preview
from console.core.records.verdict import Caveat, VerdictRecord
from console.engine.buildkey import built_by

EXIT_REPLAY_ABORTED = 130
MAX_GAP_S = 2.0  # a replay never sits silent longer than this (at speed 1)
NOT_REDERIVED = ("this receipt cannot be judged by this version of the gate: its verdict is shown "
                 "as recorded, not re-derived")
NOT_REDERIVED_CODE = "not-rederived"


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
            stream = events_from_receipt(read_receipt(loads(self.path.read_bytes()), self.path), str(self.path))
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


_GIVE = ("Give a sealed receipt (results/<profile>/receipt.json) or a round's journal "
         "(results/<profile>/journal/<round>.jsonl).")


def check_replayable(path: Path, follow: bool = False) -> None:
    """Raise a UsageError (what is wrong, what to give) unless ``path`` is a receipt or a
    journal ``ReplaySource``/``FollowSource`` can play: asked before the console opens,
    which would otherwise sit empty on a file it cannot read."""
    from ..errors import UsageError
    from ..files import read_file
    from ..results import journal
    data = read_file(path, "a receipt or a journal", _GIVE)
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
    try:
        read_receipt(doc, path)
    except ReceiptError as e:
        raise UsageError(str(e), _GIVE) from None


def read_receipt(doc: Any, path: str | Path = "the receipt") -> Receipt:
    """The receipt a replay shows, read by the one reader of receipts; one this version cannot read
    (a newer schema, no recorded rules, a damaged part) is refused, naming the file and why: a
    replay never dresses up a document it cannot read."""
    try:
        return Receipt.from_dict(doc)
    except ReceiptError as e:
        raise ReceiptError(f"{path} is not a receipt this version can read: {e}") from None


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


@dataclass
class _Graded:
    """What the gate re-derives from a receipt: the verdict, and each depth's status and each
    build's worst depth, parity and scored path, by the receipt's own rules (every depth, build
    and scored path the receipt holds has its entry)."""
    verdict: VerdictRecord
    depths: dict[tuple[str, int], DepthStatus] = field(default_factory=dict)     # by (build, depth)
    worst: dict[str, int | None] = field(default_factory=dict)
    parity_ok: dict[str, bool] = field(default_factory=dict)
    scored: dict[str, bool] = field(default_factory=dict)


def _regrade(r: Receipt) -> _Graded | None:
    """Depth statuses, worst depths and the verdict, recomputed by the gate's own rules; None
    where the gate cannot judge this receipt."""
    from ..core.decisions import gate, parity_grade
    from ..core.records import parity
    rules = r.rules
    try:
        graded = _Graded(VerdictRecord.of(gate.decide(r, rules)))
    except (ReceiptError, KeyError, TypeError, ValueError):
        return None
    par = r.parity
    for b in BUILDS:
        side, basis = par.side(b), (par.main if b == "candidate" else None)
        adj = par.adjudication if b == "candidate" else None
        for st in parity_grade.grade_depths(side, basis, rules, adj):
            graded.depths[(b, st.depth)] = st
        graded.worst[b] = parity.worst_depth(side.depths if side else [], rules)
        graded.parity_ok[b] = parity_grade.parity_ok(side, basis, rules, adj)
    graded.scored = {b: parity_grade.path_ok(sp, rules) for b, sp in par.scored_path.items()}
    return graded


def events_from_receipt(receipt: Receipt | Mapping[str, Any], path: str | None = None) -> Iterator[ev.Event]:
    """The event sequence a sealed receipt implies, stamped along its recorded durations.

    Values are copied as recorded. Grades and the verdict are not taken as stored:
    they are re-derived by the core (parity statuses, ``gate.decide``) under the
    rules the receipt itself records, exactly as `console verdict` does.
    """
    r = receipt if isinstance(receipt, Receipt) else read_receipt(receipt, path or "the receipt")
    graded = _regrade(r)
    verdict = graded.verdict if graded else _as_recorded(r, path)
    t = _epoch(r.started_at)
    yield from _opening(r, graded is not None, t)
    t = yield from _build_events(r.builds, t)
    t = yield from _parity_events(r.parity, graded, t)
    yield from _ruling_events(graded, t)
    t = yield from _rep_events(r, t)
    if verdict.decision is not None:     # where the round's last look left it (the verdict's own decision)
        yield ev.DecisionStep.of(verdict.decision.to_dict(), at=t)
    if cells := verdict.speed.cells:     # a matrix round: its cells as the verdict decided them
        yield ev.CellsStep.of(max(c.pairs or 0 for c in cells), cells, at=t)
    yield ev.PhaseStarted(phase="verdict", at=t)
    yield ev.VerdictReady(verdict=verdict, at=t)
    end = _epoch(r.ended_at, t)
    yield ev.RoundEnded(status=r.status, exit_code=int(verdict.exit_code or 0), receipt_path=path,
                        message="replayed from a sealed receipt", at=max(end, t))


def _as_recorded(r: Receipt, path: str | None) -> VerdictRecord:
    """The verdict the receipt was sealed with, for one the gate cannot re-derive: shown with a
    caveat that says so, never passed off as re-derived. A receipt that stores none has nothing
    honest to show."""
    stored = r.verdict
    if stored is None:
        raise ReceiptError(f"{path or 'the receipt'}: the gate cannot re-derive its verdict, and it stores none")
    keys = stored.keys if "warnings" in stored.keys else (*stored.keys, "warnings")
    return replace(stored, warnings=(*stored.warnings, Caveat(NOT_REDERIVED_CODE, NOT_REDERIVED)), keys=keys)


def _opening(r: Receipt, rederived: bool, t: float) -> Iterator[ev.Event]:
    sides = [side for b in BUILDS if (side := r.parity.side(b)) is not None]
    depths = sorted({d.depth for side in sides for d in side.depths})
    yield ev.RoundStarted(round_id=r.round_id, profile=r.profile.name, profile_sha256=r.profile.sha256,
                          runtime=str(r.runtime.kind or ""), host=r.host,
                          plan={"depths": depths, "parity": plain(r.profile.parity)}, at=t)
    yield ev.Notice(level="info", code="replay-receipt",
                    message="replay of a sealed receipt: build logs, telemetry samples and "
                            "notices are not kept in a receipt", at=t)
    if not rederived:
        yield ev.Notice(level="warn", code=NOT_REDERIVED_CODE, message=NOT_REDERIVED, at=t)


def _build_events(builds: dict[str, Build], t: float) -> Generator[ev.Event, None, float]:
    """Each build, stamped along its recorded build time; returns the time after the last."""
    yield ev.PhaseStarted(phase="build", at=t)
    for name, b in builds.items():
        yield ev.BuildStarted(build=name, source=b.source, at=t)
        t += b.build_s or 0.0
        yield ev.BuildDone(build=name, image_id=str(b.image_id), base_image_id=str(b.base_image_id),
                           compiler=str(b.compiler), seconds=b.build_s or 0.0, at=t,
                           reused_from=built_by(b.reused_from), key=b.key or "")
    return t


def _parity_events(parity: ParityRecord, graded: _Graded | None,
                   t: float) -> Generator[ev.Event, None, float]:
    """Each build's depths and parity result, then the scored path; returns the time after. Without
    the gate's grades (it cannot judge the receipt) a depth is shown as recorded."""
    yield ev.PhaseStarted(phase="parity", at=t)
    for name in BUILDS:
        side = parity.side(name)
        if side is None:
            continue
        for d in side.depths:
            t += 0.05
            yield _depth_graded(name, d, graded.depths[(name, d.depth)] if graded else None, t)
        ok = graded.parity_ok[name] if graded else side.error is None
        worst = graded.worst[name] if graded else None
        yield ev.ParityDone(build=name, ok=bool(ok), worst_depth=worst, error=side.error, at=t)
    for name, sp in parity.scored_path.items():
        if sp is not None:
            yield ev.ScoredPathChecked(build=name, depth=sp.depth or 0, top1=sp.top1, kl=sp.kl,
                                       ok=graded.scored[name] if graded else False,
                                       error=sp.error, at=t)
    return t


def _depth_graded(build: str, d: DepthFigures, grade: DepthStatus | None, t: float) -> ev.DepthGraded:
    """One depth, with the gate's status, or "recorded" where the gate could not grade it."""
    return ev.DepthGraded(build=build, depth=d.depth, top1=d.top1, kl=d.kl, ref_entropy=d.ref_entropy,
                          status=str(grade.status) if grade else "recorded",
                          reasons=list(grade.messages) if grade else [],
                          stats=d.stats, at=t)


def _ruling_events(graded: _Graded | None, t: float) -> Iterator[ev.Event]:
    """The re-derived adjudication ruling and task accuracy grade, where the round had them (the
    events carry them as JSON, as a live round's do)."""
    if graded is None:
        return
    verdict = graded.verdict
    if (ruling := verdict.adjudication) is not None:
        yield ev.AdjudicationStep(step="ruling", message=ruling.summary, figures=ruling.to_dict(),
                                  ok=ruling.passed, at=t)
    if (accuracy := verdict.accuracy) is not None:
        grade = {k: v for k, v in accuracy.to_dict().items() if k not in ("reference_ok", "candidate_ok")}
        yield ev.AccuracyGraded(grade=grade, reasons=[r.message for r in verdict.reasons
                                                      if r.code.startswith("accuracy-")], at=t)


def _rep_events(r: Receipt, t: float) -> Generator[ev.Event, None, float]:
    """The plan, then every rep stamped along its wall time; returns the time after the last."""
    yield ev.PhaseStarted(phase="reps", at=t)
    seq = r.sequential
    if seq is not None and isinstance(seq.preview, Mapping):
        preview = Preview(**seq.preview)
        yield ev.PlanReady(preview=plain(seq.preview), sentence=preview.sentence(), prior_rounds=len(seq.prior),
                           prior_pairs=sum(len(p.log_ratios) for p in seq.prior), at=t)
    for rep in r.reps:
        yield ev.RepStarted(build=rep.build, index=rep.index, position=rep.position, phase=rep.phase, at=t)
        if rep.telemetry and isinstance(rep.telemetry, Mapping):
            tel = rep.telemetry
            values = {k: v.get("median") for k, v in (tel.get("metrics") or {}).items() if isinstance(v, Mapping)}
            yield ev.TelemetrySample(source=str(tel.get("source", "host")), values=values or plain(tel),
                                     build=rep.build, index=rep.index, at=t)
        t += rep.wall_s or 0.0
        yield ev.RepDone(rep=rep, at=t)
    return t
