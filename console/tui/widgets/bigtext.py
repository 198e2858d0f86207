"""Outcome words in large type (Digits only draws digits and a few letters)."""
from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

# Three rows per glyph, three cells wide, drawn with box characters like Digits.
_FONT: dict[str, tuple[str, str, str]] = {
    "A": ("╭─╮", "├─┤", "╵ ╵"), "B": ("┌─╮", "├─┤", "└─╯"), "C": ("╭─╴", "│  ", "╰─╴"),
    "D": ("┌─╮", "│ │", "└─╯"), "E": ("┌─╴", "├─ ", "└─╴"), "F": ("┌─╴", "├─ ", "╵  "),
    "G": ("╭─╴", "│╶╮", "╰─╯"), "H": ("╷ ╷", "├─┤", "╵ ╵"), "I": ("╶┬╴", " │ ", "╶┴╴"),
    "J": ("  ╷", "  │", "╰─╯"), "K": ("╷ ╱", "├┤ ", "╵ ╲"), "L": ("╷  ", "│  ", "└─╴"),
    "M": ("╭┬╮", "│││", "╵╵╵"), "N": ("╭─╮", "│ │", "╵ ╵"), "O": ("╭─╮", "│ │", "╰─╯"),
    "P": ("┌─╮", "├─╯", "╵  "), "Q": ("╭─╮", "│ │", "╰─╲"), "R": ("┌─╮", "├┬╯", "╵╰╴"),
    "S": ("╭─╴", "╰─╮", "╶─╯"), "T": ("╶┬╴", " │ ", " ╵ "), "U": ("╷ ╷", "│ │", "╰─╯"),
    "V": ("╷ ╷", "╲ ╱", " ╵ "), "W": ("╷╷╷", "│││", "╰┴╯"), "X": ("╲ ╱", " ╳ ", "╱ ╲"),
    "Y": ("╷ ╷", "╰┬╯", " ╵ "), "Z": ("╶─┐", " ╱ ", "└─╴"), " ": ("  ", "  ", "  "),
    "-": ("   ", "╶─╴", "   "), "?": ("╶─╮", " ╭╯", " ╵ "),
}


def render_big(word: str) -> list[str]:
    """The three text rows that draw ``word`` (unknown characters draw as '?')."""
    rows = ["", "", ""]
    for ch in word.upper():
        glyph = _FONT.get(ch, _FONT["?"])
        for i in range(3):
            rows[i] += glyph[i] + " "
    return [r.rstrip() for r in rows]


class BigText(Widget):
    """A word drawn three rows tall, centred; ``text`` holds the plain word."""

    DEFAULT_CSS = """
    BigText { height: 3; width: 1fr; content-align: center middle; text-style: bold; }
    """

    text: reactive[str] = reactive("", layout=True)

    def render(self) -> Text:
        return Text("\n".join(render_big(self.text)), justify="center")
