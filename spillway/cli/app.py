"""The ``spillway`` entry point.

Importing the typer app means importing every command module, and typer converts each option through
pydantic: together ~0.15 s of CPU before any work, as much as validate needs for a GiB of channel state.
So a plain ``spillway validate`` (``fast.parse_validate`` says which) runs its command function directly;
every other invocation, help and usage errors included, goes through the app in ``commands``.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    # This process ends with its command: what a command decodes may skip the cycle collector. (Every
    # path imports the codec anyway: the validate fast path and every typer command.)
    from spillway.formats.metadata_codec import freeze_after_pauses

    freeze_after_pauses()
    from spillway.cli.fast import run_validate

    code = run_validate(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from spillway.cli.commands import app

    app()


def __getattr__(name: str) -> Any:
    """``app`` (and the rest of the typer wiring) from ``commands``, imported on first use."""
    if name in ("app", "repair", "root"):
        from spillway.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
