"""The console as a user installs it, and its demo round in a real terminal.

One wheel, one fresh venv outside the checkout, one `console demo` in tmux: the wheel tests read
what that round left (results under the working directory, nothing written into the package) and
the terminal test reads its screen. One demo round serves both, as it would serve a user.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Installed:
    venv: Path
    work: Path          # the user's working directory: results land here
    site: Path          # the installed package
    env: dict

    def console(self, *args: str, check: int | None = 0) -> subprocess.CompletedProcess:
        run = subprocess.run(["console", *args], cwd=self.work, env=self.env, capture_output=True, text=True,
                             timeout=1800)
        if check is not None:
            assert run.returncode == check, f"console {' '.join(args)} exited {run.returncode}:\n" \
                                            f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        return run

    def tree(self) -> set[str]:
        """Files of the installed package, less the bytecode Python writes beside modules."""
        return {str(p.relative_to(self.site)) for p in self.site.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}


def install(top: Path) -> Installed:
    """A wheel of this checkout installed into a fresh venv under ``top``."""
    wheels, venv, work = top / "wheels", top / "venv", top / "work"
    work.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, cwd=top)
    wheel, = wheels.glob("bench_console-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, cwd=top)
    site = next((venv / "lib").glob("python3*/site-packages")) / "console"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    return Installed(venv, work, site, env)


@dataclass
class Screen:
    text: str           # the last capture, with the verdict on it
    exit_code: str      # what `console demo` exited with, after q


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def demo_in_tmux(inst: Installed, scratch: Path) -> Screen:
    """`console demo --candidate fast` of the installed console in a 160x50 tmux window, from the
    user's working directory; waits for the verdict on one screen, presses q, returns what it saw."""
    assert shutil.which("tmux"), "tmux is needed for this test (.ci/run installs it)"
    scratch.mkdir(parents=True, exist_ok=True)
    session = f"bench-console-{int(time.time())}"
    cmd = (f"cd {inst.work} && env -u PYTHONPATH -u VIRTUAL_ENV PATH={inst.venv / 'bin'}:$PATH TERM=xterm-256color "
           f"console demo --candidate fast; echo $? > {scratch}/exit; sleep 30")
    # Size the window first, then start the app in it: a server that already runs may
    # give a new detached window its own default size until it is resized.
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "50")
    _tmux("resize-window", "-t", session, "-x", "160", "-y", "50")
    time.sleep(0.5)
    _tmux("send-keys", "-t", session, cmd, "Enter")
    try:
        screen, t0 = "", time.monotonic()
        while time.monotonic() - t0 < 600:
            screen = _tmux("capture-pane", "-p", "-t", session)
            # all of it on one capture: the verdict's arithmetic and the parity table
            if "gain +" in screen and "frontier" in screen and "parity vs reference" in screen:
                break
            time.sleep(1)
        else:
            return Screen(screen, "")
        time.sleep(1)
        _tmux("send-keys", "-t", session, "q")
        t1 = time.monotonic()
        while not (scratch / "exit").exists() and time.monotonic() - t1 < 30:
            time.sleep(0.5)
        code = (scratch / "exit").read_text().strip() if (scratch / "exit").exists() else ""
        return Screen(screen, code)
    finally:
        _tmux("kill-session", "-t", session)
