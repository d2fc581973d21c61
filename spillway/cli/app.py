"""The ``spillway`` entry point.

Start-up is most of a small command's time, so this imports only what the invocation needs:
``--version`` alone is answered here; a plain ``spillway validate`` or ``dump`` (``fast.parse`` says
which) runs its command function without typer, whose conversion of each option through pydantic costs
more CPU than the command; everything else, help and usage errors included, goes through the app in
``commands``, which imports the one command module that runs (``-h`` imports none).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
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
        _load_on_first_use("pdb")
        from spillway.api import freeze_after_pauses

        freeze_after_pauses()  # this process ends with its command (see commands.freeze_gc)
        sys.exit(fast.run(plain))
    from spillway.cli import commands

    commands.freeze_gc = True
    commands.app()


class _OnFirstUse(ModuleType):
    """Stands in ``sys.modules`` for a module not imported yet: the first attribute asked of it imports the real
    module (which then replaces it there) and answers from it."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):  # what the import system asks of a module it finds: not a use
            raise AttributeError(attribute)
        if sys.modules.get(self.__name__) is self:  # the first use: import the real module in our place
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def _load_on_first_use(name: str) -> None:
    """Make ``import name`` free in this process until the module is used. construct imports pdb (for its
    Debugger, never used here) and pdb brings half the debugger stack: ~4 ms of a plain command's start. Only
    the entry point does this, for the process it owns. (importlib's LazyLoader would not do: the import system
    reads ``__spec__`` of a module it finds in ``sys.modules``, which makes LazyLoader load it at once.)"""
    if name not in sys.modules:
        sys.modules[name] = _OnFirstUse(name)


def __getattr__(name: str) -> Any:
    """``app`` (and the rest of the typer wiring) from ``commands``, imported on first use."""
    if name in ("app", "repair", "root"):
        from spillway.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
