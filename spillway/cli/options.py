"""Options several commands share, declared once, and their values checked and put the way the API takes them.
Groups of options (``Naming``, ``PlanNaming``, ``NewJob``) reach a command as one dataclass: ``@bundle``."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from spillway import api
from spillway.api import UsageError

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _list_or_none(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str] | None:
    return list(value) or None


# An option; its dest is the last name that is not an option name (``option("--json", "json_out", …)``).
option = click.option


def flag(*names: str, help: str, **attrs: Any) -> Decorator:
    return click.option(*names, is_flag=True, help=help, **attrs)


def repeatable(*names: str, help: str, **attrs: Any) -> Decorator:
    """An option given any number of times: its values in order, or None when not given."""
    return click.option(*names, multiple=True, callback=_list_or_none, help=help, **attrs)


def bundle(keyword: str, group: type, *options: Decorator) -> Decorator:
    """Declare ``options`` (one per field of the dataclass ``group``, in the order ``-h`` lists them) and call
    the command with them as one ``group`` in ``keyword``."""
    names = [f.name for f in dataclasses.fields(group)]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)  # keeps the options declared below this group (click keeps them on the function)
        def run(**given: Any) -> Any:
            given[keyword] = group(**{name: given.pop(name) for name in names})
            return command(**given)

        declared: Callable[..., Any] = run
        for declare in reversed(options):
            declared = declare(declared)
        return declared

    return decorate


PATH_HELP = "job checkpoint dir, chk-N dir or _metadata file"
path_argument = click.argument("path", help=PATH_HELP)
src_argument = click.argument("src", help="job checkpoint dir, chk-N dir or _metadata file; local or a URI (s3://…)")
json_flag = flag("--json", "json_out", help="Emit the change report as JSON.")
plan_option = option("--plan", metavar="FILE", help="Flink plan JSON (for channel pairing and checks).")
operators_option = repeatable("--operator", metavar="OPERATOR", help="Operator id, uid or name (repeatable).")
rebase_option = repeatable(
    "--rebase",
    metavar="OLD=NEW",
    help="Rewrite paths at or below OLD to NEW (repeatable; wins over automatic rebasing). OLD and NEW are "
    "paths or URIs; /x, file:/x and file:///x are one place. A rule that matches no path is a warning.",
)
uid_option = repeatable(
    "--uid",
    metavar="NAME=UID",
    help="The uid of the plan operator NAME (repeatable). A plan shows names, not uids; before Flink 2.0 "
    "a checkpoint stores neither, so operators whose uid differs from their name are bound through this.",
)
uid_map_option = option("--uid-map", metavar="FILE", help='JSON file {"operator name": "uid", …} (like --uid).')
# --job JOB.jar wherever --plan is taken: the job's own graph, as Flink builds it from the jar (``plan_or_job``)
job_options = (
    option(
        "--job",
        metavar="JOB.jar",
        help="The job's jar instead of a plan: its main runs in Flink's plan-only environment (nothing is "
        "executed) and every operator is bound by Flink's own id (see spillway ids).",
    ),
    option("--job-class", metavar="MAIN", help="The job's main class (else the jar manifest's)."),
    repeatable("--job-arg", metavar="ARG", help="One argument of the job's main (repeatable, in order)."),
    option(
        "--job-flink-version",
        metavar="X.Y.Z",
        help="The Flink release the job is built for (else read from the jar, else FLINK_HOME's).",
    ),
)
naming_options: Sequence[Decorator] = (rebase_option, uid_option, uid_map_option, *job_options)
naming_plan_option = option(
    "--plan",
    metavar="FILE",
    help="Flink plan JSON (job-graph or stream-graph): once bound, operators a checkpoint stores by id only "
    "(before Flink 2.0) are shown with the plan's names.",
)


@dataclasses.dataclass(frozen=True)
class Naming:
    """--uid/--uid-map (the uids a plan cannot show) and --rebase, as given; checked, in the CLI's words, when used
    (inside ``guarded``: a mistake is a usage error like any other)."""

    rebase: list[str] | None = None
    uid: list[str] | None = None
    uid_map: str | None = None
    job: str | None = None
    job_class: str | None = None
    job_arg: list[str] | None = None
    job_flink_version: str | None = None

    def keywords(self, plan: str | None) -> dict[str, Any]:
        """``uids``, ``uid_map`` and ``rebase`` as the API's calls take them (the uids are ``plan``'s; --uid and
        --uid-map need --plan), the syntax of --uid and --rebase checked here."""
        if plan is None and self.job is None and (self.uid or self.uid_map):
            raise UsageError("--uid and --uid-map need --plan")
        uids: dict[str, str] = {}
        for item in self.uid or []:
            name, sep, value = item.rpartition("=")
            if not sep or not name or not value:
                raise UsageError(f"--uid {item!r}: expected NAME=UID")
            uids[name] = value
        for text in self.rebase or []:
            old, sep, new = text.partition("=")
            if not sep or not old or not new:
                raise UsageError(f"--rebase expects OLD_PREFIX=NEW_PREFIX, got {text!r}")
        return {"uids": uids, "uid_map": self.uid_map, "rebase": self.rebase}

    def plan_or_job(self, plan: str | None) -> str | api.JobJar | None:
        """``plan``, or the job's jar (--job) with how to run its main, as the API takes it in its place."""
        if self.job is None:
            given = (("--job-class", self.job_class), ("--job-arg", self.job_arg))
            named = [name for name, v in (*given, ("--job-flink-version", self.job_flink_version)) if v]
            if named:
                raise UsageError(f"{' and '.join(named)} need --job JOB.jar")
            return plan
        if plan is not None:
            raise UsageError("--plan and --job both given: the job's jar is its plan; give one")
        if self.uid or self.uid_map:
            raise UsageError("--uid and --uid-map are not taken with --job: the job's jar shows every uid itself")
        return api.JobJar(self.job, self.job_class, tuple(self.job_arg or ()), self.job_flink_version)

    def open(self, path: str, plan: str | None) -> api.Checkpoint:
        """PATH opened with ``plan`` (or --job) and these uids and rules."""
        return api.open(path, plan=self.plan_or_job(plan), **self.keywords(plan))


