"""Text for people, made with rich and loaded only when a run prints some (a ``--json`` run never does).

Prose and lists of items are wrapped at a width the user gave (a terminal's, or ``COLUMNS``) between words or
items, never inside one; in a pipe without ``COLUMNS`` each stays one line. Tables (``table``: columns declared
by name) and trees never cut, fold or ellipsize an identifier (operator id, file name, path, vertex name): only
prose columns wrap. A table too wide for the width the user gave is tried again without its frame (columns
apart by spaces), then in the narrower shape its command offers (``narrow``), and only when none fits printed
as one paragraph per row: the identifiers on the first lines, whole, each with its column's name, the prose
wrapped below them. In a pipe without ``COLUMNS`` tables and trees keep their shape and grow past the console
(a script reads whole rows).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from rich._wrap import divide_line  # rich's word wrap without its folding of long words
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from spillway.cli.output import PIPE_WIDTH, columns, current

if TYPE_CHECKING:  # rich's table machinery is loaded by the first table (a sound validate prints none)
    from rich.table import Table
    from rich.tree import Tree

INDENT = 4
_TRAILING_BLANKS = re.compile(r"[ \t]+(?=\n)")
_UNBOUNDED = 1 << 16
_GUIDE = 4  # a tree's guide per level ("├── ")


class _Console(Console):
    """A console that never leaves trailing blanks in a file or pipe (rich pads table cells and titles)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        text = super()._render_buffer(buffer)
        return text if self.is_terminal else _TRAILING_BLANKS.sub("", text)

    def on_broken_pipe(self) -> None:
        # rich's own reaction is SystemExit(1); a closed pipe is not our failure: ``guarded`` ends quietly.
        self.quiet = True
        raise BrokenPipeError


def console(which: str) -> Console:
    """The current invocation's console for ``"out"`` (stdout) or ``"err"`` (stderr), made on first use."""
    output = current()
    made = output.consoles.get(which)
    if made is None:
        if which == "out":
            width = columns() or (None if output.stdout_is_tty else PIPE_WIDTH)
            made = _Console(file=output.stdout, highlight=False, soft_wrap=False, width=width)
        else:
            made = _Console(file=output.stderr, stderr=True, highlight=False, soft_wrap=True)
        output.consoles[which] = made
    return cast(Console, made)


class _ConsoleProxy:
    def __init__(self, which: str) -> None:
        self._which = which

    def __getattr__(self, name: str) -> Any:
        return getattr(console(self._which), name)


# Stand-ins that forward every attribute to the current invocation's console: typed as what they forward to.
out = cast(Console, _ConsoleProxy("out"))
err = cast(Console, _ConsoleProxy("err"))


def _twin(like: Console, width: int) -> Console:
    """A console like ``like`` (same stream, colours, terminal-ness) but ``width`` columns wide."""
    return _Console(
        file=like.file,
        width=width,
        # rich types Console.color_system as str but takes a Literal of its names: forced by rich's stubs.
        color_system=like.color_system,  # type: ignore[arg-type]
        force_terminal=like.is_terminal,
        no_color=like.no_color,
        highlight=False,
        soft_wrap=False,
    )


def text_of(markup: object) -> Text:
    return markup if isinstance(markup, Text) else Text.from_markup(str(markup))


def bounded() -> bool:
    """Whether output must fit a width the user gave (a terminal's, or ``COLUMNS``)."""
    return current().stdout_is_tty or columns() is not None


def print_items_on(on: Console, items: list[Text], separator: str = "  ", indent: int = INDENT) -> None:
    """``items`` apart by ``separator``, a new line (``indent`` in) before an item that would cross the
    width: an item is never broken."""
    line = Text()
    for item in items:
        if line.plain.strip() and line.cell_len + len(separator) + item.cell_len > on.width:
            _print_line(on, line, indent)
            line = Text(" " * indent)
        elif line.plain.strip():
            line.append(separator)
        line.append_text(item)
    if line.plain.strip():
        _print_line(on, line, indent)


def _print_line(on: Console, line: Text, indent: int) -> None:
    """``line``, or, when one item made it wider than the console, wrapped at its spaces."""
    offsets = divide_line(line.plain, max(on.width, 1), fold=False) if line.cell_len > on.width else []
    if not offsets:
        on.print(line, soft_wrap=True)
        return
    head, rest = line[: offsets[0]], line[offsets[0] :]
    head.rstrip()
    on.print(head, soft_wrap=True)
    print_wrapped(on, rest, indent)


def print_items(items: list[str], separator: str = " · ", indent: int = 0) -> None:
    """``items`` (markup) on one line, or, at a width the user gave that they do not fit, on as many as
    needed, broken between items only."""
    texts = [text_of(i) for i in items]
    if not bounded():
        out.print(Text(separator).join(texts), soft_wrap=True)
        return
    print_items_on(console("out"), texts, separator, indent)


def print_paragraph(text: Text | str, indent: int = INDENT) -> None:
    """``text`` (markup when a string) wrapped at spaces to the width the user gave, words whole, every
    line after the first ``indent`` columns in; in a pipe without ``COLUMNS`` one line as it is."""
    whole = text_of(text)
    if not bounded():
        out.print(whole, soft_wrap=True)
        return
    for line in whole.split("\n"):
        _print_line(console("out"), line, indent)


