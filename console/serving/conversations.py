"""Multi-turn conversations: each one opens with one of a few shared system prefixes, and each of
its turns asks again with the whole conversation so far (earlier prompts and the answers served to
them) and a new user part. This is the work a prompt cache exists for, and the only work it may
measure honestly: a turn reuses its own history, which no server can know before it has answered.

A conversation's shape (its turns' new-part and output lengths) is drawn from the profile's ranges
or read from a trace file (JSON Lines with the shape of the public Mooncake and Bailian traces:
``timestamp``, ``chat_id``, ``turn``, ``input_length``, ``output_length``); the tokens are always
drawn from the document with the block's seed, a few of each new part's ids from its vocabulary.

The turns are ``workload.Request``s: a first turn's prompt is whole (its prefix and user part), a
later turn's prompt only its new user part, which the load client sends after the history it has
built from the answers (``client.run_block``). Nothing here touches the network.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .workload import Request, WorkloadError, json_lines, mix_drawn

ID_KEYS = ("chat_id", "conversation_id")        # the conversation a trace line belongs to


@dataclass(frozen=True)
class Shape:
    """One turn's lengths: the tokens its prompt adds (the whole first prompt for a first turn, its
    prefix included), and the tokens asked of it."""
    new: int
    output: int


# --- drawn shapes ------------------------------------------------------------------------

def drawn_shapes(conversations: int, turns: int, prefix: int, input: tuple[int, int],
                 output: tuple[int, int], seed: int) -> list[list[Shape]]:
    """``conversations`` of ``turns`` turns each, user parts uniform in ``input`` (a first turn's
    prompt is the ``prefix`` and its user part) and outputs uniform in ``output``."""
    lo, hi = _span("input", input)
    olo, ohi = _span("output", output)
    if conversations < 1 or turns < 1:
        raise WorkloadError(None, 0, f"expected at least one conversation of at least one turn, got "
                                     f"{conversations} of {turns}")
    rng = np.random.default_rng([seed, 1])
    parts = rng.integers(lo, hi + 1, size=(conversations, turns))
    outs = rng.integers(olo, ohi + 1, size=(conversations, turns))
    return [[Shape(new=int(parts[c, t]) + (prefix if t == 0 else 0), output=int(outs[c, t]))
             for t in range(turns)] for c in range(conversations)]


def _span(name: str, span: tuple[int, int]) -> tuple[int, int]:
    lo, hi = int(span[0]), int(span[1])
    if lo < 1 or hi < lo:
        raise WorkloadError(None, 0, f"{name} lengths must be 1 ≤ lo ≤ hi, got [{lo}, {hi}]")
    return lo, hi


# --- a trace -------------------------------------------------------------------------------

@dataclass
class _Open:
    """A conversation as the trace has told it so far."""
    shapes: list[Shape]
    first_ms: float
    last_ms: float
    whole: int              # the last turn's input_length
    last_output: int


def _whole(obj: dict, name: str, least: int) -> int:
    v = obj.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise ValueError(f"expected {name} an integer ≥ {least}, got {_shown(v)}")
    return v


def _shown(v: Any) -> str:
    return "nothing" if v is None else repr(v)


def _conversation_id(obj: dict) -> str:
    given = [k for k in ID_KEYS if k in obj]
    if len(given) != 1:
        raise ValueError(f"expected one conversation id, chat_id or conversation_id, got "
                         f"{' and '.join(given) or 'neither'}")
    v = obj[given[0]]
    if isinstance(v, bool) or not isinstance(v, (int, str)) or v == "":
        raise ValueError(f"expected {given[0]} a non-empty string or an integer, got {_shown(v)}")
    return str(v)


def _timestamp(obj: dict) -> float:
    v = obj.get("timestamp")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"expected timestamp a finite number of milliseconds ≥ 0, got {_shown(v)}")
    return float(v)


def _next_turn(conv: _Open | None, obj: dict, name: str) -> _Open:
    """The conversation ``name`` with the line ``obj`` added, or a ValueError naming what is wrong."""
    at, whole, out = _timestamp(obj), _whole(obj, "input_length", 1), _whole(obj, "output_length", 1)
    turn = 1 if conv is None else len(conv.shapes) + 1
    if "turn" in obj and obj["turn"] != turn:
        raise ValueError(f"expected turn {turn} of conversation {name!r} (its lines in order, 1-based), "
                         f"got {_shown(obj['turn'])}")
    if conv is None:
        return _Open([Shape(whole, out)], at, at, whole, out)
    if at < conv.last_ms:
        raise ValueError(f"expected turn {turn} of conversation {name!r} at or after its turn {turn - 1} "
                         f"({conv.last_ms:g} ms), got timestamp {at:g}")
    new = whole - (conv.whole + conv.last_output)
    if new < 1:
        raise ValueError(f"turn {turn} of conversation {name!r}: input_length {whole} must exceed the previous "
                         f"turn's input_length and output_length ({conv.whole} + {conv.last_output}): its prompt "
                         f"is that history and at least one new token ({new} new)")
    return _Open([*conv.shapes, Shape(new, out)], conv.first_ms, at, whole, out)


def trace_shapes(path: Path) -> list[list[Shape]]:
    """The conversations of a trace file, ordered by their first turn's timestamp: one JSON object
    per non-blank line with ``timestamp`` (ms), ``chat_id`` (or ``conversation_id``), ``turn``
    (optional), ``input_length`` (the whole prompt, history included) and ``output_length``; other
    keys are not read. A line that contradicts its conversation's earlier ones is refused by number."""
    convs: dict[str, _Open] = {}
    for number, obj in json_lines(path):
        try:
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            name = _conversation_id(obj)
            convs[name] = _next_turn(convs.get(name), obj, name)
        except ValueError as e:
            raise WorkloadError(path, number, str(e)) from e
    if not convs:
        raise WorkloadError(path, 0, "expected at least one request line")
    return [c.shapes for c in sorted(convs.values(), key=lambda c: c.first_ms)]


