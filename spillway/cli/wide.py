"""Tables whose identifiers (operator ids, file names) are never cut, folded or ellipsized."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from spillway.cli.output import current


def print_wide(table: Table) -> None:
    """Print ``table`` at least as wide as its widest row needs: identifier columns are ``no_wrap``,
    and rather than shorten them the table grows past the terminal (which then wraps whole lines)."""
    console = current().out
    needed = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    if needed <= console.width:
        console.print(table)
        return
    # Console.print never renders wider than its console: render on a wider twin writing to the same stream.
    wide = Console(
        file=console.file,
        width=needed,
        color_system=console.color_system,  # type: ignore[arg-type]
        force_terminal=console.is_terminal,
        no_color=console.no_color,
        highlight=False,
        soft_wrap=False,
    )
    wide.print(table)
