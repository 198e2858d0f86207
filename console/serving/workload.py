"""The requests a block sends: drawn from a token-id document by seed, or read from a JSON Lines
file, optionally spread over time by Poisson arrivals, and hashed so a receipt pins the exact work.

A document is public, and so is every slice of it: a server could compute the answers to all of
them before it says it is ready. ``mix_drawn`` overwrites a few positions of each prompt (its last
always) with ids drawn from the whole vocabulary the tokenizer makes from text, so that the prompts a
round can send are far too many to answer in advance (``prompt_space_log10`` says how many), and
``plant_copies`` plants a drawn run the prompt ends by starting again, so the right answer is made of ids
the document never uses; the round's seed, drawn from the operating system when its blocks begin,
picks which.

Nothing here touches the network; reading a workload file is the only I/O.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ..core.records.untrusted import loads
from ..files import read_capped

FILE_KEYS = ("prompt", "max_tokens", "input_tokens")
MAX_WORKLOAD_BYTES = 64 << 20       # tens of thousands of long prompts; /dev/zero is refused, not read


class WorkloadError(ValueError):
    """A workload that cannot be sent. From a file: ``path`` and ``line`` (1-based; 0 for the file
    as a whole) say where, ``expected`` what should have been there."""

    def __init__(self, path: Path | str | None, line: int, expected: str):
        self.path, self.line, self.expected = path, line, expected
        super().__init__(expected if path is None else f"{path}: line {line}: {expected}")


@dataclass(frozen=True)
class Request:
    index: int
    prompt: tuple[int, ...] | str       # token ids, or text the server tokenizes
    input_tokens: int                   # len of an id prompt; a text prompt's count if known, else 0
    max_tokens: int
    at_s: float = 0.0                   # arrival offset from the block's start; 0 = when a slot is free
    # a turn of a conversation (``conversations``): its first turn's prompt is whole; a later turn's
    # ``prompt`` is only its new user part, sent after the conversation's history (earlier prompts
    # and the answers served to them), and ``input_tokens`` counts the whole prompt as asked
    conversation: int | None = None
    turn: int = 0                       # 1-based within its conversation; 0 for a single-turn request


# --- drawn from a document -------------------------------------------------------------

def _span(name: str, span: tuple[int, int], least: int) -> tuple[int, int]:
    lo, hi = int(span[0]), int(span[1])
    if lo < least or hi < lo:
        raise WorkloadError(None, 0, f"{name} lengths must be {least} ≤ lo ≤ hi, got [{lo}, {hi}]")
    return lo, hi


def _fits(doc: Sequence[int], tokens: int, what: str) -> None:
    if tokens > len(doc):
        raise WorkloadError(None, 0, f"{what} of {tokens} tokens is longer than the document "
                                     f"({len(doc)} tokens)")


def _places(doc: Sequence[int], count: int, tokens: int, what: str) -> None:
    if count > len(doc) - tokens + 1:
        raise WorkloadError(None, 0, f"the document ({len(doc)} tokens) has too few places for "
                                     f"{count} distinct {what} of up to {tokens} tokens")


def _slice(doc: Sequence[int], at: int, n: int) -> tuple[int, ...]:
    return tuple(int(t) for t in doc[at:at + n])


def random_requests(doc: Sequence[int], n: int, input: tuple[int, int], output: tuple[int, int],
                    seed: int, bos: int | None = None) -> list[Request]:
    """``n`` prompts cut from ``doc`` at seeded offsets, input and output lengths uniform in their
    inclusive ranges. With ``bos`` a prompt is ``(bos,)`` and L − 1 document tokens, counted as L."""
    lo, hi = _span("input", input, 1)
    olo, ohi = _span("output", output, 1)
    extra = 1 if bos is not None else 0
    _fits(doc, hi - extra, "an input")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(lo, hi + 1, size=n)
    outs = rng.integers(olo, ohi + 1, size=n)
    offsets = rng.integers(0, len(doc) - (lengths - extra) + 1)
    head = (bos,) if bos is not None else ()
    return [Request(index=i, prompt=head + _slice(doc, int(offsets[i]), int(lengths[i]) - extra),
                    input_tokens=int(lengths[i]), max_tokens=int(outs[i])) for i in range(n)]


def shared_prefix_requests(doc: Sequence[int], n: int, prefix: int, input: tuple[int, int],
                           output: tuple[int, int], seed: int, groups: int = 1,
                           bos: int | None = None) -> list[Request]:
    """``groups`` prefixes of ``prefix`` tokens, request i in group i mod ``groups``; each prompt is
    its group's prefix and a suffix of a length uniform in ``input``. Suffixes start at distinct
    offsets, so no two prompts are the same and a prefix cache can reuse only the prefix."""
    lo, hi = _span("suffix", input, 1)
    olo, ohi = _span("output", output, 1)
    extra = 1 if bos is not None else 0
    if prefix < 1 + extra or groups < 1:
        raise WorkloadError(None, 0, f"a shared prefix needs prefix ≥ {1 + extra} and groups ≥ 1, "
                                     f"got prefix {prefix}, groups {groups}")
    _fits(doc, prefix - extra, "a prefix")
    _fits(doc, hi, "a suffix")
    _places(doc, groups, prefix - extra, "prefixes")
    _places(doc, n, hi, "suffixes")
    rng = np.random.default_rng(seed)
    starts = rng.choice(len(doc) - (prefix - extra) + 1, size=groups, replace=False)
    head = (bos,) if bos is not None else ()
    heads = [head + _slice(doc, int(s), prefix - extra) for s in starts]
    lengths = rng.integers(lo, hi + 1, size=n)
    outs = rng.integers(olo, ohi + 1, size=n)
    offsets = rng.choice(len(doc) - hi + 1, size=n, replace=False)
    return [Request(index=i, prompt=heads[i % groups] + _slice(doc, int(offsets[i]), int(lengths[i])),
                    input_tokens=prefix + int(lengths[i]), max_tokens=int(outs[i])) for i in range(n)]


# --- drawn tokens --------------------------------------------------------------------

def mix_drawn(requests: Sequence[Request], pool: Sequence[int], drawn: int, seed: int,
              keep: int = 1) -> list[Request]:
    """Copies of ``requests`` whose prompts have ``drawn`` positions overwritten with ids drawn
    uniformly from ``pool``: the last position always (the next token's context is never a slice of
    the document), the others distinct and uniform after the first ``keep`` (a BOS, a shared
    prefix). A prompt shorter than that keeps what it can; a text prompt is left as it is."""
    if drawn <= 0 or not pool:
        return list(requests)
    rng = np.random.default_rng(seed)
    out = []
    for r in requests:
        if isinstance(r.prompt, str) or len(r.prompt) <= keep:
            out.append(r)
            continue
        ids = list(r.prompt)
        last = len(ids) - 1
        others = rng.choice(np.arange(keep, last), size=min(drawn - 1, last - keep), replace=False)
        for at in [last, *(int(x) for x in others)]:
            ids[at] = int(pool[int(rng.integers(len(pool)))])
        out.append(replace(r, prompt=tuple(ids)))
    return out


COPY_MAX = 16       # ids of a planted run
ECHO = 3            # of its first ids the prompt ends on


def copy_length(prompt_len: int, max_tokens: int, keep: int) -> int:
    """Ids in the run planted in a prompt: up to COPY_MAX, enough for the answer to copy after the
    echo, and room after ``keep`` for the run twice and the echo; 0 when fewer than ECHO + 2 fit."""
    m = min(COPY_MAX, max_tokens + ECHO, (prompt_len - keep - ECHO - 1) // 2)
    return m if m >= ECHO + 2 else 0


def plant_copies(requests: Sequence[Request], pool: Sequence[int], seed: int, keep: int = 1) -> list[Request]:
    """Copies of ``requests`` each carrying a run of ids drawn from ``pool`` (drawn across the
    vocabulary: ``engine.vocabulary``), placed twice after the first ``keep`` positions, with the
    prompt ending on the run's first ECHO ids. A model continues a sequence it has seen, so the
    reference's answer copies the rest of the run: ids the document never uses, which a server that
    computes only part of the vocabulary cannot serve (a request departs unless every copied id is in
    its part). Twice and three ids deep, because a small model copies a sequence seen once, and
    cued by one id, only now and then (Gemma 3 270M: 2 ids per answer on average)."""
    rng = np.random.default_rng([seed, 0x0C0B1E])
    out = []
    for r in requests:
        m = 0 if isinstance(r.prompt, str) else copy_length(len(r.prompt), r.max_tokens, keep)
        if not m:
            out.append(r)
            continue
        ids = list(r.prompt)
        run = [int(pool[int(i)]) for i in rng.integers(len(pool), size=m)]
        at = keep + int(rng.integers(len(ids) - ECHO - 2 * m - keep))     # the runs end before the echo
        ids[at:at + 2 * m] = run + run
        ids[len(ids) - ECHO:] = run[:ECHO]
        out.append(replace(r, prompt=tuple(ids)))
    return out


def prompt_space_log10(doc_tokens: int, input: tuple[int, int], drawn: int, pool: int, fixed: int = 1) -> float:
    """log10 of how many prompts ``random_requests`` and ``mix_drawn`` can make: each length, each
    place in the document, each choice of the other drawn positions, each drawn id (an upper
    bound: a drawn id may equal the one it replaces). ``fixed``: leading positions never drawn."""
    total = 0.0
    for length in range(input[0], input[1] + 1):
        places = doc_tokens - (length - fixed) + 1
        free = max(length - fixed - 1, 0)            # positions a drawn id may take besides the last
        others = min(drawn - 1, free) if drawn > 0 else 0
        ids = others + 1 if drawn > 0 and length > fixed else 0     # the last position, and the others
        total += places * math.comb(free, others) * pool ** ids
    return math.log10(total) if total > 0 else 0.0


# --- read from a file ------------------------------------------------------------------

def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _prompt(value: Any) -> tuple[int, ...] | str:
    """The prompt of one line, or a ValueError saying what was expected."""
    if isinstance(value, str):
        if not value:
            raise ValueError("prompt is empty")
        return value
    if isinstance(value, list):
        if not value:
            raise ValueError("prompt is empty")
        for t in value:
            if not _is_int(t) or t < 0:
                raise ValueError(f"prompt token ids must be non-negative integers, got {json.dumps(t)}")
        return tuple(value)
    raise ValueError(f"prompt must be text or a list of token ids, got {type(value).__name__}")


def _file_request(index: int, obj: Any, default_max_tokens: int) -> Request:
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object ({type(obj).__name__})")
    unknown = sorted(set(obj) - set(FILE_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))} (expected {', '.join(FILE_KEYS)})")
    if "prompt" not in obj:
        raise ValueError("missing prompt")
    prompt = _prompt(obj["prompt"])
    max_tokens = obj.get("max_tokens", default_max_tokens)
    if not _is_int(max_tokens) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {json.dumps(max_tokens)}")
    counted = len(prompt) if isinstance(prompt, tuple) else 0
    given = obj.get("input_tokens", counted)
    if not _is_int(given) or given < 0:
        raise ValueError(f"input_tokens must be a non-negative integer, got {json.dumps(given)}")
    if isinstance(prompt, tuple) and given != counted:
        raise ValueError(f"input_tokens {given} disagrees with the prompt's {counted} token ids")
    return Request(index=index, prompt=prompt, input_tokens=given, max_tokens=max_tokens)


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of a JSON Lines file read within the size cap;
    a file that is not UTF-8 or a line that is not JSON is a WorkloadError naming it."""
    try:
        lines = read_capped(path, MAX_WORKLOAD_BYTES).decode("utf-8").splitlines()
    except ValueError as e:         # UnicodeDecodeError too
        raise WorkloadError(path, 0, f"a readable UTF-8 file ({e})") from e
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, loads(line)
        except ValueError as e:
            raise WorkloadError(path, number, f"invalid JSON ({e})") from e


