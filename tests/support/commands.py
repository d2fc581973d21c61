"""Every command of the ``spillway`` app, found through click's own interface (a group lists its commands and
hands out each one), so the lazily loaded commands are walked as the command line would reach them."""

from __future__ import annotations

import click


def every_command(app: click.Command) -> dict[tuple[str, ...], click.Command]:
    """Every command and group by its path of names (the root is ``()``), groups before their commands."""
    found: dict[tuple[str, ...], click.Command] = {}

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        found[path] = cmd
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, (*path, name))

    walk(app, ())
    return found