@dataclasses.dataclass(frozen=True)
class PlanNaming(Naming):
    """--plan only to name operators (dump, diff, files), with --uid/--uid-map and --rebase."""

    plan: str | None = None

    def plan_keywords(self) -> dict[str, Any]:
        """``plan``, ``uids``, ``uid_map`` and ``rebase`` as the API's reading calls take them."""
        return {"plan": self.plan_or_job(self.plan), **self.keywords(self.plan)}


@dataclasses.dataclass(frozen=True)
class NewJob:
    """What a new job's plan does not show (``preflight``; ``report --new-plan``), as preflight reads it."""

    parallelism: list[str] | None = None
    max_parallelism: list[str] | None = None
    allow_non_restored_state: bool = False
    flink_version: str | None = None

    def given(self) -> list[str]:
        """The options given, by name."""
        values = (self.parallelism, self.max_parallelism, self.allow_non_restored_state, self.flink_version)
        names = ("-p", "--max-parallelism", "--allow-non-restored-state", "--flink-version")
        return [name for name, value in zip(names, values, strict=True) if value]

    def for_plan(self, new_plan: str | None) -> api.PreflightOptions | None:
        """What --new-plan's plan does not show (``report``, ``salvage``): None without --new-plan, where these
        options are a usage error (they describe the new job)."""
        if new_plan is None and self.given():
            raise UsageError(f"{', '.join(self.given())}: only with --new-plan (they describe the new job)")
        return None if new_plan is None else self.options()

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


def naming(keyword: str = "naming") -> Decorator:
    """--rebase, --uid, --uid-map and --job…, as one ``Naming``."""
    return bundle(keyword, Naming, *naming_options)


def plan_naming(keyword: str = "naming") -> Decorator:
    """``naming`` and --plan (only to name operators), as one ``PlanNaming``."""
    return bundle(keyword, PlanNaming, *naming_options, naming_plan_option)


def new_job(keyword: str = "new_job") -> Decorator:
    """-p, --max-parallelism, --allow-non-restored-state and --flink-version, as one ``NewJob``."""
    return bundle(
        keyword,
        NewJob,
        repeatable("-p", "--parallelism", metavar="VERTEX=N", help="Change a vertex's parallelism in the new job."),
        repeatable(
            "--max-parallelism",
            metavar="N|VERTEX=N|none",
            help="Max parallelism the new job sets (repeatable); none: it sets none (Flink takes the checkpoint's).",
        ),
        flag(
            "--allow-non-restored-state",
            help="As Flink's option: state of operators not in the new job is dropped.",
        ),
        option("--flink-version", metavar="X.Y.Z", help="The Flink release that will restore."),
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


# what ``spillway salvage`` and ``repair strip-channel-state --salvage`` share
value_type_option = repeatable(
    "--value-type",
    metavar="SPEC|EDGE=SPEC",
    help="Decode values with a value spec: of every edge, or of EDGE (UP->DOWN or UP); repeatable.",
)
jsonl_flag = flag("--jsonl", help="Also write records.jsonl: every record as JSON (value_raw in base64).")


def salvage_options(
    out_dir: str,
    operators: list[str] | None,
    value_type: list[str] | None,
    jsonl: bool,
    dry_run: bool = False,
) -> api.SalvageOptions:
    """The API's salvage options from the command line (a bad --value-type is named by ``guarded``)."""
    default, by_edge = api.value_type_args(value_type or [])
    return api.SalvageOptions(out_dir, operators or None, default, by_edge, jsonl, dry_run)