def file_requests(path: Path, default_max_tokens: int) -> list[Request]:
    """One request per non-blank line of a JSON Lines file:
    ``{"prompt": "text" | [ids], "max_tokens": n, "input_tokens": n}`` (the last two optional)."""
    out: list[Request] = []
    for number, obj in json_lines(path):
        try:
            out.append(_file_request(len(out), obj, default_max_tokens))
        except ValueError as e:
            raise WorkloadError(path, number, str(e)) from e
    if not out:
        raise WorkloadError(path, 0, "no requests")
    return out


# --- arrivals and identity -------------------------------------------------------------

def poisson_arrivals(requests: Sequence[Request], rate: float, seed: int) -> list[Request]:
    """Copies with ``at_s`` set by exponential gaps of mean 1/``rate`` (requests per second); the
    first request arrives after its own gap, not at 0, which would mean 'at once'."""
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadError(None, 0, f"an arrival rate must be a positive number, got {rate}")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=len(requests))
    return [replace(r, at_s=float(t)) for r, t in zip(requests, np.cumsum(gaps))]


def _row(r: Request) -> dict[str, Any]:
    row = {"index": r.index, "prompt": r.prompt if isinstance(r.prompt, str) else list(r.prompt),
           "input_tokens": r.input_tokens, "max_tokens": r.max_tokens, "at_s": round(r.at_s, 6)}
    if r.conversation is not None:      # a single-turn request's row is as it always was
        row |= {"conversation": r.conversation, "turn": r.turn}
    return row


def workload_sha256(requests: Sequence[Request]) -> str:
    """sha256 of a canonical JSON of every request, so a receipt pins the exact work sent. For a
    conversation it pins the structure (which conversation, which turn, each new user part, the
    lengths, the arrivals); the answers it is sent with are pinned by the block's served file."""
    rows = [_row(r) for r in requests]
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
