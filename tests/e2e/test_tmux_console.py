"""The real app in a real terminal: tmux runs `console demo`, we read the screen and press q."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def test_demo_round_in_a_real_terminal_shows_the_verdict(tmp_path, base_image):
    assert shutil.which("tmux"), "tmux is needed for this test (.ci/run installs it)"
    session = f"bench-console-{int(time.time())}"
    out = tmp_path / "out"
    console = ROOT / ".venv" / "bin" / "console"
    cmd = (f"cd {ROOT} && TERM=xterm-256color {console} demo --candidate fast --out {out}; "
           f"echo $? > {tmp_path}/exit; sleep 30")
    # Size the window first, then start the app in it: a server that already runs may
    # give a new detached window its own default size until it is resized.
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "50")
    _tmux("resize-window", "-t", session, "-x", "160", "-y", "50")
    time.sleep(0.5)
    _tmux("send-keys", "-t", session, cmd, "Enter")
    try:
        screen = ""
        t0 = time.monotonic()
        while time.monotonic() - t0 < 600:
            screen = _tmux("capture-pane", "-p", "-t", session)
            # all of it on one capture: the verdict's arithmetic and the parity table
            if "gain +" in screen and "frontier" in screen and "parity vs reference" in screen:
                break
            time.sleep(1)
        else:
            pytest.fail("the verdict never appeared on screen:\n" + screen)
        assert "pass/pass" in screen                    # depth rows graded for both builds
        assert "accepted" in screen, screen
        time.sleep(1)
        _tmux("send-keys", "-t", session, "q")
        t1 = time.monotonic()
        while not (tmp_path / "exit").exists() and time.monotonic() - t1 < 30:
            time.sleep(0.5)
        assert (tmp_path / "exit").read_text().strip() == "0"
        assert (out / "receipt.json").exists()
    finally:
        _tmux("kill-session", "-t", session)
