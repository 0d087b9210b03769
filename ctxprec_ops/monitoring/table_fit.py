"""Tables that stay readable at the width they are printed at, an 80-column terminal included.

``FitTable`` is a rich renderable: it lays itself out for the width of the console it is printed
to (``options.max_width``). Each column (``Col``) says how it may give way when the table is too
wide:

- a column with ``drop=N`` is left out, the ``drop=1`` ones first (columns of one rank go
  together), until the rest fits;
- a key column (``drop=0``: a row's name or date, a figure the table is about) is never left out;
- no cell is ever wrapped or cut, except in a ``wrap=True`` column (free text such as a list of
  alert names), which wraps at word boundaries;
- headers wrap at word boundaries when the cells are narrower than the header.

Widths are computed here (each column gets a fixed width): rich's own last resort for a table
wider than the console shrinks every column evenly, which would cut dates and names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box as boxes
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.errors import MarkupError
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "FitTable"]


@dataclass(frozen=True)
class Col:
    """A column of a ``FitTable``. ``drop``: 0 never left out; N > 0 left out N-th (with the other
    columns of rank N) when the table is too wide. ``wrap``: free text that may wrap at word
    boundaries (otherwise never wrapped)."""

    header: str
    justify: Any = "right"
    drop: int = 0
    wrap: bool = False
    style: str | None = None


def _text(cell: RenderableType) -> Text:
    if isinstance(cell, Text):
        return cell
    try:
        return Text.from_markup(str(cell))
    except MarkupError:
        return Text(str(cell))


def _widest_line(cell: RenderableType) -> int:
    return max((cell_len(line) for line in _text(cell).plain.split("\n")), default=0)


def _widest_word(cell: RenderableType) -> int:
    return max((cell_len(word) for word in _text(cell).plain.split()), default=0)


class FitTable:
    """A table of ``Col`` columns that fits the console it is printed to (see the module's notes).
    ``table_options`` go to ``rich.table.Table`` (title, caption, box, header_style, ...)."""

    def __init__(self, *columns: Col, **table_options: Any) -> None:
        self.columns = list(columns)
        self.rows: list[tuple[list[RenderableType], str | None]] = []
        self.options = {"header_style": "bold", **table_options}

    def add_row(self, *cells: RenderableType, style: str | None = None) -> None:
        self.rows.append(([("" if c is None else c) for c in cells], style))

    # -- layout ------------------------------------------------------------------------------------

    def _cells(self, i: int) -> list[RenderableType]:
        return [cells[i] for cells, _style in self.rows]

    def _need(self, i: int) -> int:
        """The narrowest the column can be: its widest cell (a ``wrap`` column: widest word), and
        the header's widest word."""
        col, cells = self.columns[i], self._cells(i)
        cell = max(((_widest_word if col.wrap else _widest_line)(c) for c in cells), default=0)
        return max(1, cell, _widest_word(col.header))

    def _want(self, i: int) -> int:
        """The width at which nothing in the column wraps, its header included."""
        return max([self._need(i), _widest_line(self.columns[i].header), *map(_widest_line, self._cells(i))])

    def _chrome(self, n: int) -> int:
        """Borders and padding of a table of ``n`` columns."""
        box = self.options.get("box", boxes.HEAVY_HEAD)
        show_edge = self.options.get("show_edge", True)
        pad_edge = self.options.get("pad_edge", True)
        borders = ((2 if show_edge else 0) + n - 1) if box else 0
        return borders + 2 * n - (0 if pad_edge or n == 0 else 2)

    def layout(self, width: int) -> tuple[list[int], list[int]]:
        """(indexes of the columns shown, their widths) for a console ``width`` columns wide."""
        shown = list(range(len(self.columns)))
        ranks = sorted({c.drop for c in self.columns if c.drop})
        while True:
            need = [self._need(i) for i in shown]
            spare = width - self._chrome(len(shown)) - sum(need)
            if spare >= 0 or not ranks:
                break
            rank = ranks.pop(0)  # columns of one rank go together (the two sides' means, say)
            shown = [i for i in shown if self.columns[i].drop != rank]
        widths = dict(zip(shown, need))
        # spare room: first so no header wraps, then so free text wraps less
        for wrap in (False, True):
            for i in shown:
                if self.columns[i].wrap == wrap and spare > 0:
                    grow = min(spare, self._want(i) - widths[i])
                    widths[i] += grow
                    spare -= grow
        return shown, [widths[i] for i in shown]

    def table(self, width: int) -> Table:
        """The rich ``Table`` laid out for ``width`` columns."""
        shown, widths = self.layout(width)
        table = Table(**self.options)
        for i, w in zip(shown, widths):
            col = self.columns[i]
            table.add_column(
                Text(col.header, no_wrap=False),  # a header may wrap; the cells follow the column
                justify=col.justify,
                width=w,
                no_wrap=not col.wrap,
                overflow="fold" if col.wrap else "ellipsis",
                style=col.style,
            )
        for cells, style in self.rows:
            table.add_row(*(cells[i] for i in shown), style=style)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table(options.max_width))
