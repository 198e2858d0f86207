"""Headless Chromium draws a page to a PNG. It fails, never skips, when Chromium is missing."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def screenshot(page: Path, shot: Path, size: tuple[int, int] = (1280, 2400)) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("this test needs Chromium to render the report: run `make test-fast` or `make test` (they "
                    "install `chromium` with apt)", pytrace=False)
    run = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--user-data-dir={shot.parent / 'chromium-profile'}", f"--screenshot={shot}",
                          f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=180)
    assert shot.exists(), f"chromium wrote no screenshot (exit {run.returncode}): {run.stderr[-2000:]}"


def inked(shot: Path) -> tuple[float, int]:
    """(share of pixels that are not near-white, number of distinct colours)."""
    import numpy as np
    from PIL import Image
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int).reshape(-1, 3)
    return float((pixels.min(axis=1) < 235).mean()), len(np.unique(pixels, axis=0))


def dom(page: Path, profile: Path) -> str:
    """The page's DOM as headless Chromium parsed it (``--dump-dom``)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("this test needs Chromium to parse the page: run `make test-fast` or `make test` (they "
                    "install `chromium` with apt)", pytrace=False)
    run = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                          "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert run.stdout.strip(), f"chromium dumped no DOM (exit {run.returncode}): {run.stderr[-2000:]}"
    return run.stdout