def print_wrapped(on: Console, text: Text, indent: int) -> None:
    """``text`` wrapped at spaces only, ``indent`` columns in: a word wider than the line stays whole."""
    for line in text.split("\n"):
        offsets = divide_line(line.plain, max(on.width - indent, 1), fold=False)
        for part in line.divide(offsets):
            part.rstrip()
            on.print(Text(" " * indent) + part, soft_wrap=True)


def print_rebased(rebases: Iterable[dict[str, Any]], prefix: str = "") -> None:
    """The automatic rebasing a reading command did (``dump``, ``validate``, ``files``), one line a rule."""
    for r in rebases:
        print_paragraph(
            f"[dim]{prefix}rebased {r['paths']} paths: {escape(str(r['from']))} -> {escape(str(r['to']))}[/]"
        )


def table(
    names: Iterable[str], rows: Iterable[Sequence[RenderableType]], title: str | None = None, **settings: Any
) -> Table:
    """A table with a column per name; a name's last characters say how its column shows: ``>`` right-aligned,
    ``~`` prose (wraps), ``*`` bold; every other column holds identifiers, never wrapped."""
    from rich.table import Table

    made = Table(title=title, title_justify="left", **settings)
    for spec in names:
        name = spec.rstrip(">~*")
        marks = spec[len(name) :]
        made.add_column(
            name,
            justify="right" if ">" in marks else "left",
            no_wrap="~" not in marks,
            overflow="fold" if "~" in marks else "ellipsis",
            style="bold" if "*" in marks else None,
        )
    for row in rows:
        made.add_row(*row)
    return made


def print_table(
    names: Iterable[str], rows: Iterable[Sequence[RenderableType]], title: str | None = None, **settings: Any
) -> None:
    """``table(...)``, printed as ``print_wide`` prints it."""
    print_wide(table(names, rows, title, **settings))


def _needed(on: Console, renderable: RenderableType) -> int:
    from rich.measure import Measurement
    from rich.table import Table

    options = on.options.update_width(_UNBOUNDED)
    if isinstance(renderable, Table):
        # no_wrap columns need their widest cell; prose columns only their longest word.
        widths = [
            (m.maximum if c.no_wrap else m.minimum)
            for c in renderable.columns
            for m in [renderable._measure_column(on, options, c)]
        ]
        return sum(widths) + renderable._extra_width
    return Measurement.get(on, options, renderable).maximum


def print_wide(renderable: Table | Tree, narrow: Table | None = None) -> None:
    """Print ``renderable`` at least as wide as its identifiers need. A table's title and caption are
    printed as lines of their own (never squeezed into the table's width). ``narrow``: the same rows in
    fewer or taller columns, for a width the full table does not fit."""
    from rich.table import Table

    on = console("out")
    title = caption = None
    if isinstance(renderable, Table):
        title, caption = renderable.title, renderable.caption
        renderable.title = renderable.caption = None
        if narrow is not None:
            narrow.title = narrow.caption = None
    if title:
        on.print(text_of(title), style="table.title", soft_wrap=True)
    needed = _needed(on, renderable)
    if needed <= on.width:
        on.print(renderable)
    elif isinstance(renderable, Table) and bounded():
        _fitted(on, renderable, narrow)
    elif bounded() and not isinstance(renderable, Table):  # a tree
        width = _wrap_tree(renderable, on.width)
        (on if width <= on.width else _twin(on, width)).print(renderable)
    else:
        _twin(on, needed).print(renderable)
    if caption:
        on.print(text_of(caption), style="table.caption", soft_wrap=True)


def _fitted(on: Console, whole: Table, narrow: Table | None) -> None:
    for candidate in (whole, narrow):
        if candidate is None:
            continue
        unframed = _unframed(candidate)
        if _needed(on, unframed) <= on.width:
            on.print(unframed)
            return
    _paragraphs(on, whole)


def _unframed(framed: Table) -> Table:
    """``framed`` without its box: a rule under the header, columns two spaces apart."""
    from rich import box

    framed.box = box.SIMPLE_HEAD
    framed.show_edge = False
    framed.pad_edge = False
    framed.padding = (0, 1, 0, 0)
    framed.collapse_padding = True
    return framed


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


def _paragraphs(on: Console, rows: Table) -> None:
    """One paragraph per row: the first column's value, then every other identifier column as ``name
    value`` (left out when empty), wrapped between items, never inside one; the prose columns as ``name:
    value`` wrapped at spaces, indented."""
    from rich.padding import Padding

    names = [text_of(c.header).plain.strip() for c in rows.columns]
    cells = [list(c.cells) for c in rows.columns]
    for row in range(rows.row_count):
        items: list[Text] = []
        prose: list[Text] = []
        blocks: list[tuple[str, RenderableType]] = []
        for i, (name, column, whole) in enumerate(zip(names, cells, [c.no_wrap for c in rows.columns], strict=True)):
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
        print_items_on(on, items)
        for text in prose:
            print_wrapped(on, text, INDENT)
        for name, value in blocks:
            on.print(Text(" " * INDENT + f"{name}:"), soft_wrap=True)
            on.print(Padding(value, (0, 0, 0, 2 * INDENT)))
