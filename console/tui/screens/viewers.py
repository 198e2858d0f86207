"""Full-screen viewers: a whole log, a sealed receipt."""
from __future__ import annotations

import json
from typing import Any

from rich.json import JSON
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Log, Static


class _Viewer(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    _Viewer { align: center middle; }
    _Viewer > .viewer-body { width: 95%; height: 90%; border: round $accent;
                             background: $surface; }
    """

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class LogScreen(_Viewer):
    """The whole log of one build or one rep."""

    def __init__(self, title: str, lines: list[str]) -> None:
        super().__init__()
        self._title = title
        self._lines = lines

    def compose(self) -> ComposeResult:
        log = Log(classes="viewer-body", id="full-log", auto_scroll=False)
        log.border_title = self._title
        yield log
        yield Footer()

    def on_mount(self) -> None:
        log = self.query_one(Log)
        log.write_lines(self._lines or ["(no log lines)"])
        log.scroll_home(animate=False)


class ReceiptScreen(_Viewer):
    """A receipt as pretty JSON (read as text; nothing in it is re-judged here)."""

    def __init__(self, path: str, data: Any) -> None:
        super().__init__()
        self._path = path
        self._data = data

    def compose(self) -> ComposeResult:
        body = VerticalScroll(classes="viewer-body", id="receipt-body")
        body.border_title = self._path
        with body:
            yield Static(JSON(json.dumps(self._data), indent=2), id="receipt-json")
        yield Footer()
