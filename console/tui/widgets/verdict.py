"""The verdict as the gate decided it: the outcome in large type, why, and the arithmetic."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from ...core.verdict import OUTCOMES
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


def banner_label(verdict: dict[str, Any]) -> tuple[str, str]:
    """The word to show and its style class, for the outcome the gate returned."""
    outcome = str(verdict.get("outcome") or "")
    if outcome not in OUTCOMES or outcome not in BANNER:
        # Not something the gate says: shown as it came, never dressed as a pass.
        return f"? {outcome.upper().replace('_', ' ')}".rstrip(), UNKNOWN
    word, cls = BANNER[outcome]
    if outcome == "accepted":
        word = f"{word} {str(verdict.get('tier') or '?').upper()}"
    return word, cls


def _pct(v: Any) -> str:
    return f"{v:+.2%}" if isinstance(v, (int, float)) else "—"


def _share(v: Any) -> str:
    return f"{v:.2%}" if isinstance(v, (int, float)) else "—"


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "—" if v is None else str(v)
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def _interval(iv: Any) -> str:
    return f"[{_pct(iv[0])}, {_pct(iv[1])}]" if isinstance(iv, (list, tuple)) and len(iv) == 2 else "—"


def noise_text(report: dict[str, Any]) -> Text:
    """A noise round's report as the gate returned it: pair noise (schema 2) or the old spread."""
    t = Text()
    if "sd" in report:
        t.append("pair noise ", style="bold")
        t.append(f"SD {_share(report.get('sd'))} (95% {_share(report.get('lower'))}–{_share(report.get('upper'))}) "
                 f"over {report.get('pairs', 0)} pairs  gain {_pct(report.get('gain'))}\n")
        t.append("decides ", style="bold")
        t.append(f"gains ≥ {_share(report.get('decidable_gain'))} within {report.get('max_pairs', '?')} pairs")
        return t
    t.append("noise ", style="bold")
    t.append(f"spread {_share(report.get('spread'))} over {report.get('pairs', 0)} pairs"
             f"  gain {_pct(report.get('gain'))} {_interval(report.get('interval'))}\n")
    t.append("false positives ", style="bold")
    t.append(f"{report.get('false_positives', 0)} of {report.get('windows', 0)} windows"
             f"  suggested significance {_share(report.get('suggested_significance'))}")
    return t


def arithmetic_text(speed: dict[str, Any]) -> Text:
    """The verdict's own numbers, three compact lines; nothing is recomputed here."""
    t = Text()
    if not speed:
        return t
    if speed.get("suppressed"):
        t.append("speed ", style="bold")
        t.append(f"not computed: {speed['suppressed']}")
        return t
    if isinstance(speed.get("noise"), dict):
        return noise_text(speed["noise"])
    t.append("gain ", style="bold")
    t.append(f"{_pct(speed.get('gain'))} {_interval(speed.get('interval'))}"
             f"  median {_num(speed.get('main_median'))} → {_num(speed.get('candidate_median'))}\n")
    t.append("basis ", style="bold")
    t.append(_pct(speed.get("basis")))
    if speed.get("basis_kind"):
        t.append(f" (Δ/{speed['basis_kind']})")
    if speed.get("band"):
        t.append("  band ")
        t.append(str(speed["band"]), style="bold")
    t.append("\n")
    d = speed.get("decision")
    if isinstance(d, dict):
        t.append("pairs ", style="bold")
        t.append(f"{d.get('pairs')}" + (f" (+{d['prior_pairs']} pooled)" if d.get("prior_pairs") else ""))
        t.append(f"  state {d.get('state')}  levels {1 - float(speed.get('confidence') or 0.99):.0%}")
        if speed.get("pair_sd") is not None:
            t.append(f"  pair SD {_share(speed.get('pair_sd'))}")
        t.append("\n")
    t.append(f"frontier {_num(speed.get('frontier'))}")
    if speed.get("frontier_source"):
        t.append(f" ({speed['frontier_source']})")
    anchor = speed.get("anchor")
    t.append("  anchor " + ("unset" if anchor in (0, 0.0, None) else _num(anchor)))
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
        self.verdict: dict[str, Any] | None = None
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

    def show(self, verdict: dict[str, Any]) -> None:
        self.verdict = verdict or {}
        v = self.verdict
        self.label, cls = banner_label(v)
        self.remove_class(*_CLASSES)
        self.add_class(cls)
        self.query_one(BigText).text = self.label
        t = Text()
        t.append(f"outcome {v.get('outcome', '?')}", style="bold")
        if v.get("tier"):
            t.append(f"  tier {v['tier']}", style="bold")
            span = v.get("tier_span")
            if span and span[0] != span[-1]:
                t.append(f" (interval spans {span[0]}–{span[-1]})")
        if v.get("would_be_tier"):
            t.append(f"  would be tier {v['would_be_tier']}")
        if "exit_code" in v:
            t.append(f"  exit {v['exit_code']}")
        t.append("\n")
        speed = v.get("speed")
        if isinstance(speed, dict) and speed:
            t.append_text(arithmetic_text(speed))
            t.append("\n")
        for reason in v.get("reasons") or []:
            msg, code = _entry(reason)
            t.append("• ", style="bold")
            t.append(msg)
            if code:
                t.append(f"  [{code}]", style="dim")
            t.append("\n")
        for warning in v.get("warnings") or []:
            msg, code = _entry(warning)
            t.append("⚠ " + msg, style="yellow")
            if code:
                t.append(f"  [{code}]", style="dim")
            t.append("\n")
        t.rstrip()
        self.text_plain = t.plain
        self.query_one("#verdict-text", Static).update(t)


def _entry(item: Any) -> tuple[str, str]:
    if isinstance(item, dict):
        return str(item.get("message") or item.get("code") or item), str(item.get("code") or "")
    return str(item), ""
