"""What a timed section computes: drawn per pair from the operating system's randomness, known to no
build before the console's clock starts, and re-derivable from the seed the receipt reveals.

A section is ``tokens`` ids per repeat: a slice of the document at a drawn offset (real text, so
the model runs as it is used), overwritten by a drawn run of ids from the whole vocabulary that the
section repeats at its end. A model that copies (as any transformer does) then has to put its next
token among ids the document never uses, so a build that computes only part of the vocabulary, or
a cheaper model than the one parity checked, departs from main on exactly the figure that is checked.

Both builds of a pair get the same section (their outputs are compared, and the pair's work is the
same); each pair, warm-up, short run and guard rep has its own. The ids are derived from the seed
with SHAKE-256 alone, so any Python re-derives them (no random generator whose stream may change).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from console.core.records.served import commitment_of   # the one commitment rule (a workload's too)

RUN_MIN_TOKENS = 8          # a section this long or longer carries a drawn run that it repeats


@dataclass(frozen=True)
class SectionDraw:
    """One drawn section: the rep key it serves both builds at, its seed (revealed after both have
    run) and the commitment journaled before either did."""
    phase: str
    index: int
    seed: str
    commitment: str

    def holds(self) -> bool:
        return commitment_of(self.seed) == self.commitment

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SectionDraw:
        return cls(phase=str(d["phase"]), index=int(d["index"]), seed=str(d["seed"]),
                   commitment=str(d["commitment"]))


class _Stream:
    """Unsigned 64-bit words from SHAKE-256 of the seed and a label: a stable, portable stream."""

    def __init__(self, seed: str, label: str):
        self._data = hashlib.shake_256(f"{seed}/{label}".encode()).digest(8 * 4096)
        self._at = 0

    def below(self, n: int) -> int:
        """A number in [0, n) (the modulo bias of 64 bits over n < 2**32 is below 1e-9)."""
        if self._at + 8 > len(self._data):
            raise ValueError("a section draws at most 4096 numbers")
        word = int.from_bytes(self._data[self._at:self._at + 8], "little")
        self._at += 8
        return word % n


def run_length(tokens: int) -> int:
    """Ids in the drawn run: none below RUN_MIN_TOKENS; then an eighth of the section, 2 to 16."""
    return 0 if tokens < RUN_MIN_TOKENS else max(2, min(16, tokens // 8))


def section_tokens(seed: str, doc: list[int], vocab: int, tokens: int, repeat: int = 1) -> list[list[int]]:
    """The ids of each repeat's section: a document slice with a drawn run repeated at its end."""
    if tokens < 1 or repeat < 1:
        raise ValueError("a section has at least one token and one repeat")
    if not doc:
        raise ValueError("an empty document has no slice to draw")
    out = []
    for r in range(repeat):
        s = _Stream(seed, f"repeat-{r}")
        start = s.below(max(1, len(doc) - tokens + 1))
        ids = [doc[(start + i) % len(doc)] for i in range(tokens)]
        n = run_length(tokens)
        if n:
            run = [s.below(vocab) for _ in range(n)]
            at = s.below(tokens // 2 - n + 1)
            ids[at:at + n] = run
            # the section ends on the run again, all but its last id: the right next token is run[-1]
            ids[tokens - (n - 1):] = run[:n - 1]
        else:
            ids[-1] = s.below(vocab)
        out.append(ids)
    return out


def chunks_of(metric: str, sections: list[list[int]]) -> list[list[int]]:
    """How a section is handed over: a decode metric one id at a time (the engine never holds the
    next token before answering this one), any other metric one chunk per repeat."""
    if metric.startswith("decode"):
        return [[t] for ids in sections for t in ids]
    return [list(ids) for ids in sections]
