"""A sweep's HTML page (``reports.sweep_html``), written under ``sweeps/`` beside its document once
the sweep ends."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .base import SWEEP, Exporter

# The page's modules (the round report's styles, the gate, the results store) load when a page is
# made: the CLI reads this registry at every start, for --format's choices.


def render(doc: Mapping[str, Any]) -> str:
    from ..sweep_html import render_sweep
    return render_sweep(doc)


def _save(path: Path, text: str) -> None:
    from ...results.store import atomic_write
    atomic_write(path, text.encode("utf-8"))       # a browser open on the page never reads half of it


EXPORTER = Exporter("sweep-page", ".html", SWEEP, render, stem="sweeps/{round_id}", save=_save)
