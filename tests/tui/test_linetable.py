"""The line-API table: rows render once, the header stays on top, the cursor moves by keys and mouse."""
from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from console.tui.widgets.linetable import Column, LineTable

COLUMNS = [Column("n", "n", 4, right=True), Column("name", "name", 6), Column("note", "note", 4)]


class One(App):
    def compose(self) -> ComposeResult:
        yield LineTable(COLUMNS, id="t")


def _lines(table: LineTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.scrollable_content_region.height)]


async def test_rows_cells_and_a_pinned_header():
    app = One()
    async with app.run_test(size=(40, 8)) as pilot:
        app.query_one(LineTable).styles.height = 6
        table = app.query_one(LineTable)
        table.add_rows([(f"r{i}", [str(i), f"row{i}", Text("ok", style="green")]) for i in range(20)])
        await pilot.pause()
        assert table.row_count == 20 and table.get_cell("r3", "name") == "row3"
        lines = _lines(table)
        assert lines[0].startswith("   n name   note") and lines[1].startswith("   0 row0   ok")
        table.update_cells("r1", {"name": "a-much-longer-name", "note": "is kept whole"})
        await pilot.pause()
        assert _lines(table)[2].startswith("   1 a-muc… is kept whole")
        table.focus()
        await pilot.press("end")
        assert table.cursor_row == 19
        lines = _lines(table)
        assert lines[0].startswith("   n name") and lines[-1].startswith("  19 row19")   # header stays
        await pilot.press("home")
        assert table.cursor_row == 0 and _lines(table)[1].startswith("   0 row0")
        await pilot.press("down", "down", "pagedown")
        assert table.cursor_row == 2 + (table.scrollable_content_region.height - 1)
        await pilot.press("up")
        before = table.cursor_row
        await pilot.click("#t", offset=(2, 2))        # the second row on screen
        assert table.cursor_row == int(table.scroll_y) + 1 != before


async def test_a_table_without_a_cursor_does_not_take_focus():
    class Plain(App):
        def compose(self) -> ComposeResult:
            yield LineTable(COLUMNS, cursor=False, gap=0, id="t")

    app = Plain()
    async with app.run_test(size=(40, 8)) as pilot:
        table = app.query_one(LineTable)
        table.add_row("1", "x", "y", key="a")
        await pilot.pause()
        assert not table.can_focus and _lines(table)[1].startswith("   1x     y")
