"""Options several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

RebaseOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--rebase",
        metavar="OLD=NEW",
        help="Rewrite paths starting with OLD (repeatable; wins over automatic rebasing).",
    ),
]
SrcArg = Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file; local or a URI (s3://…)")]
OutOpt = Annotated[str, typer.Option("--out", help="New checkpoint directory or URI (s3://…); must not exist.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Emit the change report as JSON.")]
PlanOpt = Annotated[str | None, typer.Option("--plan", help="Flink plan JSON (for channel pairing and checks).")]
OperatorsOpt = Annotated[
    list[str] | None, typer.Option("--operator", metavar="OPERATOR", help="Operator id, uid or name (repeatable).")
]
