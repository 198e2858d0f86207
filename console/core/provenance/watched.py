"""What main's history watches in one round: every figure the round measured main by, one series
each. The scored metric over its timed reps; each matrix cell's metric over the cell's reps; each
guard's metric over its reps; and for a serving round, besides its throughput, the TTFT p99 and ITL
p99 of every counted timed block (per cell, in a serving matrix).

Each reading is main's counted values of one figure (the same reps the verdict read,
``counting.counted``); history makes one point of them (their geometric mean). Latencies are
better lower, every other figure higher: a regression is a step the wrong way for the figure.

Pure: a receipt in, readings out.
"""
from __future__ import annotations

from dataclasses import dataclass

from console.core.decisions import counting
from console.core.decisions.serving import LATENCIES
from console.core.records.figures import finite
from console.core.records.receipt import Receipt, Rep

# The serving latencies history follows per block (of ``LATENCIES``): the tails users feel.
WATCHED_LATENCIES = ("ttft_p99_ms", "itl_p99_ms")


@dataclass(frozen=True)
class Reading:
    """Main's counted values of one figure in one round."""
    figure: str                 # "" for the round's scored metric; "cell[KEY]", "guard[NAME]", "ttft_p99_ms", …
    metric: str                 # the metric the values are of
    depth: int
    tokens: int
    values: tuple[float, ...]
    pin: float = 0.0            # the pin in force for it: the frontier, or the cell's or the guard's own

    @property
    def lower_is_better(self) -> bool:
        return lower_is_better(self.metric)


def lower_is_better(metric: str) -> bool:
    """Latencies are better lower; throughputs and every other figure higher."""
    return metric in LATENCIES


def bisectable(figure: str) -> bool:
    """Whether `console bisect` decides the figure: the scored metric or a guard's (not a latency or a cell)."""
    return figure == "" or figure.startswith("guard[")


def _positive(xs) -> tuple[float, ...]:
    return tuple(float(x) for x in xs if finite(x) and x > 0)


def _shapes(r: Receipt) -> list[tuple[str, str, str, int, int, float]]:
    """(figure, phase, metric, depth, tokens, pin in force) of each shape main was timed at."""
    bench, lock = r.profile.bench, r.lock
    metric = str(bench.get("metric") or "")
    out = [("", "timed", metric, int(bench.get("depth") or 0), int(bench.get("tokens") or 0),
            float(lock.frontier or 0.0))]
    if r.profile.matrix is not None:
        out += [(f"cell[{c.key}]", c.phase, c.metric, c.depth, c.tokens, float(lock.cells.get(c.key) or 0.0))
                for c in r.profile.matrix.cells]
    out += [(f"guard[{g.name}]", f"guard:{g.name}", g.metric or metric, g.depth, g.tokens,
             float((lock.guards or {}).get(g.name) or 0.0)) for g in r.rules.guards]
    return out


def _latencies(figure: str, reps: list[Rep], depth: int, tokens: int) -> list[Reading]:
    out = []
    for lat in WATCHED_LATENCIES:
        xs = _positive((rep.reported or {}).get(LATENCIES[lat]) for rep in reps)
        if xs:
            out.append(Reading(f"{figure} {lat}".strip(), lat, depth, tokens, xs))
    return out


def readings(r: Receipt) -> list[Reading]:
    """Every figure of main this round counted, in a fixed order (scored, cells, guards)."""
    c = counting.counted(r, r.rules)
    out: list[Reading] = []
    for figure, phase, metric, depth, tokens, pin in _shapes(r):
        reps = c.valid.get(("main", phase), [])
        values = _positive(rep.value for rep in reps)
        if values:
            out.append(Reading(figure, metric, depth, tokens, values, pin))
        if r.profile.serves:
            out += _latencies(figure, reps, depth, tokens)
    return out
