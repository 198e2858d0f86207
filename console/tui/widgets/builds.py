"""One panel per build: its state, image facts, and its live build log."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Log, Static

from ...core.decisions.progress import build_how

LOG_VIEW_LINES = 400  # the panel shows a tail; the whole log stays in ``lines``


def short_image(image_id: str) -> str:
    algo, _, digest = image_id.partition(":")
    return f"{algo}:{digest[:12]}" if digest else image_id[:19]


class BuildPanel(Vertical):
    """State line plus a collapsible tail of the build log."""

    DEFAULT_CSS = """
    BuildPanel { height: auto; border: round $primary-darken-2; padding: 0 1; }
    BuildPanel > .build-state { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    BuildPanel Collapsible { border-top: none; padding: 0; background: transparent; }
    BuildPanel Collapsible > Contents { padding: 0; }
    BuildPanel Log { height: 6; overflow-x: hidden; }
    """

    def __init__(self, build: str, **kw: Any) -> None:
        super().__init__(id=f"build-{build}", **kw)
        self.build = build
        self.state = "waiting"
        self.lines: list[str] = []
        self.facts: dict[str, Any] = {}
        self.message = ""
        self.border_title = build

    def compose(self) -> ComposeResult:
        yield Static(self._state_text(), classes="build-state")
        with Collapsible(title="build log", collapsed=True):
            yield Log(max_lines=LOG_VIEW_LINES, auto_scroll=True, id=f"log-{self.build}")

    @property
    def log_widget(self) -> Log:
        return self.query_one(Log)

    def _state_text(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        mark, style = {"waiting": ("○", "dim"), "building": ("◐", "bold yellow"),
                       "built": ("✔", "bold green"), "failed": ("✘", "bold red")}.get(
                           self.state, ("?", ""))
        t.append(f"{mark} {self.state}", style=style)
        if self.state == "building":
            t.append(f"  {len(self.lines)} log lines", style="dim")
        if self.state == "built":
            f = self.facts
            secs = f.get("seconds")
            if f.get("reused_from"):
                t.append(", " + build_how(0.0, f["reused_from"]))
            elif isinstance(secs, (int, float)):
                t.append(f" in {secs:.1f} s")
            t.append(f"\nimage {short_image(str(f.get('image_id', '')))}")
            if f.get("compiler"):
                t.append(f"  {f['compiler']}", style="dim")
        if self.state == "failed":
            t.append(f"\n{self.message}", style="red")
        return t

    def _redraw(self, layout: bool = True) -> None:
        self.query_one(".build-state", Static).update(self._state_text(), layout=layout)

    def started(self) -> None:
        self.state = "building"
        self.query_one(Collapsible).collapsed = False
        self._redraw()

    def add_lines(self, lines: list[str]) -> None:
        started = self.state == "waiting"
        if started:
            self.state = "building"
        self.lines.extend(lines)
        self.log_widget.write_lines(lines)
        # While building, the state is one line whose count changes: a repaint, not a re-layout.
        self._redraw(layout=started)

    def done(self, facts: dict[str, Any]) -> None:
        self.state = "built"
        self.facts = facts
        # A finished log folds away to leave room for parity and reps.
        self.query_one(Collapsible).collapsed = True
        self._redraw()

    def failed(self, message: str, log_tail: list[str]) -> None:
        self.state = "failed"
        self.message = message
        if log_tail and not self.lines:
            self.add_lines(list(log_tail))
        self.state = "failed"
        self.query_one(Collapsible).collapsed = False
        self._redraw()
