"""Options, I/O and output shared by the ``spillway repair`` commands.

SRC and --out may be local paths or URIs of any file system pyarrow.fs knows (``s3://…``, ``file:///…``).
A remote SRC is brought to a local working copy first (spillway.storage.fs.materialize); a remote
--out is written and self-checked locally, then published (spillway.storage.fs.publish_dir).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from spillway.cli.common import EXIT_OK, emit_json, err, out
from spillway.inspect.findings import Finding
from spillway.inspect.output_check import validated_output
from spillway.inspect.topology import Topology, load_plan
from spillway.inspect.validate import validate
from spillway.repair.common import Change, RepairError, RepairPlan
from spillway.storage import fs
from spillway.storage.load import LoadedCheckpoint, load_checkpoint
from spillway.storage.locate import strip_file_scheme
from spillway.storage.safe_writer import write_checkpoint

OutOpt = Annotated[str, typer.Option("--out", help="New checkpoint directory or URI (s3://…); must not exist.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Emit the change report as JSON.")]
PlanOpt = Annotated[str | None, typer.Option("--plan", help="Flink plan JSON (for channel pairing and checks).")]
SrcArg = Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file; local or a URI (s3://…)")]


@dataclass
class RepairIO:
    """Where a repair reads and writes."""

    loaded: LoadedCheckpoint
    rebase: list[str]  # --rebase rules plus those reaching a remote source's downloaded files
    target: Path  # where the local writer puts the output (a staging directory when --out is remote)
    final_prefix: str  # the output directory as the new _metadata names it
    remote_out: str | None = None

    @property
    def shown_out(self) -> str:
        return self.remote_out or str(self.target)


@contextmanager
def open_repair(src: str, out_dir: str, rebase: list[str] | None) -> Iterator[RepairIO]:
    workdir: Path | None = None
    try:
        rules = list(rebase or [])
        if fs.is_remote(src) or fs.is_remote(out_dir):
            workdir = Path(tempfile.mkdtemp(prefix="spillway-repair-"))
        if fs.is_remote(src):
            assert workdir is not None
            copy = fs.materialize(src, workdir / "source")
            rules += copy.rebase
            loaded = load_checkpoint(copy.checkpoint_dir, rules)
        else:
            loaded = load_checkpoint(strip_file_scheme(src) or src, rules)
        if fs.is_remote(out_dir):
            assert workdir is not None
            final = out_dir.rstrip("/")
            name = final.rpartition("/")[2] or "checkpoint"
            yield RepairIO(loaded, rules, workdir / "output" / name, final, final)
        else:
            target = Path(strip_file_scheme(out_dir) or out_dir).resolve()
            yield RepairIO(loaded, rules, target, f"file:{target}")
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def storage_guarded(run: Callable[[], int]) -> Callable[[], int]:
    """Storage failures (missing bucket, object, permission) are refused repairs: exit 1, one line."""

    def wrapped() -> int:
        try:
            return run()
        except fs.StorageError as exc:
            raise RepairError(str(exc)) from None

    return wrapped


def source_rebases(loaded: LoadedCheckpoint, user_rules: list[str] | None) -> list[str]:
    """Where the source's files really are (explicit --rebase and automatic rebasing), as rules for
    the output's self-check: the output names the same files, it must resolve them the same way."""
    loaded.resolve_files()
    return [*(user_rules or []), *(f"{r['from']}={r['to']}" for r in loaded.resolver.rebases())]


def moved_rules(old: str, new: str, source_rules: list[str]) -> list[str]:
    """Self-check rules for paths rewritten ``old`` -> ``new`` whose data has not moved (or not to
    this machine): send ``new…`` to wherever the source's ``old…`` really is."""
    rules: list[str] = []
    for rule in source_rules:
        src_prefix, _, actual = rule.partition("=")
        if src_prefix.startswith(old):
            rules.append(f"{new}{src_prefix[len(old) :]}={actual}")
        elif old.startswith(src_prefix):
            rules.append(f"{new}={actual}{old[len(src_prefix) :]}")
    rules.append(f"{new}={old}")
    return rules


