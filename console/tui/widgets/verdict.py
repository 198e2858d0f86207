"""The verdict as the gate decided it: the outcome in large type, why, and the arithmetic."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from .bigtext import BigText

_ACCEPTED = {"accepted", "accept", "pass", "passed", "tier"}
_OUTCOME_CLASS = {"tier": "-tier", "NONE": "-none", "REJECTED": "-bad", "IMPLAUSIBLE": "-held",
                  "UNCHECKABLE": "-held", "INFRA": "-infra"}


def banner_label(verdict: dict[str, Any]) -> tuple[str, str]:
    """The word to show and its style class; the verdict already decided both."""
    outcome = str(verdict.get("outcome") or "").strip()
    tier = verdict.get("tier")
    if tier and outcome.lower() in _ACCEPTED | {""}:
        return f"TIER {str(tier).upper()}", "-tier"
    if outcome.lower() in _ACCEPTED | {"none", "no_change", "no-change", "not_significant"}:
        return "NONE", "-none"
    word = outcome.upper().replace("_", " ") or "?"
    return word, _OUTCOME_CLASS.get(word, "-bad")


def _pct(v: Any) -> str:
    return f"{v:+.2%}" if isinstance(v, (int, float)) else "—"


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "—" if v is None else str(v)
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def arithmetic_text(speed: dict[str, Any]) -> Text:
    """The verdict's own numbers, three compact lines; nothing is recomputed here."""
    t = Text()
    if not speed:
        return t
    interval = speed.get("interval")
    iv = (f"[{_pct(interval[0])}, {_pct(interval[1])}]"
          if isinstance(interval, (list, tuple)) and len(interval) == 2 else "—")
    t.append("gain ", style="bold")
    t.append(f"{_pct(speed.get('gain'))} {iv}  median {_num(speed.get('main_median'))}"
             f" → {_num(speed.get('candidate_median'))}\n")
    t.append("basis ", style="bold")
    t.append(_pct(speed.get("basis")))
    if speed.get("basis_kind"):
        t.append(f" (Δ/{speed['basis_kind']})")
    band = speed.get("band")
    if isinstance(band, dict):
        band = " ".join(f"{k}={v}" for k, v in band.items())
    elif isinstance(band, (list, tuple)):
        band = "–".join(_pct(b) if isinstance(b, float) else str(b) for b in band)
    if band:
        t.append("  band ")
        t.append(str(band), style="bold")
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

    def show(self, verdict: dict[str, Any]) -> None:
        self.verdict = verdict or {}
        v = self.verdict
        self.label, cls = banner_label(v)
        for c in _OUTCOME_CLASS.values():
            self.remove_class(c)
        self.add_class(cls)
        self.query_one(BigText).text = self.label
        t = Text()
        t.append(f"outcome {v.get('outcome', '?')}", style="bold")
        if v.get("tier"):
            t.append(f"  tier {v['tier']}", style="bold")
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
