"""Every format the console exports, by name: one registry, one module per format.

Its readers: ``--format`` (every command that prints tables, ``console verdict`` included), the
files a finished round leaves beside its record (run by what drives rounds, ``commands`` and the
queue's worker, once the round has sealed, so a round never writes a report), and ``console blocks
--save-result``. A new format is a module here and a line in ``EXPORTERS``.
"""
from __future__ import annotations

from pathlib import Path
from typing import IO, Any, Mapping, Sequence

from ... import events as ev
from ...core.records import kinds
from ...core.records.receipt import BUILDS, Receipt
from ...core.records.verdict import VerdictRecord
from ..tables import Table
from . import csv, json, junit, markdown, summary, sweep_page, table, vllm
from .base import TABLES, Exporter

EXPORTERS: dict[str, Exporter] = {e.name: e for e in (
    table.EXPORTER, markdown.EXPORTER, csv.EXPORTER, json.EXPORTER,      # --format, in --help's order
    junit.EXPORTER, summary.EXPORTER, sweep_page.EXPORTER, vllm.EXPORTER)}

FORMATS = tuple(name for name, e in EXPORTERS.items() if e.reads == TABLES)


def render(tables: Sequence[Table], fmt: str, out: IO[str], table: str | None = None) -> None:
    """Write ``tables`` in the format ``fmt`` names (one of FORMATS); CSV holds one table: ``table``."""
    out.write(EXPORTERS[fmt].render(tables, table))


def write_sealed(out: Path, r: Receipt, verdict: VerdictRecord) -> list[Path]:
    """The reports a sealed receipt's kind leaves beside it (its CI reports), from it and its verdict."""
    made = [(e, e.render(r, verdict)) for e in after(kinds.of(r.kind))]
    return _save([(e, e.path(out, round_id=r.round_id), text) for e, text in made])


def export(record: Receipt | Mapping[str, Any], out: Path) -> list[Path]:
    """Every file ``record``'s kind leaves beside it (its record's ``exports``, in their order): the
    round's sealed receipt, as the round read it, or a sweep's document, which seals nothing."""
    if isinstance(record, Receipt):
        return write_sealed(out, record, record.sealed_verdict())
    kind = kinds.of(record["kind"])
    made = [(e, e.render(record)) for e in after(kind)]
    return _save([(e, e.path(out, round_id=record["round_id"]), text) for e, text in made])


def after(kind: kinds.KindRecord) -> list[Exporter]:
    """The exporters a kind's record names: each reads a sealed receipt (RECEIPT) or, for a kind
    that seals none, its document (SWEEP); a test holds every kind to that."""
    return [EXPORTERS[name] for name in kind.exports]


def write_results(folder: Path, r: Receipt, receipt_id: str) -> list[Path]:
    """Each build's vLLM-named result of a serving round's receipt (``console blocks --save-result``);
    of a serving matrix round's, each cell's and build's."""
    e = EXPORTERS["vllm"]
    if r.profile.matrix is None:
        return _save([(e, e.path(folder, round_id=r.round_id, build=b), e.render(r, b, receipt_id)) for b in BUILDS])
    named = lambda cell, b: folder / (vllm.CELL_STEM.format(round_id=r.round_id, cell=vllm.cell_stem(cell),  # noqa: E731
                                                           build=b) + e.suffix)
    return _save([(e, named(cell, b), vllm.render(r, b, receipt_id, cell))
                   for cell in r.profile.matrix.cells for b in BUILDS])


def _save(made: Sequence[tuple[Exporter, Path, str]]) -> list[Path]:
    for e, path, text in made:
        e.save(path, text)
    return [path for _, path, _ in made]


def export_notice(record: Receipt | Mapping[str, Any], out: Path) -> ev.Notice:
    """``export``, said as one notice: the files written, or why not (the round is sealed either way)."""
    try:
        written = export(record, out)
    except OSError as e:
        return ev.Notice(level="error", code="export-failed",
                         message=f"the round is sealed, but its reports were not written: {e}")
    return ev.Notice(level="info", code="exported", message="written: " + ", ".join(str(p) for p in written))
