"""The timed workload: its seed drawn from the operating system once both servers are ready, and
each block's requests derived from it, so the revealed seed re-derives every block and no server
knows the work before the blocks begin."""
from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import Sequence

from ...core.decisions.sweep import Level
from ...core.records.served import WorkloadDraw, commitment_of
from ...errors import UsageError
from ...serving import conversations as conv
from ...serving import workload as wl


def draw(spec, doc: list[int], pool: Sequence[int]) -> WorkloadDraw:
    """A fresh seed for the timed workload, its commitment, and how large the space it draws from is.
    The caller journals the commitment before the first block and records the seed after the last."""
    seed = secrets.token_hex(16)
    w = spec.workload
    space = wl.prompt_space_log10(len(doc), tuple(w.input), w.drawn, len(pool)) if w.kind == "random" else 0.0
    return WorkloadDraw(seed=seed, commitment=commitment_of(seed), drawn=w.drawn if w.draws_ids else 0,
                        space_log10=round(space, 2), pool=len(pool) if w.draws_ids else 0)


def block_requests(spec, doc: list[int], seed: str, phase: str, index: int, load: Level,
                   pool: Sequence[int]) -> list[wl.Request]:
    """A block's requests: seeded by the round's drawn seed, the phase and the index, so the two builds
    of a pair answer the same work, no two blocks repeat it, and no server knows it before the blocks
    begin (a file's prompts are its own, and public; a trace gives only a conversation's lengths).
    Drawn ids come from ``pool``, the ids the model's tokenizer makes from text (engine.vocabulary)."""
    w = spec.workload
    block = int.from_bytes(hashlib.sha256(f"{seed}/{phase}/{index}".encode()).digest()[:8], "big")
    bos = doc[0]        # every prompt starts as the document does (llama.cpp's tokenizer: BOS)
    if w.kind == "random":
        reqs = wl.random_requests(doc, w.requests, tuple(w.input), tuple(w.output), block, bos=bos)
        reqs = wl.plant_copies(wl.mix_drawn(reqs, pool, w.drawn, block, keep=1), pool, block, keep=1)
    elif w.kind == "shared_prefix":
        reqs = wl.shared_prefix_requests(doc, w.requests, w.prefix, tuple(w.input), tuple(w.output), block,
                                         groups=w.groups, bos=bos)
        reqs = wl.mix_drawn(reqs, pool, w.drawn, block, keep=w.prefix)  # the prefix stays shared
        reqs = wl.plant_copies(reqs, pool, block, keep=w.prefix)
    elif w.kind == "conversations":
        return _conversations(w, doc, block, bos, load, pool)
    else:
        reqs = wl.file_requests(Path(w.file), w.output[1])
    if load.rate > 0:
        reqs = wl.poisson_arrivals(reqs, load.rate, block)
    return reqs


def _conversations(w, doc: list[int], block: int, bos: int, load: Level, pool: Sequence[int]) -> list[wl.Request]:
    """A block's conversations: their shapes drawn from the profile's ranges or read from its trace,
    their tokens from the document and the block's seed (each new part's drawn ids too), and under
    an arrival rate each conversation's first turn arriving by Poisson (its later turns follow the
    answers)."""
    shapes = conv.trace_shapes(Path(w.file)) if w.file else conv.drawn_shapes(
        w.conversations, w.turns, w.prefix, tuple(w.input), tuple(w.output), block)
    reqs = conv.requests_of(doc, shapes, w.prefix, w.groups, block, bos=bos)
    reqs = conv.mix_drawn_turns(reqs, pool, w.drawn, block, w.prefix)
    return conv.conversation_arrivals(reqs, load.rate, block) if load.rate > 0 else reqs


def check_workload(p) -> None:
    """A workload that cannot be drawn from the document, or a workload file with a bad line, is
    refused before anything is built, naming the key (and the line)."""
    doc = [int(x) for x in Path(p.parity.document).read_text().split()]
    try:
        block_requests(p.server, doc, "check", "timed", 0, Level(p.server.concurrency, p.server.rate),
                       range(p.parity.vocab))
    except wl.WorkloadError as e:
        raise UsageError(f"{p.path}: key 'server.workload': {e}",
                         "Fix the workload: its lengths must fit the document, and each line of a "
                         "workload file must be a JSON object with a prompt (of a conversation trace: "
                         "timestamp, chat_id, input_length, output_length).") from None
