"""The files a finished round leaves beside its record: one registry, run by what drives rounds
(``commands``, the queue's worker) once the round has sealed, so a round never writes a report.

Each exporter takes the round's record as it was written (a sealed receipt, or a sweep's document)
and the results directory, writes what it makes of that kind of record and returns the paths.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from .. import events as ev
from ..core.receipt import Receipt
from .sweep_html import write_sweep_html
from .text import write_reports

Exporter = Callable[[Mapping[str, Any], Path], list[Path]]


def _ci_reports(record: Mapping[str, Any], out: Path) -> list[Path]:
    """junit.xml and summary.md of a sealed receipt (its document, read here once)."""
    r = Receipt.from_dict(record)
    return write_reports(out, r, r.sealed_verdict())


def _sweep_page(record: Mapping[str, Any], out: Path) -> list[Path]:
    """A sweep's page, beside its document under sweeps/."""
    return [write_sweep_html(record, out / "sweeps" / f"{record['round_id']}.html")]


# What a record is exported as, by its kind (round.kinds: its name): a sealed receipt of any kind
# gets the CI reports; a sweep, which seals no verdict, its page.
SEALED: dict[str, Exporter] = {"ci-reports": _ci_reports}
EXPORTERS: dict[str, dict[str, Exporter]] = {"sweep": {"sweep-page": _sweep_page}}


def export(record: Mapping[str, Any], out: Path) -> list[Path]:
    """Every exporter's files for ``record``, in the order of its kind's registry."""
    return [path for write in EXPORTERS.get(str(record.get("kind", "round")), SEALED).values()
            for path in write(record, out)]


def export_notice(record: Mapping[str, Any], out: Path) -> ev.Notice:
    """``export``, said as one notice: the files written, or why not (the round is sealed either way)."""
    try:
        written = export(record, out)
    except OSError as e:
        return ev.Notice(level="error", code="export-failed",
                         message=f"the round is sealed, but its reports were not written: {e}")
    return ev.Notice(level="info", code="exported", message="written: " + ", ".join(str(p) for p in written))
