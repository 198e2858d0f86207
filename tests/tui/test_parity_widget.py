"""The parity panel's spread table: each depth's KLStats, shown once a round reports them.

Regenerate the snapshot after an intended change of look:
    .venv/bin/pytest tests/tui/test_parity_widget.py --snapshot-update
"""
from __future__ import annotations

import json

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from console import events as ev
from console.core.records.parity import KLStats
from console.reports.replay import ReplaySource
from console.tui.widgets.parity import ParityPanel, fmt_kl_se, fmt_small, fmt_top1_se

from .conftest import SIZE, recorded_receipt

DEPTHS = [64, 128, 256, 512, 1024, 2048, 4096]
ROWS = 64


def stats(kl: float, top1: float, rms_dp: float) -> KLStats:
    """A depth's KLStats as the event carries it (figures shaped like the demo's main)."""
    return KLStats.from_dict({"rows": ROWS, "kl_se": kl * 0.052, "kl_median": kl * 0.95, "kl_p90": kl * 1.5, "kl_p95": kl * 1.7,
            "kl_p99": kl * 2.1, "kl_p999": kl * 2.2, "kl_max": kl * 2.2,
            "top1_se": (top1 * (1 - top1) / ROWS) ** 0.5, "rms_dp": rms_dp, "dp_rows": ROWS})


# (build, depth) -> top1, mean KL, RMS Δp: main as the demo measures it, a candidate a little worse
FIGURES = {("main", d): (0.984 if d == 64 else 1.0, kl, dp) for d, kl, dp in
           zip(DEPTHS, (1.7e-6, 1.5e-6, 1.3e-6, 1.1e-6, 9.4e-7, 8.3e-7, 7.6e-7),
               (8.2e-7, 4.5e-7, 4.6e-7, 3.4e-7, 2.4e-6, 1.6e-6, 3.5e-7))}
FIGURES |= {("candidate", d): (0.969 if d >= 2048 else top1, kl * 3.1, dp * 2.7)
            for (_, d), (top1, kl, dp) in FIGURES.items()}


class _PanelApp(App):
    """The parity panel alone, in the dashboard's 58-cell left column."""

    CSS = "#left { width: 58; height: 1fr; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="left"):
            yield ParityPanel()


def _grade(panel: ParityPanel, builds=("main", "candidate"), with_stats: bool = True) -> None:
    panel.set_plan({"parity": {"depths": DEPTHS, "top1_min": 0.95, "kl_max": 0.05}})
    for build in builds:
        for d in DEPTHS:
            top1, kl, dp = FIGURES[build, d]
            panel.graded(build, d, top1, kl, "pass", [], stats=stats(kl, top1, dp) if with_stats else None)
        panel.done(build, True, 4096, None)


def test_formats_fit_their_columns():
    assert fmt_small(1.72e-6) == "1.7e-6" and fmt_small(0.0) == "0" and fmt_small(None) == "—"
    assert fmt_kl_se(1.7e-6, 8.9e-8) == "1.7e-6±5%" and fmt_kl_se(0.0, 0.0) == "0"
    assert fmt_kl_se(1e-3, 1e-3) == "1.0e-3±100%" and fmt_kl_se(1e-3, None) == "1.0e-3"
    assert fmt_top1_se(0.984375, 0.0157) == "0.984±.016" and fmt_top1_se(1.0, 0.0) == "1.000±.000"
    # a row KL is never negative, so its SE is at most the mean: every cell fits its column
    assert max(len(fmt_kl_se(k, k)) for k in (1e-9, 0.5, 12.0)) <= 11


