"""The real app in a real terminal: tmux runs the installed `console demo`, we read the screen
and press q (the round is tests/installed.py's, which the wheel tests read too)."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_demo_round_in_a_real_terminal_shows_the_verdict(installed_demo):
    inst, _, screen = installed_demo
    # all of it on one capture: the verdict's arithmetic and the parity table
    assert "gain +" in screen.text and "frontier" in screen.text and "parity vs reference" in screen.text, \
        "the verdict never appeared on screen:\n" + screen.text
    assert "pass/pass" in screen.text                    # depth rows graded for both builds
    assert "accepted" in screen.text, screen.text
    assert screen.exit_code == "0"                       # q after an accepted round
    assert (inst.work / "results" / "demo" / "receipt.json").exists()
