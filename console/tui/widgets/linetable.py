"""A table of fixed-width columns drawn through Textual's line API.

Each row is rendered into a strip once, when it changes; a frame only crops the visible
strips. A generic data table re-renders every visible cell whenever any cell changes, which
in a round's flood of events was half the cost of every frame. The header stays on top;
an optional row cursor moves with the arrow keys, page keys, home/end and the mouse.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

Cell = str | Text


@dataclass(frozen=True)
class Column:
    key: str
    heading: str
    width: int
    right: bool = False         # right-aligned (figures)


class LineTable(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "ends(0)", "First", show=False),
        Binding("end", "ends(1)", "Last", show=False),
    ]
    COMPONENT_CLASSES = {"line-table--header", "line-table--cursor"}
    DEFAULT_CSS = """
    LineTable { background: $surface; color: $foreground; height: auto; }
    LineTable > .line-table--header { text-style: bold; background: $panel; color: $foreground; }
    LineTable > .line-table--cursor { background: $block-cursor-blurred-background;
                                      color: $block-cursor-blurred-foreground; }
    LineTable:focus > .line-table--cursor { background: $block-cursor-background;
                                            color: $block-cursor-foreground; text-style: bold; }
    """

    def __init__(self, columns: Sequence[Column], *, cursor: bool = True, gap: int = 1, **kw: Any) -> None:
        super().__init__(**kw)
        self.columns = tuple(columns)
        self.show_cursor = cursor
        self.can_focus = cursor
        self.gap = gap
        self.cursor_row = 0
        self._col = {c.key: i for i, c in enumerate(self.columns)}
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: list[list[Cell]] = []
        self._strips: dict[int, Strip] = {}      # rendered rows, dropped when a row changes
        self._width = sum(c.width + gap for c in self.columns)

    # --- content -------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._keys)

    def key_at(self, row: int) -> str:
        return self._keys[row]

    def get_cell(self, key: str, column: str) -> Cell:
        return self._cells[self._index[key]][self._col[column]]

    def add_rows(self, rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
        for key, cells in rows:
            self._index[key] = len(self._keys)
            self._keys.append(key)
            self._cells.append(list(cells))
        self._resize()

    def replace_rows(self, rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
        """All rows at once (a view that is re-read, not appended to); the cursor stays in range."""
        self._keys, self._index, self._cells, self._strips = [], {}, [], {}
        self.add_rows(rows)
        self.cursor_row = min(self.cursor_row, max(0, self.row_count - 1))
        self.refresh()

    def add_row(self, *cells: Cell, key: str) -> None:
        self.add_rows([(key, cells)])

    def update_cell(self, key: str, column: str, value: Cell) -> None:
        self.update_cells(key, {column: value})

    def update_cells(self, key: str, values: dict[str, Cell]) -> None:
        row = self._index[key]
        for column, value in values.items():
            self._cells[row][self._col[column]] = value
        self._strips.pop(row, None)
        self.refresh_line(row + 1)          # virtual lines: the header is line 0

    def _resize(self) -> None:
        size = Size(self._width, len(self._keys) + 1)
        old = self.virtual_size
        if self.show_vertical_scrollbar and size.width == old.width and size.height >= old.height:
            # More rows under a scrollbar already shown: only its thumb changes. Set through
            # virtual_size this would re-lay out the whole screen on every batch of rows.
            self.set_reactive(LineTable.virtual_size, size)
            self._scroll_update(size)
            self.refresh()
        else:
            self.virtual_size = size

    # --- cursor --------------------------------------------------------------------
    def move_cursor(self, row: int) -> None:
        row = max(0, min(row, self.row_count - 1))
        old, self.cursor_row = self.cursor_row, row
        self._strips.pop(old, None)
        self._strips.pop(row, None)
        top = int(self.scroll_y)
        rows = max(1, self.scrollable_content_region.height - 1)    # less the header line
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + rows:
            self.scroll_to(y=row - rows + 1, animate=False)
        self.refresh()

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step * max(1, self.scrollable_content_region.height - 1))

    def action_ends(self, last: int) -> None:
        self.move_cursor(self.row_count - 1 if last else 0)

    def on_click(self, event: events.Click) -> None:
        at = event.get_content_offset(self)
        if self.show_cursor and at is not None and at.y >= 1:
            self.move_cursor(int(self.scroll_y) + at.y - 1)

    def on_focus(self) -> None:
        self._strips.pop(self.cursor_row, None)     # the cursor's colour depends on focus

    def on_blur(self) -> None:
        self._strips.pop(self.cursor_row, None)

    # --- drawing -------------------------------------------------------------------
    def _line(self, cells: Sequence[Cell], style: Style) -> Strip:
        segments: list[Segment] = []
        last = len(self.columns) - 1
        for i, (column, cell) in enumerate(zip(self.columns, cells)):
            text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
            if i < last:        # the last column keeps what does not fit: flags, messages
                text.truncate(column.width, overflow="ellipsis")
                text.align("right" if column.right else "left", column.width)
                text.append(" " * self.gap)
            segments += text.render(self.app.console)
        return Strip(segments).apply_style(style)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        x = int(self.scroll_x)
        if y == 0:
            header = base + self.get_component_rich_style("line-table--header")
            return self._line([c.heading for c in self.columns], header).crop_extend(x, x + width, header)
        row = int(self.scroll_y) + y - 1
        if row >= len(self._keys):
            return Strip.blank(width, base)
        strip = self._strips.get(row)
        if strip is None:
            style = base
            if self.show_cursor and row == self.cursor_row:
                style = base + self.get_component_rich_style("line-table--cursor")
            strip = self._strips[row] = self._line(self._cells[row], style)
        return strip.crop_extend(x, x + width, base)
