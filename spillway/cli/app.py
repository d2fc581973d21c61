"""The ``spillway`` entry point.

Start-up is most of a small command's time, so this imports only what the invocation needs:
``--version`` alone is answered here; a plain ``spillway validate`` or ``dump`` (``fast.parse`` says
which) runs its command function without typer, whose conversion of each option through pydantic costs
more CPU than the command; everything else, help and usage errors included, goes through the app in
``commands``, which imports the one command module that runs (``-h`` imports none).
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:  # what the app's eager --version option prints (commands._print_version)
        from spillway import __version__

        sys.stdout.write(f"spillway {__version__}\n")
        sys.stdout.flush()
        return
    from spillway.cli import fast

    plain = fast.parse(argv)
    if plain is not None:
        from spillway.api import freeze_after_pauses

        freeze_after_pauses()  # this process ends with its command (see commands.freeze_gc)
        sys.exit(fast.run(plain))
    from spillway.cli import commands

    commands.freeze_gc = True
    commands.app()


def __getattr__(name: str) -> Any:
    """``app`` (and the rest of the typer wiring) from ``commands``, imported on first use."""
    if name in ("app", "repair", "root"):
        from spillway.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
