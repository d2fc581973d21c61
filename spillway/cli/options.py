"""Options several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

from spillway.flink.operator_ids import Binding
from spillway.inspect.topology import Topology, load_plan, load_uid_map
from spillway.model.checkpoint import Checkpoint

RebaseOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--rebase",
        metavar="OLD=NEW",
        help="Rewrite paths at or below OLD to NEW (repeatable; wins over automatic rebasing). OLD and NEW are "
        "paths or URIs; /x, file:/x and file:///x are one place. A rule that matches no path is a warning.",
    ),
]
SrcArg = Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file; local or a URI (s3://…)")]
OutOpt = Annotated[str, typer.Option("--out", help="New checkpoint directory or URI (s3://…); must not exist.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Write even if the source has validate errors (each is listed in the report)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Emit the change report as JSON.")]
NamingPlanOpt = Annotated[
    str | None,
    typer.Option(
        "--plan",
        help="Flink plan JSON (job-graph or stream-graph): once bound, operators a checkpoint stores by id only "
        "(before Flink 2.0) are shown with the plan's names.",
    ),
]
PlanOpt = Annotated[str | None, typer.Option("--plan", help="Flink plan JSON (for channel pairing and checks).")]
OperatorsOpt = Annotated[
    list[str] | None, typer.Option("--operator", metavar="OPERATOR", help="Operator id, uid or name (repeatable).")
]
UidOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--uid",
        metavar="NAME=UID",
        help="The uid of the plan operator NAME (repeatable). A plan shows names, not uids; before Flink 2.0 "
        "a checkpoint stores neither, so operators whose uid differs from their name are bound through this.",
    ),
]
UidMapOpt = Annotated[
    str | None,
    typer.Option("--uid-map", metavar="FILE", help='JSON file {"operator name": "uid", …} (like --uid).'),
]


def plan_with_uids(plan: str | None, uid: list[str] | None, uid_map: str | None) -> Topology | None:
    """Load --plan with the uids given by --uid-map and --uid (which wins)."""
    from spillway.errors import UsageError

    if plan is None:
        if uid or uid_map:
            raise UsageError("--uid and --uid-map need --plan")
        return None
    uids = load_uid_map(uid_map) if uid_map else {}
    for item in uid or []:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value:
            raise UsageError(f"--uid {item!r}: expected NAME=UID")
        uids[name] = value
    return load_plan(plan, uids)


class PlanNames:
    """--plan/--uid/--uid-map for commands that only name operators (dump, diff, files): the plan is read
    (and its errors reported) before any checkpoint is opened, then bound to each checkpoint in turn."""

    def __init__(self, plan: str | None, uid: list[str] | None, uid_map: str | None):
        self._args = (plan, uid, uid_map)
        self._first = plan_with_uids(plan, uid, uid_map)  # usage errors before any checkpoint is read

    def bind(self, checkpoint: Checkpoint) -> Binding | None:
        """Bind the plan to ``checkpoint`` (sets ``plan_name`` on its bound 1.x operators); None without --plan.
        Each checkpoint gets a plan of its own: a binding rebuilds the plan's chains from that checkpoint."""
        from spillway.inspect.topology import operator_binding

        topology, self._first = self._first, None
        if topology is None:
            if self._args[0] is None:
                return None
            topology = plan_with_uids(*self._args)
        assert topology is not None
        return operator_binding(topology, checkpoint)
