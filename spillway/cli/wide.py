"""Tables and trees whose identifiers (operator ids, file names, paths, vertex names) are never cut,
folded or ellipsized: identifier columns are ``no_wrap``, only prose columns wrap.

At a width the user gave (a terminal's, or ``COLUMNS``) a table too wide for it is tried again without
its frame (columns apart by spaces), then in the narrower shape its command offers (``narrow``), and
only when none fits printed as one paragraph per row: the identifiers on the first lines, whole, each
with its column's name, the prose wrapped below them. A tree's labels wrap at spaces at that width; a
word longer than its line keeps the line long rather than being cut. In a pipe without ``COLUMNS``
tables and trees keep their shape and grow past the console (a script reads whole rows)."""

from __future__ import annotations

from rich import box
from rich._wrap import divide_line  # rich's word wrap without its folding of long words
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from spillway.cli.consoles import twin
from spillway.cli.output import current
from spillway.cli.wrap import INDENT, bounded, print_items_on, print_wrapped, text_of

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


def print_wide(renderable: Table | Tree, narrow: Table | None = None) -> None:
    """Print ``renderable`` at least as wide as its identifiers need. A table's title and caption are
    printed as lines of their own (never squeezed into the table's width). ``narrow``: the same rows in
    fewer or taller columns, for a width the full table does not fit."""
    console = current().out
    title = caption = None
    if isinstance(renderable, Table):
        title, caption = renderable.title, renderable.caption
        renderable.title = renderable.caption = None
        if narrow is not None:
            narrow.title = narrow.caption = None
    if title:
        console.print(text_of(title), style="table.title", soft_wrap=True)
    needed = _needed(console, renderable)
    if needed <= console.width:
        console.print(renderable)
    elif isinstance(renderable, Table) and bounded():
        _fitted(console, renderable, narrow)
    elif isinstance(renderable, Tree) and bounded():
        width = _wrap_tree(renderable, console.width)
        (console if width <= console.width else twin(console, width)).print(renderable)
    else:
        twin(console, needed).print(renderable)
    if caption:
        console.print(text_of(caption), style="table.caption", soft_wrap=True)


def _fitted(console: Console, table: Table, narrow: Table | None) -> None:
    for candidate in (table, narrow):
        if candidate is None:
            continue
        unframed = _unframed(candidate)
        if _needed(console, unframed) <= console.width:
            console.print(unframed)
            return
    _paragraphs(console, table)


def _unframed(table: Table) -> Table:
    """``table`` without its box: a rule under the header, columns two spaces apart."""
    table.box = box.SIMPLE_HEAD
    table.show_edge = False
    table.pad_edge = False
    table.padding = (0, 1, 0, 0)
    table.collapse_padding = True
    return table


def _wrap_tree(tree: Tree, width: int) -> int:
    """Wrap every label of ``tree`` at spaces to what is left of ``width`` beside its guides (a word
    longer than that stays whole); the width the widest line then needs."""
    needed = width
    stack: list[tuple[Tree, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        label = text_of(node.label)
        room = max(width - depth * _GUIDE, 1)
        lines = [part for line in label.split("\n") for part in line.divide(divide_line(line.plain, room, fold=False))]
        for line in lines:
            line.rstrip()
        node.label = Text("\n").join(lines)
        needed = max(needed, depth * _GUIDE + max((line.cell_len for line in lines), default=0))
        stack.extend((child, depth + 1) for child in node.children)
    return needed


_GUIDE = 4  # a tree's guide per level ("├── ")


def _paragraphs(console: Console, table: Table) -> None:
    """One paragraph per row: the first column's value, then every other identifier column as ``name
    value`` (left out when empty), wrapped between items, never inside one; the prose columns as ``name:
    value`` wrapped at spaces, indented."""
    names = [text_of(c.header).plain.strip() for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    for row in range(table.row_count):
        items: list[Text] = []
        prose: list[Text] = []
        blocks: list[tuple[str, RenderableType]] = []
        for i, (name, column, whole) in enumerate(zip(names, cells, [c.no_wrap for c in table.columns], strict=True)):
            value = column[row]
            if not isinstance(value, (str, Text)):
                blocks.append((name, value))
                continue
            text = text_of(value)
            if text.plain.strip() in ("", "-"):
                continue
            if i == 0:
                items.extend(Text.assemble(part, style="bold") for part in text.split("\n"))
            elif whole:
                items.extend(Text(f"{name} ") + part for part in text.split("\n"))
            else:
                prose.append(Text(f"{name}: ") + text)
        print_items_on(console, items)
        for text in prose:
            print_wrapped(console, text, INDENT)
        for name, value in blocks:
            console.print(Text(" " * INDENT + f"{name}:"), soft_wrap=True)
            console.print(Padding(value, (0, 0, 0, 2 * INDENT)))
