"""Notices from the round (and from the app itself), warnings and errors highlighted."""
from __future__ import annotations

import datetime as _dt
from typing import Any

from rich.text import Text
from textual.widgets import RichLog

_LEVEL_STYLE = {"info": "", "warn": "bold yellow", "warning": "bold yellow", "error": "bold red"}


def clock_time(at: float | None) -> str:
    """HH:MM:SS in UTC, so a replay reads the same on every machine."""
    if not isinstance(at, (int, float)):
        return "--:--:--"
    return _dt.datetime.fromtimestamp(at, _dt.timezone.utc).strftime("%H:%M:%S")


class NoticeLog(RichLog):
    DEFAULT_CSS = "NoticeLog { border: round $primary-darken-2; height: 1fr; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(id="notices", wrap=True, markup=False, highlight=False, max_lines=2000,
                         min_width=20,                          **kw)
        self.border_title = "notices"
        self.entries: list[tuple[str, str, str]] = []

    def add(self, level: str, code: str, message: str, at: float | None = None) -> None:
        self.entries.append((level, code, message))
        t = Text(no_wrap=False)
        t.append(clock_time(at) + " ", style="dim")
        style = _LEVEL_STYLE.get(level, "")
        t.append(f"{level:<5} ", style=style or "dim")
        if code:
            t.append(f"{code}: ", style=style or "bold")
        t.append(message, style=style)
        self.write(t)