def _key(f: Finding) -> tuple:
    return (f.rule, f.operator, f.subtask, f.channel, f.message)


def _plan_check(rp: RepairPlan, io: RepairIO, topology: Topology) -> Callable[[Path], list[str]]:
    """Validate the output under --plan, failing only on errors the repair brought in: errors the
    source already has under that plan (e.g. a new job's plan given to clear-finished) are reported
    as a warning, not blamed on the output."""

    def check(tmp: Path) -> list[str]:
        rules = [f"{rp.output.final_prefix}={tmp}", *rp.self_check_rebase]
        errors = validate(load_checkpoint(tmp, rules), topology).errors
        if not errors:
            return []
        before = {_key(f) for f in validate(io.loaded, topology).errors}
        new = [f for f in errors if _key(f) not in before]
        old = [f for f in errors if _key(f) in before]
        if old:
            rp.warnings.append(
                f"the source already has {len(old)} validate errors under this plan, kept as they were "
                f"(first: {old[0].rule}: {old[0].message}, operator {old[0].operator})"
            )
        return [
            f"validate found {len(new)} errors in the output under --plan, first: {f.rule}: {f.message} "
            f"(operator {f.operator}, subtask {f.subtask}, channel {f.channel})"
            for f in new[:1]
        ]

    return check


def finish(
    rp: RepairPlan,
    io: RepairIO,
    dry_run: bool,
    json_out: bool,
    plan: str | None,
    before: Callable[[], Callable[[], None] | None] | None = None,
    report: dict | None = None,
) -> int:
    """Write (unless --dry-run), self-check, publish, and print the change report. ``before`` runs
    just before the output is written (e.g. copying data files) and may return an undo for failures."""
    if not dry_run:
        if io.remote_out is not None:
            fs.check_target(io.remote_out)  # refuse before doing any work
        undo = before() if before is not None else None
        try:
            rp.output.final_prefix = rp.output.final_prefix or io.final_prefix
            topology = load_plan(plan) if plan else None
            write_checkpoint(
                rp.output,
                io.target,
                validated_output(
                    None,
                    rebase=rp.self_check_rebase,
                    extra_check=_plan_check(rp, io, topology) if topology is not None else None,
                ),
            )
            if io.remote_out is not None:
                files = fs.publish_dir(io.target, io.remote_out)
                rp.changes.append(Change("files published (each read back and compared)", files, io.remote_out))
        except BaseException:
            if undo is not None:
                undo()
            raise
    doc = {
        "schema": "spillway.repair/1",
        "out": io.shown_out,
        "dry_run": dry_run,
        "changes": [{"what": c.what, "count": c.count, "detail": c.detail} for c in rp.changes],
        "warnings": rp.warnings,
        **(report or {}),
    }
    if json_out:
        emit_json(doc)
        return EXIT_OK
    table = Table(title=("would write " if dry_run else "wrote ") + escape(io.shown_out), title_justify="left")
    for col in ("change", "count", "detail"):
        table.add_column(col)
    for c in rp.changes:
        table.add_row(escape(c.what), str(c.count), escape(c.detail))
    out.print(table)
    for w in rp.warnings:
        err.print(f"[yellow]warning:[/] {escape(w)}")
    if not dry_run:
        out.print("[green]self-check passed: the output decodes identically and validates clean[/]")
    return EXIT_OK


OperatorsOpt = Annotated[list[str] | None, typer.Option("--operator", help="Operator id, uid or name (repeatable).")]


def operator_ids(checkpoint, wanted: list[str] | None) -> set[str] | None:
    """Resolve --operator values to operator ids; None when none were given."""
    if not wanted:
        return None
    from spillway.cli.dump import select_operators

    ids: set[str] = set()
    for w in wanted:
        ids |= {o.operator_id for o in select_operators(checkpoint, w)}
    return ids
