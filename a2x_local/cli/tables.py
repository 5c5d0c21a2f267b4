"""Tables that fit the terminal without cutting what users copy.

rich alone shares a narrow terminal out evenly: ids folded every few characters, or squeezed to nothing beside a
long description. Here each column says what may happen to it: `WHOLE` columns (ids, numbers, types) are never cut
or wrapped; `CUT` columns (names) shrink with an ellipsis and go when even their header does not fit; the `REST`
column (a description) takes what is left and goes first. When the whole columns alone are wider than the terminal,
each row is printed as lines instead of a table, so an id is never cut even then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from a2x_local.cli.output import terminal_safe

Role = Literal["whole", "cut", "rest"]
WHOLE: Role = "whole"
CUT: Role = "cut"
REST: Role = "rest"

# The least a description is worth showing in (below, the column is dropped), and the least a cut column keeps.
REST_MIN_WIDTH = 20
CUT_MIN_WIDTH = 6


@dataclass(frozen=True)
class Column:
    header: str
    role: Role = WHOLE
    justify: Literal["left", "right"] = "left"
    most: int | None = None   # a CUT column's widest, even when its text is longer


def one_line(text: object) -> str:
    """A cell's text on one line and terminal-safe: line breaks and runs of spaces become single spaces."""
    return terminal_safe(" ".join(str(text).split()))


def _overhead(columns: int) -> int:
    """Borders and padding of a table with ``columns`` columns: a bar between and around them, a space each side."""
    return columns + 1 + 2 * columns


def layout(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int | None] | None:
    """Each column's width in a table ``width`` characters wide (None: the column is left out), or None when even
    the whole columns do not fit (print the rows as lines)."""
    natural = [max([cell_len(column.header), *(cell_len(row[i]) for row in rows)])
               for i, column in enumerate(columns)]
    kept = [i for i, column in enumerate(columns) if column.role != REST]
    rest = [i for i, column in enumerate(columns) if column.role == REST]
    cut = [i for i in kept if columns[i].role == CUT]
    whole = sum(natural[i] for i in kept if columns[i].role == WHOLE)

    def floor(i: int) -> int:   # the least a CUT column takes: its header, or CUT_MIN_WIDTH
        return min(natural[i], max(cell_len(columns[i].header), CUT_MIN_WIDTH))

    while True:
        room = width - _overhead(len(kept) + len(rest)) - whole
        if room >= sum(floor(i) for i in cut) + REST_MIN_WIDTH * len(rest):
            break
        if rest:
            rest.pop()
        elif cut:
            kept.remove(cut.pop())
        else:
            return None
    widths: list[int | None] = [None] * len(columns)
    for i in kept:
        widths[i] = natural[i]
    wants = {i: min(natural[i], columns[i].most or natural[i]) for i in cut}
    spare = room - REST_MIN_WIDTH * len(rest)
    for i in cut:   # each cut column its floor, then what it wants as far as the room goes, in column order
        widths[i] = floor(i)
    spare -= sum(floor(i) for i in cut)
    for i in cut:
        more = min(spare, wants[i] - floor(i))
        if more > 0:
            widths[i] = floor(i) + more
            spare -= more
    for i in rest:
        widths[i] = min(natural[i], REST_MIN_WIDTH + spare)
    return widths


def print_table(console: Console, title: str | None, columns: Sequence[Column],
                rows: Sequence[Sequence[object]]) -> None:
    """Print ``rows`` under ``columns`` on ``console`` at its width (see the module)."""
    texts = [[one_line(cell) for cell in row] for row in rows]
    widths = layout(columns, texts, console.width)
    if title:   # above the table, not in it: a table pads its title with spaces to its width
        console.print(Text(one_line(title), style="bold"), soft_wrap=True)
    if widths is None:
        _print_lines(console, columns, texts)
        return
    table = Table()
    shown = [i for i, w in enumerate(widths) if w is not None]
    for i in shown:
        column = columns[i]
        # A whole column is as wide as its widest cell, so its ellipsis never shows ("ignore" would also lose the
        # column's justification in rich).
        table.add_column(column.header, justify=column.justify, width=widths[i], no_wrap=True, overflow="ellipsis")
    for row in texts:
        table.add_row(*(Text(row[i]) for i in shown))
    console.print(table)


def _print_lines(console: Console, columns: Sequence[Column], rows: list[list[str]]) -> None:
    """A terminal too narrow for the table: per row, its whole columns on one line (never cut: soft-wrapped by the
    terminal, not by rich), then each other column indented on a line of its own, cut to the width."""
    whole = [i for i, column in enumerate(columns) if column.role == WHOLE]
    other = [i for i, column in enumerate(columns) if column.role != WHOLE]
    for row in rows:
        console.print(Text("  ".join(row[i] for i in whole if row[i])), soft_wrap=True)
        for i in other:
            if row[i]:
                line = Text(f"    {columns[i].header}: {row[i]}", no_wrap=True, overflow="ellipsis")
                line.truncate(console.width, overflow="ellipsis")
                console.print(line)
