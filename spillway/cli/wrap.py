"""Prose and lists of items for people, wrapped at a width the user gave (a terminal's, or ``COLUMNS``)
between words or items, never inside one: an identifier longer than the line keeps the line long rather
than being cut. In a pipe without ``COLUMNS`` each stays one line. Light on purpose (no rich tables):
commands that print a few lines use it without loading rich's table machinery."""

from __future__ import annotations

from rich._wrap import divide_line  # rich's word wrap without its folding of long words
from rich.console import Console
from rich.text import Text

from spillway.cli.output import columns, current

INDENT = 4


def text_of(markup: object) -> Text:
    return markup if isinstance(markup, Text) else Text.from_markup(str(markup))


def bounded() -> bool:
    """Whether output must fit a width the user gave (a terminal's, or ``COLUMNS``)."""
    return current().stdout_is_tty or columns() is not None


def print_items_on(console: Console, items: list[Text], separator: str = "  ", indent: int = INDENT) -> None:
    """``items`` apart by ``separator``, a new line (``indent`` in) before an item that would cross the
    width: an item is never broken."""
    line = Text()
    for item in items:
        if line.plain.strip() and line.cell_len + len(separator) + item.cell_len > console.width:
            _print_line(console, line, indent)
            line = Text(" " * indent)
        elif line.plain.strip():
            line.append(separator)
        line.append_text(item)
    if line.plain.strip():
        _print_line(console, line, indent)


def _print_line(console: Console, line: Text, indent: int) -> None:
    """``line``, or, when one item made it wider than the console, wrapped at its spaces."""
    offsets = divide_line(line.plain, max(console.width, 1), fold=False) if line.cell_len > console.width else []
    if not offsets:
        console.print(line, soft_wrap=True)
        return
    head, rest = line[: offsets[0]], line[offsets[0] :]
    head.rstrip()
    console.print(head, soft_wrap=True)
    print_wrapped(console, rest, indent)


def print_items(items: list[str], separator: str = " · ", indent: int = 0) -> None:
    """``items`` (markup) on one line, or, at a width the user gave that they do not fit, on as many as
    needed, broken between items only."""
    console = current().out
    texts = [text_of(i) for i in items]
    if not bounded():
        console.print(Text(separator).join(texts), soft_wrap=True)
        return
    print_items_on(console, texts, separator, indent)


def print_paragraph(text: Text | str, indent: int = INDENT) -> None:
    """``text`` (markup when a string) wrapped at spaces to the width the user gave, words whole, every
    line after the first ``indent`` columns in; in a pipe without ``COLUMNS`` one line as it is."""
    console = current().out
    whole = text_of(text)
    if not bounded():
        console.print(whole, soft_wrap=True)
        return
    for line in whole.split("\n"):
        _print_line(console, line, indent)


def print_wrapped(console: Console, text: Text, indent: int) -> None:
    """``text`` wrapped at spaces only, ``indent`` columns in: a word wider than the line stays whole."""
    for line in text.split("\n"):
        offsets = divide_line(line.plain, max(console.width - indent, 1), fold=False)
        for part in line.divide(offsets):
            part.rstrip()
            console.print(Text(" " * indent) + part, soft_wrap=True)
