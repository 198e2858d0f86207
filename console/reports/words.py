"""The words the live lines, summary.md and the HTML page share, so each says a thing one way.

Kept apart from all three: the line reporter renders the matrix table through the exporters, and
the HTML page is one of them, so neither may be where the other's words come from.
"""
from __future__ import annotations

from pathlib import Path

from ..core.records.facts import SourceRecord
from ..core.records.verdict import VerdictRecord

# One headline per outcome the gate can produce (a test checks there is one for each).
HEADLINES = {"accepted": "ACCEPTED, tier {tier}", "none": "NONE (decided: no worthwhile gain or regression)",
             "slower": "SLOWER (decided: slower than main)", "undecided": "UNDECIDED (budget spent)",
             "noise": "NOISE (this node's floor)",
             "rejected": "REJECTED", "implausible": "IMPLAUSIBLE (held for review)",
             "uncheckable": "UNCHECKABLE (held)", "infra": "INFRA (node fault, retry)"}


def tier_text(v: VerdictRecord) -> str:
    """``L`` or ``L (interval spans L–XL)``: the conservative tier and what it may still be."""
    tier, span = str(v.tier).upper(), v.tier_span
    if span and span[0] != span[-1]:
        return f"{tier} (interval spans {span[0].upper()}–{span[-1].upper()})"
    return tier


def rate_text(x: float) -> str:
    """An error rate as said to people: 1 %, 0.5 %, 0.17 % (a matrix splits the round's rate)."""
    return f"{round(x * 100, 10):.2g}%"


def source_text(src: SourceRecord) -> str:
    """A build's source in a few words: a patch over its base, a commit, an sdist or a directory."""
    if src.patch is not None:
        return f"patch {Path(src.patch).name} over {source_text(src.over or SourceRecord())}"
    if src.git is not None:
        return f"{src.git}@{(src.commit or src.ref or '')[:12]}"
    if src.pypi is not None:
        return f"sdist {src.pypi}" + (f" ({src.subtree})" if src.subtree else "") \
            + (f", sha256 {src.sdist_sha256[:12]}" if src.sdist_sha256 else "")
    return "?" if src.path is None else src.path


def gain_phrase(verdict: VerdictRecord) -> str:
    """" — gain +12.3 %, interval [+8.1 %, +16.0 %], 1 % false accept", or "" without a gain; the
    false-accept rate is said only where the verdict records it."""
    if verdict.gain is None:
        return ""
    iv = ", ".join("unbounded" if x is None else f"{x:+.1%}" for x in verdict.interval or (None, None))
    fa = verdict.false_accept
    level = f", {rate_text(fa)} false accept" if fa is not None else ""
    return f" — gain {verdict.gain:+.1%}, interval [{iv}]{level}"


def accuracy_sentence(verdict: VerdictRecord) -> str | None:
    """The task accuracy stage in one sentence, as the gate graded it; None when there was none."""
    acc = verdict.accuracy
    if acc is None or acc.status not in ("pass", "fail"):
        return None
    return (f"Task accuracy: {acc.status}. Reference {acc.reference_correct}/{acc.items} "
            f"({acc.reference_score:.1%}), candidate {acc.candidate_correct}/{acc.items} "
            f"({acc.candidate_score:.1%}): {acc.delta * 100:+.1f} points against a tolerance of "
            f"±{acc.tolerance * 100:.1f} ({acc.estimator}, {acc.level:.0%}); "
            f"{acc.only_reference} item(s) only the reference answered, {acc.only_candidate} only the candidate.")
