"""Tables whose identifiers (operator ids, file names) are never cut, folded or ellipsized."""

from __future__ import annotations

from rich.measure import Measurement
from rich.table import Table

from spillway.cli.output import current


def print_wide(table: Table) -> None:
    """Print ``table`` at least as wide as its widest row needs: identifier columns are ``no_wrap``,
    and rather than shorten them the table grows past the terminal (which then wraps whole lines)."""
    console = current().out
    needed = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    width = max(console.width, needed)
    console.print(table, width=width, crop=False, overflow="ignore")
