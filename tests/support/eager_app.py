"""The ``spillway`` app as it was built before its commands were loaded lazily (the reference for
tests/cli/test_startup.py): every command registered up front on typer's own group, whose ``-h`` lists each
command's short help. Run as a script, it is that app's command line (``python eager_app.py dump -h``)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from spillway.cli import commands
from spillway.cli.help import plain_metavars


class _EagerGroup(typer.core.TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_metavars(self)


def _register(app: typer.Typer, table: dict[str, str]) -> None:
    for name, module in table.items():
        cli = importlib.import_module(f"spillway.cli.{module}")
        app.command(name, help=cli.HELP)(cli.command)


def eager_app() -> typer.Typer:
    settings: dict[str, Any] = {"rich_markup_mode": None, "no_args_is_help": True}
    settings["context_settings"] = {"help_option_names": ["-h", "--help"]}
    app = typer.Typer(
        name=commands.app.info.name,
        cls=_EagerGroup,
        help=commands.app.info.help,
        add_completion=False,
        pretty_exceptions_enable=False,
        **settings,
    )
    _register(app, commands.COMMANDS)
    repair = typer.Typer(help=commands.repair.info.help, **settings)
    _register(repair, commands.REPAIR_COMMANDS)
    app.add_typer(repair, name="repair")
    app.callback()(commands.root)
    return app


if __name__ == "__main__":
    sys.argv[0] = "spillway"
    eager_app()()
