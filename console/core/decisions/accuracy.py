"""Task accuracy under greedy decoding, and whether the candidate's score is the reference's (pure).

Both builds answer the same items greedily (temperature 0); an answer is right when the first
line of the continuation is the expected answer (``is_correct``). The candidate passes when its
score lies within the sampling tolerance of the reference's: greedy decoding has no run-to-run
variance, so the uncertainty that matters is which items the set happens to hold. The
estimator is the paired t interval over items of d_i = cand_i - ref_i (1 right, 0 wrong):

    Δ = mean(d),  SE = sd(d) / √n,  tolerance = t(1 - α/2, n - 1) · SE,  pass iff |Δ| ≤ tolerance

It is zero when both builds answer alike and grows with the items on which they differ, so a
few flipped answers pass and a systematic loss does not. Without per-item outcomes for both
builds (fewer than two paired items) the tolerance is the fixed ±``accuracy_fallback``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from scipy import stats as sps

from console.core.records.untrusted import loads
from console.core.records.rules import GateRules

ESTIMATOR = "paired t interval over items"
FALLBACK = "fixed tolerance (no per-item pairing)"


class TaskSetError(ValueError):
    """A task set that cannot be used: says the line and the field."""


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    prompt: str
    answer: str


def parse_tasks(text: str) -> list[Task]:
    """JSON lines of {"id", "kind", "prompt", "answer"}; ids unique, prompts and answers non-empty."""
    tasks: list[Task] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = loads(line)
        except ValueError as e:
            raise TaskSetError(f"line {n}: {e}") from None
        if not isinstance(d, dict):
            raise TaskSetError(f"line {n}: expected an object")
        for k in ("id", "prompt", "answer"):
            if not isinstance(d.get(k), str) or not d[k].strip():
                raise TaskSetError(f"line {n}: '{k}' must be a non-empty string")
        if d["id"] in seen:
            raise TaskSetError(f"line {n}: id {d['id']!r} appears twice")
        seen.add(d["id"])
        tasks.append(Task(d["id"], str(d.get("kind") or ""), d["prompt"], d["answer"]))
    if not tasks:
        raise TaskSetError("no items")
    return tasks


def escape(text: str) -> str:
    """One prompt per line for the harness: backslash, newline and tab escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            i += 1
            c = {"n": "\n", "t": "\t"}.get(text[i], text[i])
        out.append(c)
        i += 1
    return "".join(out)


def parse_generated(text: str, expected: int) -> list[str]:
    """The continuations a ``generate`` run wrote (token ids, a tab, escaped text per line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != expected:
        raise TaskSetError(f"expected {expected} continuations, got {len(lines)}")
    out = []
    for n, line in enumerate(lines, 1):
        if "\t" not in line:
            raise TaskSetError(f"continuation {n}: no tab between the token ids and the text")
        out.append(unescape(line.split("\t", 1)[1]))
    return out


def normalise(text: str) -> str:
    """The first non-empty line, trimmed, lower-cased, without trailing punctuation or quotes."""
    line = next((x for x in text.split("\n") if x.strip()), "")
    return line.strip().lower().strip("\"'").rstrip(".,;:!?\"'")


def is_correct(output: str, answer: str) -> bool:
    """Right when the first line is the answer, or starts with it followed by a non-word
    character ("Paris." and "paris, the city" are right for "Paris"; "Parisian" is not)."""
    got, want = normalise(output), answer.strip().lower()
    if got == want:
        return True
    return got.startswith(want) and not (got[len(want)].isalnum() or got[len(want)] == "_")


@dataclass(frozen=True)
class AccuracyGrade:
    items: int
    reference_correct: int
    candidate_correct: int
    reference_score: float         # share of items right
    candidate_score: float
    delta: float                   # candidate - reference, share
    tolerance: float               # share: |delta| at most this passes
    estimator: str                 # ESTIMATOR or FALLBACK
    level: float                   # two-sided level of the interval (ESTIMATOR)
    only_candidate: int            # items only the candidate got right
    only_reference: int            # items only the reference got right
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grade(reference: Sequence[bool], candidate: Sequence[bool], rules: GateRules) -> AccuracyGrade:
    """The candidate's score against the reference's over the same items, in order."""
    n = len(candidate)
    paired = len(reference) == n and n >= 2
    rc, cc = sum(map(bool, reference)), sum(map(bool, candidate))
    r_score = rc / len(reference) if reference else 0.0
    c_score = cc / n if n else 0.0
    delta = c_score - r_score
    only_c = sum(1 for r, c in zip(reference, candidate) if c and not r) if paired else 0
    only_r = sum(1 for r, c in zip(reference, candidate) if r and not c) if paired else 0
    if paired:
        # d_i in {-1, 0, 1}: Σd² = discordant items, so sd² = (b + c - nΔ²) / (n - 1)
        var = max(only_c + only_r - n * delta * delta, 0.0) / (n - 1)
        se = math.sqrt(var / n)
        tolerance = float(sps.t.ppf(1 - rules.accuracy_alpha / 2, n - 1)) * se
        estimator = ESTIMATOR
    else:
        tolerance, estimator = rules.accuracy_fallback, FALLBACK
    # a hair of slack for rounding: identical answers must pass exactly
    return AccuracyGrade(items=n, reference_correct=rc, candidate_correct=cc, reference_score=r_score,
                         candidate_score=c_score, delta=delta, tolerance=tolerance, estimator=estimator,
                         level=1 - rules.accuracy_alpha, only_candidate=only_c, only_reference=only_r,
                         passed=abs(delta) <= tolerance + 1e-12)
