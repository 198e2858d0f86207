"""The round dashboard: every event lands on exactly one widget, in arrival order."""
from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer
from console import events as ev
from console.core.decisions.counting import counts
from console.core.decisions.progress import Tracker
from console.reports.text import accuracy_grade_text, accuracy_progress_text, decision_text
from ..widgets.builds import BuildPanel
from ..widgets.cells import CellsPanel
from ..widgets.header import RoundHeader
from ..widgets.notices import NoticeLog
from ..widgets.parity import ParityPanel
from ..widgets.reps import RepPlot, RepSummary, RepTable
from ..widgets.verdict import VerdictPanel

W = TypeVar("W")
BUILDS = ("main", "candidate")
_BUILD_STATE = (ev.BuildStarted, ev.BuildDone, ev.BuildFailed)


class DashboardScreen(Screen[None]):
    """One round, filling in live. ``apply`` is the only way state changes."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(id="dashboard")
        self._clock = clock
        self.progress = Tracker()
        self.ended: ev.RoundEnded | None = None
        self.last_build: str | None = None
        self.events_applied = 0
        self.sweep_lines: list[str] = []    # a sweep's levels as measured (it has no verdict)
        self.frames = 0  # screen refreshes drawn so far
        self._widgets: dict[type, Any] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            ev.RoundStarted: self._round_started, ev.PhaseStarted: self._phase,
            ev.Notice: self._notice, ev.BuildStarted: self._build_started,
            ev.BuildDone: self._build_done, ev.BuildFailed: self._build_failed,
            ev.DepthGraded: self._depth_graded, ev.ParityDone: self._parity_done,
            ev.ScoredPathChecked: self._scored_path, ev.RepStarted: self._rep_started,
            ev.RepDone: self._rep_done, ev.VerdictReady: self._verdict,
            ev.PlanReady: self._plan_ready, ev.DecisionStep: self._decision_step,
            ev.RoundEnded: self._round_ended, ev.AccuracyProgress: self._accuracy_progress,
            ev.AccuracyGraded: self._accuracy_graded, ev.AdjudicationStep: self._adjudication,
            ev.SweepLevel: self._sweep_level, ev.CellsStep: self._cells_step,
        }

    def compose(self) -> ComposeResult:
        yield RoundHeader(self._clock, id="header")
        with Horizontal(id="body"):
            with VerticalScroll(id="left"):
                for build in BUILDS:
                    yield BuildPanel(build)
                yield ParityPanel()
            with Vertical(id="right"):
                table = RepTable()
                table.border_title = "reps"
                yield table
                yield RepSummary(id="reps-summary")
                yield CellsPanel()
                yield RepPlot()
        with Horizontal(id="bottom"):
            yield NoticeLog()
            yield VerdictPanel()
        yield Footer()

    def _compositor_refresh(self) -> None:
        super()._compositor_refresh()
        self.frames += 1  # the app's latency probe waits for one drawn after each batch

    # --- widgets ---------------------------------------------------------
    def _one(self, cls: type[W]) -> W:
        # Looked up once: these widgets live as long as the dashboard, and a query per event
        # is a sizeable share of applying a batch.
        found = self._widgets.get(cls)
        if found is None:
            found = self._widgets[cls] = self.query_one(cls)
        return found

    @property
    def header(self) -> RoundHeader:
        return self._one(RoundHeader)

    @property
    def parity(self) -> ParityPanel:
        return self._one(ParityPanel)

    @property
    def reps(self) -> RepTable:
        return self._one(RepTable)

    @property
    def verdict(self) -> VerdictPanel:
        return self._one(VerdictPanel)

    @property
    def notices(self) -> NoticeLog:
        return self._one(NoticeLog)

    def build_panel(self, build: str) -> BuildPanel:
        found = self.query(f"#build-{build}")
        if found:
            return found.first(BuildPanel)
        # An extra build (e.g. "reference") gets its own panel above parity.
        panel = BuildPanel(build)
        self.query_one("#left").mount(panel, before=self.parity)
        return panel

    # --- applying events -------------------------------------------------
    def apply_batch(self, batch: Iterable[ev.Event]) -> None:
        """Apply events in order, merging floods: log lines per build, newest telemetry."""
        logs: dict[str, list[str]] = {}
        telemetry: dict[str, ev.TelemetrySample] = {}

        def flush_logs() -> None:
            for build, lines in logs.items():
                self.build_panel(build).add_lines(lines)
            logs.clear()

        with self.app.batch_update():
            for event in batch:
                self.events_applied += 1
                if isinstance(event, ev.BuildLog):
                    logs.setdefault(event.build, []).append(event.line)
                    self.last_build = event.build
                    continue
                if isinstance(event, ev.TelemetrySample):
                    telemetry[event.source] = event  # only the newest is shown
                    continue
                if isinstance(event, _BUILD_STATE):
                    flush_logs()  # a build's lines land before its state changes
                handler = self._handlers.get(type(event))
                if handler is not None:
                    handler(event)
            flush_logs()
            self.reps.flush()
            for sample in telemetry.values():
                self.header.set_telemetry(sample.source, sample.values, redraw=False)
            # Derived displays are redrawn once per batch, not once per event.
            self.header.redraw()
            self._one(RepSummary).redraw()

    def note(self, level: str, code: str, message: str, at: float | None = None) -> None:
        self.notices.add(level, code, message, at)

    def _round_started(self, e: ev.RoundStarted) -> None:
        self.header.round_started(e.round_id, e.profile, e.profile_sha256, e.runtime, e.host)
        self.parity.set_plan(e.plan or {})
        self.progress = Tracker()           # the same "rep k/N, ≤ T left" as the headless lines
        self.progress.start(e.plan or {})

    def _phase(self, e: ev.PhaseStarted) -> None:
        self.header.set_phase(e.phase)

    def _notice(self, e: ev.Notice) -> None:
        self.note(e.level, e.code, e.message, e.at)

    def _build_started(self, e: ev.BuildStarted) -> None:
        self.last_build = e.build
        self.build_panel(e.build).started()

    def _build_done(self, e: ev.BuildDone) -> None:
        self.build_panel(e.build).done({"image_id": e.image_id, "base_image_id": e.base_image_id,
                                        "compiler": e.compiler, "seconds": e.seconds,
                                        "reused_from": e.reused_from})

    def _build_failed(self, e: ev.BuildFailed) -> None:
        self.build_panel(e.build).failed(e.message, e.log_tail)
        self.note("error", "build-failed", f"{e.build}: {e.message}", e.at)

    def _depth_graded(self, e: ev.DepthGraded) -> None:
        self.parity.graded(e.build, e.depth, e.top1, e.kl, e.status, list(e.reasons or []),
                           stats=getattr(e, "stats", None) or None)

    def _accuracy_progress(self, e: ev.AccuracyProgress) -> None:
        self.note("error" if e.error else "info", "accuracy", accuracy_progress_text(e), e.at)

    def _accuracy_graded(self, e: ev.AccuracyGraded) -> None:
        self.note("info" if e.grade.status == "pass" else "error", "accuracy", accuracy_grade_text(e), e.at)

    def _adjudication(self, e: ev.AdjudicationStep) -> None:
        level = "warn" if e.ok is None else ("info" if e.ok else "error")
        self.note(level, "adjudication", f"{e.step}: {e.message}", e.at)

    def _parity_done(self, e: ev.ParityDone) -> None:
        self.parity.done(e.build, e.ok, e.worst_depth, e.error)

    def _scored_path(self, e: ev.ScoredPathChecked) -> None:
        self.parity.scored_path(e.build, {"depth": e.depth, "top1": e.top1, "kl": e.kl,
                                          "ok": e.ok, "error": e.error})

    def _rep_started(self, e: ev.RepStarted) -> None:
        self.reps.started(e.build, e.phase, e.index, e.position)

    def _rep_done(self, e: ev.RepDone) -> None:
        rep = e.rep
        self.reps.done(rep)
        progress = self.progress.rep_done(rep, e.at)
        if progress is not None:
            self.header.progress = progress.text()     # drawn with the batch's one header redraw
        # The running figures use the gate's own test of a single rep (the round's claim
        # checks come with the verdict): suspect, failed or unclocked reps never show.
        if rep.phase == "timed" and counts(rep):
            self._one(RepSummary).add(rep.build, float(rep.value))
            self._one(RepPlot).add(rep.build, rep.position, float(rep.value))
        elif rep.phase.startswith("sweep:") and counts(rep):     # a sweep's blocks, until its curve
            self._one(RepPlot).add(rep.build, rep.position, float(rep.value))

    def _sweep_level(self, e: ev.SweepLevel) -> None:
        self._one(RepPlot).add_level(e.figures)
        self.sweep_lines.append(e.sentence)
        self.verdict.sweep_levels(self.sweep_lines)
        self._one(RepSummary).set_decision(e.sentence)
        self.note("info", "sweep", e.sentence, e.at)

    def _plan_ready(self, e: ev.PlanReady) -> None:
        self._one(RepSummary).set_plan(e.sentence)
        self.note("info", "plan", e.sentence, e.at)

    def _decision_step(self, e: ev.DecisionStep) -> None:
        self._one(RepSummary).set_decision(decision_text(e))

    def _cells_step(self, e: ev.CellsStep) -> None:
        self._one(CellsPanel).show(e.pair, e.cells)

    def _verdict(self, e: ev.VerdictReady) -> None:
        self.verdict.show(e.verdict)
        # "-verdict" only resizes #bottom (console.tcss): restyle that subtree, not the whole
        # screen (a restyle of every widget holds the verdict's frame up by ~30 ms).
        self.add_class("-verdict", update=False)
        self.query_one("#bottom").update_node_styles()

    def _round_ended(self, e: ev.RoundEnded) -> None:
        self.ended = e
        self.header.round_ended(e.status)
        level = "info" if e.status == "complete" else "warn"
        msg = f"round {e.status}, exit code {e.exit_code}"
        if e.message:
            msg += f": {e.message}"
        if e.receipt_path:
            msg += f"  (receipt: {e.receipt_path}; press r)"
        self.note(level, "round-ended", msg, e.at)
