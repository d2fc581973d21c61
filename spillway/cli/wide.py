"""Tables and trees whose identifiers (operator ids, file names, paths, vertex names) are never cut,
folded or ellipsized: identifier columns are ``no_wrap``, only prose columns wrap.

A table too wide for a width the user gave (a terminal's, or ``COLUMNS``) is printed as one block per
row instead, ``column: value`` a line, a value that does not fit beside its name on the next lines
(like ``psql``'s expanded display): it fits the width, and identifiers stay whole. In a pipe without
``COLUMNS`` the table keeps its shape and grows past the console (a script reads whole rows)."""

from __future__ import annotations

from rich._wrap import divide_line  # rich's word wrap without its folding of long words
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from spillway.cli.consoles import twin
from spillway.cli.output import columns, current

_UNBOUNDED = 1 << 16


def _needed(console: Console, renderable: RenderableType) -> int:
    options = console.options.update_width(_UNBOUNDED)
    if isinstance(renderable, Table):
        # no_wrap columns need their widest cell; prose columns only their longest word.
        widths = [
            (m.maximum if c.no_wrap else m.minimum)
            for c in renderable.columns
            for m in [renderable._measure_column(console, options, c)]
        ]
        return sum(widths) + renderable._extra_width
    return Measurement.get(console, options, renderable).maximum


def _text(markup: object) -> Text:
    return markup if isinstance(markup, Text) else Text.from_markup(str(markup))


def print_wide(renderable: Table | Tree) -> None:
    """Print ``renderable`` at least as wide as its identifiers need. A table's title and caption are
    printed as lines of their own (never squeezed into the table's width)."""
    console = current().out
    title = caption = None
    if isinstance(renderable, Table):
        title, caption = renderable.title, renderable.caption
        renderable.title = renderable.caption = None
    if title:
        console.print(_text(title), style="table.title", soft_wrap=True)
    needed = _needed(console, renderable)
    if needed <= console.width:
        console.print(renderable)
    elif isinstance(renderable, Table) and (current().stdout_is_tty or columns() is not None):
        _stacked(console, renderable)
    else:
        twin(console, needed).print(renderable)
    if caption:
        console.print(_text(caption), style="table.caption", soft_wrap=True)


_INDENT = 4


def _stacked(console: Console, table: Table) -> None:
    """One block per row: ``column: value`` lines; a value too wide for its line goes below, indented."""
    names = [_text(c.header).plain.strip() for c in table.columns]
    label_width = max((len(n) for n in names), default=0)
    cells = [list(c.cells) for c in table.columns]
    for row in range(table.row_count):
        console.print()
        for name, column, whole in zip(names, cells, [c.no_wrap for c in table.columns], strict=True):
            value = column[row]
            if not isinstance(value, (str, Text)):
                console.print(f"{name}:", soft_wrap=True)
                console.print(Padding(value, (0, 0, 0, _INDENT)))
                continue
            text = _text(value)
            label = Text(f"{name}:".ljust(label_width + 2))
            if "\n" not in text.plain and label.cell_len + text.cell_len <= console.width:
                console.print(label + text, soft_wrap=True)
                continue
            console.print(f"{name}:", soft_wrap=True)
            if whole:  # an identifier column (a vertex name has spaces too): each line whole
                for line in text.split("\n"):
                    console.print(Text(" " * _INDENT) + line, soft_wrap=True)
            else:
                _print_wrapped(console, text, _INDENT)


def _print_wrapped(console: Console, text: Text, indent: int) -> None:
    """``text`` wrapped at spaces only, ``indent`` columns in: a word wider than the line stays whole."""
    for line in text.split("\n"):
        offsets = divide_line(line.plain, max(console.width - indent, 1), fold=False)
        for part in line.divide(offsets):
            part.rstrip()
            console.print(Text(" " * indent) + part, soft_wrap=True)
