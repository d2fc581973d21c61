"""Rewrite checkpoints safely (the source is never modified).

``spillway repair …``: one module per repair, as for the commands one level up."""

from __future__ import annotations

import click

from spillway.cli.app import Group

command: click.Group = Group(
    __name__,
    name="repair",
    help="Rewrite checkpoints safely: the source is never modified, the output is self-checked.",
    no_args_is_help=True,
)