# --- tokens ---------------------------------------------------------------------------------

def requests_of(doc: Sequence[int], shapes: Sequence[Sequence[Shape]], prefix: int, groups: int,
                seed: int, bos: int | None = None) -> list[Request]:
    """The turns of ``shapes`` as requests, conversation by conversation: conversation c opens
    with shared prefix c mod ``groups`` (``prefix`` tokens, a BOS first where given) and each user
    part is a slice of ``doc`` at a seeded place. ``input_tokens`` is the whole prompt a turn asks
    with when every earlier answer is as long as asked."""
    extra = 1 if bos is not None else 0
    if prefix < 1 + extra or groups < 1:
        raise WorkloadError(None, 0, f"conversations need a prefix of at least {1 + extra} tokens and at least "
                                     f"one group, got prefix {prefix}, groups {groups}")
    if prefix - extra > len(doc) or groups > len(doc) - (prefix - extra) + 1:
        raise WorkloadError(None, 0, f"the document ({len(doc)} tokens) cannot hold {groups} distinct prefixes "
                                     f"of {prefix} tokens")
    _fit_parts(doc, shapes, prefix)
    rng = np.random.default_rng([seed, 2])
    starts = rng.choice(len(doc) - (prefix - extra) + 1, size=groups, replace=False)
    head = (bos,) if bos is not None else ()
    heads = [head + tuple(int(t) for t in doc[s:s + prefix - extra]) for s in starts]
    out: list[Request] = []
    for c, turns in enumerate(shapes):
        whole = 0
        for t, shape in enumerate(turns):
            size = shape.new - (prefix if t == 0 else 0)
            at = int(rng.integers(0, len(doc) - size + 1))
            part = tuple(int(x) for x in doc[at:at + size])
            whole += shape.new
            out.append(Request(index=len(out), prompt=(heads[c % groups] + part) if t == 0 else part,
                               input_tokens=whole, max_tokens=shape.output, conversation=c, turn=t + 1))
            whole += shape.output
    return out


def _fit_parts(doc: Sequence[int], shapes: Sequence[Sequence[Shape]], prefix: int) -> None:
    for c, turns in enumerate(shapes):
        if turns and turns[0].new <= prefix:
            raise WorkloadError(None, 0, f"conversation {c + 1}'s first prompt of {turns[0].new} tokens leaves no "
                                         f"user part after the {prefix}-token prefix")
        longest = max(s.new - (prefix if t == 0 else 0) for t, s in enumerate(turns))
        if longest > len(doc):
            raise WorkloadError(None, 0, f"a user part of {longest} tokens is longer than the document "
                                         f"({len(doc)} tokens)")


def mix_drawn_turns(requests: Sequence[Request], pool: Sequence[int], drawn: int, seed: int,
                    prefix: int) -> list[Request]:
    """``workload.mix_drawn`` over each turn's new part only: a first turn keeps its shared prefix
    shared, a later turn's part (all of its prompt) takes drawn ids anywhere, its last always."""
    firsts = mix_drawn([r for r in requests if r.turn == 1], pool, drawn, seed, keep=prefix)
    later = mix_drawn([r for r in requests if r.turn != 1], pool, drawn, seed + 1, keep=0)
    return sorted(firsts + later, key=lambda r: r.index)


def conversation_arrivals(requests: Sequence[Request], rate: float, seed: int) -> list[Request]:
    """Poisson arrivals of conversations (``rate`` per second): a conversation's first turn arrives
    at its time; each later turn follows the answer to the one before it (``at_s`` 0)."""
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadError(None, 0, f"an arrival rate must be a positive number, got {rate}")
    firsts = [r for r in requests if r.turn == 1]
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=len(firsts))
    when = {r.conversation: float(t) for r, t in zip(firsts, np.cumsum(gaps))}
    return [replace(r, at_s=when[r.conversation]) if r.turn == 1 else r for r in requests]


def by_conversation(requests: Sequence[Request]) -> list[list[Request]]:
    """The turns of each conversation in order, the conversations in order of first appearance;
    ValueError when a conversation's turns are not 1, 2, … in order."""
    convs: dict[int, list[Request]] = {}
    for r in requests:
        turns = convs.setdefault(r.conversation, [])
        if r.turn != len(turns) + 1:
            raise ValueError(f"request #{r.index}: expected turn {len(turns) + 1} of conversation "
                             f"{r.conversation}, got turn {r.turn}")
        turns.append(r)
    return list(convs.values())
