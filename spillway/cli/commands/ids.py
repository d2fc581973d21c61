"""Flink's own operator ids of a job, from its jar."""

from __future__ import annotations

from click import argument
from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, emit_json
from spillway.cli.help import command as spillway_command
from spillway.cli.options import flag, option
from spillway.cli.render import out, print_table

HELP = """Run JOB.jar's main in Flink's plan-only environment, as `flink info` does (nothing is executed, no
cluster is contacted), and print what Flink itself built: every operator's name, uid, operator id (the id
its state is stored under; chained operators too), job vertex, parallelism and max parallelism. These are
the ids a checkpoint of the job holds: --job JOB.jar wherever --plan is taken binds every operator by them,
nothing guessed.

Flink's own classes of the job's release are used: $FLINK_HOME/lib when FLINK_HOME is set, else the
release's jars downloaded once from PyPI and cached (~/.cache/spillway/flink/). The release is
--flink-version, else the Flink the jar bundles, else FLINK_HOME's. Needs java and javac (8 or newer).
The job's own arguments follow `--`. Exit code 0, 2 when the jar, its main or Java fails (the job's
exception is named), 3 when Flink's jars cannot be downloaded.

Examples:

  spillway ids job.jar --flink-version 1.20.3

  spillway ids job.jar --class com.example.Pipeline -- --parallelism 4 --input s3://in/

  spillway ids job.jar --json | jq '.nodes[] | {name, uid, operator_id}'
"""


@spillway_command("ids", HELP)
@argument("jar", help="The job's jar (a fat jar with its connectors, as for flink run).")
@argument("args", nargs=-1, help="The job's own arguments, after --.")
@option("--class", "entry_class", metavar="MAIN", help="The job's main class (else the jar manifest's).")
@option("--flink-version", metavar="X.Y.Z", help="The job's Flink release (else the jar's, else FLINK_HOME's).")
@option("--timeout", type=float, metavar="SECONDS", default=300.0, help="Deadline for the whole planning run.")
@flag("--json", "json_out", help="Emit JSON (schema spillway.ids/1).")
def command(
    jar: str, args: tuple[str, ...], entry_class: str | None, flink_version: str | None, timeout: float, json_out: bool
) -> int:
    if timeout <= 0:
        raise api.UsageError(f"--timeout {timeout:g}: a positive number of seconds")
    found = api.ids(jar, entry_class=entry_class, args=args or (), flink_version=flink_version, timeout=timeout)
    if json_out:
        emit_json(api.ids_json(found))
    else:
        show(found)
    return ExitStatus.OK


def show(found: api.JobIds) -> None:
    vertex_number = {v.id: i for i, v in enumerate(found.vertices, 1)}
    max_p = found.max_parallelism
    out.print(
        f"Flink {escape(found.release)}, {escape(found.entry_class or '?')}: {len(found.nodes)} operators in "
        f"{len(found.vertices)} job vertices; job max parallelism "
        + (str(max_p) if max_p else "not set (Flink derives it from each operator's parallelism)")
    )
    rows = [
        (
            str(n.node_id),
            escape(n.name),
            escape(n.uid) if n.uid else "-",
            n.operator_id + (f" (setUidHash {n.user_hash})" if n.user_hash else ""),
            str(vertex_number.get(n.vertex_id, "?")),
            str(n.parallelism),
            str(n.max_parallelism or "-"),
        )
        for n in found.nodes
    ]
    print_table(("node", "name~", "uid", "operator id", "vertex", "p", "max p"), rows, box=None, pad_edge=False)
    out.print("[dim]vertices (id = its head operator's id):[/]")
    for v in found.vertices:
        out.print(f"  {vertex_number[v.id]}  {v.id}  p={v.parallelism}  {escape(v.name)}")


__all__ = ["HELP", "command"]