async def test_spread_is_hidden_until_stats_arrive_then_shows_the_candidate():
    app = _PanelApp()
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(ParityPanel)
        _grade(panel, with_stats=False)          # an older journal: no spread, the table as before
        await pilot.pause()
        assert not panel.spread_table.display
        _grade(panel, builds=("main",))
        await pilot.pause()
        assert panel.spread_table.display
        cell = lambda d, c: str(panel.spread_table.get_cell(str(d), c))  # noqa: E731
        assert cell(64, "top1") == "0.984±.016" and cell(64, "kl") == "1.7e-6±5%"
        _grade(panel, builds=("candidate",))
        await pilot.pause()
        assert cell(4096, "top1") == "0.969±.022" and cell(4096, "dp") == fmt_small(3.5e-7 * 2.7)
        assert "candidate's 64 rows per depth: spread (KL in nats)" in str(panel.query_one(".parity-spread-caption").render())


def test_spread_snapshot(snap_compare):
    async def run_before(pilot) -> None:
        _grade(pilot.app.query_one(ParityPanel))
        await pilot.pause()

    assert snap_compare(_PanelApp(), terminal_size=SIZE, run_before=run_before)


def test_a_replayed_receipt_carries_each_depths_stats(recorded, tmp_path):
    receipt = recorded_receipt(recorded)
    spread = stats(2.3e-5, 0.992, 1e-5)
    receipt["parity"]["candidate"]["depths"][-1]["stats"] = spread.to_dict()
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    graded = [e for e in ReplaySource(tmp_path / "receipt.json", speed=0).events() if isinstance(e, ev.DepthGraded)]
    assert [(e.build, e.depth, e.stats) for e in graded if e.stats] == [("candidate", 4096, spread)]


async def test_drift_and_adjudicated_depths_pass_with_their_note():
    app = _PanelApp()
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(ParityPanel)
        panel.set_plan({"parity": {"depths": [256, 768], "top1_min": 0.75, "kl_max": 0.05}})
        panel.graded("main", 256, 1.0, 0.0, "pass", [])
        panel.graded("main", 768, 1.0, 0.0, "pass", [])
        panel.graded("candidate", 256, 1.0, 0.0325, "drift", ["depth 256: drifting from main: mean KL 0.0325"])
        panel.graded("candidate", 768, 1.0, 0.0586, "adjudicated", ["depth 768: pass (adjudicated): KL 0.0586"])
        panel.done("candidate", True, 768, None)
        await pilot.pause()
        assert str(panel.table.get_cell("256", "grade")) == "pass/drift"
        assert str(panel.table.get_cell("768", "grade")) == "pass/adj"
        notes = panel.notes_plain
        assert "candidate ok, worst 768" in notes
        assert "@256 c: depth 256: drifting from main" in notes and "@768 c: depth 768: pass (adjudicated)" in notes


async def test_the_dashboard_shows_accuracy_and_adjudication_as_they_happen():
    from console.tui.screens.dashboard import DashboardScreen

    class _DashApp(App):
        def on_mount(self) -> None:
            self.push_screen(DashboardScreen(lambda: 0.0))

    app = _DashApp()
    async with app.run_test(size=SIZE) as pilot:
        dash = app.screen
        dash.apply_batch([
            ev.AdjudicationStep(step="ruling", message="pass (adjudicated): depth 768: KL 0.0586 ≤ 2x spread 0.0412",
                                ok=True),
            ev.AccuracyProgress(build="candidate", done=40, total=158, correct=12),
            ev.AccuracyGraded(grade={"status": "fail", "reference_score": 0.652, "candidate_score": 0.1, "delta": -0.552,
                                     "tolerance": 0.06, "estimator": "paired t interval over items"},
                              reasons=["task accuracy 10.0% against the reference's 65.2%"]),
        ])
        await pilot.pause()
        text = "\n".join(f"{level} {code}: {message}" for level, code, message in dash.notices.entries)
        assert "info adjudication: ruling: pass (adjudicated)" in text
        assert "candidate: 40/158 items, 12 right (30.0%)" in text
        assert "error accuracy: fail: reference 65.2%, candidate 10.0% (-55.2 pts, tolerance ±6.0" in text
