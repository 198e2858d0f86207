"""What an exporter is: a name, the suffix of the file it makes, what it renders from, and how."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# What ``render`` takes, by ``Exporter.reads``:
TABLES = "tables"       # (tables, table=None): a command's tables; ``table`` names the one CSV holds
RECEIPT = "receipt"     # (receipt, verdict): a sealed receipt and the verdict to report
BUILD = "build"         # (receipt, build, receipt_id): one build of a serving round's receipt
SWEEP = "sweep"         # (document,): a sweep's document, which seals no verdict


def write_text(path: Path, text: str) -> None:
    path.write_text(text)


@dataclass(frozen=True)
class Exporter:
    name: str                       # its key in the registry: a --format choice, or a file's kind
    suffix: str                     # what its file's name ends with
    reads: str                      # TABLES, RECEIPT, BUILD or SWEEP: what ``render`` takes
    render: Callable[..., str]      # that input -> the text printed or written
    stem: str = ""                  # its file's name before the suffix, under the folder it writes to
    save: Callable[[Path, str], None] = write_text      # how its file is written (atomically, and where else)

    def path(self, folder: Path, **fields: Any) -> Path:
        """The file it writes under ``folder``; ``fields`` fill the stem's ``{round_id}``, ``{build}``."""
        return folder / (self.stem.format(**fields) + self.suffix)
