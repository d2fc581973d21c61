"""Tables and trees whose identifiers (operator ids, file names, paths, vertex names) are never cut,
folded or ellipsized: identifier columns are ``no_wrap``, only prose columns wrap, and rather than
shorten an identifier the output grows past the console (a terminal then wraps whole lines)."""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from spillway.cli.output import current, twin

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
    (console if needed <= console.width else twin(console, needed)).print(renderable)
    if caption:
        console.print(_text(caption), style="table.caption", soft_wrap=True)
