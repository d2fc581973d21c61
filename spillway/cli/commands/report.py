"""Write a self-contained HTML page about a checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

from click import argument
from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, UsageError
from spillway.cli.help import command as spillway_command
from spillway.cli.options import Naming, NewJob, flag, naming, new_job, option
from spillway.cli.output import current
from spillway.cli.render import err, out

HELP = """Write one self-contained HTML page about a checkpoint, to attach to an incident: the topology with
the bytes and records in flight on every edge, a heat map per edge (upstream subtask x downstream
subtask, shaded by in-flight bytes), every operator's finished state and, with --plan, the restore
verdict, the validate findings, and every file the checkpoint depends on with its size.

--new-plan NEW_PLAN adds "Will Flink restore this into that job?": spillway preflight's answer for the
new job (restorable yes/no/unknown, every reason with Flink's own message where it has one, the state
each new vertex gets). -p, --max-parallelism, --allow-non-restored-state and --flink-version say what
its plan does not show, as for preflight; --uid/--uid-map name uids in both plans.

The numbers are those of analyze --json, validate --json, files --json (and preflight --json, without
its restore forecast) on the same checkpoint; those documents are embedded in the page as JSON. The
page loads nothing at view time (inline CSS and SVG, no script, no font, no network). It is written
with --out FILE (- for stdout) under a temporary name beside FILE and then renamed; an existing FILE is never
replaced unless --force is given.

Exit code 0 when written, 1 when written but validate found errors in the checkpoint (the page
shows them), 2 on usage errors (nothing written). The preflight answer does not change it.

Examples:

  spillway report chk-42 --plan plan.json --out incident-4711.html

  spillway report /checkpoints/7f3c... --plan plan.json --out chk.html --force

  spillway report chk-42 --out - | gzip > chk-42.html.gz

  spillway report chk-42 --plan plan.json --new-plan new-plan.json -p count=4 --out before-deploy.html
"""


@spillway_command("report", HELP)
@argument("path", help="job checkpoint dir, chk-N dir or _metadata file; local or a URI")
@option("--out", "out_file", metavar="FILE", help="The HTML page to write; - for stdout.")
@option("--plan", metavar="FILE", help="Flink plan JSON (job-graph or stream-graph): edges, verdict.")
@flag("--force", help="Replace FILE if it exists.")
@naming()
@option(
    "--new-plan",
    metavar="NEW_PLAN",
    help="The plan JSON of a job to restore into (either flavour, or http://HOST:PORT/jobs/JOB_ID): adds "
    "spillway preflight's answer.",
)
@new_job()
@option("--html", metavar="FILE", hidden=True, help="Deprecated: --out.")
def command(
    path: str,
    out_file: str | None,
    plan: str | None,
    force: bool,
    naming: Naming,
    new_plan: str | None,
    new_job: NewJob,
    html: str | None,
) -> int:
    target_name = _target(out_file, html)
    settings = new_job.for_plan(new_plan)
    named = naming.keywords(plan or new_plan)  # the uids name operators of either plan

    def page() -> api.ReportResult:
        return api.report(path, plan=naming.plan_or_job(plan), new_plan=new_plan, options=settings, **named)

    if target_name == "-":  # stdout, as for every tool that takes a FILE
        done = page()
        current().stdout.write(done.html)
        return _verdict(done.errors)
    target = Path(target_name)
    if target.is_dir():
        raise UsageError(f"--out {target_name}: is a directory")
    if not target.parent.is_dir():
        raise UsageError(f"--out {target_name}: directory {target.parent} does not exist")
    if os.path.lexists(target) and not force:
        raise UsageError(f"--out {target_name}: exists (pass --force to replace it)")
    done = page()
    # Through the guarded door: staged beside it, linked into place (never over a file that appeared while
    # the page was made: exit 2 naming it), nothing left on a failure.
    api.write_new_file(target, done.html.encode("utf-8"), replace=force)
    out.print(f"wrote {escape(str(target))}", soft_wrap=True)
    return _verdict(done.errors)


def _target(out_file: str | None, html: str | None) -> str:
    """--out FILE, or its older name --html FILE (not both with different files)."""
    if out_file is not None and html is not None and out_file != html:
        raise UsageError(f"--out {out_file} and --html {html}: one page, give --out")
    target = out_file if out_file is not None else html
    if target is None:
        raise UsageError("--out FILE is required (the page to write; - for stdout)")
    return target


def _verdict(errors: int) -> int:
    if errors:
        err.print(f"[bold red]the checkpoint has {errors} validate errors[/] (the page lists them)")
        return ExitStatus.FINDINGS
    return ExitStatus.OK
