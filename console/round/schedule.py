"""The bench's runs, scheduled before anything runs: each run's item, the order of a round's head,
pairs and tail, and a command's placeholders filled."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.statistics import stats
from ..profile import Profile
from ..runtime.base import HANDOVER_ROOT, INPUTS_ROOT, MODEL_ROOT, OUT_ROOT

DOC_NAME = "document.tok"


@dataclass(frozen=True)
class Item:
    """One scheduled run of the bench."""
    build: str
    phase: str
    index: int
    position: int
    depth: int
    tokens: int
    context: str
    metric: str = ""                # "" = the profile's bench.metric
    repeat: int = 1                 # timed sections in the one run (bench.min_seconds, core.sizing)
    args: tuple[tuple[str, str], ...] = ()  # a matrix cell's other placeholders (threads, fill)

    @property
    def label(self) -> str:
        return f"{self.build}/{self.phase}/{self.index}"


def _items(p: Profile, phase: str, order: list[str], start: int, depth: int, tokens: int,
           metric: str = "", first: int = 0, repeat: int = 1) -> list[Item]:
    """Items for ``order`` (one build name per run), the k-th of each build numbered k."""
    ctx = "seek" if p.bench.shortcut == "seek" else "doc"
    counts: dict[str, int] = {}
    out = []
    for b in order:
        i = counts.get(b, first)
        counts[b] = i + 1
        out.append(Item(b, phase, i, start + len(out), depth, tokens, ctx, metric or p.bench.metric, repeat))
    return out


def schedule_head(p: Profile) -> list[Item]:
    """Warm-ups, then the short differential runs, interleaved (a serving round has none: its
    client timed every token, so there is no engine claim for a wall-clock differential to check)."""
    # with bench.min_seconds the warm-ups run one full timed section: they size the timed runs
    warm_tokens = p.bench.tokens if p.bench.min_seconds > 0 else p.bench.short_tokens
    warm = _items(p, "warmup", ["main", "candidate"] * p.bench.warmup, 0, p.bench.depth, warm_tokens)
    if p.serving:
        return warm
    return warm + _items(p, "short", stats.interleaved_order(p.bench.short_reps), len(warm), p.bench.depth,
                         p.bench.short_tokens)


def timed_pair(p: Profile, k: int, start: int, repeat: int = 1) -> list[Item]:
    """The k-th pair of timed reps: main first on even pairs, the candidate first on odd
    ones (A B B A …), so linear drift cancels over pairs."""
    order = ["main", "candidate"] if k % 2 == 0 else ["candidate", "main"]
    return _items(p, "timed", order, start, p.bench.depth, p.bench.tokens, first=k, repeat=repeat)


def cell_pair(p: Profile, cells: list[Any], k: int, start: int, repeat: int = 1) -> list[Item]:
    """The k-th pair of a matrix round over ``cells`` (core.matrix.Cell, in the order they run this
    pair): each cell's two reps adjacent, main first on even pairs (A B, then B A), so each cell's
    own pairs cancel linear drift as a one-cell round's do."""
    order = ["main", "candidate"] if k % 2 == 0 else ["candidate", "main"]
    ctx = "seek" if p.bench.shortcut == "seek" else "doc"
    return [Item(b, cell.phase, k, start + 2 * i + j, cell.depth, cell.tokens, ctx, cell.metric, repeat, cell.args)
            for i, cell in enumerate(cells) for j, b in enumerate(order)]


def schedule_tail(p: Profile, start: int) -> list[Item]:
    """Guard reps, after the timed pairs."""
    items: list[Item] = []
    for g in p.gate.guards:
        items += _items(p, f"guard:{g.name}", stats.interleaved_order(g.reps), start + len(items), g.depth,
                        g.tokens, p.metric_of(g))
    return items


def make_schedule(p: Profile, pairs: int, repeat: int = 1) -> list[Item]:
    """The whole schedule for a fixed number of timed pairs (a noise round's; a round's
    timed pairs run until decided, between ``schedule_head`` and ``schedule_tail``)."""
    items = schedule_head(p)
    for k in range(pairs):
        items += timed_pair(p, k, len(items), repeat)
    return items + schedule_tail(p, len(items))


def fill(template: tuple[str, ...], p: Profile | None = None, **values: str) -> list[str]:
    """A command with its placeholders filled; with ``p``, also those every command may use."""
    if p is not None:
        values = {"threads": str(p.run.threads), "model": MODEL_ROOT, "fill": p.bench.fill, "handover": HANDOVER_ROOT,
                  **values}
    return [part.format(**values) for part in template]


def logits_argv(template: tuple[str, ...], p: Profile) -> list[str]:
    """A logits command (a build's, or the reference's) over the round's document."""
    return fill(template, p, doc=f"{INPUTS_ROOT}/{DOC_NAME}", out=OUT_ROOT,
                depths=",".join(str(d) for d in p.parity.depths), rows=str(p.parity.rows))


def document_problem(data: bytes, vocab: int) -> str | None:
    """Why a token-id document cannot be read by a model of ``vocab`` tokens, or None."""
    for i, word in enumerate(data.split()):
        if not word.isdigit():
            return f"item {i} ({word[:20]!r}) is not a token id"
        if int(word) >= vocab:
            return f"token {int(word)} at index {i} is outside the model's vocabulary of {vocab} (parity.vocab)"
    return None
