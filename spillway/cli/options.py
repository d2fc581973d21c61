"""Options several commands share, declared once; groups of them (``Naming``, ``PlanNaming``) that a command takes
as one parameter through :func:`bundled`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, get_type_hints

import typer

from spillway import api
from spillway.api import UsageError
from spillway.cli.job_options import JobArgOpt, JobClassOpt, JobFlinkOpt, JobOpt
from spillway.cli.option_values import plan_or_job, rebase_rules, uid_pairs

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


def bundled(command: Callable[..., None]) -> Callable[..., None]:
    """Let a command take groups of options: a parameter annotated with a dataclass whose fields are typer options
    (``Annotated``, with defaults) stands for those options, in its place in ``-h``; the command is called with the
    dataclass built from them. typer reads the command's ``__signature__``."""
    signature = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[Callable[..., object], list[str]]] = {}
    for param in signature.parameters.values():
        group = param.annotation
        if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        hints = get_type_hints(group, include_extras=True)
        names = [f.name for f in dataclasses.fields(group)]
        groups[param.name] = (group, names)
        keyword = inspect.Parameter.KEYWORD_ONLY
        for f in dataclasses.fields(group):
            default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            params.append(inspect.Parameter(f.name, keyword, default=default, annotation=hints[f.name]))

    @functools.wraps(command)
    def run(**given: Any) -> None:
        for name, (group, names) in groups.items():
            given[name] = group(**{n: given.pop(n) for n in names})
        command(**given)

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]  # read by typer
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
    return run


@dataclasses.dataclass(frozen=True)
class Naming:
    """--uid/--uid-map (the uids a plan cannot show) and --rebase, as given; checked, in the CLI's words, when used
    (inside ``guarded``: a mistake is a usage error like any other)."""

    rebase: RebaseOpt = None
    uid: UidOpt = None
    uid_map: UidMapOpt = None
    job: JobOpt = None
    job_class: JobClassOpt = None
    job_arg: JobArgOpt = None
    job_flink_version: JobFlinkOpt = None

    def keywords(self, plan: str | None) -> dict[str, Any]:
        """``uids``, ``uid_map`` and ``rebase`` as the API's calls take them (the uids are ``plan``'s)."""
        uids = uid_pairs(plan if self.job is None else "--job", self.uid, self.uid_map)
        return {"uids": uids, "uid_map": self.uid_map, "rebase": rebase_rules(self.rebase)}

    def plan_or_job(self, plan: str | None, option: str = "--plan") -> str | api.JobJar | None:
        """``plan``, or the job's jar (--job) as the API takes it in its place."""
        return plan_or_job(
            plan,
            self.job,
            self.job_class,
            self.job_arg,
            self.job_flink_version,
            option=option,
            uid=self.uid,
            uid_map=self.uid_map,
        )

    def open(self, path: str, plan: str | None) -> api.Checkpoint:
        """PATH opened with ``plan`` (or --job) and these uids and rules."""
        return api.open(path, plan=self.plan_or_job(plan), **self.keywords(plan))


@dataclasses.dataclass(frozen=True)
class PlanNaming(Naming):
    """--plan only to name operators (dump, diff, files), with --uid/--uid-map and --rebase."""

    plan: NamingPlanOpt = None

    def plan_keywords(self) -> dict[str, Any]:
        """``plan``, ``uids``, ``uid_map`` and ``rebase`` as the API's reading calls take them."""
        return {"plan": self.plan_or_job(self.plan), **self.keywords(self.plan)}


@dataclasses.dataclass(frozen=True)
class NewJob:
    """What a new job's plan does not show (``preflight``; ``report --new-plan``), as preflight reads it."""

    parallelism: Annotated[
        list[str] | None,
        typer.Option("-p", "--parallelism", metavar="VERTEX=N", help="Change a vertex's parallelism in the new job."),
    ] = None
    max_parallelism: Annotated[
        list[str] | None,
        typer.Option(
            "--max-parallelism",
            metavar="N|VERTEX=N|none",
            help="Max parallelism the new job sets (repeatable); none: it sets none (Flink takes the checkpoint's).",
        ),
    ] = None
    allow_non_restored_state: Annotated[
        bool,
        typer.Option(
            "--allow-non-restored-state", help="As Flink's option: state of operators not in the new job is dropped."
        ),
    ] = False
    flink_version: Annotated[
        str | None, typer.Option("--flink-version", metavar="X.Y.Z", help="The Flink release that will restore.")
    ] = None

    def given(self) -> list[str]:
        """The options given, by name."""
        values = (self.parallelism, self.max_parallelism, self.allow_non_restored_state, self.flink_version)
        names = ("-p", "--max-parallelism", "--allow-non-restored-state", "--flink-version")
        return [name for name, value in zip(names, values, strict=True) if value]

    def options(
        self, keys: tuple[dict[str, str], dict[str, str]] = ({}, {}), buffers: api.BufferSettings | None = None
    ) -> api.PreflightOptions:
        """As the API's ``PreflightOptions`` (with the forecast's ``keys``/``key_fns`` and ``buffers``)."""
        unset = [v for v in self.max_parallelism or [] if v == "none"]
        if unset and len(unset) != len(self.max_parallelism or []):
            raise UsageError("--max-parallelism none and a value given: which one?")
        return api.PreflightOptions(
            counts(self.parallelism, "-p"),
            {} if unset else _max_parallelism(self.max_parallelism),
            self.allow_non_restored_state,
            self.flink_version,
            *keys,
            buffers or api.BufferSettings(),
            bool(unset),
        )


def _max_parallelism(values: list[str] | None) -> dict[str | None, int]:
    found: dict[str | None, int] = {}
    for item in values or []:
        name, sep, n = item.rpartition("=")
        if not n.isdigit() or int(n) < 1 or (sep and not name):
            raise UsageError(f"--max-parallelism {item!r}: expected N or VERTEX=N with N a positive integer")
        found[name if sep else None] = int(n)
    return found


def pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """VERTEX=VALUE pairs of a repeatable option; the same vertex twice with different values is a usage error."""
    result: dict[str, str] = {}
    for v in values or []:
        name, sep, value = v.rpartition("=")
        if not sep or not name or not value:
            raise UsageError(f"{option} {v!r}: expected VERTEX=VALUE")
        if name in result and result[name] != value:
            raise UsageError(f"{option} given twice for {name!r} ({result[name]!r} and {value!r}): which one?")
        result[name] = value
    return result


def counts(values: list[str] | None, option: str) -> dict[str, int]:
    """VERTEX=N pairs of a parallelism option; N must be a positive integer (a usage error otherwise)."""
    found: dict[str, int] = {}
    for name, n in pairs(values, option).items():
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"{option} {name}={n}: N must be a positive integer")
        found[name] = int(n)
    return found


def key_specs(key: list[str] | None, key_fn: list[str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """--key and --key-fn pairs (the API checks the extractors: ``check_key_specs``); --key-fn modules are found
    in the current directory, as ``python -m`` finds them."""
    keys, fns = pairs(key, "--key"), pairs(key_fn, "--key-fn")
    both = sorted(set(keys) & set(fns))
    if both:
        raise UsageError(f"--key and --key-fn both given for {', '.join(both)}: give one")
    if fns:
        import_from_cwd()
    return keys, fns


def import_from_cwd() -> None:
    """A console script's path starts with its own bin/, not the current directory: put that first, for this
    process and for Spark's Python workers (they inherit PYTHONPATH)."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if cwd not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd, *filter(None, paths)])
