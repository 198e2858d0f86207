"""The verdict as the gate decided it: the outcome in large type, why, and the arithmetic."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from ...core.records.verdict import OUTCOMES, VerdictRecord
from ...core.records.verdict_parts import NoiseReport, SpeedPart
from .bigtext import BigText

# The gate's outcomes (OUTCOMES) and nothing else: word and style class.
# An accepted round's word is completed by its tier. A noise round measures the node's
# noise floor; it is neither a pass nor a failure, so it has a class of its own.
BANNER: dict[str, tuple[str, str]] = {
    "accepted": ("TIER", "-tier"),
    "none": ("NONE", "-none"),
    "undecided": ("UNDECIDED", "-none"),
    "slower": ("SLOWER", "-bad"),
    "noise": ("NOISE", "-noise"),
    "rejected": ("REJECTED", "-bad"),
    "infra": ("INFRA", "-infra"),
    "implausible": ("IMPLAUSIBLE", "-held"),
    "uncheckable": ("UNCHECKABLE", "-held"),
}
UNKNOWN = "-unknown"
_CLASSES = {cls for _, cls in BANNER.values()} | {UNKNOWN}


def banner_label(outcome: str, tier: str | None = None) -> tuple[str, str]:
    """The word to show and its style class, for the outcome the gate returned."""
    outcome = str(outcome or "")
    if outcome not in OUTCOMES or outcome not in BANNER:
        # Not something the gate says: shown as it came, never dressed as a pass.
        return f"? {outcome.upper().replace('_', ' ')}".rstrip(), UNKNOWN
    word, cls = BANNER[outcome]
    if outcome == "accepted":
        word = f"{word} {str(tier or '?').upper()}"
    return word, cls


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.2%}"


def _share(v: float | None) -> str:
    return "—" if v is None else f"{v:.2%}"


def _num(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def _interval(iv: tuple[float | None, ...]) -> str:
    return f"[{_pct(iv[0])}, {_pct(iv[1])}]" if len(iv) == 2 else "—"


def noise_text(report: NoiseReport) -> Text:
    """A noise round's report as the gate returned it: pair noise (schema 2) or the old spread."""
    t = Text()
    if report.held("sd"):
        t.append("pair noise ", style="bold")
        t.append(f"SD {_share(report.sd)} (95% {_share(report.lower)}–{_share(report.upper)}) "
                 f"over {report.pairs} pairs  gain {_pct(report.gain)}\n")
        t.append("decides ", style="bold")
        t.append(f"gains ≥ {_share(report.decidable_gain)} within {report.max_pairs or '?'} pairs")
        return t
    t.append("noise ", style="bold")
    t.append(f"spread {_share(report.spread)} over {report.pairs} pairs"
             f"  gain {_pct(report.gain)} {_interval(report.interval)}\n")
    t.append("false positives ", style="bold")
    t.append(f"{report.false_positives or 0} of {report.windows or 0} windows"
             f"  suggested significance {_share(report.suggested_significance)}")
    return t


def arithmetic_text(speed: SpeedPart) -> Text:
    """The verdict's own numbers, three compact lines; nothing is recomputed here."""
    t = Text()
    if speed.suppressed:
        t.append("speed ", style="bold")
        t.append(f"not computed: {speed.suppressed}")
        return t
    if speed.noise is not None:
        return noise_text(speed.noise)
    if not speed.decided_on:
        return t
    t.append("gain ", style="bold")
    t.append(f"{_pct(speed.gain)} {_interval(speed.interval)}"
             f"  median {_num(speed.main_median)} → {_num(speed.candidate_median)}\n")
    t.append("basis ", style="bold")
    t.append(_pct(speed.basis))
    if speed.basis_kind:
        t.append(f" (Δ/{speed.basis_kind})")
    if speed.band:
        t.append("  band ")
        t.append(speed.band, style="bold")
    t.append("\n")
    if (d := speed.decision) is not None:
        t.append("pairs ", style="bold")
        t.append(f"{d.pairs}" + (f" (+{d.prior_pairs} pooled)" if d.prior_pairs else ""))
        t.append(f"  state {d.state}")
        if speed.false_accept is not None:
            t.append(f"  false accept {speed.false_accept:.0%}")
        if speed.pair_sd is not None:
            t.append(f"  pair SD {_share(speed.pair_sd)}")
        t.append("\n")
    t.append(f"frontier {_num(speed.frontier)}")
    if speed.frontier_source:
        t.append(f" ({speed.frontier_source})")
    t.append("  anchor " + ("unset" if not speed.anchor else _num(speed.anchor)))
    return t


class VerdictPanel(Vertical):
    """Empty until VerdictReady; then the banner, reasons, warnings and arithmetic."""

    DEFAULT_CSS = """
    VerdictPanel { border: round $primary-darken-2; height: 1fr; }
    VerdictPanel BigText { color: $text-muted; }
    VerdictPanel.-tier BigText { color: $success; }
    VerdictPanel.-none BigText { color: $warning; }
    VerdictPanel.-bad BigText { color: $error; }
    VerdictPanel.-held BigText { color: $warning; }
    VerdictPanel.-infra BigText { color: $accent; }
    VerdictPanel.-noise BigText { color: $secondary; }
    VerdictPanel.-unknown BigText { color: $text-muted; }
    VerdictPanel #verdict-details { height: 1fr; padding: 0 1; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(id="verdict", **kw)
        self.border_title = "verdict"
        self.verdict: VerdictRecord | None = None
        self.label = ""
        self.text_plain = ""

    def compose(self) -> ComposeResult:
        yield BigText(id="verdict-banner")
        with VerticalScroll(id="verdict-details"):
            yield Static(Text("pending: parity first, then interleaved reps", style="dim"),
                         id="verdict-text")

    def sweep_levels(self, sentences: list[str]) -> None:
        """A sweep has no verdict: the panel lists its levels as they are measured."""
        t = Text("a sweep measures a curve and decides nothing\n", style="dim")
        for line in sentences:
            t.append("• ", style="bold")
            t.append(line + "\n")
        t.rstrip()
        self.text_plain = t.plain
        self.query_one("#verdict-text", Static).update(t)

    def show(self, verdict: VerdictRecord) -> None:
        self.verdict = v = verdict
        self.label, cls = banner_label(v.outcome.value, v.tier)
        self.remove_class(*_CLASSES)
        self.add_class(cls)
        self.query_one(BigText).text = self.label
        t = Text()
        t.append(f"outcome {v.outcome.value}", style="bold")
        if v.tier:
            t.append(f"  tier {v.tier}", style="bold")
            if v.tier_span and v.tier_span[0] != v.tier_span[-1]:
                t.append(f" (interval spans {v.tier_span[0]}–{v.tier_span[-1]})")
        if v.would_be_tier:
            t.append(f"  would be tier {v.would_be_tier}")
        if v.exit_code is not None:
            t.append(f"  exit {v.exit_code}")
        t.append("\n")
        speed = arithmetic_text(v.speed)
        if speed.plain:
            t.append_text(speed)
            t.append("\n")
        for reason in v.reasons:
            t.append("• ", style="bold")
            t.append(reason.message or reason.code)
            t.append(f"  [{reason.code}]", style="dim")
            t.append("\n")
        for warning in v.warnings:
            t.append("⚠ " + (warning.message or warning.code), style="yellow")
            t.append(f"  [{warning.code}]", style="dim")
            t.append("\n")
        t.rstrip()
        self.text_plain = t.plain
        self.query_one("#verdict-text", Static).update(t)
