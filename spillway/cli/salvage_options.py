"""The salvage options ``spillway salvage`` and ``repair strip-channel-state --salvage`` share (declared once; a
module of its own, so that either command's help loads only that command)."""

from __future__ import annotations

from typing import Annotated

import typer

from spillway import api
from spillway.cli.common import UsageError

ValueTypeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--value-type",
        metavar="SPEC|EDGE=SPEC",
        help="Decode values with a value spec: of every edge, or of EDGE (UP->DOWN or UP); repeatable.",
    ),
]
JsonlOpt = Annotated[
    bool, typer.Option("--jsonl", help="Also write records.jsonl: every record as JSON (value_raw in base64).")
]


def salvage_options(
    out_dir: str,
    operators: list[str] | None,
    value_type: list[str] | None,
    jsonl: bool,
    dry_run: bool = False,
) -> api.SalvageOptions:
    """The API's options from the command line, a mistake in the CLI's words (exit 2)."""
    try:
        default, by_edge = api.value_type_args(value_type or [])
        return api.SalvageOptions(out_dir, operators or None, default, by_edge, jsonl, dry_run)
    except api.ArgumentError as exc:
        given = exc.value if exc.key is None else f"{exc.key}={exc.value}"
        raise UsageError(f"--value-type {given}: {exc.detail}" if "value_type" in exc.argument else str(exc)) from None
