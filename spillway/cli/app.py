"""The ``spillway`` command: a click group whose commands are the modules of ``spillway.cli.commands``.

A command is one module there (``dump.py`` is ``spillway dump``; a package, ``repair/``, is a group of
them): its docstring's first line is its summary in ``spillway -h``, its ``command`` the click command. A
module is imported only when its command runs or its help is shown, so ``spillway -h`` imports none and
``spillway dump …`` imports ``dump`` alone.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from spillway import __version__
from spillway.cli import help as layout
from spillway.cli.help import HelpContext

COMMANDS = "spillway.cli.commands"
HELP_OPTIONS = {"help_option_names": ["-h", "--help"], "show_default": True}


def modules(package: str) -> dict[str, str]:
    """Command name -> module name of each command in ``package``, in the order ``-h`` lists them."""
    found: dict[str, str] = {}
    (folder,) = importlib.import_module(package).__path__
    for entry in sorted(os.listdir(folder)):
        name = entry.removesuffix(".py")
        if not name.isidentifier() or name.startswith("_"):  # __init__, __pycache__, an editor's .#dump.py
            continue
        if not (entry.endswith(".py") or os.path.isfile(f"{folder}/{entry}/__init__.py")):
            continue
        found[name.replace("_", "-")] = name
    return found


def summary(package: str, module: str) -> str:
    """A command's one line in ``-h``: its module's docstring's first line, read without importing it."""
    (folder,) = importlib.import_module(package).__path__
    path = f"{folder}/{module}.py"
    if not os.path.isfile(path):
        path = f"{folder}/{module}/__init__.py"
    with open(path, encoding="utf-8") as source:
        return source.readline().strip().strip('"')


class Group(click.Group):
    """A group whose commands are the modules of ``package`` (see the module's docstring)."""

    context_class = HelpContext

    def __init__(self, package: str, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.package = package

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(modules(self.package))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = modules(self.package).get(cmd_name)
        if module is None:
            return None
        found: click.Command = importlib.import_module(f"{self.package}.{module}").command
        return found

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.NoSuchCommand as exc:  # suggest a name: this group's commands are not loaded to be listed
            raise click.NoSuchCommand(exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, summary(self.package, module)) for name, module in modules(self.package).items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:  # the whole command line (``meta`` is shared with the subcommands' contexts)
            ctx.meta["spillway.argv"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            # A usage error click finds (a bad option, a bad KEY) is a spillway.error/1 on stdout too, for
            # scripts reading --json; click still prints it on stderr and exits 2. (Said once: by the root.)
            if ctx.parent is None and "--json" in ctx.meta.get("spillway.argv", ()):
                from spillway.cli import output
                from spillway.cli.common import ExitStatus, emit_error

                output.use(None)  # this invocation's streams: the root callback may not have run yet
                emit_error(exc.format_message(), ExitStatus.USAGE, "UsageError")
            raise


def _storage_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    # Each invocation has its own timeout (None: the environment's or the default), set before its command runs.
    from spillway.api import set_storage_timeout

    set_storage_timeout(value)
    return value


@click.group(
    "spillway",
    cls=Group,
    package=COMMANDS,
    help="Open up Apache Flink checkpoints: see inside, prove sound, repair and rescale channel state.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
)
@click.version_option(__version__, "--version", message="spillway %(version)s", help="Print the version and exit.")
@click.option(
    "--storage-timeout",
    metavar="SECONDS",
    type=click.FloatRange(min=0.001),
    expose_value=False,
    callback=_storage_timeout,
    help="Give up on a remote store (s3://, gs://, hdfs://…) or a JobManager (http://…) after SECONDS "
    "(default: $SPILLWAY_STORAGE_TIMEOUT, else 30); exit code 3. It bounds each call as a whole (a REST "
    "request: connecting, headers and body), not each read; one file's download gets SECONDS plus a "
    "second per started MiB (twice SECONDS on S3, which retries once).",
)
def app() -> None:
    """Nothing to do before a command: the options' callbacks have done it (``--storage-timeout``)."""


def main() -> None:
    """The console script: ``app`` in a process that ends with its command."""
    layout.freeze_gc = True
    _load_on_first_use("pdb")
    app(prog_name="spillway")


class _OnFirstUse(type(sys)):  # type: ignore[misc]
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
