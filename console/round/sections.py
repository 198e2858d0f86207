"""The sections a round hands over (docs/PROTOCOL.md, "The handover"): one drawn per rep key, shared
by both builds, its commitment journaled before the first build runs it and every seed revealed when
the timed stage is over (a retried rep runs its section again, so no seed is out while a run may
still be handed it); the scored-path check hands over the document's own tokens instead."""
from __future__ import annotations

import os

from .. import events as ev
from ..core.records.section import SectionDraw, chunks_of, commitment_of, section_tokens
from .schedule import Item

SEED_BYTES = 16


class Sections:
    def __init__(self, doc: list[int], vocab: int, emit: ev.Emit):
        self.doc, self.vocab, self._emit = doc, vocab, emit
        self._drawn: dict[tuple[str, int], SectionDraw] = {}
        self._revealed: set[tuple[str, int]] = set()

    def chunks(self, item: Item) -> list[list[int]]:
        """What ``item`` computes, handed over chunk by chunk: drawn for its key on first use."""
        key = (item.phase, item.index)
        d = self._drawn.get(key)
        if d is None:
            seed = os.urandom(SEED_BYTES).hex()
            d = self._drawn[key] = SectionDraw(item.phase, item.index, seed, commitment_of(seed))
            self._emit(ev.SectionCommitted(phase=item.phase, index=item.index, commitment=d.commitment))
        return chunks_of(item.metric, section_tokens(d.seed, self.doc, self.vocab, item.tokens, item.repeat))

    def document(self, item: Item) -> list[list[int]]:
        """The document's own tokens after the item's depth: the scored path, graded against the reference."""
        return chunks_of(item.metric, [self.doc[item.depth:item.depth + item.tokens]])

    def reveal_all(self) -> list[SectionDraw]:
        """Every drawn section, each seed revealed (the round's end: nothing more is handed over)."""
        for key in sorted(self._drawn.keys() - self._revealed):
            self._reveal(key)
        return [self._drawn[k] for k in sorted(self._drawn)]

    def _reveal(self, key: tuple[str, int]) -> None:
        self._revealed.add(key)
        self._emit(ev.SectionRevealed(phase=key[0], index=key[1], seed=self._drawn[key].seed))
