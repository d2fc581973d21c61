"""The ``spillway`` command as a typer app: one module per subcommand, this file only wires them up.

Each command's module (its ``HELP`` and ``command``) is imported when that command runs or its help is
shown, never before: ``spillway -h`` lists the one-line summaries of ``help.SUMMARIES`` and imports no
command at all, ``spillway dump …`` imports ``dump`` alone (not what ``rescale`` or ``analyze`` need).

The entry point is ``app.main``, which hands plain ``spillway validate`` and ``dump`` runs to ``fast``
and everything else to the app built here."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import typer
from typer._click.core import Command
from typer.main import get_command_from_info

from spillway.cli.help import Group

# command -> the module of spillway.cli that defines it, in the order ``-h`` lists them
COMMANDS: dict[str, str] = {
    "dump": "dump",
    "validate": "validate",
    "analyze": "analyze",
    "keygroup": "keygroup",
    "rescale": "rescale",
    "files": "files",
    "diff": "diff",
    "report": "report",
    "preflight": "preflight",
    "ids": "ids",
    "salvage": "salvage",
}
REPAIR_COMMANDS: dict[str, str] = {
    "relocate": "repair_relocate",
    "strip-channel-state": "repair_strip",
    "clear-finished": "repair_clear",
    "drop-operator": "repair_drop",
}


def load(name: str, module_name: str) -> Command:
    """The click command ``name`` from ``spillway.cli.<module_name>``, built as registering it on the app
    would (``app.command(name, help=HELP)(command)``) and typer then converts it."""
    module = importlib.import_module(f"spillway.cli.{module_name}")
    holder = typer.Typer()
    holder.command(name, help=module.HELP)(module.command)
    command = get_command_from_info(
        holder.registered_commands[0],
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
    )
    run = command.callback
    assert run is not None

    def prepared(*args: Any, **kwargs: Any) -> Any:
        prepare()
        return run(*args, **kwargs)

    command.callback = prepared
    return command


def prepare() -> None:
    """What every command needs before it runs, done when one does (never for help or a group's usage)."""
    from spillway.api import freeze_after_pauses
    from spillway.cli import output

    if freeze_gc:
        freeze_after_pauses()
    # Each invocation sees its own streams (a terminal, a pipe, a test runner's buffers).
    output.use(None)


def _loaders(table: Mapping[str, str]) -> dict[str, Callable[[], Command]]:
    return {name: partial(load, name, module) for name, module in table.items()}


class Spillway(Group):
    lazy = _loaders(COMMANDS)


class Repair(Group):
    lazy = _loaders(REPAIR_COMMANDS)


app = typer.Typer(
    name="spillway",
    cls=Spillway,
    help="Open up Apache Flink checkpoints: see inside, prove sound, repair and rescale channel state.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # click's plain help, wrapped by help.HelpFormatter to COLUMNS
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

repair = typer.Typer(
    cls=Repair,
    rich_markup_mode=None,
    help="Rewrite checkpoints safely: the source is never modified, the output is self-checked.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(repair, name="repair")

# Set by app.main, for the process that ends with its command: decoded checkpoints then skip the cycle
# collector (api.freeze_after_pauses). Never in a process that goes on (a test runner invoking ``app``).
freeze_gc = False


def _print_version(value: bool) -> None:
    # Eager, with its own callback: click runs it while parsing, before it asks for a command. (A plain
    # ``spillway --version`` never gets here: app.main answers it without typer.)
    if value:
        from spillway import __version__

        typer.echo(f"spillway {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
    storage_timeout: float | None = typer.Option(
        None,
        "--storage-timeout",
        metavar="SECONDS",
        min=0.001,
        help="Give up on a remote store (s3://, gs://, hdfs://…) or a JobManager (http://…) after SECONDS "
        "(default: $SPILLWAY_STORAGE_TIMEOUT, else 30); exit code 3. It bounds each call as a whole (a REST "
        "request: connecting, headers and body), not each read; one file's download gets SECONDS plus a "
        "second per started MiB (twice SECONDS on S3, which retries once).",
    ),
) -> None:
    # Runs before every command (help of a command too): the command's own setup waits for it (prepare).
    from spillway.api import set_storage_timeout

    # Each invocation has its own timeout (None: the environment's or the default).
    set_storage_timeout(storage_timeout)
