"""The ``spillway`` command as a typer app: one module per subcommand, this file only wires them up.

The entry point is ``app.main``, which hands plain ``spillway validate`` runs to ``fast`` and everything
else to the app built here."""

from __future__ import annotations

import typer

from spillway.cli import (
    analyze,
    diff,
    dump,
    files,
    keygroup,
    output,
    preflight,
    repair_clear,
    repair_drop,
    repair_relocate,
    repair_strip,
    report,
    rescale,
    validate,
)
from spillway.cli.help import Group
from spillway.storage import timeouts

app = typer.Typer(
    name="spillway",
    cls=Group,
    help="Open up Apache Flink checkpoints: see inside, prove sound, repair and rescale channel state.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # click's plain help, wrapped by help.HelpFormatter to COLUMNS
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("dump", help=dump.HELP)(dump.command)
app.command("validate", help=validate.HELP)(validate.command)
app.command("analyze", help=analyze.HELP)(analyze.command)
app.command("keygroup", help=keygroup.HELP)(keygroup.command)
app.command("rescale", help=rescale.HELP)(rescale.command)
app.command("files", help=files.HELP)(files.command)
app.command("diff", help=diff.HELP)(diff.command)
app.command("report", help=report.HELP)(report.command)
app.command("preflight", help=preflight.HELP)(preflight.command)


repair = typer.Typer(
    rich_markup_mode=None,
    help="Rewrite checkpoints safely: the source is never modified, the output is self-checked.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
repair.command("relocate", help=repair_relocate.HELP)(repair_relocate.command)
repair.command("strip-channel-state", help=repair_strip.HELP)(repair_strip.command)
repair.command("clear-finished", help=repair_clear.HELP)(repair_clear.command)
repair.command("drop-operator", help=repair_drop.HELP)(repair_drop.command)
app.add_typer(repair, name="repair")


def _print_version(value: bool) -> None:
    # Eager, with its own callback: click runs it while parsing, before it asks for a command.
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
        help="Give up on a remote store (s3://, gs://, hdfs://…) that does not connect or answer a read within "
        "SECONDS (default: $SPILLWAY_STORAGE_TIMEOUT, else 30); exit code 3.",
    ),
) -> None:
    # Each invocation sees its own streams (a terminal, a pipe, a test runner's buffers).
    output.use(None)
    # ... and its own timeout (None: the environment's or the default).
    timeouts.set_timeout(storage_timeout)
