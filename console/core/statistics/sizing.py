"""Reps sized for fast devices (``bench.min_seconds``).

On a GPU the timed section of one run can take milliseconds (prefill of 512 tokens: 0.08 s on
an H200), far below what the clock and the node's noise resolve. A profile may ask for a
minimum of engine time per timed run: the console then repeats the timed section inside the
one run (``{repeat}``), so the fixed cost of a run (container start, model load) is paid once
and amortised, and every timed rep carries at least that much measured work.

The number of repeats is chosen once per round, before the first timed rep, from the warm-up
runs (which, with ``min_seconds`` set, run the timed section's full token count once): the
faster build's engine time sets it, so both builds reach the minimum. It is recorded in the
receipt with what it was derived from, and ``check`` says afterwards whether the timed reps
reached it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

from console.core.statistics import stats

MAX_REPEAT = 10_000     # a bound on a misreported (near-zero) elapsed time


@dataclass(frozen=True)
class Sizing:
    min_seconds: float
    repeat: int                 # times each timed run repeats its timed section
    section_s: float | None     # the faster build's median engine seconds for one section; None: not known
    basis: str                  # what it was derived from, in words
    reached: bool | None = None     # after the timed reps: whether each reached min_seconds (``short_of``)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.reached is None:
            del d["reached"]    # not yet checked
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sizing":
        # values stay as the JSON held them (min_seconds = 2, not 2.0), so the receipt writes back the same
        return cls(min_seconds=d["min_seconds"], repeat=d["repeat"], section_s=d.get("section_s"),
                   basis=d["basis"], reached=d.get("reached"))


def size_repeats(min_seconds: float, probes: Iterable[tuple[str, float]]) -> Sizing:
    """Repeats per timed run so that the faster build's engine time reaches ``min_seconds``.

    ``probes`` are (build, engine seconds for one timed section) from runs whose result line
    passed the schema. Without any, the round runs one section per rep and says why.
    """
    per_build: dict[str, list[float]] = {}
    for build, seconds in probes:
        if seconds > 0 and math.isfinite(seconds):
            per_build.setdefault(build, []).append(seconds)
    if not per_build:
        return Sizing(min_seconds, 1, None, "no warm-up run reported its elapsed time: one section per run")
    medians = {b: stats.median(v) for b, v in per_build.items()}
    fastest = min(medians, key=lambda b: medians[b])
    section = medians[fastest]
    repeat = max(1, min(MAX_REPEAT, math.ceil(min_seconds / section)))
    n = sum(len(v) for v in per_build.values())
    return Sizing(min_seconds, repeat, section,
                  f"{fastest}'s median of {len(per_build[fastest])} warm-up section(s) took {section:.4g} s "
                  f"({n} warm-up run(s) in all): {repeat} repeat(s) per run give at least {min_seconds:g} s")


def short_of(sizing: Sizing, elapsed: Iterable[float]) -> str | None:
    """Whether the timed reps reached the minimum they were sized for; a sentence when they did not."""
    got = [e for e in elapsed if e > 0 and math.isfinite(e)]
    if not got or not sizing.min_seconds:
        return None
    low = min(got)
    if low >= float(sizing.min_seconds):
        return None
    return (f"the shortest timed run's engine time was {low:.3g} s, under bench.min_seconds = "
            f"{float(sizing.min_seconds):g} (sized at {int(sizing.repeat or 1)} repeat(s) from the warm-ups)")
