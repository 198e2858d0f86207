"""The verdict banner shows exactly the outcomes the gate produces, from its real verdicts."""
from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from console.core.records.verdict import OUTCOMES, Outcome
from console.tui.widgets.bigtext import BigText
from console.tui.widgets.verdict import BANNER, UNKNOWN, VerdictPanel, banner_label
from core.receipts import OUTCOME_RECEIPTS, default_rules

from .conftest import gate_verdict

RULES = default_rules()
RECEIPTS = OUTCOME_RECEIPTS


def test_banner_covers_exactly_the_gates_outcomes():
    assert set(BANNER) == set(OUTCOMES)
    for outcome in OUTCOMES:
        label, cls = banner_label(outcome, "m")
        assert label and not label.startswith("?") and cls != UNKNOWN
        assert f"VerdictPanel.{cls} BigText" in VerdictPanel.DEFAULT_CSS  # styled, not default
    assert banner_label("accepted", "xl") == ("TIER XL", "-tier")
    assert banner_label("noise") == ("NOISE", "-noise")
    assert f"VerdictPanel.{UNKNOWN} BigText" in VerdictPanel.DEFAULT_CSS


@pytest.mark.parametrize("word", ["accept", "pass", "passed", "tier", "no_change", "not_significant",
                                  "ACCEPTED", "", None])
def test_words_the_gate_never_says_are_shown_as_unknown(word):
    label, cls = banner_label(word, "m")
    assert label == f"? {str(word or '').upper().replace('_', ' ')}".rstrip() and cls == UNKNOWN


def test_every_outcome_has_a_real_receipt():
    assert set(RECEIPTS) == set(OUTCOMES)
    for outcome, make in RECEIPTS.items():
        assert gate_verdict(make(), RULES).outcome == outcome


class _PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield VerdictPanel()


async def test_banner_renders_each_verdict_of_the_gate():
    app = _PanelApp()
    async with app.run_test(size=(100, 20)) as pilot:
        panel = app.query_one(VerdictPanel)
        classes = {cls for _, cls in BANNER.values()} | {UNKNOWN}
        for outcome, make in RECEIPTS.items():
            verdict = gate_verdict(make(), RULES)
            panel.show(verdict)
            await pilot.pause()
            label, cls = banner_label(verdict.outcome, verdict.tier)
            assert label == (f"TIER {verdict.tier.upper()}" if outcome == "accepted"
                             else BANNER[outcome][0])
            assert panel.label == app.query_one(BigText).text == label
            assert panel.classes & classes == {cls}  # the previous outcome's class is gone
            assert f"outcome {outcome}" in panel.text_plain
            assert f"exit {Outcome(outcome).exit_code}" in panel.text_plain
            for item in verdict.reasons + verdict.warnings:
                assert item.message in panel.text_plain
            speed = verdict.speed
            if speed.suppressed:
                assert f"not computed: {speed.suppressed}" in panel.text_plain
            if outcome == "noise":
                assert f"SD {speed.noise.sd:.2%}" in panel.text_plain
            if verdict.tier_span:
                assert f"(interval spans {verdict.tier_span[0]}–{verdict.tier_span[1]})" in panel.text_plain
            if outcome == "implausible":
                assert f"would be tier {verdict.would_be_tier}" in panel.text_plain
